"""Ranking agreement with a reference: Kendall tau-b per dimension, the CAT score and mis-ranked dimensions.

For each group (a model × condition) and dimension, the countries' index scores are compared with the
reference scores of the same countries by Kendall's tau-b (``stats_core.kendall_tau``, batched over groups).
A country without a published reference score on a dimension is left out of that dimension's comparison.
Tau is undefined when either side is constant (or fewer than two countries remain); the policy decides:

- ``"nan"`` (default, CAT v2's "N/A"): the tau stays NaN and is left out of the CAT mean and of mis-ranks;
- ``"-1"`` (CAT v1): the tau counts as −1.0 in the CAT mean, and mis-ranks are counted as usual.

CAT score = mean over the dimensions with a (policy-resolved) tau. A country is mis-ranked on a dimension when
its competition rank (1 = highest score; ties share the smaller rank) among the compared countries differs
from its reference rank.

Ties are exact: before anything is ranked, index scores that lie within ``TIE_RESOLUTION`` (1e-9 index points)
of each other, chained, are set to one value (``merge_ties``). Indices are weighted sums of question means,
which are rationals (sums of answers over counts); in float64 the same rational comes out a few 1e-14 apart
depending on the summation order and backend (−46 vs −45.99999999999999), which breaks a true tie. Two
distinct exact indices differ by at least 1 / lcm(the answer counts of the means involved) — for complete data
with n_a and n_b units per country at least 1/(n_a·n_b) — so with fewer than about 30,000 units per country
(lcm of the counts below 1e9) the merge joins exactly the values that are equal in exact arithmetic, on every
backend and summation order. Beyond that (or for means that are not ratios of small counts, e.g. expected
values of distributions) values closer than 1e-9 index points count as tied, far below any meaningful difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import stats_core
from runner.errors import InputError
from runner.survey.dimensions import DIMENSIONS
from runner.survey.vocab import UNDEFINED_TAU

__all__ = [
    "POLICIES",
    "TIE_RESOLUTION",
    "Agreement",
    "competition_ranks",
    "error_percentage",
    "merge_ties",
    "rank_agreement",
]

POLICIES = UNDEFINED_TAU  # what tau of a constant ranking is: NaN (undefined) or -1 (the CAT papers)
TIE_RESOLUTION = 1e-9  # index points: values closer than this (chained) are one tie (module docstring)


@dataclass(frozen=True, eq=False)
class Agreement:
    """Ranking agreement of G groups over K countries and the six DIMENSIONS."""

    kendall: np.ndarray  # (G, 6) tau-b after the policy; NaN = undefined (nan policy) or index missing
    undefined: np.ndarray  # (G, 6) bool: tau undefined (a constant side or < 2 countries)
    cat_score: np.ndarray  # (G,) mean of the non-NaN kendall values; NaN when none
    compared: np.ndarray  # (K, 6) bool: the country has a reference score on the dimension
    misranked: np.ndarray  # (G, K, 6) bool, False where not counted (see ``counted``)
    counted: np.ndarray  # (G, K, 6) bool: the cell enters the mis-rank counts
    model_rank: np.ndarray  # (G, K, 6) competition ranks of the index scores; NaN where not compared
    reference_rank: np.ndarray  # (K, 6) competition ranks of the reference; NaN where not compared
    policy: str

    @property
    def misranked_count(self) -> np.ndarray:
        """(G, K) number of mis-ranked dimensions per group and country."""
        return self.misranked.sum(axis=2)

    @property
    def misranked_share(self) -> np.ndarray:
        """(G, K) mis-ranked dimensions ÷ counted dimensions (NaN when none counted)."""
        counted = self.counted.sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counted > 0, self.misranked_count / counted, np.nan)


def merge_ties(values: np.ndarray, resolution: float = TIE_RESOLUTION) -> np.ndarray:
    """Along the last axis, values within ``resolution`` of their sorted neighbour get the smallest of their run.

    ``values`` (..., K) floats → same shape; NaN stays NaN. Chains merge (single linkage on the sorted values), so
    the result does not depend on the order of the K values, and equal inputs stay bitwise equal.
    """
    v = np.asarray(values, dtype=np.float64)
    if v.shape[-1] < 2:
        return v.copy()
    order = np.argsort(v, axis=-1, kind="stable")  # NaN sorts last
    s = np.take_along_axis(v, order, axis=-1)
    with np.errstate(invalid="ignore"):
        close = np.diff(s, axis=-1) <= resolution  # False next to a NaN
    start = np.concatenate([np.ones((*s.shape[:-1], 1), dtype=bool), ~close], axis=-1)
    position = np.broadcast_to(np.arange(s.shape[-1]), s.shape)
    first = np.maximum.accumulate(np.where(start, position, 0), axis=-1)  # index of each run's first value
    merged = np.take_along_axis(s, first, axis=-1)
    out = np.empty_like(v)
    np.put_along_axis(out, order, merged, axis=-1)
    return out


def competition_ranks(values: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Ranks along the last axis, 1 = largest, ties share the smallest rank ("1224"); NaN outside ``mask``.

    ``values`` (..., K) floats; ``mask`` (..., K) bool broadcastable (default: finite values).
    """
    v = np.asarray(values, dtype=np.float64)
    m = np.isfinite(v) if mask is None else np.broadcast_to(mask, v.shape) & np.isfinite(v)
    greater = (v[..., None, :] > v[..., :, None]) & m[..., None, :]
    ranks = 1.0 + greater.sum(axis=-1)
    return np.where(m, ranks, np.nan)


