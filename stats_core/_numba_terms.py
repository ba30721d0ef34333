"""numba kernel of the multi-term PERMANOVA (``permanova_terms``); same signature as ``_reference_terms``."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, parallel=True, nogil=True)
def _cell_pair_sums(squares, cell_rows, cells):
    # One permutation per task, each summed alone in condensed order: bit-identical for any thread count.
    rows, n = cell_rows.shape
    out = np.zeros((rows, cells * cells))
    for p in numba.prange(rows):
        labels = cell_rows[p]
        acc = out[p]
        k = 0
        for i in range(n):
            base = labels[i] * cells
            for j in range(i + 1, n):
                acc[base + labels[j]] += squares[k]
                k += 1
    return out


def cell_pair_sums(squares: np.ndarray, cell_rows: np.ndarray, cells: int) -> np.ndarray:
    """(rows, cells, cells) sums of condensed ``squares`` between the cells of each row (see _reference_terms)."""
    out = _cell_pair_sums(np.ascontiguousarray(squares, np.float64), np.ascontiguousarray(cell_rows, np.int32), cells)
    return out.reshape(cell_rows.shape[0], cells, cells)
