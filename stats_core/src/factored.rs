//! PERMANOVA's between-group sum of squares from a factor Y of Gower's centred matrix G ≈ Y Yᵀ:
//! SS_A = Σ_g (1/n_g) ‖Σ_{i∈g} y_i‖², O(n·k) per permutation instead of O(n²).
//!
//! Distances between points in k dimensions (hofcat's dimension scores and item answers: k ≤ 24) give a
//! G of rank ≤ k, so this is exact up to the factor's residual E = G − Y Yᵀ, whose largest entry
//! `residual_max` measures in one pass (`stats_core/_screen.py` turns it into the screen's margin).
use crate::matrix::{balanced_row_ranges, Distances};
use crate::multiversion;
use rayon::prelude::*;

/// The residual is computed in register tiles of TILE_ROWS rows × TILE_COLS columns, accumulated over the k
/// factor columns: each factor value loaded feeds several products.
const TILE_ROWS: usize = 4;
const TILE_COLS: usize = 8;
const COL_BLOCK: usize = 512;

/// Σ_g inv_g ‖Σ_{i: label_i = g} y_i‖² for one label row; `sums` is g·k scratch.
#[inline(always)]
fn between_body(y: &[f64], k: usize, labels: &[i32], inv: &[f64], sums: &mut [f64]) -> f64 {
    sums.fill(0.0);
    for (yi, &c) in y.chunks_exact(k).zip(labels) {
        let s = &mut sums[c as usize * k..(c as usize + 1) * k];
        for (a, b) in s.iter_mut().zip(yi) {
            *a += b;
        }
    }
    sums.chunks_exact(k).zip(inv).map(|(s, w)| w * s.iter().map(|v| v * v).sum::<f64>()).sum()
}

multiversion! {
    fn between(y: &[f64], k: usize, labels: &[i32], inv: &[f64], sums: &mut [f64]) -> f64 => between_body
}

/// SS_A in the factor for each of `perms` label rows (perms × n codes below inv.len()); y is n × k row-major.
pub fn between_sums(y: &[f64], k: usize, labels: &[i32], perms: usize, inv: &[f64]) -> Vec<f64> {
    if perms == 0 || k == 0 {
        return vec![0.0; perms];
    }
    let n = y.len() / k;
    labels
        .par_chunks_exact(n)
        .take(perms)
        .map_init(|| vec![0.0f64; inv.len() * k], |sums, row| between(y, k, row, inv, sums))
        .collect()
}

/// max_{i<j} |G_ij − y_i·y_j| over row tiles [t0, t1) (rows t·TILE_ROWS …), G_ij = −½(d²_ij − m_i − m_j + grand).
///
/// `yt` is Y transposed and padded with zero columns to a multiple of TILE_COLS (k × width).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn residual_tiles<const FUSED: bool>(
    d: Distances<'_>,
    y: &[f64],
    yt: &[f64],
    width: usize,
    k: usize,
    means: &[f64],
    grand: f64,
    t0: usize,
    t1: usize,
) -> f64 {
    let n = d.n;
    let mut lanes = [0.0f64; TILE_COLS];
    // the tile's rows of Y, factor column by factor column (zero rows past n)
    let mut a = vec![[0.0f64; TILE_ROWS]; k];
    // column blocks keep their slice of `yt` (k · COL_BLOCK values) in L2 while every row tile uses it
    for c0 in (0..n).step_by(COL_BLOCK) {
        let c1 = (c0 + COL_BLOCK).min(n);
        for tile in t0..t1 {
            let i0 = tile * TILE_ROWS;
            let rows = TILE_ROWS.min(n - i0);
            let mut j0 = c0.max((i0 + 1) / TILE_COLS * TILE_COLS);
            if j0 >= c1 {
                continue;
            }
            for (t, at) in a.iter_mut().enumerate() {
                *at = std::array::from_fn(|r| if r < rows { y[(i0 + r) * k + t] } else { 0.0 });
            }
            while j0 < c1 {
                let mut acc = [[0.0f64; TILE_COLS]; TILE_ROWS];
                for (t, at) in a.iter().enumerate() {
                    let b: &[f64; TILE_COLS] =
                        yt[t * width + j0..t * width + j0 + TILE_COLS].try_into().expect("a whole tile");
                    for r in 0..TILE_ROWS {
                        for c in 0..TILE_COLS {
                            // fused where the CPU has FMA: half the instructions (this is a bound, not a
                            // result that must match other paths bit for bit)
                            acc[r][c] = if FUSED { at[r].mul_add(b[c], acc[r][c]) } else { acc[r][c] + at[r] * b[c] };
                        }
                    }
                }
                let full = j0 > i0 + TILE_ROWS - 1 && j0 + TILE_COLS <= n && rows == TILE_ROWS;
                for (r, accr) in acc.iter().enumerate().take(rows) {
                    let i = i0 + r;
                    let row = d.row(i);
                    if full {
                        // every column is later than every row of the tile: lane-wise, branch-free
                        let v: &[f64; TILE_COLS] =
                            row[j0 - i - 1..j0 - i - 1 + TILE_COLS].try_into().expect("a whole tile");
                        let m: &[f64; TILE_COLS] = means[j0..j0 + TILE_COLS].try_into().expect("a whole tile");
                        for c in 0..TILE_COLS {
                            lanes[c] = lanes[c].max((-0.5 * (v[c] * v[c] - means[i] - m[c] + grand) - accr[c]).abs());
                        }
                        continue;
                    }
                    for (c, &dot) in accr.iter().enumerate() {
                        let j = j0 + c;
                        if j > i && j < n {
                            let v = row[j - i - 1];
                            lanes[0] = lanes[0].max((-0.5 * (v * v - means[i] - means[j] + grand) - dot).abs());
                        }
                    }
                }
                j0 += TILE_COLS;
            }
        }
    }
    lanes.iter().fold(0.0, |a, &b| a.max(b))
}

