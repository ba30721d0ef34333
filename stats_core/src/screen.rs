//! The PERMANOVA screen: SS_W of every permutation in exact integer arithmetic on quantized d².
//!
//! Each d²_ij becomes q_ij = round(d²_ij · scale) ≤ 2²³ (the caller picks `scale` from the largest d²), so
//! integer sums carry no rounding error at all: the screened SS_W differs from the exact one only by the
//! quantization, at most ½ / scale per pair, the same for every permutation (`stats_core/_screen.py`
//! turns that into the margin). Three kernels give bit-identical sums (the fastest the CPU runs is used):
//! - `Kernel::Vnni` (AVX-512 VNNI, VL, BW, VBMI; ≤ 256 groups; `screen_vnni.rs`): the byte planes through
//!   `vpdpbusd`, accumulating straight into i32 — one instruction per 32 pair-updates and plane, ~53 G/s per thread.
//! - `Kernel::BytePlanes` (AVX2, ≤ 256 groups): byte labels; q split into three bytes, and `vpmaddubsw`
//!   multiplies two columns' q bytes by 16 permutations' compare masks and adds the pairs — 7 vector
//!   operations per 32 pair-updates. ~29 G pair-updates/s per thread (`examples/permanova_kernels.rs`).
//! - `Kernel::Words`: u32 labels, one compare, one `and` and one integer add per 8 permutations of a
//!   pair, two rows per label load, in plain Rust — 12 operations per 32 updates, ~18 G/s per thread.
//!
//! Tasks are blocks of ROWS rows swept in column tiles of COLS objects starting at an even column: the
//! tile's q values are computed once and reused by every permutation chunk, and 256 sums of q ≤ 2²³
//! fit a u32 lane.
use crate::matrix::Distances;
use crate::multiversion;
use crate::permanova::{pack, row_blocks, LANES, ROWS};
use rayon::prelude::*;

pub(crate) const COLS: usize = 256;
/// The largest quantized d²: COLS of them must fit a u32 lane (256 · 2²³ = 2³¹).
pub const QUANTUM_MAX: f64 = 8_388_608.0;

/// Per-lane sums over one tile of q for two rows at once: Σ_j q0_j [label_j = own0], Σ_j q1_j [label_j = own1].
#[inline(always)]
fn pair_sums(
    q0: &[u32],
    q1: &[u32],
    labels: &[u32],
    own0: &[u32; LANES],
    own1: &[u32; LANES],
) -> ([u32; LANES], [u32; LANES]) {
    let (mut a0, mut a1) = ([0u32; LANES], [0u32; LANES]);
    for ((&x0, &x1), lj) in q0.iter().zip(q1).zip(labels.chunks_exact(LANES)) {
        let lj: &[u32; LANES] = lj.try_into().expect("a whole lane group");
        for q in 0..LANES {
            a0[q] += if lj[q] == own0[q] { x0 } else { 0 };
            a1[q] += if lj[q] == own1[q] { x1 } else { 0 };
        }
    }
    (a0, a1)
}

/// One task: rows [r0, r1) against every later column, all permutation chunks; adds Σ inv·q into `out`.
#[inline(always)]
fn task_body(d: Distances<'_>, packed: &[u32], inv: &[f64], scale: f64, r0: usize, r1: usize, out: &mut [f64]) {
    let n = d.n;
    let chunks = out.len() / LANES;
    let mut tile = vec![0u32; ROWS * COLS];
    // tiles start at an even column, as the byte-pair kernel's must: identical tiles, identical sums
    let mut c0 = (r0 + 1) & !1;
    while c0 < n {
        let c1 = (c0 + COLS).min(n);
        let last = r1.min(c1 - 1);
        for i in r0..last {
            let j0 = c0.max(i + 1);
            let row = &d.row(i)[j0 - i - 1..c1 - i - 1];
            let t = &mut tile[(i - r0) * COLS + (j0 - c0)..(i - r0) * COLS + (c1 - c0)];
            for (q, &v) in t.iter_mut().zip(row) {
                *q = (v * v * scale).round() as u32;
            }
        }
        let q_row = |i: usize, from: usize| &tile[(i - r0) * COLS + (from - c0)..(i - r0) * COLS + (c1 - c0)];
        for c in 0..chunks {
            let labels = &packed[c * n * LANES..(c + 1) * n * LANES];
            let own = |i: usize| -> &[u32; LANES] {
                labels[i * LANES..(i + 1) * LANES].try_into().expect("a whole lane group")
            };
            let slot = &mut out[c * LANES..(c + 1) * LANES];
            let mut i = r0;
            while i < last {
                // Rows i and i+1 share columns from i+2 on; a lone last row pairs with itself.
                let k = if i + 1 < last { i + 1 } else { i };
                let j0 = c0.max(k + 1);
                let (o0, o1) = (own(i), own(k));
                let (mut a0, a1) = pair_sums(q_row(i, j0), q_row(k, j0), &labels[j0 * LANES..c1 * LANES], o0, o1);
                if k > i && i + 1 >= c0 {
                    let (lj, x) = (own(i + 1), q_row(i, i + 1)[0]);
                    for q in 0..LANES {
                        a0[q] += if lj[q] == o0[q] { x } else { 0 };
                    }
                }
                for q in 0..LANES {
                    slot[q] += f64::from(a0[q]) * inv[o0[q] as usize];
                    if k > i {
                        slot[q] += f64::from(a1[q]) * inv[o1[q] as usize];
                    }
                }
                i = k + 1;
            }
        }
        c0 = c1;
    }
}