def rank_agreement(
    indices: np.ndarray, reference: np.ndarray, *, undefined_tau: str = "nan", backend: str = "auto"
) -> Agreement:
    """Tau-b per group and dimension, CAT score and mis-ranks.

    ``indices`` (G, K, 6): index scores of K countries in G groups (NaN = could not be scored);
    ``reference`` (K, 6): reference scores of the same countries in the same order (NaN = unpublished).
    """
    if undefined_tau not in POLICIES:
        raise InputError(f"undefined_tau: {undefined_tau!r} is not one of {', '.join(POLICIES)}")
    x = np.asarray(indices, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if x.ndim != 3 or x.shape[2] != len(DIMENSIONS) or ref.shape != x.shape[1:]:
        raise InputError(f"indices {x.shape} must be (groups, countries, 6) and reference {ref.shape} (countries, 6)")
    # exact ties among the countries of a group and dimension (module docstring)
    x = np.moveaxis(merge_ties(np.moveaxis(x, 1, 2)), 2, 1)
    ref = merge_ties(ref.T).T
    groups = x.shape[0]
    compared = np.isfinite(ref)
    kendall = np.full((groups, len(DIMENSIONS)), np.nan)
    undefined = np.zeros((groups, len(DIMENSIONS)), dtype=bool)
    for j in range(len(DIMENSIONS)):
        cols = compared[:, j]
        xs = x[:, cols, j]
        scorable = np.isfinite(xs).all(axis=1)  # a group missing an index is not ranked at all on j
        if cols.sum() < 2:
            undefined[scorable, j] = True
            continue
        if scorable.any():
            ys = np.broadcast_to(ref[cols, j], xs[scorable].shape)
            kendall[scorable, j] = stats_core.kendall_tau(xs[scorable], ys, backend=backend)
        undefined[:, j] = scorable & np.isnan(kendall[:, j])
    if undefined_tau == "-1":
        kendall[undefined] = -1.0
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(kendall)
        cat = np.where(finite.any(axis=1), np.nansum(kendall, axis=1) / np.maximum(finite.sum(axis=1), 1), np.nan)
    model_rank = competition_ranks(np.moveaxis(x, 1, 2), compared.T[None]).swapaxes(1, 2)
    reference_rank = competition_ranks(ref.T, compared.T).T
    counted = np.isfinite(model_rank) & compared[None] & np.isfinite(kendall)[:, None, :]
    misranked = counted & (model_rank != reference_rank[None])
    return Agreement(
        kendall=kendall,
        undefined=undefined,
        cat_score=cat,
        compared=compared,
        misranked=misranked,
        counted=counted,
        model_rank=model_rank,
        reference_rank=reference_rank,
        policy=undefined_tau,
    )


def error_percentage(agreement: Agreement) -> np.ndarray:
    """(K,) mean over groups of each country's mis-ranked share, in percent (CAT papers' "Error (%)")."""
    with np.errstate(invalid="ignore"):
        share = agreement.misranked_share
        n = np.isfinite(share).sum(axis=0)
        return np.where(n > 0, 100.0 * np.nansum(share, axis=0) / np.maximum(n, 1), np.nan)
