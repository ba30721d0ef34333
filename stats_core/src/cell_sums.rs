//! The kernel of the multi-term PERMANOVA (`stats_core.permanova_terms`): for each permutation of the cell
//! labels, the sums of squared distances between every ordered pair of cells,
//! U[a][b] = Σ_{i<j, cell_i = a, cell_j = b} d²_ij. Every term's sum of squares is then a small quadratic
//! form in U (Python side), so one pass over the distances serves all terms.
//!
//! Permutations go LANES at a time over the condensed distances (each distance loaded once per group and
//! added to LANES accumulators). Each permutation's bins accumulate in condensed order, alone: the sums are
//! bit-identical to the numpy and numba kernels and do not depend on the number of threads.
use numpy::{IntoPyArray, PyArray3, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

/// Permutations that share one pass over the distances.
pub const LANES: usize = 16;

/// U (rows × cells × cells, row-major) for `labels` (rows × n cell codes, each < cells) and the condensed
/// squared distances `squares` (n(n−1)/2, row-major i < j).
pub fn cell_pair_sums(squares: &[f64], labels: &[u32], n: usize, cells: usize) -> Vec<f64> {
    let rows = labels.len().checked_div(n).unwrap_or(0);
    let bins = cells * cells;
    let mut out = vec![0.0; rows * bins];
    out.par_chunks_mut(LANES * bins).enumerate().for_each(|(g, sums)| {
        let lanes = sums.len() / bins;
        // Labels of this group's permutations as [object][lane], pre-multiplied by `cells` for the row side.
        let mut packed = vec![0u32; n * lanes];
        for (q, row) in labels[g * LANES * n..].chunks_exact(n).take(lanes).enumerate() {
            for (j, &c) in row.iter().enumerate() {
                packed[j * lanes + q] = c;
            }
        }
        let mut k = 0;
        for i in 0..n {
            let own = &packed[i * lanes..(i + 1) * lanes];
            let bases: Vec<usize> = own.iter().enumerate().map(|(q, &c)| q * bins + c as usize * cells).collect();
            let row = &squares[k..k + (n - i - 1)];
            for (&d, other) in row.iter().zip(packed[(i + 1) * lanes..].chunks_exact(lanes)) {
                for (&base, &c) in bases.iter().zip(other) {
                    sums[base + c as usize] += d;
                }
            }
            k += n - i - 1;
        }
    });
    out
}

#[pyfunction(name = "cell_pair_sums")]
fn cell_pair_sums_py<'py>(
    py: Python<'py>,
    squares: PyReadonlyArray1<'py, f64>,
    cell_rows: PyReadonlyArray2<'py, i32>,
    cells: usize,
) -> PyResult<Bound<'py, PyArray3<f64>>> {
    let err = |m: String| PyValueError::new_err(m);
    let sq = squares.as_slice().map_err(|_| err("squares: must be C-contiguous".into()))?;
    let lab = cell_rows.as_slice().map_err(|_| err("cell_rows: must be C-contiguous".into()))?;
    let (rows, n) = (cell_rows.shape()[0], cell_rows.shape()[1]);
    if sq.len() != n * n.saturating_sub(1) / 2 {
        return Err(err(format!("squares: {} values, but n = {n} needs {}", sq.len(), n * n.saturating_sub(1) / 2)));
    }
    if let Some(c) = lab.iter().find(|&&c| c < 0 || c as usize >= cells) {
        return Err(err(format!("cell_rows: code {c} outside 0..{cells}")));
    }
    let lab: Vec<u32> = lab.iter().map(|&c| c as u32).collect();
    let out = py.detach(|| cell_pair_sums(sq, &lab, n, cells));
    out.into_pyarray(py).reshape([rows, cells, cells])
}

/// Adds `cell_pair_sums` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cell_pair_sums_py, m)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, pair by pair, for one permutation.
    fn direct(squares: &[f64], labels: &[u32], n: usize, cells: usize) -> Vec<f64> {
        let mut out = vec![0.0; cells * cells];
        let mut k = 0;
        for i in 0..n {
            for j in i + 1..n {
                out[labels[i] as usize * cells + labels[j] as usize] += squares[k];
                k += 1;
            }
        }
        out
    }

    #[test]
    fn every_lane_equals_the_pairwise_definition_bit_for_bit() {
        let (n, cells, rows) = (11, 3, 2 * LANES + 5);
        let squares: Vec<f64> = (0..n * (n - 1) / 2).map(|k| ((k * 37 % 101) as f64).sqrt()).collect();
        let labels: Vec<u32> = (0..rows * n).map(|k| ((k * 7 + k / n) % cells) as u32).collect();
        let got = cell_pair_sums(&squares, &labels, n, cells);
        for p in 0..rows {
            let want = direct(&squares, &labels[p * n..(p + 1) * n], n, cells);
            assert_eq!(&got[p * cells * cells..(p + 1) * cells * cells], &want[..], "permutation {p}");
        }
    }
}
