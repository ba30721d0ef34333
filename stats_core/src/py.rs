//! PyO3 shims for the kernels other than Kendall's: convert arguments, check codes, release the GIL.
use crate::matrix::Distances;
use crate::{bootstrap, cluster, factored, observed, pdist, permanova, permdisp, permute, screen};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArray3, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
    PyReadonlyArrayDyn, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn err(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

fn contiguous<'a, T: numpy::Element, D: numpy::ndarray::Dimension>(
    name: &str,
    a: &'a numpy::PyReadonlyArray<'_, T, D>,
) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| err(format!("{name}: must be C-contiguous")))
}

fn distances<'a>(a: &'a PyReadonlyArrayDyn<'_, f64>) -> PyResult<Distances<'a>> {
    Distances::from_flat(contiguous("distances", a)?, a.shape()).map_err(err)
}

fn codes_below(name: &str, codes: &[i32], g: usize) -> PyResult<()> {
    match codes.iter().find(|&&c| c < 0 || c as usize >= g) {
        Some(c) => Err(err(format!("{name}: code {c} outside 0..{g}"))),
        None => Ok(()),
    }
}

/// One group code per object, checked: `n` of them (`objects` names what n counts), each below `g`.
fn object_codes(codes: &PyReadonlyArray1<'_, i32>, n: usize, objects: &str, g: usize) -> PyResult<Vec<u32>> {
    let c = contiguous("codes", codes)?;
    if c.len() != n {
        return Err(err(format!("codes: {} labels {objects}", c.len())));
    }
    codes_below("codes", c, g)?;
    Ok(c.iter().map(|&v| v as u32).collect())
}

/// Permuted labels (permutations × n) and the inverse group sizes they index → (labels, sizes, permutations).
fn permuted_labels<'a>(
    labels: &'a PyReadonlyArray2<'_, i32>,
    inverse_sizes: &'a PyReadonlyArray1<'_, f64>,
    n: usize,
    objects: &str,
) -> PyResult<(&'a [i32], &'a [f64], usize)> {
    let (perms, columns) = (labels.shape()[0], labels.shape()[1]);
    if columns != n {
        return Err(err(format!("labels: {columns} columns but {objects}")));
    }
    let lab = contiguous("labels", labels)?;
    let inv = contiguous("inverse_sizes", inverse_sizes)?;
    codes_below("labels", lab, inv.len())?;
    Ok((lab, inv, perms))
}

/// A distance matrix and label rows (permutations × n) for it, with the inverse group sizes they index.
fn distances_and_labels<'a>(
    distances: &'a PyReadonlyArrayDyn<'_, f64>,
    labels: &'a PyReadonlyArray2<'_, i32>,
    inverse_sizes: &'a PyReadonlyArray1<'_, f64>,
) -> PyResult<(Distances<'a>, &'a [i32], &'a [f64], usize)> {
    let d = self::distances(distances)?;
    let (lab, inv, perms) = permuted_labels(labels, inverse_sizes, d.n, &format!("the distances have n = {}", d.n))?;
    Ok((d, lab, inv, perms))
}

/// A distance matrix and one group code per object, each below `g`.
fn distances_and_codes<'a>(
    distances: &'a PyReadonlyArrayDyn<'_, f64>,
    codes: &PyReadonlyArray1<'_, i32>,
    g: usize,
) -> PyResult<(Distances<'a>, Vec<u32>)> {
    let d = self::distances(distances)?;
    let c = object_codes(codes, d.n, &format!("but the distances have n = {}", d.n), g)?;
    Ok((d, c))
}

#[pyfunction(name = "pdist")]
fn pdist_py<'py>(py: Python<'py>, x: PyReadonlyArray2<'py, f64>, metric: &str) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let metric = pdist::Metric::parse(metric).map_err(err)?;
    let (n, k) = (x.shape()[0], x.shape()[1]);
    let data = contiguous("x", &x)?;
    Ok(py.detach(|| pdist::pdist(data, n, k, metric)).into_pyarray(py))
}

#[pyfunction(name = "permanova_within")]
fn permanova_within_py<'py>(
    py: Python<'py>,
    distances: PyReadonlyArrayDyn<'py, f64>,
    labels: PyReadonlyArray2<'py, i32>,
    inverse_sizes: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (d, lab, inv, perms) = distances_and_labels(&distances, &labels, &inverse_sizes)?;
    Ok(py.detach(|| permanova::within_sums(d, lab, perms, inv)).into_pyarray(py))
}

