"""hofcat's statistics core: Kendall tau, PERMANOVA, PERMDISP, distances, bootstrap CIs and cluster measures.

Each kernel exists three times — compiled Rust (``stats_core._native``), numba and a numpy reference —
and every public function takes ``backend="auto"|"native"|"numba"|"numpy"``. ``backend()`` names the
one ``auto`` uses; the environment variable ``STATS_CORE_BACKEND`` forces one. Random functions take an
integer ``seed`` (recorded in their result); the same seed gives the same result on every backend.
"""

from __future__ import annotations

from stats_core._backend import BackendFallbackWarning, available, backend
from stats_core.bootstrap import bootstrap_kendall_tau
from stats_core.cluster import davies_bouldin, mcd, silhouette, ss_h
from stats_core.distance import pdist, pdist_square, squareform
from stats_core.errors import BackendUnavailableError, InvalidInputError, StatsCoreError
from stats_core.kendall import kendall_tau
from stats_core.permanova import permanova
from stats_core.permdisp import permdisp
from stats_core.results import BootstrapResult, ConfidenceInterval, DisparityResult, PermutationTestResult

__all__ = [
    "BackendFallbackWarning",
    "BackendUnavailableError",
    "BootstrapResult",
    "ConfidenceInterval",
    "DisparityResult",
    "InvalidInputError",
    "PermutationTestResult",
    "StatsCoreError",
    "available",
    "backend",
    "bootstrap_kendall_tau",
    "davies_bouldin",
    "kendall_tau",
    "mcd",
    "pdist",
    "pdist_square",
    "permanova",
    "permdisp",
    "silhouette",
    "squareform",
    "ss_h",
]
