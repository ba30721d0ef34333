//! PERMANOVA's within-group sum of squares SS_W = Σ_g (1/n_g) Σ_{i<j ∈ g} d²_ij for blocks of permutations,
//! exactly in f64 (the screens in `screen.rs` and `factored.rs` decide most permutations more cheaply).
//!
//! Design (chosen by measurement against a GEMM form): every distance is loaded once per tile and applied
//! to all permutations of the block. Permutations are grouped LANES at a time with their labels stored
//! object-major as bytes, so one pair (i, j) updates LANES accumulators with a vector compare-and-add.
//! Tasks are blocks of ROWS rows, swept in column tiles of COLS objects so that the distance tile and
//! the labels it needs stay in L1/L2 while every permutation chunk passes over them. Each task writes
//! its own partial sums, reduced in a fixed order: results do not depend on thread scheduling.
use crate::matrix::Distances;
use rayon::prelude::*;

pub const LANES: usize = 32;
/// Rows per parallel task (`row_blocks`); the screens' tiles use the same blocks.
pub const ROWS: usize = 32;
const COLS: usize = 512;

/// A compact group label (u8 when there are at most 256 groups, else u32).
pub trait Label: Copy + PartialEq + Send + Sync + Default {
    fn from_code(code: i32) -> Self;
    fn index(self) -> usize;
}
macro_rules! label {
    ($($t:ty),*) => {$(
        impl Label for $t {
            #[inline(always)]
            fn from_code(code: i32) -> Self {
                code as $t
            }
            #[inline(always)]
            fn index(self) -> usize {
                self as usize
            }
        }
    )*};
}
label!(u8, u32);

/// Labels regrouped as [chunk][object][lane]; lanes past the last permutation repeat permutation 0.
pub fn pack<T: Label>(labels: &[i32], perms: usize, n: usize) -> Vec<T> {
    let chunks = perms.div_ceil(LANES);
    let mut out = vec![T::default(); chunks * n * LANES];
    out.par_chunks_mut(n * LANES).enumerate().for_each(|(c, chunk)| {
        let rows: [&[i32]; LANES] = std::array::from_fn(|q| {
            let p = if c * LANES + q < perms { c * LANES + q } else { 0 };
            &labels[p * n..(p + 1) * n]
        });
        for (j, lanes) in chunk.chunks_exact_mut(LANES).enumerate() {
            for (lane, row) in lanes.iter_mut().zip(&rows) {
                *lane = T::from_code(row[j]);
            }
        }
    });
    out
}

