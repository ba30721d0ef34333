//! Kendall's tau-b, exactly as `scipy.stats.kendalltau(x, y)` (variant "b"), batched over rows.
use numpy::{PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use rayon::prelude::*;

/// Tau-b of two equal-length samples; NaN when either side is constant (denominator zero).
///
/// O(n²) pair counting: the batched use here is many short vectors (countries per dimension),
/// where the quadratic loop beats sorting.
pub fn tau_b(x: &[f64], y: &[f64]) -> f64 {
    debug_assert_eq!(x.len(), y.len());
    let n = x.len();
    let (mut concordant_minus_discordant, mut tied_x_only, mut tied_y_only, mut untied) = (0i64, 0i64, 0i64, 0i64);
    for i in 0..n {
        for j in (i + 1)..n {
            let dx = x[i] - x[j];
            let dy = y[i] - y[j];
            match (dx == 0.0, dy == 0.0) {
                (true, true) => {}
                (true, false) => tied_x_only += 1,
                (false, true) => tied_y_only += 1,
                (false, false) => {
                    untied += 1;
                    concordant_minus_discordant += if (dx > 0.0) == (dy > 0.0) { 1 } else { -1 };
                }
            }
        }
    }
    // n0 - n1 = pairs not tied in x; n0 - n2 = pairs not tied in y.
    let not_tied_x = (untied + tied_y_only) as f64;
    let not_tied_y = (untied + tied_x_only) as f64;
    let denom = (not_tied_x * not_tied_y).sqrt();
    if denom == 0.0 {
        return f64::NAN;
    }
    (concordant_minus_discordant as f64 / denom).clamp(-1.0, 1.0)
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
    }

    #[test]
    fn hand_worked_ties() {
        // x = [1,1,2,3], y = [1,2,2,3]: pairs (6): (0,1) tie x; (0,2) C; (0,3) C; (1,2) tie y;
        // (1,3) C; (2,3) C -> C-D = 4, not tied x = 5, not tied y = 5 -> 4/5.
        assert!((tau_b(&[1.0, 1.0, 2.0, 3.0], &[1.0, 2.0, 2.0, 3.0]) - 0.8).abs() < 1e-15);
    }

    #[test]
    fn constant_side_is_nan() {
        assert!(tau_b(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_nan());
    }
}
