//! The kernel of the multi-term PERMANOVA (`stats_core.permanova_terms`): for each permutation of the cell
//! labels, the sums of squared distances between every ordered pair of cells,
//! U[a][b] = Σ_{i<j, cell_i = a, cell_j = b} d²_ij. Every term's sum of squares is then a small quadratic
//! form in U (Python side), so one pass over the distances serves all terms.
//!
//! `cell_factor_sums` is the same for a low-rank factor Y of Gower's matrix (G ≈ Y Yᵀ): the cells' sums of
//! the rows of Y, O(n·k) per permutation, which screens most permutations (`stats_core/_terms_screen.py`).
//!
//! Permutations go LANES at a time over the condensed distances (each distance loaded once per group and
//! added to LANES accumulators). Each permutation's bins accumulate in condensed order, alone: the sums are
//! bit-identical to the numpy and numba kernels and do not depend on the number of threads.
use numpy::{
    IntoPyArray, PyArray2, PyArray3, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
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

/// Columns per integer tile: 256 quanta ≤ 2²³ fit a u32 lane (`stats_core._terms_screen.QUANTUM_MAX`).
const TILE: usize = 256;

/// Per lane, the sums of one tile's quanta over the later objects in each column's cell set: acc[s][q] =
/// Σ_j tile_j & masks[s][j][q] (masks all ones or zero; `masks` is [column][object][lane], `stride` apart).
fn tile_sums_scalar(tile: &[u32], masks: &[u32], stride: usize, acc: &mut [[u32; LANES]]) {
    for (s, out) in acc.iter_mut().enumerate() {
        let mut a = [0u32; LANES];
        for (&x, m) in tile.iter().zip(masks[s * stride..].chunks_exact(LANES)) {
            for (v, &m) in a.iter_mut().zip(m) {
                *v += x & m;
            }
        }
        *out = a;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::LANES;
    use std::arch::x86_64::*;

    /// `tile_sums_scalar` with the 16 lanes in two 256-bit vectors (the loop vectorizer would vectorize
    /// over the tile's columns instead, gathering masks lane by lane).
    #[target_feature(enable = "avx2")]
    pub unsafe fn tile_sums(tile: &[u32], masks: &[u32], stride: usize, acc: &mut [[u32; LANES]]) {
        for (s, out) in acc.iter_mut().enumerate() {
            let column = &masks[s * stride..];
            assert!(column.len() >= tile.len() * LANES);
            let mp = column.as_ptr();
            let (mut a0, mut a1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for (j, &x) in tile.iter().enumerate() {
                let xv = _mm256_set1_epi32(x as i32);
                // SAFETY: j < tile.len(), so both loads lie within `column` (asserted above).
                let (m0, m1) = unsafe {
                    (
                        _mm256_loadu_si256(mp.add(j * LANES) as *const __m256i),
                        _mm256_loadu_si256(mp.add(j * LANES + 8) as *const __m256i),
                    )
                };
                a0 = _mm256_add_epi32(a0, _mm256_and_si256(m0, xv));
                a1 = _mm256_add_epi32(a1, _mm256_and_si256(m1, xv));
            }
            // SAFETY: `out` holds LANES = 16 u32, two 256-bit stores.
            unsafe {
                _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, a0);
                _mm256_storeu_si256(out.as_mut_ptr().add(8) as *mut __m256i, a1);
            }
        }
    }
}

/// `tile_sums_scalar`, in AVX2 where the CPU has it (integer sums: the same on either path).
fn tile_sums(tile: &[u32], masks: &[u32], stride: usize, acc: &mut [[u32; LANES]]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { avx2::tile_sums(tile, masks, stride, acc) };
    }
    tile_sums_scalar(tile, masks, stride, acc)
}

/// M = X̃ᵀ U X̃ (rows × (p+1) × (p+1), row-major) in exact integers: U the sums of integer quanta (condensed,
/// each ≤ 2²³) between ordered cell pairs as `cell_pair_sums`, X̃ = [1, columns] with `columns` (cells × p,
/// row-major, 0/1) indicators of cell sets — a model's design columns. M[r][s] = Σ_{i<j} q_ij x̃_{c_i r} x̃_{c_j s}.
/// The screen of `stats_core._terms_screen`: per row and LANES permutations, p masked-add sweeps in SIMD
/// instead of a scattered f64 add per pair and permutation. Integer sums: independent of order and threads.
/// Runs `cell_screen_vnni`'s kernel where the CPU has AVX-512 VNNI (the same integers, ~4× fewer operations).
pub fn cell_column_quanta(quanta: &[u32], labels: &[u32], n: usize, columns: &[u8], p: usize) -> Vec<u64> {
    #[cfg(target_arch = "x86_64")]
    if n > 0 && crate::cell_screen_vnni::available() {
        // SAFETY: the CPU supports AVX-512 F, BW and VNNI, checked just above.
        return unsafe { crate::cell_screen_vnni::cell_column_quanta(quanta, labels, n, columns, p) };
    }
    column_quanta_masked(quanta, labels, n, columns, p)
}

/// `cell_column_quanta` by p masked-add sweeps per row (AVX2 where the CPU has it, else scalar).
fn column_quanta_masked(quanta: &[u32], labels: &[u32], n: usize, columns: &[u8], p: usize) -> Vec<u64> {
    let rows = labels.len().checked_div(n).unwrap_or(0);
    let width = p + 1;
    let bins = width * width;
    let mut out = vec![0u64; rows * bins];
    out.par_chunks_mut(LANES * bins).enumerate().for_each(|(g, sums)| {
        let lanes = sums.len() / bins;
        // masks[s][j][q]: object j of permutation q is in column s's cells; unused lanes are in none
        let stride = n * LANES;
        let mut masks = vec![0u32; p * stride];
        let mut own = vec![0u32; stride];
        for (q, row) in labels[g * LANES * n..].chunks_exact(n).take(lanes).enumerate() {
            for (j, &c) in row.iter().enumerate() {
                own[j * LANES + q] = c;
                for s in 0..p {
                    if columns[c as usize * p + s] != 0 {
                        masks[s * stride + j * LANES + q] = u32::MAX;
                    }
                }
            }
        }
        let mut acc = vec![[0u32; LANES]; p];
        let mut wide = vec![[0u64; LANES]; width];
        let mut k = 0;
        for i in 0..n {
            let row = &quanta[k..k + (n - i - 1)];
            k += n - i - 1;
            for w in wide.iter_mut() {
                *w = [0; LANES];
            }
            for (t, tile) in row.chunks(TILE).enumerate() {
                let from = (i + 1 + t * TILE) * LANES;
                tile_sums(tile, &masks[from..], stride, &mut acc);
                let total: u64 = tile.iter().map(|&x| x as u64).sum();
                for w in wide[0].iter_mut() {
                    *w += total;
                }
                for (w, a) in wide[1..].iter_mut().zip(&acc) {
                    for q in 0..LANES {
                        w[q] += a[q] as u64;
                    }
                }
            }
            for q in 0..lanes {
                let c = own[i * LANES + q] as usize;
                for r in 0..width {
                    if r == 0 || columns[c * p + r - 1] != 0 {
                        for (s, w) in wide.iter().enumerate() {
                            sums[q * bins + r * width + s] += w[q];
                        }
                    }
                }
            }
        }
    });
    out
}

/// Adds each object's factor row (n × k, row-major) to its cell's sums (cells × k), objects in index order.
#[inline(always)]
fn factor_sums_body(factor: &[f64], k: usize, row: &[u32], sums: &mut [f64]) {
    for (y, &c) in factor.chunks_exact(k).zip(row) {
        let cell = &mut sums[c as usize * k..(c as usize + 1) * k];
        for (a, b) in cell.iter_mut().zip(y) {
            *a += b;
        }
    }
}

crate::multiversion! {
    fn factor_sums(factor: &[f64], k: usize, row: &[u32], sums: &mut [f64]) => factor_sums_body
}

/// M (rows × cells × k, row-major): for each label row, the sum of the factor's rows (n × k, row-major) over
/// the objects of each cell, objects in index order (bit-identical to the numpy and numba kernels).
pub fn cell_factor_sums(factor: &[f64], k: usize, labels: &[u32], n: usize, cells: usize) -> Vec<f64> {
    let rows = labels.len().checked_div(n).unwrap_or(0);
    let mut out = vec![0.0; rows * cells * k];
    if k == 0 {
        return out;
    }
    out.par_chunks_mut(cells * k)
        .zip(labels.par_chunks(n.max(1)))
        .with_min_len(8)
        .for_each(|(sums, row)| factor_sums(factor, k, row, sums));
    out
}

/// Σ_{i<j} d²_ij · w_i · w_j for one label row: per row i the partial sums over j in order, then added over i
/// in order; products rounded before each addition (no fused multiply-add), as the numpy and numba kernels.
#[inline(always)]
fn forms_body(squares: &[f64], w: &[f64], m: usize, partial: &mut [f64], out: &mut [f64]) {
    let n = w.len() / m;
    let mut k = 0;
    for i in 0..n {
        partial.fill(0.0);
        for (&d, wj) in squares[k..k + (n - i - 1)].iter().zip(w[(i + 1) * m..].chunks_exact(m)) {
            for (p, &x) in partial.iter_mut().zip(wj) {
                *p += d * x;
            }
        }
        k += n - i - 1;
        for ((o, &p), &x) in out.iter_mut().zip(partial.iter()).zip(&w[i * m..(i + 1) * m]) {
            *o += x * p;
        }
    }
}

crate::multiversion! {
    fn forms(squares: &[f64], w: &[f64], m: usize, partial: &mut [f64], out: &mut [f64]) => forms_body
}

/// F (rows × m, row-major): for each label row the quadratic forms Σ_{i<j} d²_ij w_i w_j of the m vectors
/// (cells × m, row-major) read at the objects' cells — the exact per-vector sums of squares in object space, for
/// designs with many cells.
pub fn cell_forms(squares: &[f64], labels: &[u32], n: usize, vectors: &[f64], m: usize) -> Vec<f64> {
    let rows = labels.len().checked_div(n).unwrap_or(0);
    let mut out = vec![0.0; rows * m];
    if m == 0 {
        return out;
    }
    out.par_chunks_mut(m).zip(labels.par_chunks(n.max(1))).for_each(|(f, row)| {
        let w: Vec<f64> = row.iter().flat_map(|&c| &vectors[c as usize * m..(c as usize + 1) * m]).copied().collect();
        let mut partial = vec![0.0; m];
        forms(squares, &w, m, &mut partial, f);
    });
    out
}

#[pyfunction(name = "cell_forms")]
fn cell_forms_py<'py>(
    py: Python<'py>,
    squares: PyReadonlyArray1<'py, f64>,
    cell_rows: PyReadonlyArray2<'py, i32>,
    vectors: PyReadonlyArray2<'py, f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let sq = squares.as_slice().map_err(|_| PyValueError::new_err("squares: must be C-contiguous"))?;
    // as_slice also accepts a Fortran-ordered array, whose values would be read in the wrong order
    if !vectors.is_c_contiguous() {
        return Err(PyValueError::new_err("vectors: must be C-contiguous"));
    }
    let v = vectors.as_slice()?;
    let (cells, m) = (vectors.shape()[0], vectors.shape()[1]);
    let (rows, n) = (cell_rows.shape()[0], cell_rows.shape()[1]);
    let pairs = n * n.saturating_sub(1) / 2;
    if sq.len() != pairs {
        return Err(PyValueError::new_err(format!("squares: {} values, but n = {n} needs {pairs}", sq.len())));
    }
    let lab = cell_labels(&cell_rows, cells)?;
    let out = py.detach(|| cell_forms(sq, &lab, n, v, m));
    out.into_pyarray(py).reshape([rows, m])
}

