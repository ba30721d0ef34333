//! Kendall's tau-b, exactly as `scipy.stats.kendalltau(x, y)` (variant "b"), batched over rows.
//!
//! Tau-b is a function of three integer counts ([`Counts`]). Short vectors (the bootstrap's countries)
//! count them pair by pair, O(n²) without branches; long ones by Knight's (1966) method, O(n log n): sort
//! by (x, y), count the ties in runs, then count the discordant pairs as the inversions a merge sort of y
//! undoes. Both give the same integers, so the result does not depend on which one ran (or on the number
//! of threads), and the float tau is computed from them in one way everywhere.
use numpy::{PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use rayon::prelude::*;

/// Up to this length the pairwise count is faster than sorting (measured: benches/RESULTS.md, issue 23).
pub const PAIRWISE_MAX: usize = 128;

/// From this length Knight's sorts and merges use every thread; below, a row stays on one.
const PARALLEL_MIN: usize = 1 << 16;

/// Runs this long are insertion-sorted before the merge passes (each shift is one inversion).
const RUN: usize = 32;

/// The integer counts tau-b is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Concordant minus discordant pairs.
    pub score: i64,
    /// Pairs whose x differ (n0 − n1).
    pub not_tied_x: i64,
    /// Pairs whose y differ (n0 − n2).
    pub not_tied_y: i64,
}

impl Counts {
    /// score / sqrt(not_tied_x · not_tied_y): one product, one sqrt, one division (every backend does
    /// exactly these operations); NaN when either side is constant.
    pub fn tau_b(self) -> f64 {
        let denom = (self.not_tied_x as f64 * self.not_tied_y as f64).sqrt();
        if denom == 0.0 {
            return f64::NAN;
        }
        (self.score as f64 / denom).clamp(-1.0, 1.0)
    }
}

/// Up to this length the pairwise count is inlined into the caller (the bootstrap's loop over resamples):
/// for a few pairs the call through the AVX2 dispatch costs more than the pairs.
const INLINE_MAX: usize = 16;

/// Tau-b of two equal-length samples; NaN when either side is constant (denominator zero).
#[inline]
pub fn tau_b(x: &[f64], y: &[f64]) -> f64 {
    counts(x, y).tau_b()
}

/// The counts of two equal-length samples, by whichever method is faster at this length.
#[inline]
pub fn counts(x: &[f64], y: &[f64]) -> Counts {
    if x.len() <= INLINE_MAX {
        pairwise_short(x, y)
    } else if x.len() <= PAIRWISE_MAX {
        counts_pairwise(x, y)
    } else {
        counts_sorted(x, y)
    }
}

crate::multiversion! {
    /// Pair-by-pair counts, O(n²), without branches: per pair the four compares of x and y give
    /// concordant − discordant and whether each side differs (−0.0 equals 0.0, as in scipy).
    pub fn counts_pairwise(x: &[f64], y: &[f64]) -> Counts => pairwise_body
}

#[inline(always)]
fn pairwise_body(x: &[f64], y: &[f64]) -> Counts {
    debug_assert_eq!(x.len(), y.len());
    let (mut score, mut not_tied_x, mut not_tied_y) = (0i64, 0i64, 0i64);
    for i in 0..x.len() {
        let (xi, yi) = (x[i], y[i]);
        for (&xj, &yj) in x[i + 1..].iter().zip(&y[i + 1..]) {
            let (gx, lx, gy, ly) = (xi > xj, xi < xj, yi > yj, yi < yj);
            score += ((gx & gy) | (lx & ly)) as i64 - ((gx & ly) | (lx & gy)) as i64;
            not_tied_x += (gx | lx) as i64;
            not_tied_y += (gy | ly) as i64;
        }
    }
    Counts { score, not_tied_x, not_tied_y }
}

/// Pair-by-pair counts for a few values, inlined: branches on the ties, which the bootstrap's country means
/// rarely have, so they are predicted (measured faster than the branch-free loop at n = 4).
#[inline(always)]
fn pairwise_short(x: &[f64], y: &[f64]) -> Counts {
    let (mut score, mut tied_x_only, mut tied_y_only, mut untied) = (0i64, 0i64, 0i64, 0i64);
    for i in 0..x.len() {
        for j in (i + 1)..x.len() {
            let (dx, dy) = (x[i] - x[j], y[i] - y[j]);
            match (dx == 0.0, dy == 0.0) {
                (true, true) => {}
                (true, false) => tied_x_only += 1,
                (false, true) => tied_y_only += 1,
                (false, false) => {
                    untied += 1;
                    score += if (dx > 0.0) == (dy > 0.0) { 1 } else { -1 };
                }
            }
        }
    }
    Counts { score, not_tied_x: untied + tied_y_only, not_tied_y: untied + tied_x_only }
}