/// Σ_j d²_ij over the columns of one tile whose label equals row i's, lane by lane, in column order
/// (the AVX2 version below performs exactly these additions, so both give identical bits).
#[inline(always)]
fn row_tile<T: Label>(row: &[f64], labels: &[T], own: &[T; LANES]) -> [f64; LANES] {
    let mut acc = [0.0f64; LANES];
    for (d, lj) in row.iter().zip(labels.chunks_exact(LANES)) {
        let d2 = d * d;
        for q in 0..LANES {
            acc[q] += if lj[q] == own[q] { d2 } else { 0.0 };
        }
    }
    acc
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::LANES;
    use std::arch::x86_64::*;

    /// `row_tile` for byte labels: one 32-byte compare covers all 32 permutations of the chunk. Viewed as
    /// four 64-bit lanes, byte 7 of lane k holds the result for permutation 8k + 7; `blendv` selects on
    /// exactly that (sign) bit, and shifting each lane left by 8 bits brings permutation 8k + 6 there, and
    /// so on — 8 blends and 7 shifts per pair instead of widening every mask byte.
    #[target_feature(enable = "avx2")]
    pub unsafe fn row_tile_u8(row: &[f64], labels: &[u8], own: &[u8; LANES]) -> [f64; LANES] {
        assert!(labels.len() >= row.len() * LANES);
        let ov = _mm256_loadu_si256(own.as_ptr() as *const __m256i);
        let lp = labels.as_ptr();
        let zero = _mm256_setzero_pd();
        let mut acc = [zero; 8];
        for (j, &d) in row.iter().enumerate() {
            let d2 = _mm256_set1_pd(d * d);
            let mut m = _mm256_cmpeq_epi8(_mm256_loadu_si256(lp.add(j * LANES) as *const __m256i), ov);
            for (s, a) in acc.iter_mut().enumerate() {
                if s > 0 {
                    m = _mm256_slli_epi64::<8>(m);
                }
                *a = _mm256_add_pd(*a, _mm256_blendv_pd(zero, d2, _mm256_castsi256_pd(m)));
            }
        }
        // acc[s] lane k holds permutation 8k + 7 − s
        let mut out = [0.0f64; LANES];
        for (s, a) in acc.iter().enumerate() {
            let mut lanes = [0.0f64; 4];
            _mm256_storeu_pd(lanes.as_mut_ptr(), *a);
            for (k, v) in lanes.iter().enumerate() {
                out[8 * k + 7 - s] = *v;
            }
        }
        out
    }

    /// `super::task` for byte labels with the AVX2 tile.
    #[target_feature(enable = "avx2")]
    pub unsafe fn task_u8(
        d: crate::matrix::Distances<'_>,
        packed: &[u8],
        inv: &[f64],
        r0: usize,
        r1: usize,
        out: &mut [f64],
    ) {
        super::task(d, packed, inv, r0, r1, out, |r, l, o| unsafe { row_tile_u8(r, l, o) })
    }
}

/// One task: rows [r0, r1) against every later column, all permutation chunks; adds into `out` (perms·).
#[inline(always)]
fn task<T: Label, F: Fn(&[f64], &[T], &[T; LANES]) -> [f64; LANES]>(
    d: Distances<'_>,
    packed: &[T],
    inv: &[f64],
    r0: usize,
    r1: usize,
    out: &mut [f64],
    tile: F,
) {
    let n = d.n;
    let chunks = out.len() / LANES;
    let mut c0 = r0 + 1;
    while c0 < n {
        let c1 = (c0 + COLS).min(n);
        for c in 0..chunks {
            let labels = &packed[c * n * LANES..(c + 1) * n * LANES];
            for i in r0..r1.min(c1 - 1) {
                let j0 = c0.max(i + 1);
                let row = &d.row(i)[j0 - i - 1..c1 - i - 1];
                let mut own = [T::default(); LANES];
                own.copy_from_slice(&labels[i * LANES..(i + 1) * LANES]);
                let acc = tile(row, &labels[j0 * LANES..c1 * LANES], &own);
                let slot = &mut out[c * LANES..(c + 1) * LANES];
                for q in 0..LANES {
                    slot[q] += acc[q] * inv[own[q].index()];
                }
            }
        }
        c0 = c1;
    }
}

fn task_u8(d: Distances<'_>, packed: &[u8], inv: &[f64], r0: usize, r1: usize, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { avx2::task_u8(d, packed, inv, r0, r1, out) };
    }
    task(d, packed, inv, r0, r1, out, row_tile::<u8>)
}

fn task_u32(d: Distances<'_>, packed: &[u32], inv: &[f64], r0: usize, r1: usize, out: &mut [f64]) {
    task(d, packed, inv, r0, r1, out, row_tile::<u32>)
}

/// Up to this many label rows `within_sums` sums them in one interleaved pass (`few_rows`) rather than in a
/// chunk of LANES permutations, which costs as much for 1 row as for 32 (the screens' rechecks are usually 0–3 rows).
const FEW: usize = 3;

