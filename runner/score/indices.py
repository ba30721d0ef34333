"""VSM 2013 dimension indices from per-question mean answers (official coefficients, user constants).

    PDI = 35(m07 − m02) + 25(m20 − m23) + C_pdi      IDV = 35(m04 − m01) + 35(m09 − m06) + C_idv
    MAS = 35(m05 − m03) + 35(m08 − m10) + C_mas      UAI = 40(m18 − m15) + 25(m21 − m24) + C_uai
    LTO = 40(m13 − m14) + 25(m19 − m22) + C_lto      IVR = 35(m12 − m11) + 40(m17 − m16) + C_ivr

m_k is the mean answer (1–5) to question k over a group's respondents (Hofstede & Minkov, VSM 2013 manual).
The CAT papers print MAS with 25(m08 − m10); 35 is the official weight and the one that reproduces CAT v1's
published tables (docs/methodology.md, "Known discrepancies"). Everything here is vectorised: the indices of any
number of groups are one product with a (24, 6) weight matrix (``exact=False``) or one integer computation.

Exactness (``exact=True``, the default): an index is a rational — means of integer answers are sums over counts,
means typed in a CSV are decimals — and float64 reaches the same rational as different floats depending on the
summation order (−46 vs −45.99999999999999), so a true tie would be published as two values. Each mean is read as
the rational it denotes (``mean_rational``: the simplest fraction with denominator ≤ ``MAX_DENOMINATOR`` that
rounds to it, which recovers every count ratio S/n with n ≤ 10⁶ and every decimal with ≤ 8 places, else the
float's own exact value), the index (constant included) is computed in integers and rounded once to the nearest
float.
So indices equal in exact arithmetic are bitwise equal, and every index is within half an ulp of the exact one.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import polars as pl

from runner.errors import InputError
from runner.survey.dimensions import DIMENSIONS, QUESTIONS

__all__ = [
    "FORMULAS",
    "MAX_DENOMINATOR",
    "WEIGHTS",
    "indices_from_means",
    "indices_table",
    "mean_rational",
    "parse_constants",
    "question_stats",
]

# dimension → ((weight, plus question, minus question), (weight, plus question, minus question))
FORMULAS: dict[str, tuple[tuple[float, int, int], tuple[float, int, int]]] = {
    "pdi": ((35.0, 7, 2), (25.0, 20, 23)),
    "idv": ((35.0, 4, 1), (35.0, 9, 6)),
    "mas": ((35.0, 5, 3), (35.0, 8, 10)),
    "uai": ((40.0, 18, 15), (25.0, 21, 24)),
    "lto": ((40.0, 13, 14), (25.0, 19, 22)),
    "ivr": ((35.0, 12, 11), (40.0, 17, 16)),
}


def _weights() -> np.ndarray:
    """(24, 6) matrix W with indices = means @ W: +w on the plus question, −w on the minus question."""
    w = np.zeros((len(QUESTIONS), len(DIMENSIONS)))
    for j, dim in enumerate(DIMENSIONS):
        for weight, plus, minus in FORMULAS[dim]:
            w[plus - 1, j] += weight
            w[minus - 1, j] -= weight
    w.setflags(write=False)
    return w


WEIGHTS: np.ndarray = _weights()


def indices_from_means(
    means: np.ndarray, constants: Mapping[str, float] | None = None, *, exact: bool = True
) -> np.ndarray:
    """Six indices from per-question means: (..., 24) answers in [1, 5] → (..., 6) index points.

    Column q−1 holds question q's mean. An index is NaN only when one of its own four questions is NaN
    (a question nobody answered), so a missing Q15 spoils UAI and nothing else. ``exact`` (module docstring):
    each index is the exact value of the means' rationals rounded once (ties are bitwise ties); ``False`` is a
    plain float64 product, for bulk draws (bootstrap resamples) whose ties ``merge_ties`` resolves.
    """
    m = np.asarray(means, dtype=np.float64)
    if m.shape[-1:] != (len(QUESTIONS),):
        raise InputError(f"means: last axis must hold the 24 questions, got shape {m.shape}")
    missing = np.isnan(m)
    spoiled = (missing.astype(np.float64) @ (WEIGHTS != 0)) > 0
    if exact:
        out = _exact_indices(np.where(missing, 1.0, m), constants)
    else:
        out = np.where(missing, 0.0, m) @ WEIGHTS + _constant_vector(constants)
    out[spoiled] = np.nan
    return out


MAX_DENOMINATOR = 10**6  # count ratios S/n up to n = 10⁶ and decimals up to 6 places (8 still exact) recovered
_SAFE = 2.0**52  # int64 products and sums below this convert to float64 exactly


def mean_rational(value: float) -> Fraction:
    """The rational a float mean denotes: the simplest fraction with denominator ≤ ``MAX_DENOMINATOR`` that rounds
    to ``value`` (a mean of n ≤ 10⁶ integer answers, a decimal of up to 8 places), else the float's exact value.

    Two fractions with denominators q, q' ≤ 10⁶ differ by at least 1/(q·q') ≥ 10⁻¹², far more than the half-ulp
    (≤ 4.5e-16 for values up to 5) between a rational and its float, so the fraction found is the one meant.
    """
    num, den = _small_rationals(np.array([float(value)]))
    return Fraction(int(num[0]), int(den[0])) if den[0] else Fraction(float(value))


def _small_rationals(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Finite floats → int64 (p, q), the simplest p/q with q ≤ ``MAX_DENOMINATOR`` that rounds to each; q = 0: none.

    Vectorised continued fractions: by Legendre's theorem a fraction within 1/(2q²) of a number is one of its
    convergents, and S/n lies within half an ulp of its float, so the convergents are the only candidates; each is
    verified exactly (p and q convert exactly, and their float quotient is correctly rounded).
    """
    v = np.asarray(values, dtype=np.float64)
    sign = np.where(v < 0, -1, 1)
    x = np.abs(v)
    a = np.floor(x)
    h_prev, h = np.ones(v.shape, np.int64), np.minimum(a, _SAFE).astype(np.int64)
    k_prev, k = np.zeros(v.shape, np.int64), np.ones(v.shape, np.int64)
    p, q = np.zeros(v.shape, np.int64), np.zeros(v.shape, np.int64)
    frac = x - a
    for _ in range(64):
        hit = (q == 0) & (k <= MAX_DENOMINATOR) & (h < _SAFE) & (h / k == x)
        p[hit], q[hit] = h[hit], k[hit]
        active = (q == 0) & (frac > 0) & (k <= MAX_DENOMINATOR) & (h < _SAFE)
        if not active.any():
            break
        with np.errstate(divide="ignore", over="ignore"):
            x_next = np.where(active, 1.0 / np.where(active, frac, 1.0), 1.0)
        a = np.minimum(np.floor(x_next), 2.0 * MAX_DENOMINATOR)  # a larger term ends the search (k > 10⁶)
        frac = np.where(active, x_next - np.floor(x_next), 0.0)
        step = a.astype(np.int64)
        h, h_prev = np.where(active, step * h + h_prev, h), np.where(active, h, h_prev)
        k, k_prev = np.where(active, step * k + k_prev, k), np.where(active, k, k_prev)
    return sign * p, q