/// (SS_W, Σd², max d², per-object Σd², valid) as Python receives them.
type ObservedSums<'py> = (f64, f64, f64, Bound<'py, PyArray1<f64>>, bool);

#[pyfunction(name = "permanova_observed")]
fn permanova_observed_py<'py>(
    py: Python<'py>,
    distances: PyReadonlyArrayDyn<'py, f64>,
    codes: PyReadonlyArray1<'py, i32>,
    inverse_sizes: PyReadonlyArray1<'py, f64>,
) -> PyResult<ObservedSums<'py>> {
    let inv = contiguous("inverse_sizes", &inverse_sizes)?;
    let (d, c) = distances_and_codes(&distances, &codes, inv.len())?;
    let o = py.detach(|| observed::observed_sums(d, &c, inv));
    Ok((o.within, o.total, o.largest, o.row_sums.into_pyarray(py), o.valid))
}

#[pyfunction(name = "permanova_quantized")]
fn permanova_quantized_py<'py>(
    py: Python<'py>,
    distances: PyReadonlyArrayDyn<'py, f64>,
    labels: PyReadonlyArray2<'py, i32>,
    inverse_sizes: PyReadonlyArray1<'py, f64>,
    scale: f64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (d, lab, inv, perms) = distances_and_labels(&distances, &labels, &inverse_sizes)?;
    if !(scale > 0.0 && scale.is_finite()) {
        return Err(err(format!("scale: expected a finite number > 0, got {scale}")));
    }
    Ok(py.detach(|| screen::quantized_within_sums(d, lab, perms, inv, scale)).into_pyarray(py))
}

#[pyfunction(name = "permanova_factored")]
fn permanova_factored_py<'py>(
    py: Python<'py>,
    factor: PyReadonlyArray2<'py, f64>,
    labels: PyReadonlyArray2<'py, i32>,
    inverse_sizes: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (n, k) = (factor.shape()[0], factor.shape()[1]);
    let y = contiguous("factor", &factor)?;
    let (lab, inv, perms) = permuted_labels(&labels, &inverse_sizes, n, &format!("the factor has {n} rows"))?;
    Ok(py.detach(|| factored::between_sums(y, k, lab, perms, inv)).into_pyarray(py))
}

#[pyfunction(name = "gower_residual")]
fn gower_residual_py<'py>(
    py: Python<'py>,
    distances: PyReadonlyArrayDyn<'py, f64>,
    factor: PyReadonlyArray2<'py, f64>,
    means: PyReadonlyArray1<'py, f64>,
    grand: f64,
) -> PyResult<f64> {
    let d = self::distances(&distances)?;
    let (rows, k) = (factor.shape()[0], factor.shape()[1]);
    let (y, m) = (contiguous("factor", &factor)?, contiguous("means", &means)?);
    if rows != d.n || m.len() != d.n {
        return Err(err(format!("factor, means: expected {} rows, got {rows} and {}", d.n, m.len())));
    }
    Ok(py.detach(|| factored::residual_max(d, y, k, m, grand)))
}

#[pyfunction(name = "permutations")]
fn permutations_py<'py>(
    py: Python<'py>,
    codes: PyReadonlyArray1<'py, i32>,
    key: u64,
    first: u64,
    count: usize,
) -> PyResult<Bound<'py, PyArray2<i32>>> {
    let c = contiguous("codes", &codes)?;
    let n = c.len();
    let out = py.detach(|| permute::permutations(c, key, first, count));
    out.into_pyarray(py).reshape([count, n])
}

#[pyfunction(name = "permutations_within")]
fn permutations_within_py<'py>(
    py: Python<'py>,
    codes: PyReadonlyArray1<'py, i32>,
    order: PyReadonlyArray1<'py, i64>,
    starts: PyReadonlyArray1<'py, i64>,
    key: u64,
    first: u64,
    count: usize,
) -> PyResult<Bound<'py, PyArray2<i32>>> {
    let c = contiguous("codes", &codes)?;
    let n = c.len();
    let o = contiguous("order", &order)?;
    if o.len() != n || o.iter().any(|&k| k < 0 || k as usize >= n) {
        return Err(err(format!("order: expected {n} object indices in 0..{n}")));
    }
    let s = contiguous("starts", &starts)?;
    if s.first() != Some(&0) || s.last() != Some(&(n as i64)) || s.windows(2).any(|w| w[0] > w[1]) {
        return Err(err(format!("starts: expected non-decreasing stratum bounds from 0 to {n}")));
    }
    let o: Vec<u32> = o.iter().map(|&k| k as u32).collect();
    let s: Vec<usize> = s.iter().map(|&k| k as usize).collect();
    let out = py.detach(|| permute::permutations_within(c, &o, &s, key, first, count));
    out.into_pyarray(py).reshape([count, n])
}