/// An order-preserving integer key of a finite float; −0.0 and 0.0 share the key of 0.0.
#[inline(always)]
fn key(v: f64) -> u64 {
    let bits = (v + 0.0).to_bits(); // −0.0 + 0.0 = +0.0 under round-to-nearest
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Pairs among equal neighbours of a sorted sequence (equal under `same`): Σ over runs of t(t − 1)/2.
fn tied_pairs<T>(sorted: &[T], same: impl Fn(&T, &T) -> bool) -> i64 {
    let (mut tied, mut run) = (0i64, 0i64);
    for w in sorted.windows(2) {
        run = if same(&w[0], &w[1]) { run + 1 } else { 0 };
        tied += run;
    }
    tied
}

/// Knight's counts, O(n log n). n0 = C + D + (n1 − n3) + (n2 − n3) + n3 with n1, n2, n3 the pairs tied in
/// x, in y and in both, so C − D = n0 − n1 − n2 + n3 − 2D; D is the number of inversions of y once the
/// pairs are sorted by (x, y) (pairs tied in x are in y order there, so they add none).
pub fn counts_sorted(x: &[f64], y: &[f64]) -> Counts {
    debug_assert_eq!(x.len(), y.len());
    let parallel = x.len() >= PARALLEL_MIN;
    let mut pairs: Vec<(u64, u64)> = x.iter().zip(y).map(|(&a, &b)| (key(a), key(b))).collect();
    if parallel {
        pairs.par_sort_unstable();
    } else {
        pairs.sort_unstable();
    }
    let tied_x = tied_pairs(&pairs, |a, b| a.0 == b.0);
    let tied_both = tied_pairs(&pairs, |a, b| a == b);
    let mut ys: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    drop(pairs);
    let discordant = sort_counting_inversions(&mut ys, parallel);
    let tied_y = tied_pairs(&ys, |a, b| a == b);
    let n = x.len() as i64;
    let n0 = n * (n - 1) / 2;
    Counts {
        score: n0 - tied_x - tied_y + tied_both - 2 * discordant,
        not_tied_x: n0 - tied_x,
        not_tied_y: n0 - tied_y,
    }
}

/// Sorts `v` and returns the number of pairs i < j with v[i] > v[j].
pub fn sort_counting_inversions(v: &mut Vec<u64>, parallel: bool) -> i64 {
    let mut inversions: u64 = if parallel {
        v.par_chunks_mut(RUN).map(insertion_sort).sum()
    } else {
        v.chunks_mut(RUN).map(insertion_sort).sum()
    };
    let mut buffer = vec![0u64; v.len()];
    let mut width = RUN;
    while width < v.len() {
        let merge = |(dst, src): (&mut [u64], &[u64])| merge_counting(src, width, dst);
        inversions += if parallel {
            buffer.par_chunks_mut(2 * width).zip(v.par_chunks(2 * width)).map(merge).sum::<u64>()
        } else {
            buffer.chunks_mut(2 * width).zip(v.chunks(2 * width)).map(merge).sum::<u64>()
        };
        std::mem::swap(v, &mut buffer);
        width *= 2;
    }
    inversions as i64
}

/// Insertion sort of a short run; returns its inversions (one per shift).
fn insertion_sort(run: &mut [u64]) -> u64 {
    let mut inversions = 0u64;
    for i in 1..run.len() {
        let held = run[i];
        let mut j = i;
        while j > 0 && run[j - 1] > held {
            run[j] = run[j - 1];
            j -= 1;
        }
        run[j] = held;
        inversions += (i - j) as u64;
    }
    inversions
}

/// Merges the sorted halves src[..width] and src[width..] into dst; returns the pairs (left > right).
/// Equal values take the left one first, so ties are never counted.
fn merge_counting(src: &[u64], width: usize, dst: &mut [u64]) -> u64 {
    if src.len() <= width {
        dst.copy_from_slice(src);
        return 0;
    }
    let (left, right) = src.split_at(width);
    let (mut i, mut j, mut inversions) = (0usize, 0usize, 0u64);
    while i < left.len() && j < right.len() {
        let (a, b) = (left[i], right[j]);
        let take_right = b < a;
        dst[i + j] = if take_right { b } else { a };
        inversions += if take_right { (left.len() - i) as u64 } else { 0 };
        j += take_right as usize;
        i += !take_right as usize;
    }
    dst[i + j..i + j + left.len() - i].copy_from_slice(&left[i..]);
    let k = i + j + left.len() - i;
    dst[k..].copy_from_slice(&right[j..]);
    inversions
}

/// Row-wise tau-b of two (rows, n) arrays, rows computed in parallel.
pub fn tau_b_rows(x: &[f64], y: &[f64], rows: usize, n: usize) -> Vec<f64> {
    if n == 0 {
        return vec![f64::NAN; rows];
    }
    x.par_chunks(n).zip(y.par_chunks(n)).map(|(a, b)| tau_b(a, b)).collect()
}

#[pyfunction]
#[pyo3(name = "kendall_tau_b_rows")]
fn kendall_tau_b_rows_py<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (xs, ys) = (x.as_array(), y.as_array());
    if xs.shape() != ys.shape() {
        return Err(pyo3::exceptions::PyValueError::new_err("x and y must have the same shape"));
    }
    let (rows, n) = (xs.shape()[0], xs.shape()[1]);
    let (xv, yv) = (xs.as_standard_layout().into_owned(), ys.as_standard_layout().into_owned());
    let (xsl, ysl) = (xv.as_slice().unwrap(), yv.as_slice().unwrap());
    let out = py.detach(|| tau_b_rows(xsl, ysl, rows, n));
    Ok(PyArray1::from_vec(py, out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kendall_tau_b_rows_py, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_agreement_and_reversal() {
        assert_eq!(tau_b(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]), 1.0);
        assert_eq!(tau_b(&[1.0, 2.0, 3.0, 4.0], &[4.0, 3.0, 2.0, 1.0]), -1.0);
        assert_eq!(counts_sorted(&[1.0, 2.0, 3.0, 4.0], &[4.0, 3.0, 2.0, 1.0]).tau_b(), -1.0);
    }

    #[test]
    fn hand_worked_ties() {
        // x = [1,1,2,3], y = [1,2,2,3]: pairs (6): (0,1) tie x; (0,2) C; (0,3) C; (1,2) tie y;
        // (1,3) C; (2,3) C -> C-D = 4, not tied x = 5, not tied y = 5 -> 4/5.
        let (x, y) = ([1.0, 1.0, 2.0, 3.0], [1.0, 2.0, 2.0, 3.0]);
        let want = Counts { score: 4, not_tied_x: 5, not_tied_y: 5 };
        assert_eq!(counts_pairwise(&x, &y), want);
        assert_eq!(counts_sorted(&x, &y), want);
        assert!((tau_b(&x, &y) - 0.8).abs() < 1e-15);
    }

    #[test]
    fn constant_side_is_nan() {
        assert!(tau_b(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_nan());
        assert!(counts_sorted(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).tau_b().is_nan());
    }

    #[test]
    fn negative_zero_ties_with_zero() {
        let (x, y) = ([-0.0, 0.0, 1.0, -2.0], [3.0, 1.0, -0.0, 0.0]);
        assert_eq!(counts_sorted(&x, &y), counts_pairwise(&x, &y));
        assert_eq!(pairwise_short(&x, &y), counts_pairwise(&x, &y));
        assert_eq!(counts_pairwise(&x, &y).not_tied_x, 5);
    }

    #[test]
    fn every_method_gives_the_same_counts_on_tied_and_untied_data() {
        // a small LCG: values in few levels (ties, joint ties) and in many (no ties); lengths around the
        // insertion-run and merge boundaries, serial and parallel
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |levels: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 33) % levels) as f64 - (levels / 2) as f64
        };
        for n in [2usize, 3, 5, 16, 31, 32, 33, 64, 65, 97, 200, 1000, 4099] {
            for levels in [2u64, 5, 1 << 30] {
                let x: Vec<f64> = (0..n).map(|_| next(levels)).collect();
                let y: Vec<f64> = (0..n).map(|_| next(levels)).collect();
                let want = counts_pairwise(&x, &y);
                assert_eq!(counts_sorted(&x, &y), want, "n {n} levels {levels}");
                if n <= INLINE_MAX {
                    assert_eq!(pairwise_short(&x, &y), want, "n {n} levels {levels}");
                }
            }
        }
    }

    #[test]
    fn inversions_serial_and_parallel_agree_with_a_quadratic_count() {
        let v: Vec<u64> = (0..5000u64).map(|i| (i * 7919 + 13) % 1009).collect();
        let want = (0..v.len()).map(|i| v[i + 1..].iter().filter(|&&b| b < v[i]).count() as i64).sum::<i64>();
        for parallel in [false, true] {
            let mut w = v.clone();
            assert_eq!(sort_counting_inversions(&mut w, parallel), want);
            assert!(w.windows(2).all(|p| p[0] <= p[1]));
        }
    }
}
