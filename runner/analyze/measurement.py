"""How each condition was measured: sampled answers or answer distributions, and how much the options held.

``measurement_table``: per endpoint × model × measurement, the answers, how many carry ``option_probs``, their mean
``option_mass`` (probability the option tokens held before renormalising) and the shares with status
``low_mass`` and ``partial`` (runner/parse/distribution.py). Empty when the answers have no ``measurement`` column.
"""

from __future__ import annotations

import polars as pl

__all__ = ["measurement_table"]

GROUPS = ("endpoint", "model", "measurement")


def measurement_table(answers: pl.LazyFrame) -> pl.DataFrame:
    """Answers, distribution answers, mean option mass and low-mass share per endpoint × model × measurement."""
    names = answers.collect_schema().names()
    if "measurement" not in names:
        return pl.DataFrame()
    keys = [g for g in GROUPS if g in names]
    probs = "option_probs" in names
    return (
        answers.group_by(keys)
        .agg(
            answers=pl.len().cast(pl.Int64),
            with_probs=(pl.col("option_probs").is_not_null().sum() if probs else pl.lit(0)).cast(pl.Int64),
            mean_option_mass=pl.col("option_mass").mean() if probs else pl.lit(None, dtype=pl.Float64),
            low_mass_share=(pl.col("status") == "low_mass").mean(),
            partial_share=(pl.col("status") == "partial").mean(),
        )
        .sort(keys)
        .collect(engine="streaming")
    )
