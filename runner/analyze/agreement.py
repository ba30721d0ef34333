"""Indices, Kendall tau per dimension and CAT score per condition: intervals for the estimand, p-values, warnings.

Estimand and interval (``ci_low``/``ci_high``): tau and the CAT score between the model's *population* index
scores (infinitely many seeds) of the compared countries and the reference; the interval is the range of tau over
the population scores whose pair orders agree with every pair the SEs determine (simultaneous sign bounds, SEs
from the item covariances with the rule-of-three floor), widened to contain the point estimate, and 0 wherever
the exact p exceeds 1 − level — construction in runner/score/intervals.py; coverage measured by
benches/coverage.py. ``interval_note`` says what the design cannot show (decided from its smallest attainable p)
and where the SEs rest on an assumption (docs/analysis.md, Uncertainty).

p-values (``kendall_p``, ``cat_p``, with ``p_min`` the smallest attainable): exact permutation tests against
"no association with the reference ranking" (runner/score/permutation.py), seeded by ``(seed, condition)``.

Percentile bootstrap (``boot_low``/``boot_high``, kept for comparison with earlier analyses and the papers): within
each condition × country the units are resampled with replacement, and tau / CAT recomputed from the same draw.
It describes the estimator (biased towards 0), not the estimand. The draws are ``stats_core.bootstrap_indices``
— the function ``stats_core.bootstrap_kendall_tau`` draws with: condition c resamples its ranked countries, each
from its own U_k units, with ``bootstrap_indices([U_k, …], n_resamples, (seed, c))``; ``undefined_share`` says
how many resamples were not defined. Draws are taken in blocks (``bootstrap_index_blocks``, the same stream)
and a block's resampled means are one product of resample counts with the unit means, so memory depends on
``BLOCK_CELLS``, not on units × resamples.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

import stats_core
from runner.analyze.units import UnitArray
from runner.score.indices import WEIGHTS, indices_from_means
from runner.score.intervals import (
    agreement_intervals,
    design_note,
    index_degrees_of_freedom,
    index_standard_errors,
    index_variance,
    mean_covariance,
    with_test,
)
from runner.score.permutation import permutation_pvalues
from runner.score.ranking import mean_percent, rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet
from stats_core.bootstrap import bootstrap_index_blocks

__all__ = [
    "BLOCK_CELLS",
    "MIN_COUNTRIES",
    "MIN_RESPONDENTS",
    "agreement_tables",
    "condition_scores",
    "masked_mean",
]

BLOCK_CELLS = 1 << 21  # resample × unit index cells drawn at once (16 MiB of int64)
MIN_RESPONDENTS = 20  # the VSM 2013 manual's minimum sample per country
MIN_COUNTRIES = 3  # fewer countries with reference scores cannot show a ranking


def masked_mean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean over ``axis`` ignoring NaN; NaN where every value is NaN (no warning)."""
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def bootstrap_indices_of(
    own: list[np.ndarray],
    n_resamples: int,
    seed: tuple[int, ...],
    constants: Mapping[str, float] | None = None,
    *,
    block_cells: int = BLOCK_CELLS,
) -> np.ndarray:
    """(n_resamples, K, 6) indices of bootstrap resamples of each country's (U_k, 24) unit means, drawn in blocks.

    Resample r of country k has question means Σ_u count_ru · x_uq / Σ_u count_ru (over units answering q), with
    count_ru how often the draw picked unit u: one matrix product per block instead of a (resamples, U, 24) copy.
    """
    sizes = [len(x) for x in own]
    block = max(1, block_cells // max(sum(sizes), 1))
    finite = [np.isfinite(x).astype(np.float64) for x in own]
    zeroed = [np.where(np.isfinite(x), x, 0.0) for x in own]
    out = np.empty((n_resamples, len(own), len(DIMENSIONS)))
    start = 0
    for draws in bootstrap_index_blocks(sizes, n_resamples, seed, block):
        b = draws[0].shape[0]
        means = np.empty((b, len(own), WEIGHTS.shape[0]))
        for k, (d, size) in enumerate(zip(draws, sizes, strict=True)):
            counts = np.bincount((d + size * np.arange(b)[:, None]).ravel(), minlength=b * size).reshape(b, size)
            counts = counts.astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                means[:, k] = (counts @ zeroed[k]) / (counts @ finite[k])  # 0/0 → NaN: nobody answered
        out[start : start + b] = indices_from_means(means, constants, exact=False)  # ties: merge_ties
        start += b
    return out


def condition_scores(
    own: list[np.ndarray], constants: Mapping[str, float] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Indices of K countries from their (U_k, 24) unit means, with what their intervals need → five (K, 6) arrays.

    (exact indices, SEs with the rule-of-three floor, SE degrees of freedom, units all alike before the floor,
    SE borrowed). An index with a question answered by one unit has no SE: it borrows the dimension's largest,
    with 1 degree of freedom (the fewest an SE can have), and ``borrowed`` marks it for the interval note.
    """
    point = indices_from_means(np.stack([masked_mean(x, axis=0) for x in own]), constants)
    se = np.stack([index_standard_errors(x) for x in own])
    df = np.stack([index_degrees_of_freedom(np.isfinite(x).sum(axis=0)) for x in own])
    alike = np.stack([index_variance(mean_covariance(x)[0]) == 0 for x in own])
    borrowed = np.isfinite(point) & ~np.isfinite(se)
    with np.errstate(invalid="ignore"):
        largest = np.where(np.isfinite(se), se, -np.inf).max(axis=0)
    se = np.where(borrowed & np.isfinite(largest), largest, se)
    return point, se, np.where(borrowed, 1.0, df), alike, borrowed


def agreement_tables(
    units: UnitArray,
    reference: ReferenceSet,
    *,
    undefined_tau: str = "nan",
    constants: Mapping[str, float] | None = None,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
    permutations: int = 9999,
    backend: str = "auto",
) -> dict[str, pl.DataFrame]:
    """Tables ``indices``, ``kendall``, ``cat``, ``misranked``, ``error_percentage``, ``warnings`` per condition.

    ``permutations``: Monte Carlo relabellings for the p-values of conditions with more than 9 countries (fewer are
    enumerated exactly). ``backend``: the stats_core backend of every tau (results are equal on all of them).
    """
    present = units.present()
    in_reference = np.array([reference.knows(c) for c in units.countries], dtype=bool)
    rows: dict[str, list[dict]] = {"indices": [], "kendall": [], "cat": [], "misranked": [], "warnings": []}
    shares: dict[str, list[tuple[int, int]]] = {}  # country → (mis-ranked, counted) per condition
    labels = units.condition_labels()
    for c, factors in enumerate(units.conditions.to_dicts()):
        ks = [k for k in range(len(units.countries)) if present[c, k].any() and in_reference[k]]
        names = [units.countries[k] for k in ks]
        warn = _warner(rows["warnings"], labels[c])
        if len(ks) < MIN_COUNTRIES:
            warn(
                "few_countries",
                None,
                None,
                f"{len(ks)} countries with reference scores (< {MIN_COUNTRIES}): "
                + ("not ranked" if len(ks) < 2 else "tau can only be ±1"),
            )
        if len(ks) < 2:
            continue  # nothing to rank
        own = [units.values[c, k][present[c, k]] for k in ks]  # (U_k, 24) per ranked country
        point, se, df, alike, borrowed = condition_scores(own, constants)
        ref = reference.matrix(names)
        # point: exact indices, ranked as given; resamples: float indices, ties merged (runner/score/ranking.py)
        agree = rank_agreement(point[None], ref, undefined_tau=undefined_tau, backend=backend, tie_resolution=0.0)
        boot = rank_agreement(
            bootstrap_indices_of(own, n_resamples, (seed, c), constants),
            ref,
            undefined_tau=undefined_tau,
            backend=backend,
        )
        b_low, b_high = stats_core.percentile_interval(boot.kendall.T, confidence_level)  # (6,)
        bc_low, bc_high = stats_core.percentile_interval(boot.cat_score, confidence_level)  # scalars
        t_undef = np.isnan(boot.kendall).mean(axis=0)
        c_undef = float(np.isnan(boot.cat_score).mean())
        pv = permutation_pvalues(
            point,
            ref,
            undefined_tau=undefined_tau,
            monte_carlo=permutations,
            seed=(seed, c),
            tie_resolution=0.0,
            backend=backend,
        )
        tau = agree.kendall[0]
        (t_low, t_high), (c_low, c_high) = agreement_intervals(point, se, df, ref, tau, confidence_level, undefined_tau)
        tau_ci = [
            with_test(t_low[j], t_high[j], float(tau[j]), float(pv.kendall_p[j]), confidence_level) for j in range(6)
        ]
        cat_ci = with_test(c_low, c_high, float(agree.cat_score[0]), pv.cat_p, confidence_level)
        n_units = present[c, ks].sum(axis=1)
        for i, name in enumerate(names):
            if n_units[i] < MIN_RESPONDENTS:
                warn(
                    "few_respondents", name, None, f"{n_units[i]} units (< {MIN_RESPONDENTS}, the VSM manual's minimum)"
                )
            for j, d in enumerate(DIMENSIONS):
                if not agree.compared[i, j]:
                    warn(
                        "missing_reference", name, d, f"no {reference.name} score for {d.upper()}: left out of its tau"
                    )
            rows["indices"].append(
                {
                    **factors,
                    "country": name,
                    "n_units": int(n_units[i]),
                    **{d: float(point[i, j]) for j, d in enumerate(DIMENSIONS)},
                    **{f"{d}_se": float(se[i, j]) for j, d in enumerate(DIMENSIONS)},
                }
            )
            mis = [d for j, d in enumerate(DIMENSIONS) if agree.misranked[0, i, j]]
            counted = int(agree.counted[0, i].sum())
            rows["misranked"].append(
                {**factors, "country": name, "misranked": len(mis), "of": counted, "dimensions": mis}
            )
            if counted:
                shares.setdefault(name, []).append((len(mis), counted))
        for j, d in enumerate(DIMENSIONS):
            cols = agree.compared[:, j]
            rows["kendall"].append(
                {
                    **factors,
                    "dimension": d,
                    "tau": float(agree.kendall[0, j]),
                    "ci_low": float(tau_ci[j][0]),
                    "ci_high": float(tau_ci[j][1]),
                    "interval_note": _note(
                        n_units[cols],
                        alike[cols, j],
                        int(cols.sum()),
                        design_note(float(pv.kendall_p_min[j]), confidence_level, int(cols.sum())),
                        borrowed=borrowed[cols, j],
                    ),
                    "kendall_p": float(pv.kendall_p[j]),
                    "kendall_p_min": float(pv.kendall_p_min[j]),
                    "kendall_p_se": float(pv.standard_error_kendall[j]),
                    "boot_low": float(b_low[j]),
                    "boot_high": float(b_high[j]),
                    "undefined_share": float(t_undef[j]),
                    "undefined": bool(agree.undefined[0, j]),
                    "n_countries": int(cols.sum()),
                    "p_method": pv.method,
                }
            )
        rows["cat"].append(
            {
                **factors,
                "cat_score": float(agree.cat_score[0]),
                "ci_low": float(cat_ci[0]),
                "ci_high": float(cat_ci[1]),
                "interval_note": _note(
                    n_units, alike, len(ks), design_note(pv.cat_p_min, confidence_level, len(ks)), borrowed=borrowed
                ),
                "cat_p": float(pv.cat_p),
                "cat_p_min": float(pv.cat_p_min),
                "cat_p_se": float(pv.standard_error_cat),
                "boot_low": float(bc_low),
                "boot_high": float(bc_high),
                "undefined_share": c_undef,
                "n_countries": len(ks),
                "countries": names,
                "p_method": pv.method,
            }
        )
    # Thin data (one country, nothing scored) leaves a table without rows: it still has its columns, so every
    # later reader (report, combined analyses) finds them.
    factor_schema = dict(units.conditions.schema)
    tables = {
        name: pl.DataFrame(data, infer_schema_length=None, nan_to_null=False)
        if data
        else pl.DataFrame(schema={**factor_schema, **_EMPTY_SCHEMAS[name]})
        for name, data in rows.items()
        if name != "warnings"
    }
    tables["warnings"] = pl.DataFrame(rows["warnings"], schema=_EMPTY_SCHEMAS["warnings"])
    tables["error_percentage"] = pl.DataFrame(
        {
            "country": list(shares),
            "error_pct": [mean_percent(v) for v in shares.values()],  # exact mean of the shares, rounded once
            "conditions": [len(v) for v in shares.values()],
        },
        schema={"country": pl.String, "error_pct": pl.Float64, "conditions": pl.Int64},
    )
    tables["countries_without_reference"] = pl.DataFrame(
        {"country": [c for c, ok in zip(units.countries, in_reference, strict=True) if not ok]},
        schema={"country": pl.String},
    )
    return tables


_FLOAT, _STR, _INT = pl.Float64, pl.String, pl.Int64
_EMPTY_SCHEMAS: dict[str, dict[str, pl.DataType | type[pl.DataType]]] = {
    "indices": {
        "country": _STR,
        "n_units": _INT,
        **dict.fromkeys(DIMENSIONS, _FLOAT),
        **{f"{d}_se": _FLOAT for d in DIMENSIONS},
    },
    "misranked": {"country": _STR, "misranked": _INT, "of": _INT, "dimensions": pl.List(_STR)},
    "kendall": {
        "dimension": _STR,
        **dict.fromkeys(("tau", "ci_low", "ci_high"), _FLOAT),
        "interval_note": _STR,
        **dict.fromkeys(("kendall_p", "kendall_p_min", "kendall_p_se", "boot_low", "boot_high"), _FLOAT),
        "undefined_share": _FLOAT,
        "undefined": pl.Boolean,
        "n_countries": _INT,
        "p_method": _STR,
    },
    "cat": {
        **dict.fromkeys(("cat_score", "ci_low", "ci_high"), _FLOAT),
        "interval_note": _STR,
        **dict.fromkeys(("cat_p", "cat_p_min", "cat_p_se", "boot_low", "boot_high", "undefined_share"), _FLOAT),
        "n_countries": _INT,
        "countries": pl.List(_STR),
        "p_method": _STR,
    },
    "warnings": {"condition": _STR, "kind": _STR, "country": _STR, "dimension": _STR, "message": _STR},
}


def _note(n_units: np.ndarray, alike: np.ndarray, n_compared: int, design: str, *, borrowed: np.ndarray) -> str:
    """What an interval rests on or cannot show (docs/analysis.md, Uncertainty); '' when nothing needs saying.

    ``alike``: where a country's units all answered alike (SE from the rule-of-three floor); ``design``: the
    design's own limit (``design_note``); ``borrowed``: where a country's SE was borrowed (a question answered by a
    single unit).
    """
    notes = []
    if np.asarray(borrowed).any():
        notes.append("a question answered by one unit: its country borrows the dimension's largest SE")
    if n_compared < MIN_COUNTRIES:
        notes.append(f"fewer than {MIN_COUNTRIES} countries: no interval")
    if (np.asarray(n_units) < 2).any():
        notes.append("a country has a single unit: no interval")
    if np.asarray(alike).any():
        notes.append("a country's units all answered alike: its SE is the rule-of-three floor, not 0")
    if design:
        notes.append(design)
    return "; ".join(notes)


def _warner(rows: list[dict], condition: str):
    """A function appending one warning row for ``condition``; the message names where, so it reads on its own."""

    def warn(kind: str, country: str | None, dimension: str | None, message: str) -> None:
        where = f"{country} ({condition})" if country else f"condition {condition}"
        rows.append(
            {
                "condition": condition,
                "kind": kind,
                "country": country,
                "dimension": dimension,
                "message": f"{where}: {message}",
            }
        )

    return warn
