"""Permutation p-values of tau per dimension and of the CAT score against "no association with the reference".

Definition (issue 13, so that results are comparable): a relabelling assigns the model's six index scores of
country π(i) to country i, the same relabelling on every dimension; the statistic is recomputed against the
unchanged reference (tau-b per dimension over the countries with a reference score; the CAT score = mean of
the defined taus, as ``rank_agreement`` computes it). Two-sided: p = share of relabellings whose |statistic|
≥ |observed|. For n ≤ ``EXACT_MAX`` countries all n! relabellings are enumerated (the identity included, so p
≥ 1/n!); beyond, ``monte_carlo`` relabellings are drawn from ``default_rng(SeedSequence(seed))`` (the seeding
convention of ``stats_core.bootstrap_indices``) and p = (k + 1) / (draws + 1) with its binomial standard error.

One engine: every relabelled tau is ``stats_core.kendall_tau`` (batched rows, the chosen backend), here and in the
comparisons between conditions (runner/score/compare.py, through ``tau_batch``). stats_core computes tau-b from
its integer counts with one square root and one division, so relabellings with the same counts give the same
float; |statistic| ≥ |observed| is decided with an absolute tolerance of ``TOLERANCE`` (1e-12, about 10⁴ times
the rounding error of a mean of six taus and far below the gap between distinct tau-b values of up to 50
countries). The scores themselves are compared after ``merge_ties`` (runner/score/ranking.py), so a tie in
exact arithmetic is a tie here.

``minimum`` is the smallest p the design can attain: the share of relabellings that reach the largest
|statistic| of all (2/n! without ties: 0.33 for 3 countries, 0.083 for 4), so that a reader sees when no
result can be significant.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

import stats_core
from runner.score.ranking import TIE_RESOLUTION, merge_ties

__all__ = ["EXACT_MAX", "TOLERANCE", "PermutationP", "count_extremes", "permutation_pvalues", "tau_batch"]

EXACT_MAX = 9  # enumerate all n! relabellings up to here (9! = 362,880)
TOLERANCE = 1e-12
BLOCK_CELLS = 1 << 21  # relabelled scores held at once (16 MiB of float64)


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


def tau_batch(
    scores: np.ndarray, reference: np.ndarray, undefined_tau: str = "nan", backend: str = "auto"
) -> tuple[np.ndarray, np.ndarray]:
    """Tau-b per dimension and CAT score of P score sets: (P, K, D) scores, (K, D) reference → ((P, D), (P,)).

    Through ``stats_core.kendall_tau``. A dimension with fewer than two compared countries (finite reference), or a
    score set missing a compared score, has tau NaN; a constant side is undefined: NaN, or −1 under the "-1" policy.
    The CAT score is the mean of the finite taus (summed in sorted order, so equal multisets give equal floats).
    """
    p, _, dims = scores.shape
    taus = np.full((p, dims), np.nan)
    for d in range(dims):
        compared = np.isfinite(reference[:, d])
        if compared.sum() < 2:
            continue
        xs = scores[:, compared, d]
        missing = ~np.isfinite(xs).all(axis=1)
        ys = np.broadcast_to(reference[compared, d], xs.shape)
        tau = np.asarray(stats_core.kendall_tau(np.where(missing[:, None], 0.0, xs), ys, backend=backend))
        if undefined_tau == "-1":  # a constant side counts tau = −1
            tau = np.where(np.isnan(tau), -1.0, tau)
        taus[:, d] = np.where(missing, np.nan, tau)
    finite = np.isfinite(taus)
    ordered = np.sort(np.where(finite, taus, np.inf), axis=1)
    total = np.where(np.isfinite(ordered), ordered, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cat = np.where(finite.any(axis=1), total / np.maximum(finite.sum(axis=1), 1), np.nan)
    return taus, cat


@dataclass
class _Extremes:
    """Running counts over relabelled statistics (P, S): at least as extreme as observed, and of the largest."""

    observed: np.ndarray  # (S,) |observed|, NaN = undefined
    at_least: np.ndarray
    top: np.ndarray  # (S,) largest |statistic| so far (−1: none yet)
    top_count: np.ndarray
    total: int = 0

    def add(self, stats: np.ndarray) -> None:
        """Count one block of relabelled statistics."""
        a = np.abs(stats)
        with np.errstate(invalid="ignore"):
            self.at_least += (a >= self.observed - TOLERANCE).sum(axis=0)
            best = np.nanmax(np.where(np.isfinite(a), a, -1.0), axis=0)
            hits = (a >= best - TOLERANCE).sum(axis=0)
        larger = best > self.top + TOLERANCE
        same = ~larger & (np.abs(best - self.top) <= TOLERANCE) & (best >= 0)
        self.top_count = np.where(larger, hits, np.where(same, self.top_count + hits, self.top_count))
        self.top = np.where(larger, best, self.top)
        self.total += stats.shape[0]


def count_extremes(observed: np.ndarray, blocks: Iterator[np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
    """Over blocks of (P, S) relabelled statistics: per statistic, how many have |value| ≥ |observed| (within
    ``TOLERANCE``), how many reach the largest |value| of all, and the number of relabellings."""
    obs = np.abs(np.asarray(observed, dtype=np.float64))
    size = obs.shape[0]
    state = _Extremes(obs, np.zeros(size, dtype=np.int64), np.full(size, -1.0), np.zeros(size, dtype=np.int64))
    for block in blocks:
        state.add(block)
    return state.at_least, state.top_count, state.total


def permutation_pvalues(
    indices: np.ndarray,
    reference: np.ndarray,
    *,
    undefined_tau: str = "nan",
    monte_carlo: int = 9999,
    seed: int | tuple[int, ...] = 0,
    tie_resolution: float = TIE_RESOLUTION,
    backend: str = "auto",
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
    obs_tau, obs_cat = tau_batch(x[None], ref, undefined_tau, backend)
    block = max(1, BLOCK_CELLS // (k * dims))

    def statistics() -> Iterator[np.ndarray]:
        for start in range(0, len(perms), block):
            taus, cat = tau_batch(x[perms[start : start + block]], ref, undefined_tau, backend)
            yield np.column_stack([taus, cat])

    at_least, top_count, total = count_extremes(np.append(obs_tau[0], obs_cat[0]), statistics())
    p = at_least / total  # Monte Carlo: perms[0] is the observed labelling, so this is (k + 1) / (draws + 1)
    if method == "exact":
        p_min, se = top_count / total, np.zeros(dims + 1)
    elif total > 1:
        p_min, se = np.full(dims + 1, 1.0 / total), np.sqrt(p * (1 - p) / (total - 1))
    else:  # no relabellings drawn (monte_carlo = 0): no p-value
        p = p_min = se = np.full(dims + 1, np.nan)
    defined = np.isfinite(np.append(obs_tau[0], obs_cat[0]))
    p, p_min, se = (np.where(defined, a, np.nan) for a in (p, p_min, se))
    return PermutationP(
        kendall_p=p[:dims],
        kendall_p_min=p_min[:dims],
        cat_p=float(p[dims]),
        cat_p_min=float(p_min[dims]),
        method=method,
        relabellings=total if method == "exact" else total - 1,
        standard_error_kendall=se[:dims],
        standard_error_cat=float(se[dims]),
    )
