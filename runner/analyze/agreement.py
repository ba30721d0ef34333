"""Indices, Kendall tau per dimension and CAT score per condition, with bootstrap intervals over units.

Within each condition × country the units (seeds, identities) are resampled with replacement, the question
means and indices recomputed, and tau / CAT recomputed for every resample (one batched ``rank_agreement`` call
per condition, so tau and CAT of a resample come from the same draw). Intervals are percentile intervals over
the resamples whose value is defined; ``undefined_share`` says how many were not. Resample streams are
``default_rng(SeedSequence([seed, condition index]))``: the same seed reproduces every interval.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from runner.analyze.units import UnitArray
from runner.dimensions import DIMENSIONS
from runner.errors import UnknownCountryError
from runner.ranking import rank_agreement
from runner.reference import ReferenceSet
from runner.scoring import indices_from_means

__all__ = ["agreement_tables", "masked_mean"]


def masked_mean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean over ``axis`` ignoring NaN; NaN where every value is NaN (no warning)."""
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _interval(samples: np.ndarray, confidence_level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile interval over axis 0 of the finite samples → (low, high, undefined share)."""
    alpha = (1.0 - confidence_level) / 2.0
    finite = np.isfinite(samples)
    low = np.full(samples.shape[1:], np.nan)
    high = np.full(samples.shape[1:], np.nan)
    for idx in np.ndindex(samples.shape[1:]):
        column = samples[(slice(None), *idx)][finite[(slice(None), *idx)]]
        if column.size:
            low[idx], high[idx] = np.quantile(column, [alpha, 1.0 - alpha])
    return low, high, 1.0 - finite.mean(axis=0)


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
        rng = np.random.default_rng(np.random.SeedSequence([seed, c]))
        boot_means = np.empty((n_resamples, len(ks), 24))
        for i, k in enumerate(ks):
            own = units.values[c, k][present[c, k]]  # (U_k, 24)
            draws = rng.integers(0, own.shape[0], size=(n_resamples, own.shape[0]))
            boot_means[:, i] = masked_mean(own[draws], axis=1)
        boot = rank_agreement(indices_from_means(boot_means, constants), ref, undefined_tau=undefined_tau)
        t_low, t_high, t_undef = _interval(boot.kendall, confidence_level)
        c_low, c_high, c_undef = _interval(boot.cat_score[:, None], confidence_level)
        for i, name in enumerate(names):
            n_units = int(present[c, ks[i]].sum())
            rows["indices"].append({**factors, "country": name, "n_units": n_units,
                                    **{d: float(point[i, j]) for j, d in enumerate(DIMENSIONS)}})
            mis = [d for j, d in enumerate(DIMENSIONS) if agree.misranked[0, i, j]]
            rows["misranked"].append({**factors, "country": name, "misranked": len(mis),
                                      "of": int(agree.counted[0, i].sum()), "dimensions": mis})
            share = agree.misranked_share[0, i]
            if np.isfinite(share):
                shares.setdefault(name, []).append(float(share))
        for j, d in enumerate(DIMENSIONS):
            rows["kendall"].append({**factors, "dimension": d, "tau": float(agree.kendall[0, j]),
                                    "ci_low": float(t_low[j]), "ci_high": float(t_high[j]),
                                    "undefined_share": float(t_undef[j]), "undefined": bool(agree.undefined[0, j]),
                                    "n_countries": int(agree.compared[:, j].sum())})
        rows["cat"].append({**factors, "cat_score": float(agree.cat_score[0]), "ci_low": float(c_low[0]),
                            "ci_high": float(c_high[0]), "undefined_share": float(c_undef[0]),
                            "n_countries": len(ks), "countries": names})
    tables = {name: pl.DataFrame(data, infer_schema_length=None, nan_to_null=False) for name, data in rows.items()}
    tables["error_percentage"] = pl.DataFrame(
        {"country": list(shares), "error_pct": [100.0 * float(np.mean(v)) for v in shares.values()],
         "conditions": [len(v) for v in shares.values()]},
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
