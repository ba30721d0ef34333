"""Cluster-separation measures: silhouette, Davies–Bouldin, and the seed paper's SS_h and MCD.

silhouette and davies_bouldin follow scikit-learn's ``silhouette_score`` / ``davies_bouldin_score``
(Rousseeuw 1987; Davies & Bouldin 1979). ``ss_h`` and ``mcd`` are Eq. 4–5 and Eq. 1–3 of "Cultural
Value Differences of LLMs" (reference/cultural-value-differences.txt, Section 3.3 and Appendix F).
"""

from __future__ import annotations

import numpy as np

from stats_core import _resample, _validate
from stats_core._backend import kernels
from stats_core.distance import group_row_sums, pdist, squareform
from stats_core.errors import InvalidInputError
from stats_core.results import DisparityResult, PermutationTestResult


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
    return _ss_h_given(a_set, b_set, _human_spread(h_set, metric, backend), metric, backend)


def _human_spread(human: np.ndarray, metric: str, backend: str) -> np.ndarray:
    """a_h (Eq. 4): each nation's mean distance to the other nations of the human reference (all > 0)."""
    a_h = squareform(pdist(human, metric, backend=backend)).sum(axis=1) / (human.shape[0] - 1)
    if np.any(a_h == 0):
        raise InvalidInputError(
            "human", f"nation {int(np.flatnonzero(a_h == 0)[0])} is at distance 0 from every other nation"
        )
    return a_h


def _ss_h_given(a_set: np.ndarray, b_set: np.ndarray, a_h: np.ndarray, metric: str, backend: str) -> float:
    """SS_h (Eq. 5) of two (N, dims) national score arrays, given the human spreads a_h (N,)."""
    n = a_set.shape[0]
    both = squareform(pdist(np.vstack([a_set, b_set]), metric, backend=backend))
    within = np.concatenate([both[:n, :n].sum(axis=1), both[n:, n:].sum(axis=1)]) / (n - 1)
    across = np.concatenate([both[:n, n:].sum(axis=1), both[n:, :n].sum(axis=1)]) / n
    return float(np.sum((across - within) / np.concatenate([a_h, a_h])) / (2 * n))


_SS_H_BLOCK = 256  # relabellings whose distance matrices are built together (256 × 2N × 2N × dims floats)


def _ss_h_many(means: np.ndarray, a_h: np.ndarray, metric: str, backend: str) -> np.ndarray:
    """SS_h (Eq. 5) of P relabellings' (P, 2N, dims) national means (set a's N nations first), given a_h (N,)."""
    n = means.shape[1] // 2
    diff = means[:, :, None, :] - means[:, None, :, :]
    if metric == "euclidean":
        both = np.sqrt(np.einsum("pijd,pijd->pij", diff, diff))
    elif metric == "sqeuclidean":
        both = np.einsum("pijd,pijd->pij", diff, diff)
    elif metric == "cityblock":
        both = np.abs(diff).sum(axis=3)
    elif metric == "chebyshev":
        both = np.abs(diff).max(axis=3)
    else:  # braycurtis, cosine: one pdist per relabelling, as the kernels define them
        return np.array([_ss_h_given(m[:n], m[n:], a_h, metric, backend) for m in means])
    within = np.concatenate([both[:, :n, :n].sum(axis=2), both[:, n:, n:].sum(axis=2)], axis=1) / (n - 1)
    across = np.concatenate([both[:, :n, n:].sum(axis=2), both[:, n:, :n].sum(axis=2)], axis=1) / n
    return np.sum((across - within) / np.concatenate([a_h, a_h])[None, :], axis=1) / (2 * n)


