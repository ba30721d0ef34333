"""VSM 2013 dimension indices from per-question mean answers (official coefficients, user constants).

    PDI = 35(m07 − m02) + 25(m20 − m23) + C_pdi      IDV = 35(m04 − m01) + 35(m09 − m06) + C_idv
    MAS = 35(m05 − m03) + 35(m08 − m10) + C_mas      UAI = 40(m18 − m15) + 25(m21 − m24) + C_uai
    LTO = 40(m13 − m14) + 25(m19 − m22) + C_lto      IVR = 35(m12 − m11) + 40(m17 − m16) + C_ivr

m_k is the mean answer (1–5) to question k over a group's respondents (Hofstede & Minkov, VSM 2013 manual).
The CAT papers print MAS with 25(m08 − m10); 35 is the official weight and the one that reproduces CAT v1's
published tables (METHODOLOGY.md, "Known discrepancies"). Everything here is vectorised: the indices of any
number of groups are one product with a (24, 6) weight matrix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from runner.errors import InputError
from runner.survey.dimensions import DIMENSIONS, QUESTIONS

__all__ = [
    "FORMULAS",
    "WEIGHTS",
    "indices_from_means",
    "indices_table",
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


def indices_from_means(means: np.ndarray, constants: Mapping[str, float] | None = None) -> np.ndarray:
    """Six indices from per-question means: (..., 24) answers in [1, 5] → (..., 6) index points.

    Column q−1 holds question q's mean. An index is NaN only when one of its own four questions is NaN
    (a question nobody answered), so a missing Q15 spoils UAI and nothing else.
    """
    m = np.asarray(means, dtype=np.float64)
    if m.shape[-1:] != (len(QUESTIONS),):
        raise InputError(f"means: last axis must hold the 24 questions, got shape {m.shape}")
    missing = np.isnan(m)
    out = np.where(missing, 0.0, m) @ WEIGHTS
    out[(missing.astype(np.float64) @ (WEIGHTS != 0)) > 0] = np.nan
    return out + _constant_vector(constants)


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
        try:
            out[dim] = float(value)
        except ValueError:
            raise InputError(f"--constants: {value.strip()!r} (for {dim}) is not a number") from None
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