#[allow(clippy::too_many_arguments)]
fn residual_task(
    d: Distances<'_>,
    y: &[f64],
    yt: &[f64],
    width: usize,
    k: usize,
    means: &[f64],
    grand: f64,
    t0: usize,
    t1: usize,
) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        #[allow(clippy::too_many_arguments)]
        unsafe fn fused(
            d: Distances<'_>,
            y: &[f64],
            yt: &[f64],
            width: usize,
            k: usize,
            means: &[f64],
            grand: f64,
            t0: usize,
            t1: usize,
        ) -> f64 {
            residual_tiles::<true>(d, y, yt, width, k, means, grand, t0, t1)
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA, checked just above.
            return unsafe { fused(d, y, yt, width, k, means, grand, t0, t1) };
        }
    }
    residual_tiles::<false>(d, y, yt, width, k, means, grand, t0, t1)
}

/// max_{i<j} |G_ij − (Y Yᵀ)_ij| for Gower's centred G of `d` (means m_i = Σ_j d²_ij / n, grand = Σ_ij d²_ij / n²).
///
/// NaN anywhere makes the result NaN (`f64::max` would drop it), so a broken factor is never trusted.
pub fn residual_max(d: Distances<'_>, y: &[f64], k: usize, means: &[f64], grand: f64) -> f64 {
    let n = d.n;
    if y.iter().any(|v| !v.is_finite()) || means.iter().any(|v| !v.is_finite()) || !grand.is_finite() {
        return f64::NAN;
    }
    let width = n.div_ceil(TILE_COLS) * TILE_COLS;
    let mut yt = vec![0.0f64; k * width];
    for i in 0..n {
        for t in 0..k {
            yt[t * width + i] = y[i * k + t];
        }
    }
    // tiles of rows, balanced by the number of pairs they cover
    let tiles = n.div_ceil(TILE_ROWS);
    balanced_row_ranges(tiles + 1, 4 * rayon::current_num_threads())
        .par_iter()
        .map(|&(t0, t1)| residual_task(d, y, &yt, width, k, means, grand, t0, t1.min(tiles)))
        .reduce(|| 0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked() {
        // points 0, 1, 3, 6 on a line, centred (mean 2.5): groups {0,1}, {2,3} have sums −4 and 4;
        // SS_A = (16 + 16)/2 = 16, and SS_T − SS_W = (1 + 9 + 36 + 4 + 25 + 9)/4 − (1 + 9)/2 = 21 − 5 = 16
        let y = [-2.5, -1.5, 0.5, 3.5];
        assert_eq!(between_sums(&y, 1, &[0, 0, 1, 1], 1, &[0.5, 0.5]), vec![16.0]);
    }

    #[test]
    fn residual_of_an_exact_factor_is_rounding_and_of_a_truncated_one_is_the_missing_part() {
        // points (0,0), (3,0), (0,4), (3,4): centred y = (∓1.5, ∓2); Gower's G = Y Yᵀ exactly
        let pts = [(0.0f64, 0.0f64), (3.0, 0.0), (0.0, 4.0), (3.0, 4.0)];
        let cond: Vec<f64> = (0..4)
            .flat_map(|i| {
                (i + 1..4).map(move |j| {
                    let (a, b) = (pts[i], pts[j]);
                    ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt()
                })
            })
            .collect();
        let d = Distances::new(&cond, 4, false).unwrap();
        let y: Vec<f64> = pts.iter().flat_map(|p| [p.0 - 1.5, p.1 - 2.0]).collect();
        let mut means = vec![0.0; 4];
        for i in 0..4 {
            means[i] = pts.iter().map(|q| (pts[i].0 - q.0).powi(2) + (pts[i].1 - q.1).powi(2)).sum::<f64>() / 4.0;
        }
        let grand = means.iter().sum::<f64>() / 4.0;
        assert!(residual_max(d, &y, 2, &means, grand) < 1e-12);
        // keep only the first coordinate: the residual is the second one's products, largest |±2·±2| = 4
        let y1: Vec<f64> = pts.iter().map(|p| p.0 - 1.5).collect();
        assert!((residual_max(d, &y1, 1, &means, grand) - 4.0).abs() < 1e-12);
        assert!(residual_max(d, &[f64::NAN; 4], 1, &means, grand).is_nan());
    }

    #[test]
    fn several_dimensions_and_permutations() {
        let (n, k) = (9usize, 3usize);
        let y: Vec<f64> = (0..n * k).map(|v| ((v * 37) % 11) as f64 - 5.0).collect();
        let labels: Vec<i32> = (0..2 * n).map(|v| ((v * 5) % 3) as i32).collect();
        let inv = [1.0 / 3.0; 3];
        let got = between_sums(&y, k, &labels, 2, &inv);
        for p in 0..2 {
            let mut want = 0.0;
            for g in 0..3i32 {
                for d in 0..k {
                    let s: f64 = (0..n).filter(|&i| labels[p * n + i] == g).map(|i| y[i * k + d]).sum();
                    want += s * s / 3.0;
                }
            }
            assert!((got[p] - want).abs() < 1e-12 * want.max(1.0), "{} vs {want}", got[p]);
        }
    }
}
