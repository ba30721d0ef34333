"""Permutation p-values of tau per dimension and of the CAT score against "no association with the reference".

Definition (issue 13, so that results are comparable): a relabelling assigns the model's six index scores of
country π(i) to country i, the same relabelling on every dimension; the statistic is recomputed against the
unchanged reference (tau-b per dimension over the countries with a reference score; the CAT score = mean of
the defined taus, as ``rank_agreement`` computes it). Two-sided: p = share of relabellings whose |statistic|
≥ |observed|. For n ≤ ``EXACT_MAX`` countries all n! relabellings are enumerated (the identity included, so p
≥ 1/n!); beyond, ``monte_carlo`` relabellings are drawn from ``default_rng(SeedSequence(seed))`` and
p = (k + 1) / (draws + 1) with its binomial standard error.

Exactness: tau-b is (C − D) / sqrt(n_x · n_y) with integer counts, so |tau_perm| ≥ |tau_obs| is decided in
integers, (C − D)²·n_x,obs ≥ (C − D)²_obs·n_x (n_y is fixed), without any tolerance; the scores themselves are
compared after ``merge_ties`` (runner/score/ranking.py), so a tie in exact arithmetic is a tie here. The CAT
score sums square roots; it is compared with an absolute tolerance of ``CAT_TOLERANCE`` (1e-12, about 10⁴
times the rounding error of a mean of six taus, far below the gap between distinct CAT values of a design).

``minimum`` is the smallest p the design can attain: the share of relabellings that reach the largest
|statistic| of all (2/n! without ties: 0.33 for 3 countries, 0.083 for 4), so that a reader sees when no
result can be significant.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from runner.score.ranking import TIE_RESOLUTION, merge_ties

__all__ = ["CAT_TOLERANCE", "EXACT_MAX", "PermutationP", "permutation_pvalues"]

EXACT_MAX = 9  # enumerate all n! relabellings up to here (9! = 362,880)
CAT_TOLERANCE = 1e-12
BLOCK = 1 << 15  # relabellings evaluated together (memory ~ BLOCK × pairs × 6 bytes)


@dataclass(frozen=True)
class PermutationP:
    """p-values of one group: per dimension and for the CAT score, with how they were obtained."""

    kendall_p: np.ndarray  # (6,) NaN where the observed tau is undefined / not computed
    kendall_p_min: np.ndarray  # (6,) attainable minimum
    cat_p: float
    cat_p_min: float
    method: str  # "exact" (n! relabellings) or "monte-carlo"
    relabellings: int
    standard_error_kendall: np.ndarray  # (6,) Monte Carlo SE (0 when exact)
    standard_error_cat: float


@lru_cache(maxsize=16)
def _all_permutations(n: int) -> np.ndarray:
    """All n! permutations of range(n) as an (n!, n) int8 array, identity first."""
    return np.array(list(itertools.permutations(range(n))), dtype=np.int8)


def permutation_pvalues(
    indices: np.ndarray,
    reference: np.ndarray,
    *,
    undefined_tau: str = "nan",
    monte_carlo: int = 9999,
    seed: int | tuple[int, ...] = 0,
    tie_resolution: float = TIE_RESOLUTION,
) -> PermutationP:
    """p-values for one group: ``indices`` (K, D) model scores, ``reference`` (K, D) (NaN = not compared).

    A dimension whose compared scores include NaN (or fewer than two countries) has p NaN. ``undefined_tau``
    as in ``rank_agreement``: with "-1" a relabelling that makes a side constant counts tau = −1.
    ``tie_resolution`` as in ``rank_agreement`` (0 for exact indices: the values as given).
    """
    x = merge_ties(np.asarray(indices, dtype=np.float64).T, tie_resolution).T
    ref = merge_ties(np.asarray(reference, dtype=np.float64).T, tie_resolution).T
    k, dims = x.shape
    if k <= EXACT_MAX:
        perms, method = _all_permutations(k), "exact"
    else:
        rng = np.random.default_rng(np.random.SeedSequence(seed))
        draws = rng.permuted(np.tile(np.arange(k, dtype=np.int16), (monte_carlo, 1)), axis=1)
        perms, method = np.concatenate([np.arange(k, dtype=np.int16)[None], draws]), "monte-carlo"
    obs_num, obs_den, obs_cat = (a[0] for a in _statistics(x, ref, perms[:1], undefined_tau))
    counts = np.zeros(dims, dtype=np.int64)
    cat_count = 0
    top = [(0, 0)] * dims  # the largest |tau| so far as (numerator, n_x·n_y), and how often it occurs
    top_count = np.zeros(dims, dtype=np.int64)
    cat_top, cat_top_count = -1.0, 0
    for start in range(0, len(perms), BLOCK):
        num, den, cat = _statistics(x, ref, perms[start : start + BLOCK], undefined_tau)
        counts += _at_least(num, den, obs_num, obs_den).sum(axis=0)
        with np.errstate(invalid="ignore"):
            cat_count += int((np.abs(cat) >= abs(obs_cat) - CAT_TOLERANCE).sum())
        for d in range(dims):
            best = _largest(num[:, d], den[:, d])
            if best[1] == 0:
                continue
            hits = int(_at_least(num[:, d], den[:, d], *best).sum())
            if top[d][1] == 0 or not _ge(top[d], best):
                top[d], top_count[d] = best, hits  # strictly larger than anything before
            elif _ge(best, top[d]):
                top_count[d] += hits  # as large as the largest so far
        with np.errstate(invalid="ignore"):
            if np.isfinite(cat).any():
                best_cat = float(np.nanmax(np.abs(cat)))
                hits = int((np.abs(cat) >= best_cat - CAT_TOLERANCE).sum())
                if best_cat > cat_top + CAT_TOLERANCE:
                    cat_top, cat_top_count = best_cat, hits
                elif abs(best_cat - cat_top) <= CAT_TOLERANCE:
                    cat_top_count += hits
    total = len(perms)
    defined = obs_den > 0
    p = counts / total  # Monte Carlo: perms[0] is the observed labelling, so this is (k + 1) / (draws + 1)
    cat_p = cat_count / total
    if method == "exact":
        p_min, cat_min = top_count / total, cat_top_count / total
        se, cat_se = np.zeros(dims), 0.0
    elif total > 1:
        p_min, cat_min = np.full(dims, 1.0 / total), 1.0 / total
        se = np.sqrt(p * (1 - p) / (total - 1))
        cat_se = math.sqrt(cat_p * (1 - cat_p) / (total - 1))
    else:  # no relabellings drawn (monte_carlo = 0): no p-value
        p = p_min = se = np.full(dims, np.nan)
        cat_p = cat_min = cat_se = math.nan
    cat_defined = bool(np.isfinite(obs_cat))
    nan = np.full(dims, np.nan)
    return PermutationP(
        kendall_p=np.where(defined, p, nan),
        kendall_p_min=np.where(defined, p_min, nan),
        cat_p=float(cat_p) if cat_defined else math.nan,
        cat_p_min=float(cat_min) if cat_defined else math.nan,
        method=method,
        relabellings=total if method == "exact" else total - 1,
        standard_error_kendall=np.where(defined, se, nan),
        standard_error_cat=cat_se if cat_defined else math.nan,
    )


def _largest(num: np.ndarray, den: np.ndarray) -> tuple[int, int]:
    """(numerator, n_x·n_y) of a largest |tau| among defined entries (den > 0); (0, 0) when none."""
    ok = den > 0
    if not ok.any():
        return (0, 0)
    value = np.where(ok, num.astype(np.float64) ** 2 / np.where(ok, den, 1), -1.0)
    candidates = np.flatnonzero(value >= value.max() * (1 - 1e-9))  # float preselect, exact pick below
    best = (int(num[candidates[0]]), int(den[candidates[0]]))
    for c in candidates[1:]:
        n, d = int(num[c]), int(den[c])
        if n * n * best[1] > best[0] * best[0] * d:
            best = (n, d)
    return best


def _ge(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """|tau_a| ≥ |tau_b| for (numerator, n_x·n_y) pairs with positive second entries, in integers."""
    return a[0] * a[0] * b[1] >= b[0] * b[0] * a[1]


def _at_least(num: np.ndarray, den: np.ndarray, num_obs: object, den_obs: object) -> np.ndarray:
    """|tau| ≥ |tau_obs| decided in integers: num²·den_obs ≥ num_obs²·den (den = n_x·n_y > 0; 0 = undefined)."""
    num = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    lhs = num * num * np.asarray(den_obs, dtype=np.int64)
    rhs = np.asarray(num_obs, dtype=np.int64) ** 2 * den
    return (den > 0) & (lhs >= rhs) & (np.asarray(den_obs) > 0)


def _statistics(
    x: np.ndarray, ref: np.ndarray, perms: np.ndarray, undefined_tau: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each relabelling: (P, D) tau numerators C − D, (P, D) n_x·n_y (0 = undefined), (P,) CAT score.

    Dimensions with NaN among the compared scores, or with fewer than two compared countries, give n_x·n_y = 0
    (no tau); a constant side gives 0 too (undefined), except under the "-1" policy, where it is stored as
    numerator −1 over 1 (tau = −1) and enters the CAT mean as −1.
    """
    k, dims = x.shape
    p = perms.shape[0]
    num = np.zeros((p, dims), dtype=np.int64)
    den = np.zeros((p, dims), dtype=np.int64)
    taus = np.full((p, dims), np.nan)
    i, j = np.triu_indices(k, 1)
    flat = perms[:, i].astype(np.intp) * k + perms[:, j]  # (P, pairs): the relabelled pair, shared by all dimensions
    for d in range(dims):
        compared = np.isfinite(ref[:, d])
        if compared.sum() < 2:
            continue
        pairs = compared[i] & compared[j]
        sy = np.sign(ref[i[pairs], d] - ref[j[pairs], d]).astype(np.float32)
        ny = int((sy != 0).sum())
        with np.errstate(invalid="ignore"):
            signs = np.sign(x[:, d, None] - x[None, :, d])  # (K, K) sign of x_u − x_v, NaN where missing
        table = np.where(np.isfinite(signs), signs, 2).astype(np.int8).ravel()  # 2 marks a missing score
        sx = table[flat[:, pairs] if not pairs.all() else flat]  # (P, pairs): the relabelled pair's sign
        missing = (sx == 2).any(axis=1)
        nx = np.count_nonzero(sx, axis=1)
        # float32 products of ±1/0 summed over ≤ 1,225 pairs are exact integers
        num[:, d] = np.where(missing, 0, (sx.astype(np.float32) @ sy).astype(np.int64))
        den[:, d] = np.where(missing | (ny == 0), 0, nx * ny)
        if undefined_tau == "-1":  # a constant side counts tau = −1: stored as −1 / sqrt(1)
            undefined = ~missing & (den[:, d] == 0)
            num[:, d] = np.where(undefined, -1, num[:, d])
            den[:, d] = np.where(undefined, 1, den[:, d])
        with np.errstate(invalid="ignore", divide="ignore"):
            taus[:, d] = np.where(den[:, d] > 0, num[:, d] / np.sqrt(np.maximum(den[:, d], 1)), np.nan)
    finite = np.isfinite(taus)
    # sort before summing: equal multisets of taus give bitwise equal CAT scores
    ordered = np.sort(np.where(finite, taus, np.inf), axis=1)
    total = np.where(np.isfinite(ordered), ordered, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cat = np.where(finite.any(axis=1), total / np.maximum(finite.sum(axis=1), 1), np.nan)
    return num, den, cat
