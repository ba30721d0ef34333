"""What the report draws around: the factors that vary, their levels, the one or two that matter most, and colours.

Figures and tables name only the factors that vary (constants are stated once in the summary) and name them by
their values in a fixed factor order, so a condition reads ``local · en · 0.5`` under a key that says which
factor each value belongs to. Each condition also has a short ID (``C001``), kept in the Conditions table with
its factor values. The facets — the factors small multiples are split by — are the user's choice (``[report]
facets`` in the spec, ``hofcat report --facets``), else the two factors that explain most of the variance of the
CAT score across conditions (eta squared) whose levels fit in a figure. Every level of a factor has one colour in
every figure, from the Okabe–Ito palette (safe for the common colour-vision deficiencies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from runner.errors import InputError
from runner.escape import condition_label

__all__ = ["OKABE_ITO", "ReportDesign", "full_label", "level", "report_design"]

# Okabe & Ito (2008), ordered so the first colours are the most distinct on white; yellow (hard to see) last.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
MAX_PANELS = 16  # small multiples per figure: beyond this the panels get too small to read at print size
MAX_COLOURS = len(OKABE_ITO)  # levels a factor may have to be told apart by colour


def full_label(row: Mapping[str, Any], factors: Sequence[str]) -> str:
    """The analysis' own condition name (``model=a, temperature=0.5``; 'all' without factors)."""
    return condition_label((f, row[f]) for f in factors) or "all"


LEVEL_CHARS = 24  # a level longer than this is drawn by its two ends (the tables keep it whole)


def level(value: object) -> str:
    """A level as figures write it: 'none' for missing, a long one shortened in the middle (both ends kept, so
    levels that share a prefix stay apart)."""
    text = "none" if value is None else str(value)
    return text if len(text) <= LEVEL_CHARS else f"{text[:13]}…{text[-10:]}"


@dataclass(frozen=True)
class ReportDesign:
    """The varying factors with their levels, the facets and colour factor chosen, and the constants."""

    factors: tuple[str, ...]
    levels: dict[str, tuple[Any, ...]]
    importance: dict[str, float]  # eta squared of the CAT score per factor (NaN where it cannot be computed)
    facets: tuple[str, ...]
    colour_by: str | None
    constants: dict[str, str] = field(default_factory=dict)

    def short(self, row: Mapping[str, Any], factors: Sequence[str] | None = None) -> str:
        """The values of ``factors`` (default: every varying one) in ``row``, joined by ' · '; 'all' if none."""
        names = self.factors if factors is None else factors
        return " · ".join(level(row[f]) for f in names) or "all"

    def key(self, factors: Sequence[str] | None = None) -> str:
        """What a short label's values are: the factor names in their order (``model · language``)."""
        return " · ".join(self.factors if factors is None else factors)

    def panel_title(self, row: Mapping[str, Any], factors: Sequence[str]) -> str:
        """``model: local, language: en`` — a facet's title."""
        return ", ".join(f"{f}: {level(row[f])}" for f in factors) or "all conditions"

    def colour(self, factor: str | None, value: object) -> Any:
        """The colour of ``value`` of ``factor``: the same in every figure (by the level's place in its factor)."""
        if factor is None:
            return OKABE_ITO[0]
        levels = self.levels[factor]
        i = levels.index(value) if value in levels else 0
        if len(levels) <= MAX_COLOURS:
            return OKABE_ITO[i]
        import matplotlib

        return matplotlib.colormaps["viridis"](i / max(1, len(levels) - 1))

    def rest(self, *drop: str | None) -> tuple[str, ...]:
        """The varying factors other than ``drop``."""
        return tuple(f for f in self.factors if f not in drop)


def _eta_squared(cat: pl.DataFrame, factor: str) -> float:
    """Share of the variance of the CAT point estimates across conditions between the levels of ``factor``."""
    rows = cat.select(factor, pl.col("cat_score").cast(pl.Float64)).drop_nans().drop_nulls("cat_score")
    if rows.height < 2:
        return float("nan")
    y = rows["cat_score"].to_numpy()
    total = float(((y - y.mean()) ** 2).sum())
    if total == 0:
        return float("nan")
    groups = rows.group_by(factor).agg(n=pl.len(), mean=pl.col("cat_score").mean())
    between = float((groups["n"].to_numpy() * (groups["mean"].to_numpy() - y.mean()) ** 2).sum())
    return between / total


def _sorted_levels(series: pl.Series) -> tuple[Any, ...]:
    values = series.unique().to_list()
    return tuple(sorted(values, key=lambda v: (v is None, v if isinstance(v, int | float) else str(v))))


def report_design(
    cat: pl.DataFrame,
    factors: Sequence[str],
    *,
    facets: Sequence[str] | None = None,
    constants: Mapping[str, str] | None = None,
    answered: pl.DataFrame | None = None,
) -> ReportDesign:
    """The report's design from the CAT table (one row per condition) and the analysis' varying ``factors``;
    ``answered`` (a table with the factor columns, e.g. the question means) gives the levels when no condition
    could be scored, so a thin run still names what varied.

    ``facets`` (at most two) are checked against the varying factors; without them the two most important that
    fit in ``MAX_PANELS`` panels are taken. Raises ``InputError`` for a facet that does not vary."""
    present = [f for f in factors if f in cat.columns]
    source = answered if cat.height == 0 and answered is not None else cat
    levels = {f: _sorted_levels(source[f]) if f in source.columns else () for f in present}
    importance = {f: _eta_squared(cat, f) for f in present}
    ranked = sorted(present, key=lambda f: (-np.nan_to_num(importance[f], nan=-1.0), present.index(f)))
    if facets is not None:
        unknown = [f for f in facets if f not in present]
        if unknown or len(facets) > 2:
            raise InputError(
                f"facets: expected at most two of the factors that vary ({', '.join(present) or 'none'}), "
                f"got {', '.join(facets)}"
            )
        chosen = list(facets)
    else:
        chosen = []
        for f in ranked:
            panels = int(np.prod([len(levels[c]) for c in [*chosen, f]]))
            if len(chosen) < 2 and len(levels[f]) > 1 and panels <= MAX_PANELS:
                chosen.append(f)
    colour = next((f for f in ranked if f not in chosen and len(levels[f]) <= MAX_COLOURS), None)
    if colour is None and chosen and len(levels[chosen[0]]) <= MAX_COLOURS:
        colour = chosen[0]
    return ReportDesign(
        tuple(present), levels, importance, tuple(chosen), colour, {k: str(v) for k, v in (constants or {}).items()}
    )