/// Byte labels for the AVX2 kernel: per chunk of LANES permutations, objects in pairs (2m, 2m + 1), each
/// pair as [permutation][object of the pair] (64 bytes); an odd n is padded with label 0 (its q is 0).
fn pack_pairs(labels: &[i32], perms: usize, n: usize) -> Vec<u8> {
    let pairs = n.div_ceil(2);
    let chunks = perms.div_ceil(LANES);
    let mut out = vec![0u8; chunks * pairs * 2 * LANES];
    out.par_chunks_mut(pairs * 2 * LANES).enumerate().for_each(|(c, chunk)| {
        for q in 0..LANES {
            let p = if c * LANES + q < perms { c * LANES + q } else { 0 };
            for (j, &code) in labels[p * n..(p + 1) * n].iter().enumerate() {
                chunk[((j / 2) * LANES + q) * 2 + j % 2] = code as u8;
            }
        }
    });
    out
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! q split into three bytes; `vpmaddubsw` multiplies 32 bytes of q (two columns, repeated) by 32
    //! compare-mask bytes (16 permutations × the same two columns) and adds each pair: one instruction
    //! per byte plane covers 32 pair-updates, accumulated in i16 (64 of them fit) and widened to i32.
    //! Against the u32 kernel: 7 instead of 12 vector operations per 32 pair-updates. Exact as well.
    use super::{Distances, COLS, LANES, ROWS};
    use std::arch::x86_64::*;

    const PAIRS: usize = COLS / 2;
    /// i16 sums of at most this many products of ≤ 2 · 255 stay within ±32767.
    const FLUSH: usize = 64;

    /// Row i's per-permutation Σ_j q_ij [label_j = own], over column pairs [m0, m1) of the tile, as
    /// (−Σ plane 0, −Σ plane 1, −Σ plane 2) per lane in i32.
    #[inline(always)]
    unsafe fn row_planes(planes: &[u16], labels: &[u8], own: [__m256i; 2], m0: usize, m1: usize) -> [[__m256i; 4]; 3] {
        assert!(
            m1 <= PAIRS && planes.len() >= 3 * PAIRS && labels.len() >= m1 * 2 * LANES,
            "a tile within its buffers"
        );
        let mut wide = [[_mm256_setzero_si256(); 4]; 3];
        let mut m = m0;
        while m < m1 {
            let end = (m + FLUSH).min(m1);
            let mut acc = [[_mm256_setzero_si256(); 2]; 3];
            for mm in m..end {
                let lp = labels.as_ptr().add(mm * 2 * LANES) as *const __m256i;
                let mask = [
                    _mm256_cmpeq_epi8(_mm256_loadu_si256(lp), own[0]),
                    _mm256_cmpeq_epi8(_mm256_loadu_si256(lp.add(1)), own[1]),
                ];
                for (b, accb) in acc.iter_mut().enumerate() {
                    let q = _mm256_set1_epi16(*planes.get_unchecked(b * PAIRS + mm) as i16);
                    for (v, a) in accb.iter_mut().enumerate() {
                        *a = _mm256_add_epi16(*a, _mm256_maddubs_epi16(q, mask[v]));
                    }
                }
            }
            for (b, accb) in acc.iter().enumerate() {
                for (v, a) in accb.iter().enumerate() {
                    let lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(*a));
                    let hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256::<1>(*a));
                    wide[b][2 * v] = _mm256_add_epi32(wide[b][2 * v], lo);
                    wide[b][2 * v + 1] = _mm256_add_epi32(wide[b][2 * v + 1], hi);
                }
            }
            m = end;
        }
        wide
    }

    /// `super::task_body` for byte-pair labels (`super::pack_pairs`); same sums, same order of f64 additions.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn task(
        d: Distances<'_>,
        packed: &[u8],
        inv: &[f64],
        scale: f64,
        r0: usize,
        r1: usize,
        out: &mut [f64],
    ) {
        let n = d.n;
        let pairs = n.div_ceil(2);
        let chunks = out.len() / LANES;
        // Own label of object i, duplicated for both objects of a pair: byte 2q and 2q + 1 = permutation q.
        let pick: [__m256i; 2] = std::array::from_fn(|e| {
            let idx: [u8; 32] = std::array::from_fn(|b| ((b % 16) & !1) as u8 + e as u8);
            _mm256_loadu_si256(idx.as_ptr() as *const __m256i)
        });
        let mut planes = vec![0u16; ROWS * 3 * PAIRS];
        let mut c0 = (r0 + 1) & !1;
        while c0 < n {
            let c1 = (c0 + COLS).min(n);
            let tile_pairs = (c1 - c0).div_ceil(2);
            let last = r1.min(c1 - 1);
            for i in r0..last {
                let row = d.row(i);
                let j0 = c0.max(i + 1);
                let t = &mut planes[(i - r0) * 3 * PAIRS..(i - r0 + 1) * 3 * PAIRS];
                for m in (j0 - c0) / 2..tile_pairs {
                    let q = |j: usize| {
                        if j >= j0 && j < c1 {
                            (row[j - i - 1] * row[j - i - 1] * scale).round() as u32
                        } else {
                            0
                        }
                    };
                    let (qa, qb) = (q(c0 + 2 * m), q(c0 + 2 * m + 1));
                    for b in 0..3 {
                        t[b * PAIRS + m] = (((qa >> (8 * b)) & 255) | (((qb >> (8 * b)) & 255) << 8)) as u16;
                    }
                }
            }
            for c in 0..chunks {
                let labels = &packed[c * pairs * 2 * LANES..(c + 1) * pairs * 2 * LANES];
                let tile_labels = &labels[(c0 / 2) * 2 * LANES..];
                let slot = &mut out[c * LANES..(c + 1) * LANES];
                for i in r0..last {
                    let own_pair = labels.as_ptr().add((i / 2) * 2 * LANES) as *const __m256i;
                    let own = [
                        _mm256_shuffle_epi8(_mm256_loadu_si256(own_pair), pick[i % 2]),
                        _mm256_shuffle_epi8(_mm256_loadu_si256(own_pair.add(1)), pick[i % 2]),
                    ];
                    let j0 = c0.max(i + 1);
                    let t = &planes[(i - r0) * 3 * PAIRS..(i - r0 + 1) * 3 * PAIRS];
                    let wide = row_planes(t, tile_labels, own, (j0 - c0) / 2, tile_pairs);
                    let mut sums = [[0i32; LANES]; 3];
                    for (b, w) in wide.iter().enumerate() {
                        for (v, x) in w.iter().enumerate() {
                            _mm256_storeu_si256(sums[b].as_mut_ptr().add(8 * v) as *mut __m256i, *x);
                        }
                    }
                    for q in 0..LANES {
                        let own_q = labels[(i / 2) * 2 * LANES + 2 * q + i % 2] as usize;
                        let total =
                            -(i64::from(sums[0][q]) + 256 * i64::from(sums[1][q]) + 65536 * i64::from(sums[2][q]));
                        slot[q] += total as f64 * inv[own_q];
                    }
                }
            }
            c0 = c1;
        }
    }
}