/// Rows [r0, r1) of the SS_W of K label rows (`rows`), interleaved so their K addition chains overlap: for each
/// row, exactly the additions `task` makes for that permutation's lane (the same tiles and rows in the same order;
/// the lanes' `+ 0.0` for other groups change no bits).
fn few_task<const K: usize>(d: Distances<'_>, rows: [&[i32]; K], inv: &[f64], r0: usize, r1: usize) -> [f64; K] {
    let n = d.n;
    let mut slot = [0.0f64; K];
    let mut c0 = r0 + 1;
    while c0 < n {
        let c1 = (c0 + COLS).min(n);
        for i in r0..r1.min(c1 - 1) {
            let j0 = c0.max(i + 1);
            let own: [i32; K] = std::array::from_fn(|k| rows[k][i]);
            let later: [&[i32]; K] = std::array::from_fn(|k| &rows[k][j0..c1]);
            let mut acc = [0.0f64; K];
            for (jj, v) in d.row(i)[j0 - i - 1..c1 - i - 1].iter().enumerate() {
                for k in 0..K {
                    acc[k] += if later[k][jj] == own[k] { v * v } else { 0.0 };
                }
            }
            for k in 0..K {
                slot[k] += acc[k] * inv[own[k] as usize];
            }
        }
        c0 = c1;
    }
    slot
}

/// SS_W of K label rows, bit for bit what the chunked kernels give them (blocks of ROWS rows, added in order).
fn few_rows<const K: usize>(d: Distances<'_>, rows: [&[i32]; K], inv: &[f64]) -> Vec<f64> {
    let n = d.n;
    let blocks: Vec<(usize, usize)> = (0..n - 1).step_by(ROWS).map(|r| (r, (r + ROWS).min(n - 1))).collect();
    let parts: Vec<[f64; K]> = blocks.par_iter().map(|&(r0, r1)| few_task(d, rows, inv, r0, r1)).collect();
    (0..K).map(|k| parts.iter().fold(0.0, |t, p| t + p[k])).collect()
}

/// SS_W for each of `perms` label rows (`labels` is perms × n row-major codes 0..g−1; `inv` = 1/n_g).
pub fn within_sums(d: Distances<'_>, labels: &[i32], perms: usize, inv: &[f64]) -> Vec<f64> {
    let n = d.n;
    if perms <= FEW && n >= 2 {
        let row = |p: usize| &labels[p * n..(p + 1) * n];
        return match perms {
            0 => vec![],
            1 => few_rows(d, [row(0)], inv),
            2 => few_rows(d, [row(0), row(1)], inv),
            _ => few_rows(d, [row(0), row(1), row(2)], inv),
        };
    }
    if inv.len() <= 256 {
        let packed = pack::<u8>(labels, perms, n);
        row_blocks(n, perms, |out, r0, r1| task_u8(d, &packed, inv, r0, r1, out))
    } else {
        let packed = pack::<u32>(labels, perms, n);
        row_blocks(n, perms, |out, r0, r1| task_u32(d, &packed, inv, r0, r1, out))
    }
}

