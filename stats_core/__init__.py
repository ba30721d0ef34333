"""hofcat's statistics core: Kendall tau, PERMANOVA, distances and cluster measures.

Each kernel exists three times — compiled Rust (``stats_core._native``), numba and a numpy reference —
and every public function takes ``backend="auto"|"native"|"numba"|"numpy"``. ``backend()`` names the
one ``auto`` uses; the environment variable ``STATS_CORE_BACKEND`` forces one.
"""

from __future__ import annotations

from stats_core._backend import BackendFallbackWarning, available, backend
from stats_core.errors import BackendUnavailableError, InvalidInputError, StatsCoreError
from stats_core.kendall import kendall_tau

__all__ = [
    "BackendFallbackWarning",
    "BackendUnavailableError",
    "InvalidInputError",
    "StatsCoreError",
    "available",
    "backend",
    "kendall_tau",
]