/// Checked cell label rows (rows × n, each code below `cells`) as u32.
fn cell_labels(cell_rows: &PyReadonlyArray2<'_, i32>, cells: usize) -> PyResult<Vec<u32>> {
    if !cell_rows.is_c_contiguous() {
        return Err(PyValueError::new_err("cell_rows: must be C-contiguous"));
    }
    let lab = cell_rows.as_slice()?;
    if let Some(c) = lab.iter().find(|&&c| c < 0 || c as usize >= cells) {
        return Err(PyValueError::new_err(format!("cell_rows: code {c} outside 0..{cells}")));
    }
    Ok(lab.iter().map(|&c| c as u32).collect())
}

#[pyfunction(name = "cell_factor_sums")]
fn cell_factor_sums_py<'py>(
    py: Python<'py>,
    factor: PyReadonlyArray2<'py, f64>,
    cell_rows: PyReadonlyArray2<'py, i32>,
    cells: usize,
) -> PyResult<Bound<'py, PyArray3<f64>>> {
    if !factor.is_c_contiguous() {
        return Err(PyValueError::new_err("factor: must be C-contiguous"));
    }
    let y = factor.as_slice()?;
    let (n, k) = (factor.shape()[0], factor.shape()[1]);
    let (rows, columns) = (cell_rows.shape()[0], cell_rows.shape()[1]);
    if columns != n {
        return Err(PyValueError::new_err(format!("cell_rows: {columns} columns but the factor has {n} rows")));
    }
    let lab = cell_labels(&cell_rows, cells)?;
    let out = py.detach(|| cell_factor_sums(y, k, &lab, n, cells));
    out.into_pyarray(py).reshape([rows, cells, k])
}