multiversion! {
    fn task(d: Distances<'_>, packed: &[u32], inv: &[f64], scale: f64, r0: usize, r1: usize, out: &mut [f64]) => task_body
}

/// Screened SS_W for each of `perms` label rows (`labels`: perms × n codes below inv.len()).
///
/// Σ_g (1/n_g) Σ_{i<j ∈ g} round(d²_ij · scale) / scale, exact up to f64 rounding of the weighted sums
/// (relative ~1e-12); `scale` must keep every d²·scale ≤ QUANTUM_MAX.
pub fn quantized_within_sums(d: Distances<'_>, labels: &[i32], perms: usize, inv: &[f64], scale: f64) -> Vec<f64> {
    let kernel = match () {
        _ if inv.len() <= 256 && vnni_available() => Kernel::Vnni,
        _ if inv.len() <= 256 && avx2_available() => Kernel::BytePlanes,
        _ => Kernel::Words,
    };
    quantized_within_sums_by(kernel, d, labels, perms, inv, scale)
}

/// The implementations of the quantized screen; they give bit-identical sums.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kernel {
    /// u32 labels and q, plain Rust (vectorized by the compiler; any CPU, any number of groups).
    Words,
    /// byte labels and byte planes of q with `vpmaddubsw` (AVX2, at most 256 groups).
    BytePlanes,
    /// byte labels and byte planes of q with `vpdpbusd` (AVX-512 VNNI, at most 256 groups; `screen_vnni`).
    Vnni,
}

