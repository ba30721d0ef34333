"""Cluster-separation measures: silhouette, Davies–Bouldin, and the seed paper's SS_h and MCD.

silhouette and davies_bouldin follow scikit-learn's ``silhouette_score`` / ``davies_bouldin_score``
(Rousseeuw 1987; Davies & Bouldin 1979). ``ss_h`` and ``mcd`` are Eq. 4–5 and Eq. 1–3 of "Cultural
Value Differences of LLMs" (reference/cultural-value-differences.txt, Section 3.3 and Appendix F).
"""

from __future__ import annotations

import numpy as np

from stats_core import _validate
from stats_core._backend import kernels
from stats_core.distance import group_row_sums, pdist, squareform
from stats_core.errors import InvalidInputError
from stats_core.results import DisparityResult


def silhouette(distances: object, labels: object, *, backend: str = "auto") -> float:
    """Mean silhouette s = mean_i (b_i − a_i) / max(a_i, b_i) of a condensed or square distance matrix.

    a_i: mean distance to the other members of i's cluster; b_i: smallest mean distance to another
    cluster; s_i = 0 for a cluster of one (as scikit-learn). Needs 2 ≤ clusters ≤ n − 1.
    """
    # The kernel checks finite/non-negative in its own pass; the full check runs only to name a bad value.
    dist, n = _validate.distances("distances", distances, condensed_values=False)
    codes, groups, sizes = _validate.grouping("labels", labels, n)
    g = len(groups)
    if g > n - 1:
        raise InvalidInputError("labels", f"needs 2 <= clusters <= n - 1 = {n - 1}, got {g}")
    sums = group_row_sums(dist, codes, g, squared=False, backend=backend)
    rows = np.arange(n)
    own = sizes[codes]
    with np.errstate(invalid="ignore", divide="ignore"):
        a = sums[rows, codes] / (own - 1)
        means = sums / sizes
        means[rows, codes] = np.inf
        b = means.min(axis=1)
        s = (b - a) / np.maximum(a, b)
    s = np.where((own > 1) & np.isfinite(s), s, 0.0)
    return float(s.mean())


def davies_bouldin(X: object, labels: object, *, backend: str = "auto") -> float:
    """Davies–Bouldin index of the rows of ``X`` (n, k) clustered by ``labels``: mean_i max_{j≠i} (S_i + S_j) / M_ij.

    S_i: mean Euclidean distance of cluster i's points to its centroid; M_ij: distance between centroids.
    With two clusters this is the paper's DBI(e_i, e_j) (Eq. 12). 0 when all S or all M are 0 (scikit-learn).
    """
    x = _validate.finite_array("X", X, min_ndim=2)
    if x.ndim != 2:
        raise InvalidInputError("X", f"expected a 2-D (observations, features) array, got shape {x.shape}")
    codes, groups, _ = _validate.grouping("labels", labels, x.shape[0])
    g = len(groups)
    if g > x.shape[0] - 1:
        raise InvalidInputError("labels", f"needs 2 <= clusters <= n - 1 = {x.shape[0] - 1}, got {g}")
    centroids, spread = kernels(backend).cluster_spread(np.ascontiguousarray(x), codes, g)
    between = squareform(pdist(centroids, backend=backend))
    if np.allclose(spread, 0) or np.allclose(between, 0):
        return 0.0
    between[between == 0] = np.inf
    return float(np.mean(np.max((spread[:, None] + spread[None, :]) / between, axis=1)))


def _nation_scores(name: str, value: object, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """(nations, dimensions) finite scores, at least 2 nations; optionally of a required shape."""
    arr = _validate.finite_array(name, value, min_ndim=2)
    if arr.ndim != 2 or arr.shape[0] < 2:
        raise InvalidInputError(name, f"expected (nations >= 2, dimensions) scores, got shape {arr.shape}")
    if shape is not None and arr.shape != shape:
        raise InvalidInputError(name, f"expected shape {shape} (same nations and dimensions as set_a), got {arr.shape}")
    return arr


def ss_h(set_a: object, set_b: object, human: object, *, metric: str = "euclidean", backend: str = "auto") -> float:
    """Silhouette with human reference SS_h (Eq. 5): (1/2N) Σ_i (b(n_i) − a(n_i)) / a_h(n_i) over both sets.

    Inputs are (N nations, dimensions) national mean scores, nations in the same row order. a: mean distance
    to the other nations of the same set; b: mean distance to all nations of the other set; a_h (Eq. 4):
    the nation's mean distance to the other nations in ``human``. > 1: the sets differ more than nations do.
    """
    a_set = _nation_scores("set_a", set_a)
    b_set = _nation_scores("set_b", set_b, a_set.shape)
    h_set = _nation_scores("human", human, a_set.shape)
    n = a_set.shape[0]
    both = squareform(pdist(np.vstack([a_set, b_set]), metric, backend=backend))
    within = np.concatenate([both[:n, :n].sum(axis=1), both[n:, n:].sum(axis=1)]) / (n - 1)
    across = np.concatenate([both[:n, n:].sum(axis=1), both[n:, :n].sum(axis=1)]) / n
    a_h = squareform(pdist(h_set, metric, backend=backend)).sum(axis=1) / (n - 1)
    if np.any(a_h == 0):
        raise InvalidInputError(
            "human", f"nation {int(np.flatnonzero(a_h == 0)[0])} is at distance 0 from every other nation"
        )
    return float(np.sum((across - within) / np.concatenate([a_h, a_h])) / (2 * n))


def mcd(model: object, human: object, *, ddof: int = 1) -> DisparityResult:
    """Model Cultural Disparity (Eq. 1–3): D_m / D_h, D = mean over dimensions of the std across nations.

    ``model`` and ``human`` are (nations, dimensions) national mean scores. ``ddof=1`` (sample std)
    reproduces the paper's Table 6 human row from its Table 3.
    """
    m = _nation_scores("model", model)
    h = _nation_scores("human", human)
    if h.shape[1] != m.shape[1]:
        raise InvalidInputError("human", f"has {h.shape[1]} dimensions but model has {m.shape[1]}")
    m_sigma = m.std(axis=0, ddof=ddof)
    h_sigma = h.std(axis=0, ddof=ddof)
    d_m, d_h = float(m_sigma.mean()), float(h_sigma.mean())
    if d_h == 0.0:
        raise InvalidInputError("human", "every dimension is constant across nations: D_h = 0")
    return DisparityResult(
        statistic=d_m / d_h, model_disparity=d_m, human_disparity=d_h, model_sigma=m_sigma, human_sigma=h_sigma
    )