def _rationals(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Finite floats → int64 (p, q) (``_small_rationals``), a mask of the values without one, and every value's
    (numerator, denominator) as Python-int object arrays (``mean_rational``) for the exact fallback."""
    distinct, inverse = np.unique(values, return_inverse=True)  # means take few distinct values
    p, q = _small_rationals(distinct)
    # the others' exact binary value, mantissa · 2^exponent, as Python ints (the few distinct powers made once)
    mantissa, exponent = np.frexp(distinct)
    shift = 53 - exponent.astype(np.int64)
    powers = {int(e): 1 << abs(int(e)) for e in np.unique(shift)}
    scale = np.array([powers[int(e)] for e in shift] + [None], dtype=object)[:-1]
    whole = np.ldexp(mantissa, 53).astype(np.int64).astype(object)
    big_p = np.where(q > 0, p.astype(object), np.where(shift >= 0, whole, whole * scale))
    big_q = np.where(q > 0, q.astype(object), np.where(shift >= 0, scale, 1))
    inverse = inverse.reshape(values.shape)
    return p[inverse], q[inverse], (q == 0)[inverse], big_p[inverse], big_q[inverse]


_TRUEDIV = np.frompyfunc(operator.truediv, 2, 1)  # Python int / int: correctly rounded to the nearest float


def _exact_indices(means: np.ndarray, constants: Mapping[str, float] | None) -> np.ndarray:
    """(..., 24) finite means → (..., 6): each index computed in integers from the means' rationals, rounded once.

    Small rationals go through int64 (one common denominator, the lcm of the four), checked against overflow;
    the rest (a value without a small rational, a large lcm) through Python integers, row by row.
    """
    p, q, binary, big_p, big_q = _rationals(means)
    shift = _constant_vector(constants)
    out = np.empty((*means.shape[:-1], len(DIMENSIONS)))
    for j, dim in enumerate(DIMENSIONS):
        (w1, a, b), (w2, c, d) = ((int(w), plus - 1, minus - 1) for w, plus, minus in FORMULAS[dim])
        cols = [a, b, c, d]
        given = float(shift[j])
        constant = mean_rational(given) if np.isfinite(given) else Fraction(0)
        slow = binary[..., cols].any(axis=-1)
        qs = np.where(slow[..., None], 1, q[..., cols])
        with np.errstate(over="ignore", invalid="ignore"):
            lcm = np.lcm(np.lcm(qs[..., 0], qs[..., 1]), np.lcm(qs[..., 2], qs[..., 3]))
            bound = 400.0 * lcm.astype(np.float64) * max(constant.denominator, 1) + abs(float(constant)) * lcm
        slow |= (lcm <= 0) | (bound >= _SAFE) | (lcm.astype(np.float64) * constant.denominator >= _SAFE)
        if abs(constant.numerator) >= _SAFE or constant.denominator >= _SAFE:  # e.g. 1e-7's binary fraction
            slow[...] = True  # its terms do not fit int64: every row in Python integers
        if not slow.all():
            lcm = np.where(slow, 1, lcm)
            top = w1 * (
                p[..., a] * (lcm // np.where(slow, 1, q[..., a])) - p[..., b] * (lcm // np.where(slow, 1, q[..., b]))
            )
            top = top + w2 * (
                p[..., c] * (lcm // np.where(slow, 1, q[..., c])) - p[..., d] * (lcm // np.where(slow, 1, q[..., d]))
            )
            top = top * constant.denominator + constant.numerator * lcm
            out[..., j] = top.astype(np.float64) / (lcm * constant.denominator).astype(np.float64)
        if slow.any():
            out[slow, j] = _object_index(big_p[slow], big_q[slow], dim, constant)
        if not np.isfinite(given):  # an infinite constant: nothing exact to keep
            out[..., j] += given
    return out


def _object_index(num: np.ndarray, den: np.ndarray, dim: str, constant: Fraction) -> np.ndarray:
    """(R, 24) numerators and denominators (Python ints) → (R,) index ``dim`` in exact integers, rounded once."""
    top, bottom = constant.numerator, constant.denominator
    for weight, plus, minus in FORMULAS[dim]:
        a, b, c, d = num[:, plus - 1], den[:, plus - 1], num[:, minus - 1], den[:, minus - 1]
        # top/bottom + w·(a/b − c/d) as one fraction of Python ints (no overflow, no rounding)
        term_top, term_bottom = int(weight) * (a * d - c * b), b * d
        top, bottom = top * term_bottom + term_top * bottom, bottom * term_bottom
    return np.asarray(_TRUEDIV(top, bottom), dtype=np.float64)


def _constant_vector(constants: Mapping[str, float] | None) -> np.ndarray:
    """The constants C as a length-6 vector in DIMENSIONS order (0 where not given)."""
    constants = dict(constants or {})
    unknown = sorted(set(constants) - set(DIMENSIONS))
    if unknown:
        raise InputError(f"constants: unknown dimension(s) {unknown}; allowed: {', '.join(DIMENSIONS)}")
    return np.array([float(constants.get(d, 0.0)) for d in DIMENSIONS])


def parse_constants(text: str) -> dict[str, float]:
    """``"pdi=20,idv=-5"`` → ``{"pdi": 20.0, "idv": -5.0}``; empty text → ``{}``."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        dim, sep, value = part.partition("=")
        dim = dim.strip().lower()
        if not sep or dim not in DIMENSIONS:
            raise InputError(f"--constants: {part!r} is not DIM=NUMBER with DIM one of {', '.join(DIMENSIONS)}")
        if dim in out:  # the later one would silently win
            raise InputError(f"--constants: {dim} is given twice")
        try:
            out[dim] = float(value)
        except ValueError:
            raise InputError(f"--constants: {value.strip()!r} (for {dim}) is not a number") from None
        if not math.isfinite(out[dim]):  # an index of inf or NaN scores nothing
            raise InputError(f"--constants: {value.strip()!r} (for {dim}) is not a finite number")
    return out


def question_stats(
    answers: pl.LazyFrame | pl.DataFrame, by: Sequence[str], *, value: str = "answer", ddof: int = 0
) -> pl.LazyFrame:
    """Per ``by`` × question: ``mean``, ``std`` and ``n`` of the non-null answers in column ``value``.

    ``answers`` has the ``by`` columns, ``question`` (1–24) and ``value`` (1–5, null = no usable answer).
    ``std`` uses ``ddof`` (0 = population SD, as the CAT papers' tables print it); NaN when n ≤ ddof.
    """
    lazy = answers.lazy()
    keys = [*by, "question"]
    x = pl.col(value).cast(pl.Float64)
    return (
        lazy.filter(pl.col(value).is_not_null())
        .group_by(keys)
        .agg(mean=x.mean(), std=x.std(ddof=ddof).fill_null(float("nan")), n=pl.len().cast(pl.Int64))
        .sort(keys)
    )


def indices_table(
    stats: pl.DataFrame | pl.LazyFrame, by: Sequence[str], constants: Mapping[str, float] | None = None
) -> pl.DataFrame:
    """Long ``by…, question, mean`` rows → one row per ``by`` key with the six index columns (NaN if unanswerable)."""
    # Demographic questions (25–30) may sit in the same table; only 1–24 enter the indices.
    frame = stats.lazy().select([*by, "question", "mean"]).filter(pl.col("question").is_between(1, 24)).collect()
    keys = frame.select(by).unique(maintain_order=False).sort(by)
    if keys.height == 0:
        return keys.with_columns([pl.lit(None, dtype=pl.Float64).alias(d) for d in DIMENSIONS])
    key_index = keys.with_row_index("_row")
    located = frame.join(key_index, on=list(by), how="inner", nulls_equal=True)
    means = np.full((keys.height, len(QUESTIONS)), np.nan)
    rows = located["_row"].to_numpy()
    cols = located["question"].to_numpy().astype(np.int64) - 1
    means[rows, cols] = located["mean"].to_numpy()
    idx = indices_from_means(means, constants)
    return keys.with_columns([pl.Series(d, idx[:, j]) for j, d in enumerate(DIMENSIONS)])
