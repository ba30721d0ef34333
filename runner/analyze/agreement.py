"""Indices, Kendall tau per dimension and CAT score per condition, with bootstrap intervals over units.

Within each condition × country the units (seeds, identities) are resampled with replacement, the question
means and indices recomputed, and tau / CAT recomputed for every resample (one batched ``rank_agreement`` call
per condition, tau-b by ``stats_core.kendall_tau``, so tau and CAT of a resample come from the same draw).

The draws are ``stats_core.bootstrap_indices`` — the function ``stats_core.bootstrap_kendall_tau`` draws with:
condition c (its row in ``UnitArray.conditions``) resamples its ranked countries (those with units and a
reference score, in ``UnitArray.countries`` order), each from its own U_k units, with
``bootstrap_indices([U_k, …], n_resamples, (seed, c))``, i.e. ``default_rng(SeedSequence([seed, c]))`` country
after country. Each condition has its own stream, so adding a condition changes no other interval; the same
seed reproduces every interval. (numpy zero-pads short entropy, so condition 0 draws exactly what
``bootstrap_kendall_tau(seed=seed)`` draws.) Intervals are ``stats_core.percentile_interval`` over the resamples
whose value is defined; ``undefined_share`` says how many were not.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

import stats_core
from runner.analyze.units import UnitArray
from runner.errors import UnknownCountryError
from runner.score.indices import indices_from_means
from runner.score.ranking import rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet

__all__ = ["agreement_tables", "masked_mean"]


def masked_mean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean over ``axis`` ignoring NaN; NaN where every value is NaN (no warning)."""
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def agreement_tables(
    units: UnitArray,
    reference: ReferenceSet,
    *,
    undefined_tau: str = "nan",
    constants: Mapping[str, float] | None = None,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> dict[str, pl.DataFrame]:
    """Tables ``indices``, ``kendall``, ``cat``, ``misranked`` and ``error_percentage`` for every condition."""
    present = units.present()
    in_reference = np.array([_known(reference, c) for c in units.countries], dtype=bool)
    rows: dict[str, list[dict]] = {"indices": [], "kendall": [], "cat": [], "misranked": []}
    shares: dict[str, list[float]] = {}
    factor_rows = units.conditions.to_dicts()
    for c, factors in enumerate(factor_rows):
        ks = [k for k in range(len(units.countries)) if present[c, k].any() and in_reference[k]]
        names = [units.countries[k] for k in ks]
        if len(ks) < 2:
            continue  # nothing to rank
        point_means = np.stack([masked_mean(units.values[c, k], axis=0) for k in ks])
        point = indices_from_means(point_means, constants)
        ref = reference.matrix(names)
        agree = rank_agreement(point[None], ref, undefined_tau=undefined_tau)
        own = [units.values[c, k][present[c, k]] for k in ks]  # (U_k, 24) per ranked country
        draws = stats_core.bootstrap_indices([len(x) for x in own], n_resamples, (seed, c))
        boot_means = np.stack([masked_mean(x[d], axis=1) for x, d in zip(own, draws, strict=True)], axis=1)
        boot = rank_agreement(indices_from_means(boot_means, constants), ref, undefined_tau=undefined_tau)
        t_low, t_high = stats_core.percentile_interval(boot.kendall.T, confidence_level)  # (6,)
        c_low, c_high = stats_core.percentile_interval(boot.cat_score, confidence_level)  # scalars
        t_undef = np.isnan(boot.kendall).mean(axis=0)
        c_undef = float(np.isnan(boot.cat_score).mean())
        for i, name in enumerate(names):
            n_units = int(present[c, ks[i]].sum())
            rows["indices"].append(
                {
                    **factors,
                    "country": name,
                    "n_units": n_units,
                    **{d: float(point[i, j]) for j, d in enumerate(DIMENSIONS)},
                }
            )
            mis = [d for j, d in enumerate(DIMENSIONS) if agree.misranked[0, i, j]]
            rows["misranked"].append(
                {
                    **factors,
                    "country": name,
                    "misranked": len(mis),
                    "of": int(agree.counted[0, i].sum()),
                    "dimensions": mis,
                }
            )
            share = agree.misranked_share[0, i]
            if np.isfinite(share):
                shares.setdefault(name, []).append(float(share))
        for j, d in enumerate(DIMENSIONS):
            rows["kendall"].append(
                {
                    **factors,
                    "dimension": d,
                    "tau": float(agree.kendall[0, j]),
                    "ci_low": float(t_low[j]),
                    "ci_high": float(t_high[j]),
                    "undefined_share": float(t_undef[j]),
                    "undefined": bool(agree.undefined[0, j]),
                    "n_countries": int(agree.compared[:, j].sum()),
                }
            )
        rows["cat"].append(
            {
                **factors,
                "cat_score": float(agree.cat_score[0]),
                "ci_low": float(c_low),
                "ci_high": float(c_high),
                "undefined_share": c_undef,
                "n_countries": len(ks),
                "countries": names,
            }
        )
    tables = {name: pl.DataFrame(data, infer_schema_length=None, nan_to_null=False) for name, data in rows.items()}
    tables["error_percentage"] = pl.DataFrame(
        {
            "country": list(shares),
            "error_pct": [100.0 * float(np.mean(v)) for v in shares.values()],
            "conditions": [len(v) for v in shares.values()],
        },
        schema={"country": pl.String, "error_pct": pl.Float64, "conditions": pl.Int64},
    )
    tables["countries_without_reference"] = pl.DataFrame(
        {"country": [c for c, ok in zip(units.countries, in_reference, strict=True) if not ok]},
        schema={"country": pl.String},
    )
    return tables


def _known(reference: ReferenceSet, country: str) -> bool:
    """Whether ``country`` resolves in ``reference``."""
    try:
        reference.resolve(country)
    except UnknownCountryError:
        return False
    return True
