"""From validated per-question means to the CAT result: indices, tau per dimension, CAT score, mis-ranks.

The result is a plain dict (the JSON that ``hofcat score`` prints) that always carries the reference set,
the undefined-tau policy and the constants used, so that a number never travels without its definition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from runner.score.indices import WEIGHTS, indices_from_means
from runner.score.intervals import (
    agreement_intervals,
    design_note,
    floored_covariance,
    index_degrees_of_freedom,
    index_variance,
    with_test,
)
from runner.score.means_file import MeansTable
from runner.score.permutation import PermutationP, permutation_pvalues
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
    permutations: int = 9999,
    seed: int = 0,
    confidence_level: float = 0.95,
) -> dict[str, object]:
    """JSON-ready result for every group of ``table``; groups with the same countries are ranked in one batch.

    p-values (``kendall_p``, ``cat_p``; runner/score/permutation.py) are exact for up to 9 countries, otherwise
    from ``permutations`` relabellings drawn from ``(seed, group number)``. When the file gives ``std`` and ``n``
    for every mean of a group, ``kendall_ci`` and ``cat_ci`` are intervals for the population tau / CAT score
    (runner/score/intervals.py) at ``confidence_level``, the items taken as uncorrelated; otherwise null.
    """
    batches: dict[tuple[str, ...], list[int]] = {}
    for g, countries in enumerate(table.countries):
        batches.setdefault(countries, []).append(g)
    out: list[dict[str, object] | None] = [None] * len(table.groups)
    for countries, members in batches.items():
        indices = indices_from_means(np.stack([table.means[g] for g in members]), constants)
        ref = reference.matrix(countries)
        agreement = rank_agreement(indices, ref, undefined_tau=undefined_tau, tie_resolution=0.0)
        for b, g in enumerate(members):
            pv = permutation_pvalues(
                indices[b],
                ref,
                undefined_tau=undefined_tau,
                monte_carlo=permutations,
                seed=(seed, g),
                tie_resolution=0.0,
            )
            kendall_ci, cat_ci = _intervals(
                table,
                g,
                indices[b],
                ref,
                (agreement.kendall[b], agreement.cat_score[b]),
                pv,
                undefined_tau,
                confidence_level,
            )
            out[g] = {
                "group": table.groups[g],
                "countries": list(countries),
                "indices": {c: _dims(indices[b, k]) for k, c in enumerate(countries)},
                "kendall": _dims(agreement.kendall[b]),
                "kendall_ci": kendall_ci,
                "kendall_p": _dims(pv.kendall_p),
                "kendall_p_min": _dims(pv.kendall_p_min),
                "kendall_undefined": [d for j, d in enumerate(DIMENSIONS) if agreement.undefined[b, j]],
                "cat_score": _num(agreement.cat_score[b]),
                "cat_ci": cat_ci,
                "cat_ci_note": design_note(pv.cat_p_min, confidence_level, len(countries))
                if cat_ci is not None
                else "",
                "cat_p": _num(pv.cat_p),
                "cat_p_min": _num(pv.cat_p_min),
                "p_method": pv.method if pv.method == "exact" else f"monte-carlo ({pv.relabellings} relabellings)",
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
                "excluded_missing_means": _missing(table.means[g], countries),
            }
    return {
        "reference": reference.to_dict(),
        "undefined_tau": undefined_tau,
        "constants": {d: float((constants or {}).get(d, 0.0)) for d in DIMENSIONS},
        "formula": FORMULA_NOTE,
        "intervals": {  # what kendall_ci / cat_ci estimate, so that an interval never travels without it
            "estimand": "tau / CAT score between the population index scores (infinitely many seeds) and the reference",
            "method": (
                "simultaneous sign bounds from std and n (rule-of-three variance floor), containing the estimate, "
                "and 0 where the exact p exceeds 1 - level (runner/score/intervals.py)"
            ),
            "level": confidence_level,
        },
        "p_values": "two-sided permutation p of |tau| (|CAT|) over country relabellings; exact = all n! enumerated",
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
        if group["kendall_ci"] is not None:
            for side, label in ((0, "  interval low"), (1, "  interval high")):
                lines.append(f"{label:24}" + "".join(_cell(group["kendall_ci"][d][side], ".2f") for d in DIMENSIONS))
        lines.append(f"{'  p (permutation)':24}" + "".join(_cell(group["kendall_p"][d], ".3g") for d in DIMENSIONS))
        lines.append(
            f"{'  smallest attainable p':24}" + "".join(_cell(group["kendall_p_min"][d], ".3g") for d in DIMENSIONS)
        )
        cat = group["cat_score"]
        p, p_min = group["cat_p"], group["cat_p_min"]
        lines.append(
            f"CAT score: {'N/A' if cat is None else format(cat, '.2f')}"
            + ("" if group["cat_ci"] is None else f" {_pair(group['cat_ci'])}")
            + ("" if p is None else f"   p = {p:.3g} (smallest attainable {p_min:.3g}; {group['p_method']})")
        )
        if group["cat_ci_note"]:
            lines.append(f"  interval: {group['cat_ci_note']}")
        for dim, countries in group["excluded_no_reference"].items():
            lines.append(f"  {dim.upper()}: no reference score for {', '.join(countries)} (left out)")
        for dim, gaps in group["excluded_missing_means"].items():
            text = ", ".join(f"{c} (Q{', Q'.join(map(str, qs))})" for c, qs in gaps.items())
            lines.append(f"  {dim.upper()}: not scored, a mean is missing for {text}")
    return "\n".join(lines)


def _intervals(
    table: MeansTable,
    g: int,
    indices: np.ndarray,
    ref: np.ndarray,
    point: tuple[np.ndarray, float],
    pv: PermutationP,
    undefined_tau: str,
    level: float,
) -> tuple[dict[str, list[float | None] | None] | None, list[float | None] | None]:
    """Group g's intervals from its std and n (None when any is missing): SE² of a mean = std² / (n − 1).

    ``std`` is the papers' population SD (ddof 0), so std²·n/(n − 1) is the sample variance and std²/(n − 1) the
    variance of the mean, floored where the answers never varied (``floored_covariance``); the covariances between
    items are not published, so they are taken as 0. ``point``: the group's (6,) taus and CAT score; the intervals
    are made consistent with its exact p-values ``pv`` (``with_test``).
    """
    tau, cat_point = point
    std, n = table.std[g], table.n[g]
    if not (np.isfinite(std).all() and np.isfinite(n).all() and (n >= 2).all()):
        return None, None
    cov = np.stack(
        [floored_covariance(np.diag(row**2 / (count - 1)), count) for row, count in zip(std, n, strict=True)]
    )
    se = np.sqrt(index_variance(cov))
    df = index_degrees_of_freedom(n)
    (low, high), (c_low, c_high) = agreement_intervals(indices, se, df, ref, tau, level, undefined_tau)
    kendall = [with_test(low[j], high[j], tau[j], pv.kendall_p[j], level) for j in range(len(DIMENSIONS))]
    cat = with_test(c_low, c_high, float(cat_point), pv.cat_p, level)
    return (
        {d: [_num(kendall[j][0]), _num(kendall[j][1])] for j, d in enumerate(DIMENSIONS)},
        [_num(cat[0]), _num(cat[1])],
    )


def _missing(means: np.ndarray, countries: tuple[str, ...]) -> dict[str, dict[str, list[int]]]:
    """Per dimension, the countries left out because a mean it needs is missing, with those questions."""
    out: dict[str, dict[str, list[int]]] = {}
    for j, d in enumerate(DIMENSIONS):
        for k, c in enumerate(countries):
            gaps = [int(q) + 1 for q in np.flatnonzero((WEIGHTS[:, j] != 0) & np.isnan(means[k]))]
            if gaps:
                out.setdefault(d, {})[c] = gaps
    return out


def _dims(row: np.ndarray) -> dict[str, float | None]:
    """One row of six values as ``{dim: value}`` with NaN → None (JSON null)."""
    return {d: _num(v) for d, v in zip(DIMENSIONS, row, strict=True)}


def _num(value: float) -> float | None:
    """A float for JSON; NaN → None."""
    value = float(value)
    return None if math.isnan(value) else value


def _pair(limits: list[float | None]) -> str:
    """An interval as '[low, high]' with two decimals; '[N/A]' when undefined."""
    return "[N/A]" if None in limits else f"[{limits[0]:.2f}, {limits[1]:.2f}]"


def _cell(value: float | None, fmt: str) -> str:
    """One right-aligned table cell; None → N/A."""
    return f"{'N/A' if value is None else format(value, fmt):>8}"
