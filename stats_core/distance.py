"""Pairwise distances between the rows of a matrix, condensed like ``scipy.spatial.distance.pdist``.

Metrics (u, v are two rows): euclidean ‖u − v‖₂; sqeuclidean ‖u − v‖₂²; cityblock Σ|u − v|; chebyshev
max|u − v|; cosine 1 − u·v / (‖u‖‖v‖); braycurtis Σ|u − v| / Σ|u + v|. As in scipy, float32 input is
computed in float64, and a zero-norm row gives NaN for cosine (0/0 for braycurtis).
"""

from __future__ import annotations

import numpy as np

from stats_core import _validate
from stats_core._backend import kernels
from stats_core._validate import condensed_size, finite_array
from stats_core.errors import InvalidInputError

METRICS = ("braycurtis", "chebyshev", "cityblock", "cosine", "euclidean", "sqeuclidean")


def pdist(X: object, metric: str = "euclidean", *, backend: str = "auto") -> np.ndarray:
    """Distances between all row pairs of ``X`` (n, k) → condensed float64 (n(n−1)/2,), pairs (0,1), (0,2), …."""
    if metric not in METRICS:
        raise InvalidInputError("metric", f"{metric!r} is not one of {', '.join(METRICS)}")
    x = finite_array("X", X, min_ndim=2)
    if x.ndim != 2:
        raise InvalidInputError("X", f"expected a 2-D (observations, features) array, got shape {x.shape}")
    with np.errstate(invalid="ignore", divide="ignore"):
        return kernels(backend).pdist(np.ascontiguousarray(x), metric)


def squareform(distances: object) -> np.ndarray:
    """Condensed (n(n−1)/2,) → square (n, n) with zero diagonal, or square → condensed (as scipy's)."""
    arr = np.asarray(distances, dtype=np.float64)
    if arr.ndim == 1:
        n = condensed_size("distances", arr.shape[0]) if arr.shape[0] else 1
        out = np.zeros((n, n))
        rows, cols = np.triu_indices(n, k=1)
        out[rows, cols] = arr
        out[cols, rows] = arr
        return out
    if arr.ndim == 2 and arr.shape[0] == arr.shape[1]:
        return arr[np.triu_indices(arr.shape[0], k=1)]
    raise InvalidInputError("distances", f"expected a condensed vector or a square matrix, got shape {arr.shape}")


def pdist_square(X: object, metric: str = "euclidean", *, backend: str = "auto") -> np.ndarray:
    """Distances between all row pairs of ``X`` (n, k) as a square symmetric (n, n) float64 matrix."""
    return squareform(pdist(X, metric, backend=backend))


def group_row_sums(
    distances: np.ndarray, codes: np.ndarray, n_groups: int, *, squared: bool, backend: str = "auto"
) -> np.ndarray:
    """(n, n_groups): Σ_{j in group h, j≠i} d_ij (or d²_ij) per object of a distance matrix checked by
    ``_validate.distances(..., condensed_values=False)``: the kernel checks finite/non-negative in its own
    pass, and a bad value is then named by the full check."""
    sums, valid = kernels(backend).group_row_sums(distances, codes, n_groups, squared)
    if not valid:
        _validate.condensed_values_check("distances", distances)
    return sums