/// Per-permutation sums over the upper triangle's rows: `task(out, r0, r1)` adds rows [r0, r1) into `out`
/// (one slot per lane, `perms` rounded up to whole lane groups), for blocks of ROWS rows in parallel; the
/// blocks' partial sums are added in block order, so results do not depend on thread scheduling.
pub fn row_blocks(n: usize, perms: usize, task: impl Fn(&mut [f64], usize, usize) + Sync) -> Vec<f64> {
    if perms == 0 || n < 2 {
        return vec![0.0; perms];
    }
    let width = perms.div_ceil(LANES) * LANES;
    let blocks: Vec<(usize, usize)> = (0..n - 1).step_by(ROWS).map(|r| (r, (r + ROWS).min(n - 1))).collect();
    let mut partials = vec![0.0f64; blocks.len() * width];
    partials.par_chunks_mut(width).zip(blocks.par_iter()).for_each(|(out, &(r0, r1))| task(out, r0, r1));
    let mut total = vec![0.0f64; width];
    for part in partials.chunks_exact(width) {
        for (t, p) in total.iter_mut().zip(part) {
            *t += p;
        }
    }
    total.truncate(perms);
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(d: &Distances<'_>, labels: &[i32], inv: &[f64]) -> f64 {
        let mut s = 0.0;
        for i in 0..d.n - 1 {
            for (k, v) in d.row(i).iter().enumerate() {
                let j = i + 1 + k;
                if labels[i] == labels[j] {
                    s += v * v * inv[labels[i] as usize];
                }
            }
        }
        s
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_tile_is_bitwise_equal_to_portable_tile() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        for len in [0usize, 1, 2, 7, 64] {
            let row: Vec<f64> = (0..len).map(|k| (k as f64 * 0.731).sin().abs() * 3.0).collect();
            let labels: Vec<u8> = (0..len * LANES).map(|k| ((k * 7919) % 5) as u8).collect();
            let own: [u8; LANES] = std::array::from_fn(|q| (q % 5) as u8);
            let portable = row_tile(&row, &labels, &own);
            // SAFETY: AVX2 checked above.
            let simd = unsafe { avx2::row_tile_u8(&row, &labels, &own) };
            assert_eq!(portable.map(f64::to_bits), simd.map(f64::to_bits));
        }
    }

    #[test]
    fn few_rows_are_summed_bit_for_bit_as_in_a_chunk() {
        let mut state = 5u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as f64 / (1u64 << 31) as f64
        };
        for &(n, g) in &[(2usize, 2usize), (35, 3), (600, 4), (1100, 300)] {
            let cond: Vec<f64> = (0..n * (n - 1) / 2).map(|_| next() * 7.0).collect();
            let d = Distances::new(&cond, n, false).unwrap();
            let codes: Vec<i32> = (0..n).map(|j| (j % g) as i32).collect();
            let labels = crate::permute::permutations(&codes, 3, 0, 40);
            let inv: Vec<f64> = (0..g).map(|c| 1.0 / (c + 2) as f64).collect();
            let chunked = within_sums(d, &labels, 40, &inv);
            for k in 1..=FEW {
                for p in 0..40 - k {
                    let few = within_sums(d, &labels[p * n..(p + k) * n], k, &inv);
                    assert_eq!(
                        few.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        chunked[p..p + k].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "n={n} p={p} rows={k}"
                    );
                }
            }
        }
    }

    #[test]
    fn hand_worked_two_groups() {
        // 4 points on a line at 0, 1, 3, 6; groups {0,1} and {2,3}: SS_W = (1² + 3²)/2 = 5.
        let coords = [0.0f64, 1.0, 3.0, 6.0];
        let mut cond = vec![];
        for i in 0..4 {
            for j in i + 1..4 {
                cond.push((coords[i] - coords[j]).abs());
            }
        }
        let d = Distances::new(&cond, 4, false).unwrap();
        assert_eq!(within_sums(d, &[0, 0, 1, 1], 1, &[0.5, 0.5]), vec![5.0]);
    }

    #[test]
    fn matches_naive_for_many_permutations_and_sizes() {
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as f64 / (1u64 << 31) as f64
        };
        for &(n, perms, g) in &[(2usize, 1usize, 2usize), (7, 3, 3), (40, 37, 4), (700, 20, 300)] {
            let cond: Vec<f64> = (0..n * (n - 1) / 2).map(|_| next()).collect();
            let d = Distances::new(&cond, n, false).unwrap();
            let codes: Vec<i32> = (0..n).map(|j| (j % g) as i32).collect();
            let labels = crate::permute::permutations(&codes, n as u64, 0, perms);
            let mut sizes = vec![0.0; g];
            for &c in &labels[..n] {
                sizes[c as usize] += 1.0;
            }
            let inv: Vec<f64> = sizes.iter().map(|s: &f64| 1.0 / s).collect();
            let got = within_sums(d, &labels, perms, &inv);
            for p in 0..perms {
                let want = naive(&d, &labels[p * n..(p + 1) * n], &inv);
                assert!((got[p] - want).abs() <= 1e-9 * want.abs(), "n={n} p={p}: {} vs {want}", got[p]);
            }
        }
    }
}
