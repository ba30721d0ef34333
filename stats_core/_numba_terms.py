"""numba kernel of the multi-term PERMANOVA (``permanova_terms``); same signature as ``_reference_terms``."""

from __future__ import annotations

import numba
import numpy as np

from stats_core._reference_terms import design_forms


@numba.njit(cache=True, parallel=True, nogil=True)
def _cell_pair_accumulate(values, cell_rows, cells, out):
    # One permutation per task, each summed alone in condensed order: bit-identical for any thread count. One
    # kernel for the f64 squares and the u32 quanta (summed in u64): numba compiles one copy per dtype of `out`.
    rows, n = cell_rows.shape
    for p in numba.prange(rows):
        labels = cell_rows[p]
        acc = out[p]
        k = 0
        for i in range(n):
            base = labels[i] * cells
            for j in range(i + 1, n):
                acc[base + labels[j]] += values[k]
                k += 1
    return out


def cell_pair_sums(squares: np.ndarray, cell_rows: np.ndarray, cells: int) -> np.ndarray:
    """(rows, cells, cells) sums of condensed ``squares`` between the cells of each row (see _reference_terms)."""
    rows = np.ascontiguousarray(cell_rows, np.int32)
    out = np.zeros((rows.shape[0], cells * cells))
    _cell_pair_accumulate(np.ascontiguousarray(squares, np.float64), rows, cells, out)
    return out.reshape(rows.shape[0], cells, cells)


def cell_column_quanta(quanta: np.ndarray, cell_rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """(rows, p + 1, p + 1) uint64 X̃ᵀ U X̃ of the integer cell sums of ``quanta`` (see _reference_terms)."""
    cells = columns.shape[0]
    rows = np.ascontiguousarray(cell_rows, np.int32)
    out = np.zeros((rows.shape[0], cells * cells), dtype=np.uint64)
    _cell_pair_accumulate(np.ascontiguousarray(quanta, np.uint32), rows, cells, out)
    return design_forms(out.reshape(rows.shape[0], cells, cells), columns)


@numba.njit(cache=True, parallel=True, nogil=True)
def _cell_factor_sums(factor, cell_rows, cells):
    rows, n = cell_rows.shape
    k = factor.shape[1]
    out = np.zeros((rows, cells, k))
    for p in numba.prange(rows):
        labels = cell_rows[p]
        sums = out[p]
        for i in range(n):
            c = labels[i]
            for m in range(k):
                sums[c, m] += factor[i, m]
    return out


def cell_factor_sums(factor: np.ndarray, cell_rows: np.ndarray, cells: int) -> np.ndarray:
    """(rows, cells, k) sums of the factor's rows (n, k) over the cells of each row (see _reference_terms)."""
    return _cell_factor_sums(np.ascontiguousarray(factor, np.float64), np.ascontiguousarray(cell_rows, np.int32), cells)


@numba.njit(cache=True, parallel=True, nogil=True)
def _cell_forms(squares, cell_rows, vectors):
    rows, n = cell_rows.shape
    m = vectors.shape[1]
    out = np.zeros((rows, m))
    for p in numba.prange(rows):
        labels = cell_rows[p]
        partial = np.empty(m)
        k = 0
        for i in range(n):
            partial[:] = 0.0
            for j in range(i + 1, n):
                d = squares[k]
                c = labels[j]
                for a in range(m):
                    partial[a] += d * vectors[c, a]
                k += 1
            own = labels[i]
            for a in range(m):
                out[p, a] += vectors[own, a] * partial[a]
    return out


def cell_forms(squares: np.ndarray, cell_rows: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(rows, m) quadratic forms Σ_{i<j} squares_ij w_i w_j of each vector over the cells (see _reference_terms)."""
    return _cell_forms(
        np.ascontiguousarray(squares, np.float64),
        np.ascontiguousarray(cell_rows, np.int32),
        np.ascontiguousarray(vectors, np.float64),
    )
