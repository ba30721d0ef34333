"""hofcat's statistics core: Kendall tau, PERMANOVA, PERMDISP, distances, bootstrap CIs and cluster measures.

Each kernel exists three times — compiled Rust (``stats_core._native``), numba and a numpy reference —
and every public function takes ``backend="auto"|"native"|"numba"|"numpy"``. ``backend()`` names the
one ``auto`` uses; the environment variable ``STATS_CORE_BACKEND`` forces one. Random functions take an
integer ``seed`` (recorded in their result); the same seed gives the same result on every backend. The
bootstrap's building blocks, ``bootstrap_indices`` (the stratified draws) and ``percentile_interval``, are
plain numpy (no kernel, hence no ``backend``) and public so that every bootstrap shares one random stream.
"""

from __future__ import annotations

from stats_core._backend import BackendFallbackWarning, available, backend
from stats_core._resample import log_relabellings
from stats_core.bootstrap import bootstrap_indices, bootstrap_kendall_tau, percentile_interval
from stats_core.cluster import davies_bouldin, mcd, silhouette, ss_h, ss_h_test
from stats_core.distance import pdist, pdist_square, squareform
from stats_core.errors import BackendUnavailableError, InvalidInputError, StatsCoreError
from stats_core.kendall import kendall_tau
from stats_core.permanova import permanova
from stats_core.permanova_terms import permanova_terms, permutation_indices
from stats_core.permdisp import permdisp
from stats_core.results import (
    BootstrapResult,
    ConfidenceInterval,
    DisparityResult,
    PermanovaTerm,
    PermanovaTermsResult,
    PermutationTestResult,
)

__all__ = [
    "BackendFallbackWarning",
    "BackendUnavailableError",
    "BootstrapResult",
    "ConfidenceInterval",
    "DisparityResult",
    "InvalidInputError",
    "PermanovaTerm",
    "PermanovaTermsResult",
    "PermutationTestResult",
    "StatsCoreError",
    "available",
    "backend",
    "bootstrap_indices",
    "bootstrap_kendall_tau",
    "davies_bouldin",
    "kendall_tau",
    "log_relabellings",
    "mcd",
    "pdist",
    "pdist_square",
    "percentile_interval",
    "permanova",
    "permanova_terms",
    "permdisp",
    "permutation_indices",
    "silhouette",
    "squareform",
    "ss_h",
    "ss_h_test",
]
