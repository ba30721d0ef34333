"""From validated per-question means to the CAT result: indices, tau per dimension, CAT score, mis-ranks.

The result is a plain dict (the JSON that ``hofcat score`` prints) that always carries the reference set,
the undefined-tau policy and the constants used, so that a number never travels without its definition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from runner.score.indices import indices_from_means
from runner.score.means_file import MeansTable
from runner.score.ranking import rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet

__all__ = ["render_table", "score_means"]

FORMULA_NOTE = "VSM 2013 official coefficients (MAS = 35(m05 - m03) + 35(m08 - m10))"


def score_means(
    table: MeansTable,
    reference: ReferenceSet,
    *,
    undefined_tau: str = "nan",
    constants: Mapping[str, float] | None = None,
) -> dict[str, object]:
    """JSON-ready result for every group of ``table``; groups with the same countries are ranked in one batch."""
    batches: dict[tuple[str, ...], list[int]] = {}
    for g, countries in enumerate(table.countries):
        batches.setdefault(countries, []).append(g)
    out: list[dict[str, object] | None] = [None] * len(table.groups)
    for countries, members in batches.items():
        indices = indices_from_means(np.stack([table.means[g] for g in members]), constants)
        ref = reference.matrix(countries)
        agreement = rank_agreement(indices, ref, undefined_tau=undefined_tau)
        for b, g in enumerate(members):
            out[g] = {
                "group": table.groups[g],
                "countries": list(countries),
                "indices": {c: _dims(indices[b, k]) for k, c in enumerate(countries)},
                "kendall": _dims(agreement.kendall[b]),
                "kendall_undefined": [d for j, d in enumerate(DIMENSIONS) if agreement.undefined[b, j]],
                "cat_score": _num(agreement.cat_score[b]),
                "misranked": {
                    c: {
                        "count": int(agreement.misranked[b, k].sum()),
                        "of": int(agreement.counted[b, k].sum()),
                        "dimensions": [d for j, d in enumerate(DIMENSIONS) if agreement.misranked[b, k, j]],
                    }
                    for k, c in enumerate(countries)
                },
                "excluded_no_reference": {
                    d: [c for k, c in enumerate(countries) if not agreement.compared[k, j]]
                    for j, d in enumerate(DIMENSIONS)
                    if not agreement.compared[:, j].all()
                },
            }
    return {
        "reference": reference.to_dict(),
        "undefined_tau": undefined_tau,
        "constants": {d: float((constants or {}).get(d, 0.0)) for d in DIMENSIONS},
        "formula": FORMULA_NOTE,
        "means_file": table.path,
        "groups": out,
    }


def render_table(result: Mapping[str, object]) -> str:
    """A plain-text view of ``score_means``'s result: per group, indices by country, then tau and CAT."""
    ref = result["reference"]
    lines = [f"reference: {ref['name']}   undefined tau: {result['undefined_tau']}   {result['formula']}"]
    head = f"{'':24}" + "".join(f"{d.upper():>8}" for d in DIMENSIONS)
    for group in result["groups"]:
        lines += ["", f"group: {group['group']}", head]
        for country, scores in group["indices"].items():
            mis = group["misranked"][country]
            lines.append(
                f"{country:24.24}"
                + "".join(_cell(scores[d], ".1f") for d in DIMENSIONS)
                + f"   mis-ranked {mis['count']}/{mis['of']}"
            )
        lines.append(f"{'Kendall tau-b':24}" + "".join(_cell(group["kendall"][d], ".2f") for d in DIMENSIONS))
        cat = group["cat_score"]
        lines.append(f"CAT score: {'N/A' if cat is None else format(cat, '.2f')}")
        for dim, countries in group["excluded_no_reference"].items():
            lines.append(f"  {dim.upper()}: no reference score for {', '.join(countries)} (left out)")
    return "\n".join(lines)


def _dims(row: np.ndarray) -> dict[str, float | None]:
    """One row of six values as ``{dim: value}`` with NaN → None (JSON null)."""
    return {d: _num(v) for d, v in zip(DIMENSIONS, row, strict=True)}


def _num(value: float) -> float | None:
    """A float for JSON; NaN → None."""
    value = float(value)
    return None if math.isnan(value) else value


def _cell(value: float | None, fmt: str) -> str:
    """One right-aligned table cell; None → N/A."""
    return f"{'N/A' if value is None else format(value, fmt):>8}"
