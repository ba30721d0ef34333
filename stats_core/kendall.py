"""Kendall's rank correlation tau-b (Kendall 1945), matching ``scipy.stats.kendalltau``.

tau_b = (C − D) / sqrt((n0 − n1)(n0 − n2)), with C/D the concordant/discordant pairs, n0 = n(n−1)/2 and
n1, n2 the pairs tied in x, y. Undefined (NaN) when either side is constant.

Floats are taken as given, as scipy does: values tie when their float64 values are equal, and tau is computed
in float64 from the exact integer counts (one sqrt, one division). Callers whose values are rationals reached
through float arithmetic make equal values equal floats first (docs/stats_core.md, Exact arithmetic and ties).
"""

from __future__ import annotations

import numpy as np

from stats_core._backend import kernels
from stats_core._validate import finite_array


def kendall_tau(x: np.ndarray, y: np.ndarray, *, backend: str = "auto") -> float | np.ndarray:
    """Tau-b between ``x`` and ``y`` (1-D, same length) → float; or, for (..., n) arrays, tau per row."""
    xa = finite_array("x", x)
    ya = finite_array("y", y)
    if xa.shape != ya.shape:
        from stats_core.errors import InvalidInputError

        raise InvalidInputError("y", f"shape {ya.shape} differs from x's shape {xa.shape}")
    lead = xa.shape[:-1]
    n = xa.shape[-1]
    tau = kernels(backend).kendall_tau_b_rows(
        np.ascontiguousarray(xa.reshape(-1, n)), np.ascontiguousarray(ya.reshape(-1, n))
    )
    return float(tau[0]) if xa.ndim == 1 else tau.reshape(lead)