#[pyfunction(name = "group_row_sums")]
fn group_row_sums_py<'py>(
    py: Python<'py>,
    distances: PyReadonlyArrayDyn<'py, f64>,
    codes: PyReadonlyArray1<'py, i32>,
    n_groups: usize,
    squared: bool,
) -> PyResult<(Bound<'py, PyArray2<f64>>, bool)> {
    let (d, c) = distances_and_codes(&distances, &codes, n_groups)?;
    let (out, valid) = py.detach(|| cluster::group_row_sums(d, &c, n_groups, squared));
    Ok((out.into_pyarray(py).reshape([d.n, n_groups])?, valid))
}

#[pyfunction(name = "group_f")]
fn group_f_py<'py>(
    py: Python<'py>,
    values: PyReadonlyArray1<'py, f64>,
    labels: PyReadonlyArray2<'py, i32>,
    inverse_sizes: PyReadonlyArray1<'py, f64>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let v = contiguous("values", &values)?;
    let n = v.len();
    let (lab, inv, perms) = permuted_labels(&labels, &inverse_sizes, n, &format!("{n} values"))?;
    if inv.len() < 2 || n <= inv.len() {
        return Err(err("inverse_sizes: need 2 <= groups < n"));
    }
    Ok(py.detach(|| permdisp::group_f(v, lab, perms, inv)).into_pyarray(py))
}

#[pyfunction(name = "bootstrap_kendall")]
fn bootstrap_kendall_py<'py>(
    py: Python<'py>,
    samples: PyReadonlyArrayDyn<'py, f64>,
    reference: PyReadonlyArray3<'py, f64>,
    indices: PyReadonlyArray3<'py, i32>,
) -> PyResult<Bound<'py, PyArray3<f64>>> {
    let shape: [usize; 4] =
        samples.shape().try_into().map_err(|_| err("samples: expected 4 dimensions (G, C, D, U)"))?;
    let [groups, countries, dims, units] = shape;
    if reference.shape() != [groups, countries, dims] {
        return Err(err(format!("reference: expected shape ({groups}, {countries}, {dims})")));
    }
    let (ic, b, k) = (indices.shape()[0], indices.shape()[1], indices.shape()[2]);
    if ic != countries || k == 0 {
        return Err(err(format!("indices: expected shape ({countries}, B, K >= 1)")));
    }
    let idx = contiguous("indices", &indices)?;
    codes_below("indices", idx, units)?;
    let (s, r) = (contiguous("samples", &samples)?, contiguous("reference", &reference)?);
    let out = py.detach(|| bootstrap::bootstrap_kendall(s, shape, r, idx, b, k));
    out.into_pyarray(py).reshape([b, groups, dims])
}

/// (centroids (g × k), per-group spread) as Python receives them.
type CentroidsSpread<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<f64>>);

#[pyfunction(name = "cluster_spread")]
fn cluster_spread_py<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    codes: PyReadonlyArray1<'py, i32>,
    n_groups: usize,
) -> PyResult<CentroidsSpread<'py>> {
    let (n, k) = (x.shape()[0], x.shape()[1]);
    let c = object_codes(&codes, n, &format!("for {n} rows"), n_groups)?;
    let data = contiguous("x", &x)?;
    let (centroids, spread) = py.detach(|| cluster::cluster_spread(data, n, k, &c, n_groups));
    Ok((centroids.into_pyarray(py).reshape([n_groups, k])?, spread.into_pyarray(py)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pdist_py, m)?)?;
    m.add_function(wrap_pyfunction!(permanova_within_py, m)?)?;
    m.add_function(wrap_pyfunction!(permanova_observed_py, m)?)?;
    m.add_function(wrap_pyfunction!(permanova_quantized_py, m)?)?;
    m.add_function(wrap_pyfunction!(permanova_factored_py, m)?)?;
    m.add_function(wrap_pyfunction!(gower_residual_py, m)?)?;
    m.add_function(wrap_pyfunction!(permutations_py, m)?)?;
    m.add_function(wrap_pyfunction!(permutations_within_py, m)?)?;
    m.add_function(wrap_pyfunction!(group_row_sums_py, m)?)?;
    m.add_function(wrap_pyfunction!(group_f_py, m)?)?;
    m.add_function(wrap_pyfunction!(bootstrap_kendall_py, m)?)?;
    m.add_function(wrap_pyfunction!(cluster_spread_py, m)?)?;
    Ok(())
}
