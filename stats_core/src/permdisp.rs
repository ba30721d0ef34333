//! One-way ANOVA F of a value per object under many groupings (PERMDISP's permutation test).
use rayon::prelude::*;

/// F for each of `perms` label rows (`labels` perms × n, codes 0..g−1; `inv` = 1/n_g).
pub fn group_f(values: &[f64], labels: &[i32], perms: usize, inv: &[f64]) -> Vec<f64> {
    let n = values.len();
    let g = inv.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    (0..perms)
        .into_par_iter()
        .map(|p| {
            let lab = &labels[p * n..(p + 1) * n];
            let mut means = vec![0.0f64; g];
            for (v, &c) in values.iter().zip(lab) {
                means[c as usize] += v;
            }
            for (m, w) in means.iter_mut().zip(inv) {
                *m *= w;
            }
            let mut ss_within = 0.0;
            for (v, &c) in values.iter().zip(lab) {
                let r = v - means[c as usize];
                ss_within += r * r;
            }
            let mut ss_between = 0.0;
            for (m, w) in means.iter().zip(inv) {
                let c = m - mean;
                ss_between += c * c / w;
            }
            let fb = ss_between / (g - 1) as f64;
            if ss_within > 0.0 {
                fb / (ss_within / (n - g) as f64)
            } else if ss_between > 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked_anova() {
        // groups {1,2,3} and {5,6,7}: means 2, 6; grand 4; SSB = 3·4 + 3·4 = 24; SSW = 2 + 2 = 4;
        // F = (24/1) / (4/4) = 24.
        let f = group_f(&[1.0, 2.0, 3.0, 5.0, 6.0, 7.0], &[0, 0, 0, 1, 1, 1], 1, &[1.0 / 3.0, 1.0 / 3.0]);
        assert!((f[0] - 24.0).abs() < 1e-12);
    }
}
