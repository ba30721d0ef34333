"""Ranking agreement with a reference: Kendall tau-b per dimension, the CAT score and mis-ranked dimensions.

For each group (a model × condition) and dimension, the countries' index scores are compared with the
reference scores of the same countries by Kendall's tau-b (from integer counts, ``tau_counts``, batched over groups).
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
Indices from ``indices_from_means(exact=True)`` are already exact (equal rationals are bitwise equal floats), so
hofcat's own point estimates are ranked with ``tie_resolution=0``: as given, no distinct values merged.

Tau and the CAT score are exact too: tau-b = (C − D) / sqrt(n_x · n_y) is computed from the integer counts and
rounded once to the nearest float (``rounded_tau``), and the CAT score — a mean of such square roots — is
evaluated in double-double precision (~32 digits) before its one rounding, so statistics equal in exact
arithmetic (e.g. 1/sqrt(2) from (1, 2) and from (3, 18), or the same taus in another dimension order) are
published as the same float.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from functools import lru_cache

import numpy as np

from runner.errors import InputError
from runner.survey.dimensions import DIMENSIONS
from runner.survey.vocab import UNDEFINED_TAU

__all__ = [
    "POLICIES",
    "TIE_RESOLUTION",
    "Agreement",
    "competition_ranks",
    "error_percentage",
    "exact_cat",
    "mean_percent",
    "merge_ties",
    "rank_agreement",
    "rounded_tau",
    "tau_counts",
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
    # tau = tau_numerator / sqrt(tau_denominator) exactly: (G, 6) int64 C − D and n_x·n_y (0 = no tau)
    tau_numerator: np.ndarray | None = None
    tau_denominator: np.ndarray | None = None

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


def tau_counts(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kendall's counts per row of (R, n) arrays: (R,) C − D, n_x and n_y (pairs not tied in x, in y), int64.

    Values are compared as given (exact float comparison); NaN must not occur.
    """
    i, j = np.triu_indices(x.shape[-1], 1)
    sx = np.sign(x[..., i] - x[..., j]).astype(np.int8)
    sy = np.sign(y[..., i] - y[..., j]).astype(np.int8)
    s = (sx.astype(np.int64) * sy).sum(axis=-1)
    return s, np.count_nonzero(sx, axis=-1).astype(np.int64), np.count_nonzero(sy, axis=-1).astype(np.int64)


@lru_cache(maxsize=1 << 16)
def _tau_float(s: int, p: int) -> float:
    """s / sqrt(p) rounded once (p > 0); cached: a design's taus take few distinct (s, p)."""
    return math.copysign(_nearest_sqrt(Fraction(s * s, p)), s)


@lru_cache(maxsize=1 << 16)
def _tau_decimal(s: int, p: int) -> Decimal:
    """s / sqrt(p) to 50 digits (p > 0): the exact value the CAT mean's double-double terms are taken from."""
    return _CAT_CONTEXT.divide(Decimal(s), _CAT_CONTEXT.sqrt(Decimal(p)))


def _nearest_sqrt(square: Fraction) -> float:
    """The float nearest to sqrt(square) for a rational square ≥ 0 (decided by exact comparisons with midpoints)."""
    f = math.sqrt(float(square))  # within an ulp or two
    for _ in range(4):
        up, down = math.nextafter(f, math.inf), math.nextafter(f, 0.0)
        if square > ((Fraction(f) + Fraction(up)) / 2) ** 2:
            f = up
        elif f > 0.0 and square < ((Fraction(f) + Fraction(down)) / 2) ** 2:
            f = down
        else:
            break
    return f


