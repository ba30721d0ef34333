//! The PERMANOVA screen: SS_W of every permutation in exact integer arithmetic on quantized d².
//!
//! Each d²_ij becomes q_ij = round(d²_ij · scale) ≤ 2²³ (the caller picks `scale` from the largest d²), so
//! integer sums carry no rounding error at all: the screened SS_W differs from the exact one only by the
//! quantization, at most ½ / scale per pair, the same for every permutation (`stats_core/_screen.py`
//! turns that into the margin). Labels are u32, 32 permutations per object, so one compare, one `and`
//! and one integer add serve 8 permutations of a pair; two rows share each label load. Measured against
//! byte labels with f32 blends (`examples/permanova_kernels.rs`): about 1.5× the updates per cycle.
//!
//! Tasks are blocks of ROWS rows swept in column tiles of COLS objects: the tile's q values are computed
//! once and reused by every permutation chunk, and 256 sums of q ≤ 2²³ fit a u32 lane.
use crate::matrix::Distances;
use crate::multiversion;
use crate::permanova::{pack, LANES};
use rayon::prelude::*;

const ROWS: usize = 32;
const COLS: usize = 256;
/// The largest quantized d²: COLS of them must fit a u32 lane (256 · 2²³ = 2³¹).
pub const QUANTUM_MAX: f64 = 8_388_608.0;

/// Per-lane sums over one tile of q for two rows at once: Σ_j q0_j [label_j = own0], Σ_j q1_j [label_j = own1].
#[inline(always)]
fn pair_sums(q0: &[u32], q1: &[u32], labels: &[u32], own0: &[u32; LANES], own1: &[u32; LANES]) -> ([u32; LANES], [u32; LANES]) {
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
    let mut c0 = r0 + 1;
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
            let own = |i: usize| -> &[u32; LANES] { labels[i * LANES..(i + 1) * LANES].try_into().expect("a whole lane group") };
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

multiversion! {
    fn task(d: Distances<'_>, packed: &[u32], inv: &[f64], scale: f64, r0: usize, r1: usize, out: &mut [f64]) => task_body
}

/// Screened SS_W for each of `perms` label rows (`labels`: perms × n codes below inv.len()).
///
/// Σ_g (1/n_g) Σ_{i<j ∈ g} round(d²_ij · scale) / scale, exact up to f64 rounding of the weighted sums
/// (relative ~1e-12); `scale` must keep every d²·scale ≤ QUANTUM_MAX.
pub fn quantized_within_sums(d: Distances<'_>, labels: &[i32], perms: usize, inv: &[f64], scale: f64) -> Vec<f64> {
    let n = d.n;
    if perms == 0 || n < 2 {
        return vec![0.0; perms];
    }
    let width = perms.div_ceil(LANES) * LANES;
    let packed = pack::<u32>(labels, perms, n);
    let tasks: Vec<(usize, usize)> = (0..n - 1).step_by(ROWS).map(|r| (r, (r + ROWS).min(n - 1))).collect();
    let mut partials = vec![0.0f64; tasks.len() * width];
    partials.par_chunks_mut(width).zip(tasks.par_iter()).for_each(|(out, &(r0, r1))| task(d, &packed, inv, scale, r0, r1, out));
    let mut total = vec![0.0f64; width];
    for part in partials.chunks_exact(width) {
        for (t, p) in total.iter_mut().zip(part) {
            *t += p;
        }
    }
    total.truncate(perms);
    total.iter_mut().for_each(|t| *t /= scale);
    total
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
        for &(n, perms, g) in &[(2usize, 1usize, 2usize), (3, 2, 2), (33, 5, 3), (258, 33, 4), (530, 40, 7), (700, 3, 300)] {
            let cond: Vec<f64> = (0..n * (n - 1) / 2).map(|_| lcg(&mut state) as f64 / (1u64 << 31) as f64 * 3.0).collect();
            let d = Distances::new(&cond, n, false).unwrap();
            let largest = cond.iter().map(|v| v * v).fold(0.0, f64::max);
            let scale = QUANTUM_MAX / largest;
            let mut labels: Vec<i32> = (0..perms * n).map(|k| ((k % n) % g) as i32).collect();
            for p in 0..perms {
                for j in (1..n).rev() {
                    labels.swap(p * n + j, p * n + lcg(&mut state) as usize % (j + 1));
                }
            }
            let inv: Vec<f64> = (0..g).map(|c| 1.0 / (n / g + usize::from(c < n % g)) as f64).collect();
            let got = quantized_within_sums(d, &labels, perms, &inv, scale);
            for p in 0..perms {
                let want = naive(&d, &labels[p * n..(p + 1) * n], &inv, scale);
                assert!((got[p] - want).abs() <= 1e-12 * want.abs().max(1e-300), "n={n} p={p}: {} vs {want}", got[p]);
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
