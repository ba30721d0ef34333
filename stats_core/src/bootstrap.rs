//! Bootstrap distribution of Kendall's tau-b between resampled country means and reference scores.
use crate::kendall::tau_b;
use rayon::prelude::*;

/// Shapes: samples (G, C, D, U), reference (G, C, D), indices (C, B, K) → taus (B, G, D), row-major.
///
/// Means are summed over the K drawn units in draw order, then divided by K — the order every backend
/// uses, so equal means (ties) are equal bitwise everywhere.
pub fn bootstrap_kendall(
    samples: &[f64],
    shape: [usize; 4],
    reference: &[f64],
    indices: &[i32],
    b: usize,
    k: usize,
) -> Vec<f64> {
    let [groups, countries, dims, units] = shape;
    // reference columns (g, d) as contiguous country vectors
    let mut ref_cols = vec![0.0f64; groups * dims * countries];
    for g in 0..groups {
        for c in 0..countries {
            for d in 0..dims {
                ref_cols[(g * dims + d) * countries + c] = reference[(g * countries + c) * dims + d];
            }
        }
    }
    let mut out = vec![0.0f64; b * groups * dims];
    out.par_chunks_mut(groups * dims).enumerate().for_each(|(r, slot)| {
        let mut means = vec![0.0f64; countries];
        for g in 0..groups {
            for d in 0..dims {
                for (c, m) in means.iter_mut().enumerate() {
                    let base = ((g * countries + c) * dims + d) * units;
                    let draw = &indices[(c * b + r) * k..(c * b + r + 1) * k];
                    let mut total = samples[base + draw[0] as usize];
                    for &u in &draw[1..] {
                        total += samples[base + u as usize];
                    }
                    *m = total / k as f64;
                }
                slot[g * dims + d] =
                    tau_b(&means, &ref_cols[(g * dims + d) * countries..(g * dims + d + 1) * countries]);
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_draw_reproduces_plain_tau() {
        // G=1, C=3, D=1, U=2; drawing every unit once gives the plain means 1.5, 3.5, 2.5
        let samples = [1.0, 2.0, 3.0, 4.0, 2.0, 3.0];
        let reference = [10.0, 30.0, 20.0];
        let indices = [0, 1, 0, 1, 0, 1];
        assert_eq!(bootstrap_kendall(&samples, [1, 3, 1, 2], &reference, &indices, 1, 2), vec![1.0]);
        // drawing unit 0 twice for country 1 gives means 1.5, 3, 2.5 → still concordant
        let indices = [0, 1, 0, 0, 0, 1];
        assert_eq!(bootstrap_kendall(&samples, [1, 3, 1, 2], &reference, &indices, 1, 2), vec![1.0]);
    }
}
