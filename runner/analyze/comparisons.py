"""Comparisons between conditions: tau per dimension and the CAT score of condition A minus condition B.

Pairs: the conditions that differ in exactly one factor (``set_pairs``: model A vs model B at the same language,
persona and sampling; English vs Chinese for the same model; …), ranked over the countries both answered that
have reference scores — paired, the same countries on both sides. Difference, exact paired swap p-value and
interval: runner/score/compare.py; the p-values are adjusted per family (``kendall_differences.p``,
``cat_differences.p``; runner/analyze/multiplicity.py). Pairs sharing fewer than ``MIN_COUNTRIES`` countries keep
their row, with no statistic and a note saying why.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from runner.analyze.agreement import MIN_COUNTRIES, condition_scores
from runner.analyze.sets import set_pairs
from runner.analyze.units import UnitArray
from runner.errors import InputError
from runner.score.compare import condition_difference
from runner.score.intervals import design_note
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet

__all__ = ["compare_conditions", "comparison_tables", "pair_rows"]

_COLUMNS = {
    "condition_a": pl.String,
    "condition_b": pl.String,
    "factor": pl.String,
    "a": pl.Float64,
    "b": pl.Float64,
    "difference": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p": pl.Float64,
    "p_min": pl.Float64,
    "p_method": pl.String,
    "n_countries": pl.Int64,
    "note": pl.String,
}
_DIMENSION_COLUMNS = {**dict(list(_COLUMNS.items())[:3]), "dimension": pl.String, **dict(list(_COLUMNS.items())[3:])}


def comparison_tables(
    units: UnitArray,
    reference: ReferenceSet,
    *,
    undefined_tau: str = "nan",
    constants: Mapping[str, float] | None = None,
    confidence_level: float = 0.95,
    seed: int = 0,
    permutations: int = 9999,
) -> dict[str, pl.DataFrame]:
    """Tables ``kendall_differences`` (pair × dimension) and ``cat_differences`` (pair), A − B over shared countries.

    ``permutations``: Monte Carlo swaps beyond 12 shared countries, drawn from ``(seed, a, b)``.
    """
    kendall_rows: list[dict] = []
    cat_rows: list[dict] = []
    for a, b, factor in set_pairs(units):
        rows = pair_rows(
            units, reference, (a, b), factor, undefined_tau, constants, confidence_level, seed, permutations
        )
        kendall_rows += rows[:-1]
        cat_rows.append(rows[-1])
    return {
        "kendall_differences": pl.DataFrame(kendall_rows, schema=_DIMENSION_COLUMNS, nan_to_null=False),
        "cat_differences": pl.DataFrame(cat_rows, schema=_COLUMNS, nan_to_null=False),
    }


def pair_rows(
    units: UnitArray,
    reference: ReferenceSet,
    pair: tuple[int, int],
    factor: str,
    undefined_tau: str = "nan",
    constants: Mapping[str, float] | None = None,
    confidence_level: float = 0.95,
    seed: int = 0,
    permutations: int = 9999,
) -> list[dict]:
    """Conditions ``pair`` = (a, b) of ``units`` compared: six rows (one per dimension, ``dimension`` set), then the
    CAT row; statistics null with a ``note`` when they share fewer than ``MIN_COUNTRIES`` countries."""
    a, b = pair
    answered = units.present()  # (C, K, U)
    known = np.array([reference.knows(c) for c in units.countries], dtype=bool)
    labels = units.condition_labels()
    ks = np.flatnonzero(answered[a].any(axis=1) & answered[b].any(axis=1) & known)
    head = {"condition_a": labels[a], "condition_b": labels[b], "factor": factor, "n_countries": len(ks)}
    if len(ks) < MIN_COUNTRIES:
        note = f"{len(ks)} shared countries with reference scores (< {MIN_COUNTRIES}): not compared"
        return [{**head, "dimension": d, "note": note} for d in DIMENSIONS] + [{**head, "note": note}]
    scored = [condition_scores([units.values[c, k][answered[c, k]] for k in ks], constants) for c in (a, b)]
    diff = condition_difference(
        (scored[0][0], scored[1][0]),
        ((scored[0][1], scored[0][2]), (scored[1][1], scored[1][2])),
        reference.matrix([units.countries[k] for k in ks]),
        level=confidence_level,
        undefined_tau=undefined_tau,
        monte_carlo=permutations,
        seed=(seed, a, b),
    )
    method = diff.method if diff.method == "exact" else f"monte-carlo ({diff.swaps} swaps)"
    rows = [
        {
            **head,
            "dimension": d,
            "a": float(diff.tau_a[j]),
            "b": float(diff.tau_b[j]),
            "difference": float(diff.difference[j]),
            "ci_low": float(diff.low[j]),
            "ci_high": float(diff.high[j]),
            "p": float(diff.p[j]),
            "p_min": float(diff.p_min[j]),
            "p_method": method,
            "note": design_note(float(diff.p_min[j]), confidence_level, len(ks)),
        }
        for j, d in enumerate(DIMENSIONS)
    ]
    rows.append(
        {
            **head,
            "a": diff.cat_a,
            "b": diff.cat_b,
            "difference": diff.cat_difference,
            "ci_low": diff.cat_low,
            "ci_high": diff.cat_high,
            "p": diff.cat_p,
            "p_min": diff.cat_p_min,
            "p_method": method,
            "note": design_note(diff.cat_p_min, confidence_level, len(ks)),
        }
    )
    return rows


def compare_conditions(
    units: UnitArray,
    reference: ReferenceSet,
    a: Mapping[str, object],
    b: Mapping[str, object],
    **choices: object,
) -> pl.DataFrame:
    """Any two conditions of ``units``, each named by factor values (``{"model": "m1"}``; a factor left out must
    not vary among the matching conditions): one row per dimension and a ``cat`` row (``dimension`` = "cat").

    ``choices``: ``pair_rows``' keywords (undefined_tau, constants, confidence_level, seed, permutations).
    """
    conditions = units.conditions.to_dicts()
    picked = []
    for name, want in (("a", a), ("b", b)):
        unknown = sorted(set(want) - set(units.conditions.columns))
        if unknown:
            factors = ", ".join(c for c in units.conditions.columns if c != "_all") or "none"
            raise InputError(f"condition {name}: {', '.join(unknown)} is not a factor of this analysis ({factors})")
        match = [c for c, row in enumerate(conditions) if all(str(row[f]) == str(v) for f, v in want.items())]
        if len(match) != 1:
            raise InputError(f"condition {name} {dict(want)}: matches {len(match)} conditions, not exactly one")
        picked.append(match[0])
    factor = "/".join(f for f in units.conditions.columns if conditions[picked[0]][f] != conditions[picked[1]][f])
    rows = pair_rows(units, reference, (picked[0], picked[1]), factor or "none", **choices)  # type: ignore[arg-type]
    rows[-1]["dimension"] = "cat"
    return pl.DataFrame(rows, schema=_DIMENSION_COLUMNS, nan_to_null=False)
