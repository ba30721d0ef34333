//! The observed PERMANOVA sums in one pass over the distances: SS_W for the given labels, Σ d² (for SS_T)
//! and whether every distance is finite and non-negative — so the caller needs no separate validation pass.
use crate::matrix::{balanced_row_ranges, Distances};
use rayon::prelude::*;

/// (Σ_g (1/n_g) Σ_{i<j ∈ g} d²_ij, Σ_{i<j} d²_ij, all d finite and >= 0) over the upper triangle.
///
/// Four interleaved lanes per row keep the f64 additions independent (the compiler may not reorder them);
/// task results are added in task order, so the sums do not depend on thread scheduling.
pub fn observed_sums(d: Distances<'_>, codes: &[u32], inv: &[f64]) -> (f64, f64, bool) {
    let n = d.n;
    let ranges = balanced_row_ranges(n, 4 * rayon::current_num_threads());
    let parts: Vec<(f64, f64, bool)> = ranges
        .par_iter()
        .map(|&(r0, r1)| {
            let (mut within, mut total, mut ok) = (0.0f64, 0.0f64, true);
            for i in r0..r1 {
                let ci = codes[i];
                let row = d.row(i);
                let later = &codes[i + 1..];
                let (mut same, mut all) = ([0.0f64; 4], [0.0f64; 4]);
                let mut row_ok = true;
                let mut vs = row.chunks_exact(4);
                let mut cs = later.chunks_exact(4);
                for (v, c) in (&mut vs).zip(&mut cs) {
                    for q in 0..4 {
                        let d2 = v[q] * v[q];
                        all[q] += d2;
                        same[q] += if c[q] == ci { d2 } else { 0.0 };
                        row_ok &= (v[q] >= 0.0) & (v[q] <= f64::MAX);
                    }
                }
                for (&v, &c) in vs.remainder().iter().zip(cs.remainder()) {
                    all[0] += v * v;
                    same[0] += if c == ci { v * v } else { 0.0 };
                    row_ok &= (v >= 0.0) & (v <= f64::MAX);
                }
                within += (same[0] + same[1] + same[2] + same[3]) * inv[ci as usize];
                total += all[0] + all[1] + all[2] + all[3];
                ok &= row_ok;
            }
            (within, total, ok)
        })
        .collect();
    parts.iter().fold((0.0, 0.0, true), |(w, t, o), &(pw, pt, po)| (w + pw, t + pt, o & po))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked() {
        // points 0, 1, 3 on a line; groups [0, 0, 1] of sizes 2, 1: SS_W = 1²/2, Σd² = 1 + 9 + 4
        let cond = [1.0, 3.0, 2.0];
        let d = Distances::new(&cond, 3, false).unwrap();
        assert_eq!(observed_sums(d, &[0, 0, 1], &[0.5, 1.0]), (0.5, 14.0, true));
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
        let (within, total, ok) = observed_sums(d, &codes, &inv);
        assert!((within - want).abs() <= 1e-12 * want && ok);
        assert!((total - cond.iter().map(|v| v * v).sum::<f64>()).abs() < 1e-9);
        for bad in [-0.5, f64::NAN, f64::INFINITY] {
            cond[100] = bad;
            assert!(!observed_sums(Distances::new(&cond, n, false).unwrap(), &codes, &inv).2);
        }
    }
}