#[pyfunction(name = "cell_pair_sums")]
fn cell_pair_sums_py<'py>(
    py: Python<'py>,
    squares: PyReadonlyArray1<'py, f64>,
    cell_rows: PyReadonlyArray2<'py, i32>,
    cells: usize,
) -> PyResult<Bound<'py, PyArray3<f64>>> {
    let sq = squares.as_slice().map_err(|_| PyValueError::new_err("squares: must be C-contiguous"))?;
    let (rows, n) = (cell_rows.shape()[0], cell_rows.shape()[1]);
    let pairs = n * n.saturating_sub(1) / 2;
    if sq.len() != pairs {
        return Err(PyValueError::new_err(format!("squares: {} values, but n = {n} needs {pairs}", sq.len())));
    }
    let lab = cell_labels(&cell_rows, cells)?;
    let out = py.detach(|| cell_pair_sums(sq, &lab, n, cells));
    out.into_pyarray(py).reshape([rows, cells, cells])
}

#[pyfunction(name = "cell_column_quanta")]
fn cell_column_quanta_py<'py>(
    py: Python<'py>,
    quanta: PyReadonlyArray1<'py, u32>,
    cell_rows: PyReadonlyArray2<'py, i32>,
    columns: PyReadonlyArray2<'py, u8>,
) -> PyResult<Bound<'py, PyArray3<u64>>> {
    let qs = quanta.as_slice().map_err(|_| PyValueError::new_err("quanta: must be C-contiguous"))?;
    if !columns.is_c_contiguous() {
        return Err(PyValueError::new_err("columns: must be C-contiguous"));
    }
    let x = columns.as_slice()?;
    let (cells, p) = (columns.shape()[0], columns.shape()[1]);
    let (rows, n) = (cell_rows.shape()[0], cell_rows.shape()[1]);
    let pairs = n * n.saturating_sub(1) / 2;
    if qs.len() != pairs {
        return Err(PyValueError::new_err(format!("quanta: {} values, but n = {n} needs {pairs}", qs.len())));
    }
    if let Some(q) = qs.iter().find(|&&q| q > 1 << 23) {
        return Err(PyValueError::new_err(format!("quanta: {q} above 2^23")));
    }
    if let Some(v) = x.iter().find(|&&v| v > 1) {
        return Err(PyValueError::new_err(format!("columns: {v} is not 0 or 1")));
    }
    let lab = cell_labels(&cell_rows, cells)?;
    let out = py.detach(|| cell_column_quanta(qs, &lab, n, x, p));
    out.into_pyarray(py).reshape([rows, p + 1, p + 1])
}

