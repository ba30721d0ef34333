"""Plain numpy reference kernels: short, obviously correct, used to check the fast backends.

Every backend module (``_native``, ``_numba``, this one) exposes the same kernel functions with the same
signatures; ``stats_core/_backend.py`` picks one.
"""

from __future__ import annotations

import numpy as np


def kendall_tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Tau-b of each row pair of two (rows, n) float64 arrays → (rows,); NaN where a side is constant."""
    dx = np.sign(x[:, :, None] - x[:, None, :])
    dy = np.sign(y[:, :, None] - y[:, None, :])
    upper = np.triu(np.ones(x.shape[1], dtype=bool), k=1)
    s = (dx * dy)[:, upper].sum(axis=1)
    not_tied_x = (dx[:, upper] != 0).sum(axis=1)
    not_tied_y = (dy[:, upper] != 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = s / np.sqrt(not_tied_x.astype(np.float64) * not_tied_y)
    return np.clip(tau, -1.0, 1.0)