def ss_h_test(
    set_a: object,
    nations_a: object,
    set_b: object,
    nations_b: object,
    human: object,
    permutations: int = 999,
    seed: int | None = None,
    *,
    metric: str = "euclidean",
    backend: str = "auto",
) -> PermutationTestResult:
    """SS_h of two sets of respondent points with a permutation null: do the sets differ more than chance?

    ``set_a`` (m_a, dims) and ``set_b`` (m_b, dims) are respondents' scores (e.g. one point per simulated
    identity), ``nations_a``/``nations_b`` their nation as a row index of ``human`` (N, dims); every nation
    needs a point in each set. The statistic is SS_h (Eq. 5) of the two sets' national means. Null: set
    membership is exchangeable within each nation — the points of a nation are re-dealt to the two sets
    (same counts) by the counter-based generator (blocked by nation, as PERMANOVA's ``strata``).
    ``pvalue`` = (k + 1)/(permutations + 1), k = permuted SS_h ≥ the observed (one-sided: larger means
    more separated); ``null_distribution`` holds the permuted values (its mean is SS_h's baseline for sets
    that do not differ, negative: nations of one set sit closer to their own set's other nations on average).
    """
    a = _validate.finite_array("set_a", set_a, min_ndim=2)
    b = _validate.finite_array("set_b", set_b, min_ndim=2)
    h_set = _nation_scores("human", human)
    n, dims = h_set.shape
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != dims or b.shape[1] != dims:
        raise InvalidInputError("set_a", f"set_a, set_b: expected (points, {dims}) scores, got {a.shape}, {b.shape}")
    nations = np.concatenate(
        [_nation_codes("nations_a", nations_a, len(a), n), _nation_codes("nations_b", nations_b, len(b), n)]
    )
    labels = np.repeat(np.array([0, 1], dtype=np.int32), [len(a), len(b)])
    for name, side in (("set_a", 0), ("set_b", 1)):
        missing = np.setdiff1d(np.arange(n), nations[labels == side])
        if missing.size:
            raise InvalidInputError(name, f"nation {int(missing[0])} has no point (every nation needs one per set)")
    count = _validate.int_at_least("permutations", permutations, 0)
    seed_used = _resample.seed_value(seed)
    points = np.vstack([a, b])
    a_h = _human_spread(h_set, metric, backend)
    # national means of each set by one (set, nation) cell index per point; counts are fixed under the null
    cells = labels.astype(np.int64) * n + nations
    sizes = np.bincount(cells, minlength=2 * n).astype(np.float64)[:, None]

    def statistic(rows: np.ndarray) -> np.ndarray:
        # All relabellings of a block at once: national means by one scatter-add, then their (2N × 2N) distance
        # matrices by broadcasting (pdist's definitions), instead of one pdist call per relabelling.
        out = np.empty(rows.shape[0])
        for start in range(0, rows.shape[0], _SS_H_BLOCK):
            block = rows[start : start + _SS_H_BLOCK]
            cell = block.astype(np.int64) * n + nations  # (P, points)
            means = np.zeros((block.shape[0], 2 * n, dims))
            np.add.at(means, (np.arange(block.shape[0])[:, None], cell), points[None, :, :])
            means /= sizes[None]
            out[start : start + len(block)] = _ss_h_many(means, a_h, metric, backend)
        return out

    observed = float(statistic(labels[None, :])[0])
    layout = _resample.strata_layout(nations, len(labels))
    count, every = _resample.relabellings(labels, count, layout)
    blocks = _resample.permuted_label_blocks(kernels(backend), labels, seed_used, count, layout, every=every)
    null = np.concatenate([statistic(block) for block in blocks] or [np.empty(0)])
    return PermutationTestResult(
        method="SS_h",
        statistic=observed,
        pvalue=_resample.permutation_pvalue(_resample.count_at_least(null, observed), count, every is not None),
        permutations=count,
        n=len(labels),
        groups=("set_a", "set_b"),
        group_sizes=(len(a), len(b)),
        seed=seed_used,
        strata=tuple(range(n)),
        null_distribution=null,
        exact=every is not None,
    )


def _nation_codes(name: str, value: object, length: int, n: int) -> np.ndarray:
    """Nation row indices (length,) in 0..n−1 as int64."""
    codes = np.asarray(value)
    if codes.shape != (length,) or codes.dtype.kind not in "iu" or (length and (codes.min() < 0 or codes.max() >= n)):
        raise InvalidInputError(name, f"expected {length} integer nation indices in 0..{n - 1}, got {codes!r:.80}")
    return codes.astype(np.int64)


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