/// `quantized_within_sums` with a given kernel (BytePlanes and Vnni panic without their CPU features or with
/// more than 256 groups).
pub fn quantized_within_sums_by(
    kernel: Kernel,
    d: Distances<'_>,
    labels: &[i32],
    perms: usize,
    inv: &[f64],
    scale: f64,
) -> Vec<f64> {
    let n = d.n;
    let mut total = match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::BytePlanes => {
            assert!(avx2_available() && inv.len() <= 256, "the byte-plane kernel needs AVX2 and at most 256 groups");
            let packed = pack_pairs(labels, perms, n);
            // SAFETY: the CPU supports AVX2, asserted just above.
            row_blocks(n, perms, |out, r0, r1| unsafe { avx2::task(d, &packed, inv, scale, r0, r1, out) })
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Vnni => {
            assert!(vnni_available() && inv.len() <= 256, "the VNNI kernel needs AVX-512 VNNI and at most 256 groups");
            let packed = crate::screen_vnni::pack_quads(labels, perms, n);
            // SAFETY: the CPU supports AVX-512 VNNI, VL, BW and VBMI, asserted just above.
            row_blocks(n, perms, |out, r0, r1| unsafe { crate::screen_vnni::task(d, &packed, inv, scale, r0, r1, out) })
        }
        #[cfg(not(target_arch = "x86_64"))]
        Kernel::BytePlanes | Kernel::Vnni => panic!("the byte-plane kernels need x86-64"),
        Kernel::Words => {
            let packed = pack::<u32>(labels, perms, n);
            row_blocks(n, perms, |out, r0, r1| task(d, &packed, inv, scale, r0, r1, out))
        }
    };
    total.iter_mut().for_each(|t| *t /= scale);
    total
}