def _unique_pairs(s: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (s, p) rows of two 1-D int64 arrays (p ≥ 0) and each entry's row, via one int64 key when it fits."""
    low, span = int(s.min()), int(p.max()) + 1
    if (int(s.max()) - low + 1) * span < 2**62:
        keys, inverse = np.unique((s - low) * span + p, return_inverse=True)
        return np.stack([keys // span + low, keys % span], axis=-1), np.ravel(inverse)
    pairs, inverse = np.unique(np.stack([s, p], axis=-1), axis=0, return_inverse=True)
    return pairs, np.ravel(inverse)


def rounded_tau(s: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Tau-b = s / sqrt(p) (s = C − D, p = n_x·n_y, integer arrays) rounded once to the nearest float; NaN where p = 0.

    Equal exact values give the same float whatever their counts ((1, 2) and (3, 18) are both 1/sqrt(2)).
    """
    s, p = np.asarray(s, dtype=np.int64), np.asarray(p, dtype=np.int64)
    out = np.full(s.shape, np.nan)
    ok = p > 0
    if ok.any():
        pairs, inverse = _unique_pairs(s[ok], p[ok])
        out[ok] = np.array([_tau_float(int(a), int(b)) for a, b in pairs])[inverse]
    return out


_CAT_CONTEXT = Context(prec=50)  # digits of each tau's exact value, from which its low part is taken


@lru_cache(maxsize=1 << 16)
def _tau_parts(s: int, p: int) -> tuple[float, float]:
    """s / sqrt(p) as a double-double: (the float nearest to it, the float nearest to the rest)."""
    high = _tau_float(s, p)
    return high, float(_tau_decimal(s, p) - Decimal(high))


def exact_cat(s: np.ndarray, p: np.ndarray, defined: np.ndarray) -> np.ndarray:
    """(G,) CAT scores: the mean of s/sqrt(p) over the ``defined`` dimensions of each row ((G, D) integer counts as
    in ``Agreement.tau_numerator``/``tau_denominator``); NaN where none is defined.

    Each tau enters as a double-double (~32 digits), the terms are added smallest first with error-free sums and
    the total rounded once, so a row's value depends only on its multiset of taus and equal exact means (the same
    taus on other dimensions; 1/3 + 1/3 and 0 + 2/3) give the same float.
    """
    s, p = np.asarray(s, dtype=np.int64), np.asarray(p, dtype=np.int64)
    ok = defined & (p > 0)
    high, low = np.zeros(s.shape), np.zeros(s.shape)
    if ok.any():
        pairs, inverse = _unique_pairs(s[ok], p[ok])
        parts = np.array([_tau_parts(int(a), int(b)) for a, b in pairs]).reshape(-1, 2)
        high[ok], low[ok] = parts[inverse, 0], parts[inverse, 1]
    order = np.argsort(high, axis=1, kind="stable")
    high, low = np.take_along_axis(high, order, axis=1), np.take_along_axis(low, order, axis=1)
    total, error = np.zeros(s.shape[0]), np.zeros(s.shape[0])
    for column in range(s.shape[1]):
        added = total + high[:, column]  # Knuth's TwoSum: added + lost = total + high exactly
        virtual = added - total
        lost = (total - (added - virtual)) + (high[:, column] - virtual)
        total, error = added, error + lost + low[:, column]
    count = ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (total + error) / np.maximum(count, 1), np.nan)


def rank_agreement(
    indices: np.ndarray,
    reference: np.ndarray,
    *,
    undefined_tau: str = "nan",
    backend: str = "auto",
    tie_resolution: float = TIE_RESOLUTION,
) -> Agreement:
    """Tau-b per group and dimension, CAT score and mis-ranks.

    ``indices`` (G, K, 6): index scores of K countries in G groups (NaN = could not be scored);
    ``reference`` (K, 6): reference scores of the same countries in the same order (NaN = unpublished).
    ``tie_resolution``: index points within which values count as one tie (``merge_ties``); 0 takes the values
    as given — for exact indices (``indices_from_means(exact=True)``). Tau and CAT are computed in integers and
    rounded once (module docstring), so ``backend`` no longer changes anything (kept for callers).
    """
    del backend  # tau comes from integer counts: every backend gave the same value, now none is needed
    if undefined_tau not in POLICIES:
        raise InputError(f"undefined_tau: {undefined_tau!r} is not one of {', '.join(POLICIES)}")
    x = np.asarray(indices, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if x.ndim != 3 or x.shape[2] != len(DIMENSIONS) or ref.shape != x.shape[1:]:
        raise InputError(f"indices {x.shape} must be (groups, countries, 6) and reference {ref.shape} (countries, 6)")
    # exact ties among the countries of a group and dimension (module docstring)
    x = np.moveaxis(merge_ties(np.moveaxis(x, 1, 2), tie_resolution), 2, 1)
    ref = merge_ties(ref.T, tie_resolution).T
    groups = x.shape[0]
    compared = np.isfinite(ref)
    num = np.zeros((groups, len(DIMENSIONS)), dtype=np.int64)
    den = np.zeros((groups, len(DIMENSIONS)), dtype=np.int64)
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
            c_d, n_x, n_y = tau_counts(xs[scorable], ys)
            num[scorable, j], den[scorable, j] = c_d, n_x * n_y
        undefined[:, j] = scorable & (den[:, j] == 0)
    if undefined_tau == "-1":  # a constant side counts tau = −1: stored as −1 / sqrt(1)
        num[undefined], den[undefined] = -1, 1
    kendall = rounded_tau(num, den)
    cat = exact_cat(num, den, den > 0)
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
        tau_numerator=num,
        tau_denominator=den,
    )


def error_percentage(agreement: Agreement) -> np.ndarray:
    """(K,) mean over groups of each country's mis-ranked share, in percent (CAT papers' "Error (%)").

    Computed in fractions and rounded once, so equal shares in exact arithmetic (1/3 + 2/3 vs 1/2 + 1/2) give
    the same float.
    """
    mis = agreement.misranked.sum(axis=2)
    counted = agreement.counted.sum(axis=2)
    return np.array([mean_percent(zip(mis[:, k], counted[:, k], strict=True)) for k in range(mis.shape[1])])


def mean_percent(shares: Iterable[tuple[int, int]]) -> float:
    """100 × the mean of the shares m/c over the (m, c) pairs with c > 0, in fractions, rounded once; NaN if none."""
    exact = [Fraction(int(m), int(c)) for m, c in shares if c > 0]
    return float(100 * sum(exact, Fraction(0)) / len(exact)) if exact else math.nan
