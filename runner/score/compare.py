"""Comparisons between two conditions: the difference in tau per dimension and in the CAT score, with p and interval.

Is model A better aligned than model B, English than Chinese, persona than none? Both conditions are ranked over
the countries they share (paired: the same countries, the same reference), and the statistic is
Δ = tau_A − tau_B per dimension and CAT_A − CAT_B.

p-value: an exact paired permutation test of "the two conditions are exchangeable within each country" — under
it, which of a country's two score vectors (six indices each) belongs to A is a coin flip, so every one of the
2^K swaps of the K shared countries is equally likely. Two-sided: p = share of swaps with |Δ| ≥ |Δ_observed|
(the identity counted, so p ≥ 2/2^K: 0.25 with 3 countries, 0.0625 with 5, 0.031 with 6; ``p_min`` is the
smallest attainable). All 2^K swaps are enumerated up to ``EXACT_MAX`` countries, beyond that ``monte_carlo``
swaps are drawn from ``default_rng(SeedSequence(seed))`` and p = (k + 1)/(draws + 1). Every tau is
``stats_core.kendall_tau`` through ``runner.score.permutation.tau_batch`` (one engine with the p-values against
the reference).

Interval: for the difference of the population taus (each condition's population scores over the shared
countries, runner/score/intervals.py). Each condition's sign bounds are taken at level 1 − α/2, so both hold
together with probability ≥ 1 − α when each does: Δ lies in [low_A − high_B, high_A − low_B]. It is widened to
contain the estimate, and 0 when the exact p exceeds α (``with_test``), so it never excludes 0 where the test
does not reject.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from runner.score.intervals import agreement_intervals, with_test
from runner.score.permutation import BLOCK_CELLS, count_extremes, tau_batch

__all__ = ["EXACT_MAX", "Difference", "condition_difference"]

EXACT_MAX = 12  # enumerate all 2^K swaps up to here (4,096 per pair; beyond, Monte Carlo bounds the work)


@dataclass(frozen=True)
class Difference:
    """A − B over the shared countries: per dimension (6,) and for the CAT score, with the swap test."""

    tau_a: np.ndarray
    tau_b: np.ndarray
    difference: np.ndarray  # (6,) tau_A − tau_B, NaN where either is undefined
    low: np.ndarray
    high: np.ndarray
    p: np.ndarray
    p_min: np.ndarray
    cat_a: float
    cat_b: float
    cat_difference: float
    cat_low: float
    cat_high: float
    cat_p: float
    cat_p_min: float
    method: str  # "exact" (2^K swaps) or "monte-carlo"
    swaps: int


@lru_cache(maxsize=8)
def _all_swaps(k: int) -> np.ndarray:
    """All 2^k swap masks as a (2^k, k) bool array, no swap first."""
    return np.array(list(itertools.product((False, True), repeat=k)), dtype=bool)


def condition_difference(
    scores: tuple[np.ndarray, np.ndarray],
    errors: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    reference: np.ndarray,
    *,
    level: float = 0.95,
    undefined_tau: str = "nan",
    monte_carlo: int = 9999,
    seed: int | tuple[int, ...] = 0,
    backend: str = "auto",
) -> Difference:
    """A − B for ``scores`` = ((K, 6) indices of A, of B) over the same K countries, ``reference`` (K, 6).

    ``errors`` = ((se_A, df_A), (se_B, df_B)), each (K, 6): the index SEs and their degrees of freedom (intervals);
    ``monte_carlo`` swaps beyond ``EXACT_MAX`` countries, drawn from ``seed``.
    """
    a, b = (np.asarray(s, dtype=np.float64) for s in scores)
    ref = np.asarray(reference, dtype=np.float64)
    k, dims = a.shape
    if k <= EXACT_MAX:
        masks, method = _all_swaps(k), "exact"
    else:
        rng = np.random.default_rng(np.random.SeedSequence(seed))
        masks = np.concatenate([np.zeros((1, k), dtype=bool), rng.random((monte_carlo, k)) < 0.5])
        method = "monte-carlo"
    (tau_a, cat_a), (tau_b, cat_b) = (tau_batch(s[None], ref, undefined_tau, backend) for s in (a, b))
    observed = np.append(tau_a[0] - tau_b[0], cat_a[0] - cat_b[0])
    block = max(1, BLOCK_CELLS // (2 * k * dims))

    def statistics() -> Iterator[np.ndarray]:
        for start in range(0, len(masks), block):
            swap = masks[start : start + block, :, None]
            ta, ca = tau_batch(np.where(swap, b, a), ref, undefined_tau, backend)
            tb, cb = tau_batch(np.where(swap, a, b), ref, undefined_tau, backend)
            yield np.column_stack([ta - tb, ca - cb])

    at_least, top_count, total = count_extremes(observed, statistics())
    p = np.where(np.isfinite(observed), at_least / total, np.nan)
    p_min = np.where(np.isfinite(observed), top_count / total if method == "exact" else 1.0 / total, np.nan)
    half = 1.0 - (1.0 - level) / 2.0  # each condition's bounds at 1 − α/2: both hold with probability ≥ 1 − α
    bounds = [
        agreement_intervals(s, se, df, ref, t[0], half, undefined_tau)
        for s, (se, df), t in ((a, errors[0], tau_a), (b, errors[1], tau_b))
    ]
    (la, ha), (cla, cha) = bounds[0]
    (lb, hb), (clb, chb) = bounds[1]
    limits = [with_test(la[j] - hb[j], ha[j] - lb[j], float(observed[j]), float(p[j]), level) for j in range(dims)]
    cat_limits = with_test(cla - chb, cha - clb, float(observed[dims]), float(p[dims]), level)
    return Difference(
        tau_a=tau_a[0],
        tau_b=tau_b[0],
        difference=observed[:dims],
        low=np.array([lim[0] for lim in limits]),
        high=np.array([lim[1] for lim in limits]),
        p=p[:dims],
        p_min=p_min[:dims],
        cat_a=float(cat_a[0]),
        cat_b=float(cat_b[0]),
        cat_difference=float(observed[dims]),
        cat_low=cat_limits[0],
        cat_high=cat_limits[1],
        cat_p=float(p[dims]),
        cat_p_min=float(p_min[dims]),
        method=method,
        swaps=total if method == "exact" else total - 1,
    )