fn vnni_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::screen_vnni::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *state >> 33
    }

    /// Σ_g inv_g Σ_{i<j ∈ g} round(d² · scale) / scale, pair by pair.
    fn naive(d: &Distances<'_>, labels: &[i32], inv: &[f64], scale: f64) -> f64 {
        let mut s = 0.0;
        for i in 0..d.n - 1 {
            for (k, v) in d.row(i).iter().enumerate() {
                if labels[i] == labels[i + 1 + k] {
                    s += (v * v * scale).round() * inv[labels[i] as usize];
                }
            }
        }
        s / scale
    }

    #[test]
    fn hand_worked_quantization() {
        // points 0, 1, 3, 6; groups {0,1}, {2,3}; scale 2: q = round(2·1) = 2 and round(2·9) = 18, SS_W = (2 + 18)/2/2
        let coords = [0.0f64, 1.0, 3.0, 6.0];
        let cond: Vec<f64> = (0..4).flat_map(|i| (i + 1..4).map(move |j| (coords[i] - coords[j]).abs())).collect();
        let d = Distances::new(&cond, 4, false).unwrap();
        assert_eq!(quantized_within_sums(d, &[0, 0, 1, 1], 1, &[0.5, 0.5], 2.0), vec![5.0]);
        // a scale that rounds: 0.25·1 → 0, 0.25·9 = 2.25 → 2: SS_W = (0 + 2)/2/0.25
        assert_eq!(quantized_within_sums(d, &[0, 0, 1, 1], 1, &[0.5, 0.5], 0.25), vec![4.0]);
    }

    #[test]
    fn equals_the_pairwise_sum_across_tiles_odd_rows_and_many_groups() {
        let mut state = 7u64;
        // sizes straddle ROWS, COLS and LANES; 300 groups exercise labels beyond a byte
        for &(n, perms, g) in
            &[(2usize, 1usize, 2usize), (3, 2, 2), (33, 5, 3), (258, 33, 4), (530, 40, 7), (700, 3, 300)]
        {
            let cond: Vec<f64> =
                (0..n * (n - 1) / 2).map(|_| lcg(&mut state) as f64 / (1u64 << 31) as f64 * 3.0).collect();
            let d = Distances::new(&cond, n, false).unwrap();
            let largest = cond.iter().map(|v| v * v).fold(0.0, f64::max);
            let scale = QUANTUM_MAX / largest;
            let codes: Vec<i32> = (0..n).map(|j| (j % g) as i32).collect();
            let labels = crate::permute::permutations(&codes, state, 0, perms);
            let inv: Vec<f64> = (0..g).map(|c| 1.0 / (n / g + usize::from(c < n % g)) as f64).collect();
            let got = quantized_within_sums(d, &labels, perms, &inv, scale);
            for p in 0..perms {
                let want = naive(&d, &labels[p * n..(p + 1) * n], &inv, scale);
                assert!((got[p] - want).abs() <= 1e-12 * want.abs().max(1e-300), "n={n} p={p}: {} vs {want}", got[p]);
            }
        }
    }

    #[test]
    fn byte_plane_vnni_and_u32_kernels_agree_bit_for_bit() {
        if !avx2_available() {
            return;
        }
        let mut state = 11u64;
        for &(n, perms, g) in &[(2usize, 1usize, 2usize), (5, 3, 2), (64, 33, 3), (257, 40, 5), (531, 70, 256)] {
            let cond: Vec<f64> =
                (0..n * (n - 1) / 2).map(|_| lcg(&mut state) as f64 / (1u64 << 31) as f64 * 5.0).collect();
            let d = Distances::new(&cond, n, false).unwrap();
            let scale = QUANTUM_MAX / cond.iter().map(|v| v * v).fold(0.0, f64::max);
            let labels: Vec<i32> = (0..perms * n).map(|_| (lcg(&mut state) % g as u64) as i32).collect();
            let inv: Vec<f64> = (0..g).map(|c| 1.0 / (c + 2) as f64).collect();
            let bytes = quantized_within_sums_by(Kernel::BytePlanes, d, &labels, perms, &inv, scale);
            let words = quantized_within_sums_by(Kernel::Words, d, &labels, perms, &inv, scale);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&bytes), bits(&words), "n={n}");
            if vnni_available() {
                let vnni = quantized_within_sums_by(Kernel::Vnni, d, &labels, perms, &inv, scale);
                assert_eq!(bits(&vnni), bits(&words), "n={n}");
            }
        }
    }

    #[test]
    fn half_way_squares_round_away_from_zero_on_every_kernel() {
        // integer distances and scale ½: every odd d² lands exactly on a half; round() takes it up
        let n = 70;
        let mut state = 17u64;
        let cond: Vec<f64> = (0..n * (n - 1) / 2).map(|_| (lcg(&mut state) % 9) as f64).collect();
        let d = Distances::new(&cond, n, false).unwrap();
        let labels: Vec<i32> = (0..3 * n).map(|_| (lcg(&mut state) % 3) as i32).collect();
        let inv = [1.0; 3];
        let words = quantized_within_sums_by(Kernel::Words, d, &labels, 3, &inv, 0.5);
        for p in 0..3 {
            let want = naive(&d, &labels[p * n..(p + 1) * n], &inv, 0.5);
            assert_eq!(words[p], want);
        }
        for (kernel, ok) in [(Kernel::BytePlanes, avx2_available()), (Kernel::Vnni, vnni_available())] {
            if ok {
                assert_eq!(quantized_within_sums_by(kernel, d, &labels, 3, &inv, 0.5), words, "{kernel:?}");
            }
        }
    }

    #[test]
    fn square_and_condensed_layouts_agree() {
        let n = 40;
        let mut state = 3u64;
        let cond: Vec<f64> = (0..n * (n - 1) / 2).map(|_| (lcg(&mut state) % 1000) as f64 / 7.0).collect();
        let mut square = vec![0.0; n * n];
        let mut k = 0;
        for i in 0..n {
            for j in i + 1..n {
                square[i * n + j] = cond[k];
                square[j * n + i] = cond[k];
                k += 1;
            }
        }
        let labels: Vec<i32> = (0..2 * n).map(|k| ((k * 7) % 3) as i32).collect();
        let inv = [1.0 / 14.0, 1.0 / 13.0, 1.0 / 13.0];
        let a = quantized_within_sums(Distances::new(&cond, n, false).unwrap(), &labels, 2, &inv, 1.5);
        let b = quantized_within_sums(Distances::new(&square, n, true).unwrap(), &labels, 2, &inv, 1.5);
        assert_eq!(a, b);
    }
}
