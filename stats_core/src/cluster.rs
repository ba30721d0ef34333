//! Per-object sums of distances by group (silhouette, PERMDISP) and cluster centroids/spread (Davies–Bouldin).
use crate::matrix::{balanced_row_ranges, Distances};
use rayon::prelude::*;

/// (n × g) row-major: entry (i, h) = Σ_{j in group h, j ≠ i} d_ij, or d²_ij when `squared`.
///
/// One pass over the upper triangle; each pair feeds both its rows. Tasks own contiguous row ranges
/// and private (n × g) accumulators (a fixed, small number of them), summed in task order.
pub fn group_row_sums(d: Distances<'_>, codes: &[u32], g: usize, squared: bool) -> Vec<f64> {
    let n = d.n;
    let ranges = balanced_row_ranges(n, 4 * rayon::current_num_threads());
    let parts: Vec<Vec<f64>> = ranges
        .par_iter()
        .map(|&(r0, r1)| {
            let mut acc = vec![0.0f64; n * g];
            for i in r0..r1 {
                let ci = codes[i] as usize;
                let mut own = vec![0.0f64; g];
                for (k, &v) in d.row(i).iter().enumerate() {
                    let j = i + 1 + k;
                    let w = if squared { v * v } else { v };
                    own[codes[j] as usize] += w;
                    acc[j * g + ci] += w;
                }
                for h in 0..g {
                    acc[i * g + h] += own[h];
                }
            }
            acc
        })
        .collect();
    let mut out = vec![0.0f64; n * g];
    for part in &parts {
        for (o, p) in out.iter_mut().zip(part) {
            *o += p;
        }
    }
    out
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
        let s = group_row_sums(d, &[0, 0, 1], 2, false);
        assert_eq!(s, vec![1.0, 3.0, 1.0, 2.0, 5.0, 0.0]);
        let s2 = group_row_sums(d, &[0, 0, 1], 2, true);
        assert_eq!(s2, vec![1.0, 9.0, 1.0, 4.0, 13.0, 0.0]);
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
