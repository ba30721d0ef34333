//! Seeded label permutations from a counter-based generator, identical in the Rust, numba and numpy backends.
//!
//! Permutation p (0-based, counted over the whole test) of n labels is a Fisher–Yates shuffle: for i = n−1
//! down to 1 swap positions i and j = ⌊x·(i+1)/2⁶⁴⌋, with x = splitmix64(key + (p·n + i)·φ), φ = 0x9E3779B97F4A7C15
//! (SplitMix64's own output at counter p·n + i, so each draw depends only on (key, p, i)). Any block of
//! permutations can be made independently, in parallel. The multiply-high has bias below (i+1)/2⁶⁴.
//!
//! Blocked (stratified) permutations shuffle only within strata: `order` lists the objects stratum after
//! stratum, stratum s occupying `order[starts[s] .. starts[s + 1]]`, and the Fisher–Yates shuffle of stratum s
//! runs over those positions with counter p·n + starts[s] + i. With one stratum and `order` = 0 … n−1 that is
//! exactly the unblocked sequence above, so a single stratum reproduces the unstratified test bit for bit.
use rayon::prelude::*;

pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function.
#[inline(always)]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// ⌊x·m / 2⁶⁴⌋ for m < 2³², in 64-bit limbs (the numpy and numba backends compute it the same way).
#[inline(always)]
pub fn mul_high(x: u64, m: u64) -> u64 {
    let (hi, lo) = (x >> 32, x & 0xFFFF_FFFF);
    (hi * m + ((lo * m) >> 32)) >> 32
}

/// Rows `first .. first + count` of the permutation sequence of `codes` for `key`, row-major (count × n).
pub fn permutations(codes: &[i32], key: u64, first: u64, count: usize) -> Vec<i32> {
    rows(codes, first, count, |row, base| shuffle(row, codes.len(), base, key, |i| i))
}

/// Rows `first .. first + count` of the blocked permutation sequence (see the module note), row-major.
///
/// `order` holds object indices (< n = codes.len()) and `starts` the stratum boundaries into it, from 0 up
/// to order.len() (the caller checks both).
pub fn permutations_within(
    codes: &[i32],
    order: &[u32],
    starts: &[usize],
    key: u64,
    first: u64,
    count: usize,
) -> Vec<i32> {
    rows(codes, first, count, |row, base| {
        for bounds in starts.windows(2) {
            let (lo, positions) = (bounds[0], &order[bounds[0]..bounds[1]]);
            shuffle(row, positions.len(), base.wrapping_add(lo as u64), key, |i| positions[i] as usize);
        }
    })
}

/// `count` copies of `codes`, row r shuffled in place by `fill(row, (first + r)·n)` (its first counter), in parallel.
fn rows(codes: &[i32], first: u64, count: usize, fill: impl Fn(&mut [i32], u64) + Sync) -> Vec<i32> {
    let n = codes.len();
    let mut out = vec![0i32; count * n];
    if n == 0 {
        return out;
    }
    out.par_chunks_mut(n).enumerate().for_each(|(r, row)| {
        row.copy_from_slice(codes);
        fill(row, (first + r as u64).wrapping_mul(n as u64));
    });
    out
}

/// Fisher–Yates over `len` positions of `row` with counters from `offset`; `at(i)` is step i's position in `row`.
#[inline(always)]
fn shuffle(row: &mut [i32], len: usize, offset: u64, key: u64, at: impl Fn(usize) -> usize) {
    for i in (1..len).rev() {
        let x = mix(key.wrapping_add(offset.wrapping_add(i as u64).wrapping_mul(GOLDEN)));
        row.swap(at(i), at(mul_high(x, i as u64 + 1) as usize));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // SplitMix64 seeded with 0: first outputs are mix(φ), mix(2φ) (Vigna's reference generator).
        assert_eq!(mix(GOLDEN), 0xE220_A839_7B1D_CDAF);
        assert_eq!(mix(GOLDEN.wrapping_mul(2)), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn mul_high_matches_u128() {
        for &(x, m) in &[(u64::MAX, 1u64), (u64::MAX, 0xFFFF_FFFF), (0x1234_5678_9ABC_DEF0, 20_000), (1 << 63, 3)] {
            assert_eq!(mul_high(x, m), ((x as u128 * m as u128) >> 64) as u64);
        }
    }

    #[test]
    fn rows_are_permutations_and_blocks_compose() {
        let codes: Vec<i32> = (0..50).map(|k| k % 4).collect();
        let all = permutations(&codes, 7, 0, 10);
        let tail = permutations(&codes, 7, 6, 4);
        assert_eq!(&all[6 * 50..], &tail[..]);
        for row in all.chunks(50) {
            let mut sorted = row.to_vec();
            sorted.sort();
            let mut want = codes.clone();
            want.sort();
            assert_eq!(sorted, want);
        }
        assert_ne!(&all[..50], &all[50..100]);
    }

    #[test]
    fn positions_are_uniform() {
        // each of 5 labels should land in position 0 about 1/5 of the time over 20000 shuffles
        let codes = [0, 1, 2, 3, 4];
        let rows = permutations(&codes, 42, 0, 20_000);
        let mut counts = [0usize; 5];
        for row in rows.chunks(5) {
            counts[row[0] as usize] += 1;
        }
        for c in counts {
            assert!((3700..4300).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn one_stratum_is_the_unblocked_sequence() {
        let codes: Vec<i32> = (0..37).map(|k| k % 3).collect();
        let order: Vec<u32> = (0..37).collect();
        assert_eq!(permutations_within(&codes, &order, &[0, 37], 9, 5, 20), permutations(&codes, 9, 5, 20));
    }

    #[test]
    fn blocked_rows_keep_every_stratum_and_mix_inside_it() {
        // strata interleaved (object k in stratum k % 3); labels 0/1 alternate inside each stratum
        let n = 60usize;
        let codes: Vec<i32> = (0..n).map(|k| ((k / 3) % 2) as i32).collect();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&k| k % 3);
        let rows = permutations_within(&codes, &order, &[0, 20, 40, 60], 3, 0, 50);
        let tail = permutations_within(&codes, &order, &[0, 20, 40, 60], 3, 30, 20);
        assert_eq!(&rows[30 * n..], &tail[..]);
        let mut moved = 0;
        for row in rows.chunks(n) {
            for s in 0..3 {
                let mut got: Vec<i32> = (0..n).filter(|k| k % 3 == s).map(|k| row[k]).collect();
                let mut want: Vec<i32> = (0..n).filter(|k| k % 3 == s).map(|k| codes[k]).collect();
                moved += got.iter().zip(&want).filter(|(a, b)| a != b).count();
                got.sort();
                want.sort();
                assert_eq!(got, want);
            }
        }
        assert!(moved > 0);
    }
}
