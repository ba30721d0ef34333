//! The observed PERMANOVA sums in one pass over the distances: SS_W for the given labels, Σ d² (for SS_T),
//! the largest d² (which scales the quantized screen), each object's Σ_j d²_ij (which centres Gower's
//! matrix for the factored screen) and whether every distance is finite and non-negative — so the caller
//! needs no separate validation pass.
use crate::matrix::{balanced_row_ranges, Distances, REDUCTION_PARTS};
use rayon::prelude::*;

/// What one pass over the upper triangle gives.
#[derive(Debug, PartialEq)]
pub struct Observed {
    /// Σ_g (1/n_g) Σ_{i<j ∈ g} d²_ij for the observed labels.
    pub within: f64,
    /// Σ_{i<j} d²_ij.
    pub total: f64,
    /// max d²_ij.
    pub largest: f64,
    /// Σ_{j≠i} d²_ij for every object i.
    pub row_sums: Vec<f64>,
    /// Every distance finite and >= 0.
    pub valid: bool,
}

/// The observed sums of `codes` (group of each object, weights `inv` = 1/n_g) over the upper triangle.
///
/// Four interleaved lanes per row keep the f64 additions independent (the compiler may not reorder them);
/// the tasks (REDUCTION_PARTS of them, whatever the thread count) are added in task order, so the sums are the
/// same bits on any number of threads. Each task adds
/// its rows' d² to the later objects' sums in its own column vector.
// `(v >= 0.0) & (v <= f64::MAX)` in the hot loop: a branch-free `&` of two compares (false for NaN and
// ±inf) that keeps the validity check vectorised; `RangeInclusive::contains` would be a short-circuit `&&`.
#[allow(clippy::manual_range_contains)]
pub fn observed_sums(d: Distances<'_>, codes: &[u32], inv: &[f64]) -> Observed {
    let n = d.n;
    let ranges = balanced_row_ranges(n, REDUCTION_PARTS);
    let parts: Vec<(f64, f64, f64, Vec<f64>, bool)> = ranges
        .par_iter()
        .map(|&(r0, r1)| {
            let (mut within, mut total, mut largest, mut ok) = (0.0f64, 0.0f64, 0.0f64, true);
            let mut sums = vec![0.0f64; n];
            for i in r0..r1 {
                let ci = codes[i];
                let row = d.row(i);
                let later = &codes[i + 1..];
                let (mut same, mut all, mut top) = ([0.0f64; 4], [0.0f64; 4], [0.0f64; 4]);
                let mut row_ok = true;
                let mut vs = row.chunks_exact(4);
                let mut cs = later.chunks_exact(4);
                let mut ss = sums[i + 1..].chunks_exact_mut(4);
                for ((v, c), s) in (&mut vs).zip(&mut cs).zip(&mut ss) {
                    for q in 0..4 {
                        let d2 = v[q] * v[q];
                        all[q] += d2;
                        top[q] = top[q].max(d2);
                        s[q] += d2;
                        same[q] += if c[q] == ci { d2 } else { 0.0 };
                        row_ok &= (v[q] >= 0.0) & (v[q] <= f64::MAX);
                    }
                }
                for ((&v, &c), s) in vs.remainder().iter().zip(cs.remainder()).zip(ss.into_remainder()) {
                    all[0] += v * v;
                    top[0] = top[0].max(v * v);
                    *s += v * v;
                    same[0] += if c == ci { v * v } else { 0.0 };
                    row_ok &= (v >= 0.0) & (v <= f64::MAX);
                }
                let row_total = all[0] + all[1] + all[2] + all[3];
                within += (same[0] + same[1] + same[2] + same[3]) * inv[ci as usize];
                total += row_total;
                sums[i] += row_total;
                largest = largest.max(top[0].max(top[1]).max(top[2].max(top[3])));
                ok &= row_ok;
            }
            (within, total, largest, sums, ok)
        })
        .collect();
    let mut out = Observed { within: 0.0, total: 0.0, largest: 0.0, row_sums: vec![0.0; n], valid: true };
    for (within, total, largest, sums, ok) in parts {
        out.within += within;
        out.total += total;
        out.largest = out.largest.max(largest);
        out.valid &= ok;
        out.row_sums.iter_mut().zip(&sums).for_each(|(a, b)| *a += b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked() {
        // points 0, 1, 3 on a line; groups [0, 0, 1] of sizes 2, 1: SS_W = 1²/2, Σd² = 1 + 9 + 4, max d² = 9,
        // row sums 1 + 9, 1 + 4, 9 + 4
        let cond = [1.0, 3.0, 2.0];
        let d = Distances::new(&cond, 3, false).unwrap();
        let want = Observed { within: 0.5, total: 14.0, largest: 9.0, row_sums: vec![10.0, 5.0, 13.0], valid: true };
        assert_eq!(observed_sums(d, &[0, 0, 1], &[0.5, 1.0]), want);
    }

    #[test]
    fn agrees_with_the_permutation_kernel_and_flags_bad_values() {
        let n = 23;
        let codes: Vec<u32> = (0..n).map(|i| ((i * 5 + i / 4) % 3) as u32).collect();
        let mut sizes = [0.0f64; 3];
        codes.iter().for_each(|&c| sizes[c as usize] += 1.0);
        let inv: Vec<f64> = sizes.iter().map(|s| 1.0 / s).collect();
        let mut cond: Vec<f64> = (0..n * (n - 1) / 2).map(|k| ((k * 31) % 29) as f64 * 0.1).collect();
        let d = Distances::new(&cond, n, false).unwrap();
        let labels: Vec<i32> = codes.iter().map(|&c| c as i32).collect();
        let want = crate::permanova::within_sums(d, &labels, 1, &inv)[0];
        let got = observed_sums(d, &codes, &inv);
        assert!((got.within - want).abs() <= 1e-12 * want && got.valid);
        assert!((got.total - cond.iter().map(|v| v * v).sum::<f64>()).abs() < 1e-9);
        assert_eq!(got.largest, cond.iter().map(|v| v * v).fold(0.0, f64::max));
        for i in 0..n {
            let row: f64 = (0..n)
                .filter(|&j| j != i)
                .map(|j| {
                    let (a, b) = (i.min(j), i.max(j));
                    let v = cond[crate::matrix::row_start(a, n) + b - a - 1];
                    v * v
                })
                .sum();
            assert!((got.row_sums[i] - row).abs() <= 1e-12 * row, "row {i}");
        }
        for bad in [-0.5, f64::NAN, f64::INFINITY] {
            cond[100] = bad;
            assert!(!observed_sums(Distances::new(&cond, n, false).unwrap(), &codes, &inv).valid);
        }
    }
}
