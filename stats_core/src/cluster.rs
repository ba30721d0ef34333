//! Per-object sums of distances by group (silhouette, PERMDISP) and cluster centroids/spread (Davies–Bouldin).
use crate::matrix::{balanced_row_ranges, Distances, REDUCTION_PARTS};
use rayon::prelude::*;

/// (n × g) row-major: entry (i, h) = Σ_{j in group h, j ≠ i} d_ij, or d²_ij when `squared`; and whether every
/// distance is finite and non-negative (checked in the same pass, so callers need not validate first).
///
/// One pass over the upper triangle; each pair feeds both its rows. Tasks own contiguous row ranges. The
/// "row i, later j" side is a per-row reduction by group (4 interleaved accumulators break the
/// store-to-load chains); the "later j, row i" side goes to a group-major (g × n) column accumulator, so
/// for fixed i it is a contiguous vector add. The tasks are a fixed split of the rows (REDUCTION_PARTS ranges,
/// whatever the number of threads; each holds one g × n column accumulator until the ordered sum) and their
/// results are summed in task order, so the sums are bit-identical on any thread count.
// `(v >= 0.0) & (v <= f64::MAX)` in the hot loop: a branch-free `&` of two compares (false for NaN and
// ±inf) that keeps the validity check vectorised; `RangeInclusive::contains` would be a short-circuit `&&`.
#[allow(clippy::manual_range_contains)]
pub fn group_row_sums(d: Distances<'_>, codes: &[u32], g: usize, squared: bool) -> (Vec<f64>, bool) {
    let n = d.n;
    let ranges = balanced_row_ranges(n, REDUCTION_PARTS);
    let parts: Vec<(usize, Vec<f64>, Vec<f64>, bool)> = ranges
        .par_iter()
        .map(|&(r0, r1)| {
            let mut col = vec![0.0f64; g * n];
            let mut rows = vec![0.0f64; (r1 - r0) * g];
            let mut own = vec![0.0f64; 4 * g];
            let mut ok = true;
            for i in r0..r1 {
                let ci = codes[i] as usize;
                let row = d.row(i);
                let tail = &mut col[ci * n + i + 1..(ci + 1) * n];
                let mut row_ok = true;
                if squared {
                    for (t, &v) in tail.iter_mut().zip(row) {
                        *t += v * v;
                        row_ok &= (v >= 0.0) & (v <= f64::MAX);
                    }
                } else {
                    for (t, &v) in tail.iter_mut().zip(row) {
                        *t += v;
                        row_ok &= (v >= 0.0) & (v <= f64::MAX);
                    }
                }
                ok &= row_ok;
                own.iter_mut().for_each(|o| *o = 0.0);
                let later = &codes[i + 1..];
                let mut chunks = row.chunks_exact(4);
                let mut cchunks = later.chunks_exact(4);
                for (vs, cs) in (&mut chunks).zip(&mut cchunks) {
                    for lane in 0..4 {
                        let v = vs[lane];
                        own[lane * g + cs[lane] as usize] += if squared { v * v } else { v };
                    }
                }
                for (&v, &c) in chunks.remainder().iter().zip(cchunks.remainder()) {
                    own[c as usize] += if squared { v * v } else { v };
                }
                let out = &mut rows[(i - r0) * g..(i - r0 + 1) * g];
                for h in 0..g {
                    out[h] = own[h] + own[g + h] + own[2 * g + h] + own[3 * g + h];
                }
            }
            (r0, rows, col, ok)
        })
        .collect();
    let mut out = vec![0.0f64; n * g];
    let mut ok = true;
    for (r0, rows, col, part_ok) in &parts {
        ok &= part_ok;
        for (o, r) in out[r0 * g..].iter_mut().zip(rows) {
            *o += r;
        }
        for h in 0..g {
            let c = &col[h * n..(h + 1) * n];
            for j in 0..n {
                out[j * g + h] += c[j];
            }
        }
    }
    (out, ok)
}

/// Centroids (g × k, row-major) and each cluster's mean Euclidean distance to its centroid (g).
pub fn cluster_spread(x: &[f64], n: usize, k: usize, codes: &[u32], g: usize) -> (Vec<f64>, Vec<f64>) {
    let mut sizes = vec![0.0f64; g];
    let mut centroids = vec![0.0f64; g * k];
    for i in 0..n {
        let c = codes[i] as usize;
        sizes[c] += 1.0;
        for f in 0..k {
            centroids[c * k + f] += x[i * k + f];
        }
    }
    for c in 0..g {
        for f in 0..k {
            centroids[c * k + f] /= sizes[c];
        }
    }
    let mut spread = vec![0.0f64; g];
    for i in 0..n {
        let c = codes[i] as usize;
        let mut acc = 0.0;
        for f in 0..k {
            let t = x[i * k + f] - centroids[c * k + f];
            acc += t * t;
        }
        spread[c] += acc.sqrt();
    }
    for c in 0..g {
        spread[c] /= sizes[c];
    }
    (centroids, spread)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_sums_hand_worked() {
        // points 0, 1, 3 on a line; groups [0, 0, 1]
        let cond = [1.0, 3.0, 2.0];
        let d = Distances::new(&cond, 3, false).unwrap();
        let (s, ok) = group_row_sums(d, &[0, 0, 1], 2, false);
        assert_eq!(s, vec![1.0, 3.0, 1.0, 2.0, 5.0, 0.0]);
        assert!(ok);
        let (s2, _) = group_row_sums(d, &[0, 0, 1], 2, true);
        assert_eq!(s2, vec![1.0, 9.0, 1.0, 4.0, 13.0, 0.0]);
    }

    #[test]
    fn row_sums_flag_bad_distances() {
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let cond = [1.0, bad, 2.0];
            let d = Distances::new(&cond, 3, false).unwrap();
            assert!(!group_row_sums(d, &[0, 0, 1], 2, false).1);
        }
    }

    #[test]
    fn row_sums_match_naive_on_many_rows() {
        // n = 37, 5 groups in an irregular pattern: compare with a direct double loop over both triangles.
        let n = 37;
        let codes: Vec<u32> = (0..n).map(|i| ((i * 7 + i / 3) % 5) as u32).collect();
        let cond: Vec<f64> = (0..n * (n - 1) / 2).map(|k| ((k * 13) % 17) as f64 * 0.25).collect();
        let d = Distances::new(&cond, n, false).unwrap();
        let (s, ok) = group_row_sums(d, &codes, 5, true);
        assert!(ok);
        for i in 0..n {
            let mut want = [0.0f64; 5];
            for j in 0..n {
                if j != i {
                    let v = if i < j { d.row(i)[j - i - 1] } else { d.row(j)[i - j - 1] };
                    want[codes[j] as usize] += v * v;
                }
            }
            for h in 0..5 {
                assert!((s[i * 5 + h] - want[h]).abs() < 1e-9, "row {i} group {h}");
            }
        }
    }

    #[test]
    fn spread_hand_worked() {
        // cluster 0: (0,0) and (2,0) → centroid (1,0), spread 1; cluster 1: (5,5) alone → spread 0
        let x = [0.0, 0.0, 2.0, 0.0, 5.0, 5.0];
        let (c, s) = cluster_spread(&x, 3, 2, &[0, 0, 1], 2);
        assert_eq!(c, vec![1.0, 0.0, 5.0, 5.0]);
        assert_eq!(s, vec![1.0, 0.0]);
    }
}
