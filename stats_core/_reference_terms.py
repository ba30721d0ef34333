"""numpy reference kernel of the multi-term PERMANOVA (``permanova_terms``): sums of squared distances between cells."""

from __future__ import annotations

import numpy as np

# Condensed entries accumulated per np.add.at call (bounds the index scratch to a few MiB).
_CHUNK = 1 << 19


def cell_pair_sums(squares: np.ndarray, cell_rows: np.ndarray, cells: int) -> np.ndarray:
    """(rows, cells, cells): U[p, a, b] = Σ over i < j with cell_rows[p, i] = a, cell_rows[p, j] = b of squares_ij.

    ``squares`` is condensed (row-major i < j). Each bin accumulates in condensed order — the order every
    backend uses, so their sums are bit-identical.
    """
    rows, n = cell_rows.shape
    out = np.zeros((rows, cells * cells))
    i, j = np.triu_indices(n, k=1)
    for start in range(0, squares.shape[0], _CHUNK):
        stop = start + _CHUNK
        for p in range(rows):
            labels = cell_rows[p].astype(np.int64)
            np.add.at(out[p], labels[i[start:stop]] * cells + labels[j[start:stop]], squares[start:stop])
    return out.reshape(rows, cells, cells)


def cell_column_quanta(quanta: np.ndarray, cell_rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """(rows, p + 1, p + 1) uint64 M = X̃ᵀ U X̃: U the ``cell_pair_sums`` of integer quanta (condensed uint32),
    X̃ = [1, columns] (columns (cells, p) of 0/1); exact in integers."""
    return design_forms(_cell_pair_quanta(quanta, cell_rows, columns.shape[0]), columns)


def design_forms(pair_sums: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """X̃ᵀ U X̃ per row of integer ``pair_sums`` (rows, C, C), X̃ = [1, columns]; exact in uint64."""
    x = np.concatenate([np.ones((columns.shape[0], 1), np.uint64), columns.astype(np.uint64)], axis=1)
    return np.matmul(np.matmul(x.T, pair_sums), x)


def _cell_pair_quanta(quanta: np.ndarray, cell_rows: np.ndarray, cells: int) -> np.ndarray:
    rows, n = cell_rows.shape
    out = np.zeros((rows, cells * cells), dtype=np.uint64)
    i, j = np.triu_indices(n, k=1)
    for start in range(0, quanta.shape[0], _CHUNK):
        stop = start + _CHUNK
        for p in range(rows):
            labels = cell_rows[p].astype(np.int64)
            bins = labels[i[start:stop]] * cells + labels[j[start:stop]]
            out[p] += np.bincount(bins, quanta[start:stop].astype(np.float64), cells * cells).astype(np.uint64)
    return out.reshape(rows, cells, cells)


def cell_factor_sums(factor: np.ndarray, cell_rows: np.ndarray, cells: int) -> np.ndarray:
    """(rows, cells, k): M[p, c] = Σ over objects i with cell_rows[p, i] = c of factor[i] (factor (n, k)).

    Each cell accumulates its objects in index order, as every backend does (bit-identical sums).
    """
    out = np.zeros((cell_rows.shape[0], cells, factor.shape[1]))
    for p in range(cell_rows.shape[0]):
        np.add.at(out[p], cell_rows[p], factor)
    return out


def cell_forms(squares: np.ndarray, cell_rows: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(rows, m): F[p, a] = Σ_{i<j} squares_ij · w_i · w_j with w = vectors[cell_rows[p], a] (vectors (C, m)).

    Per row i the partial sums r = Σ_{j>i} squares_ij · w_j run over j in order, then F += w_i · r over i in
    order — the order of every backend (products rounded before each addition, no fused multiply-add).
    """
    rows, n = cell_rows.shape
    out = np.zeros((rows, vectors.shape[1]))
    start = 0
    for i in range(n - 1):
        stop = start + n - i - 1
        for p in range(rows):
            w = vectors[cell_rows[p]]
            partial = np.cumsum(squares[start:stop, None] * w[i + 1 :], axis=0)[-1]
            out[p] += w[i] * partial
        start = stop
    return out