/// Adds `cell_pair_sums` to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cell_pair_sums_py, m)?)?;
    m.add_function(wrap_pyfunction!(cell_column_quanta_py, m)?)?;
    m.add_function(wrap_pyfunction!(cell_factor_sums_py, m)?)?;
    m.add_function(wrap_pyfunction!(cell_forms_py, m)?)
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

    #[test]
    fn factor_sums_add_each_cells_rows_in_object_order() {
        let (n, k, cells) = (9, 2, 3);
        let factor: Vec<f64> = (0..n * k).map(|v| (v as f64 * 0.37).sin()).collect();
        let labels: Vec<u32> = (0..2 * n).map(|v| (v * 5 % cells) as u32).collect();
        let got = cell_factor_sums(&factor, k, &labels, n, cells);
        for p in 0..2 {
            let mut want = vec![0.0; cells * k];
            for i in 0..n {
                let c = labels[p * n + i] as usize;
                for m in 0..k {
                    want[c * k + m] += factor[i * k + m];
                }
            }
            assert_eq!(&got[p * cells * k..(p + 1) * cells * k], &want[..]);
        }
    }

    #[test]
    fn forms_equal_the_pair_sums_quadratic_forms() {
        let (n, cells, m) = (10, 4, 3);
        let squares: Vec<f64> = (0..n * (n - 1) / 2).map(|k| ((k * 13 % 29) as f64).sqrt()).collect();
        let labels: Vec<u32> = (0..3 * n).map(|k| ((k * 3 + k / 7) % cells) as u32).collect();
        let vectors: Vec<f64> = (0..cells * m).map(|k| (k as f64 * 0.7).cos()).collect();
        let forms = cell_forms(&squares, &labels, n, &vectors, m);
        let sums = cell_pair_sums(&squares, &labels, n, cells);
        for p in 0..3 {
            let u = &sums[p * cells * cells..(p + 1) * cells * cells];
            for a in 0..m {
                let v = |c: usize| vectors[c * m + a];
                let want: f64 = (0..cells)
                    .flat_map(|b| (0..cells).map(move |c| (b, c)))
                    .map(|(b, c)| u[b * cells + c] * v(b) * v(c))
                    .sum();
                assert!((forms[p * m + a] - want).abs() <= 1e-12 * want.abs().max(1.0), "permutation {p}, vector {a}");
            }
        }
    }
    #[test]
    fn simd_and_scalar_tile_sums_agree() {
        let tile: Vec<u32> = (0..TILE as u32).map(|j| j * 32_771 % (1 << 23)).collect();
        let masks: Vec<u32> = (0..3 * TILE * LANES).map(|k| if k * 11 % 7 < 3 { u32::MAX } else { 0 }).collect();
        let (mut simd, mut scalar) = (vec![[0u32; LANES]; 3], vec![[0u32; LANES]; 3]);
        tile_sums(&tile, &masks, TILE * LANES, &mut simd);
        tile_sums_scalar(&tile, &masks, TILE * LANES, &mut scalar);
        assert_eq!(simd, scalar);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn vnni_and_masked_column_quanta_agree() {
        if !crate::cell_screen_vnni::available() {
            return;
        }
        // n off and on quad boundaries, past a tile; 1 to 11 columns (one group, three); a partial lane group
        for (n, p, rows) in [(1, 2, 3), (2, 1, 1), (7, 3, LANES), (261, 1, LANES + 5), (302, 5, 2 * LANES), (97, 11, 9)]
        {
            let cells = p + 2;
            let quanta: Vec<u32> = (0..n * (n - 1) / 2).map(|k| ((k * 7919 + 3) % ((1 << 23) + 1)) as u32).collect();
            let labels: Vec<u32> = (0..rows * n).map(|k| ((k * 7 + k / n + k / 13) % cells) as u32).collect();
            let columns: Vec<u8> = (0..cells * p).map(|k| (k * 5 % 3 == 0 || k % (p + 1) == 0) as u8).collect();
            let vnni = unsafe { crate::cell_screen_vnni::cell_column_quanta(&quanta, &labels, n, &columns, p) };
            assert_eq!(vnni, column_quanta_masked(&quanta, &labels, n, &columns, p), "n={n} p={p}");
        }
    }

    #[test]
    fn column_quanta_are_the_design_columns_forms_of_the_pairwise_sums() {
        let (n, cells, rows, p) = (300, 5, LANES + 3, 3);
        let quanta: Vec<u32> = (0..n * (n - 1) / 2).map(|k| ((k * 7919) % (1 << 23)) as u32).collect();
        let labels: Vec<u32> = (0..rows * n).map(|k| ((k * 7 + k / n + k / 13) % cells) as u32).collect();
        let columns: Vec<u8> = (0..cells * p).map(|k| (k * 5 % 3 == 0) as u8).collect();
        let squares: Vec<f64> = quanta.iter().map(|&q| q as f64).collect();
        let got = cell_column_quanta(&quanta, &labels, n, &columns, p);
        let x = |c: usize, r: usize| if r == 0 { 1.0 } else { columns[c * p + r - 1] as f64 };
        for q in 0..rows {
            let u = direct(&squares, &labels[q * n..(q + 1) * n], n, cells);
            for r in 0..=p {
                for s in 0..=p {
                    let want: f64 = (0..cells * cells).map(|k| u[k] * x(k / cells, r) * x(k % cells, s)).sum();
                    assert_eq!(got[q * (p + 1) * (p + 1) + r * (p + 1) + s] as f64, want, "permutation {q}");
                }
            }
        }
    }
}
