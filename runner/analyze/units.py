"""Parsed answers → a dense array of per-unit question means: ``values[c, k, u, q]``.

c indexes conditions (factor combinations), k countries, u resampling units (seeds, identities), q the 24
questions; NaN where a unit has nothing to score. Which answers are scored, and as what, is the parse
policy's ``scored_option`` (runner/parse/policy.py): by default ok answers only. Every later statistic
(indices, bootstrap, set measures) starts from this array; its size is bounded by the number of answers, not by
the raw run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from runner.analyze.design import Design
from runner.escape import condition_label
from runner.parse.distribution import scored_value
from runner.parse.policy import DEFAULT_POLICY, Policy

__all__ = ["UnitArray", "unit_array"]


@dataclass(frozen=True, eq=False)
class UnitArray:
    """Per-unit means of the 24 questions, with the labels of each axis."""

    conditions: pl.DataFrame  # one row per condition: the factor columns (in ``values`` order)
    countries: tuple[str, ...]
    units: pl.DataFrame  # one row per unit: the unit columns
    values: np.ndarray  # (C, K, U, 24) float64, NaN = nothing scored (the policy dropped or none given)

    def present(self) -> np.ndarray:
        """(C, K, U) bool: the unit answered at least one question for this condition and country."""
        return np.isfinite(self.values).any(axis=3)

    def condition_labels(self) -> list[str]:
        """Readable condition names: ``factor=value`` joined by ', ' (or 'all' without factors)."""
        cols = [c for c in self.conditions.columns if c != "_all"]
        if not cols:
            return ["all"] * self.conditions.height
        return [condition_label((c, row[c]) for c in cols) for row in self.conditions.iter_rows(named=True)]


def unit_array(answers: pl.LazyFrame, design: Design, policy: Policy = DEFAULT_POLICY) -> UnitArray:
    """Average each unit's scored answers (``scored_option(policy)``) per question (1–24), laid out densely."""
    factors = list(design.factors) or ["_all"]
    lazy = answers if design.factors else answers.with_columns(_all=pl.lit(1))
    # answers without a country (no persona, language without a country) cannot be ranked
    lazy = lazy.filter(pl.col("question").is_between(1, 24) & pl.col("country").is_not_null())
    # The axes first (small), then the means grouped by integer codes: grouping by the labels themselves
    # holds every group's labels in the hash table: +111 vs +41 MiB for a million units × questions (bench).
    conditions = _codes(lazy, factors)
    countries = _codes(lazy, ["country"])
    units = _codes(lazy, list(design.units))
    coded = (
        lazy.join(conditions.with_row_index("_c").lazy(), on=factors, nulls_equal=True)
        .join(countries.with_row_index("_k").lazy(), on="country", nulls_equal=True)
        .join(units.with_row_index("_u").lazy(), on=list(design.units), nulls_equal=True)
        .group_by("_c", "_k", "_u", "question")
        # distribution cells count as their expected option (runner.parse.distribution), samples as the option
        .agg(answer=scored_value(policy, has_probs="option_probs" in lazy.collect_schema().names()).mean())
        .collect(engine="streaming")
    )
    values = np.full((conditions.height, countries.height, units.height, 24), np.nan)
    values[coded["_c"].to_numpy(), coded["_k"].to_numpy(), coded["_u"].to_numpy(), coded["question"].to_numpy() - 1] = (
        coded["answer"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    )
    return UnitArray(conditions, tuple(countries["country"].to_list()), units, values)


def _codes(frame: pl.LazyFrame, columns: Sequence[str]) -> pl.DataFrame:
    """The distinct combinations of ``columns``, sorted (nulls first), as the codes of one axis."""
    return frame.select(columns).unique().collect(engine="streaming").sort(list(columns), nulls_last=False)
