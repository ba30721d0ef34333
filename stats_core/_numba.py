"""numba kernels: the fallback when the compiled extension is missing; same signatures as ``_reference``."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _tau_b(x: np.ndarray, y: np.ndarray) -> float:
    n = x.shape[0]
    s = 0
    tied_x_only = 0
    tied_y_only = 0
    untied = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = x[i] - x[j]
            dy = y[i] - y[j]
            if dx == 0.0:
                if dy != 0.0:
                    tied_x_only += 1
            elif dy == 0.0:
                tied_y_only += 1
            else:
                untied += 1
                s += 1 if (dx > 0.0) == (dy > 0.0) else -1
    denom = np.sqrt(float(untied + tied_y_only) * float(untied + tied_x_only))
    if denom == 0.0:
        return np.nan
    return min(1.0, max(-1.0, s / denom))


@numba.njit(cache=True, parallel=True, nogil=True)
def kendall_tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Tau-b of each row pair of two (rows, n) float64 arrays → (rows,); NaN where a side is constant."""
    out = np.empty(x.shape[0])
    for r in numba.prange(x.shape[0]):
        out[r] = _tau_b(x[r], y[r])
    return out
