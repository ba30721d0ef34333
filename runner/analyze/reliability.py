"""Reliability per condition: Cronbach's alpha of each dimension's four items, and the agreement of repeated seeds.

- Cronbach's alpha (Cronbach 1951): α = k/(k − 1)·(1 − Σ var(item) / var(Σ items)), ddof 1, over the complete
  rows. A dimension's items are its four questions, the minus-signed ones reversed (−answer), so that every item
  points the way the index does. Two levels: ``units`` (every unit of the condition, all countries pooled — the
  respondent-level scale) and ``countries`` (the country means, ≥ 3 countries — the level at which the VSM
  manual validates its dimensions). The VSM13's four-item scales are known for low alpha.
- Agreement of repeated seeds: the one-way random-effects intraclass correlation (Shrout & Fleiss 1979, ICC(1)
  and ICC(1,k)) with the (country, question) items as subjects and the units as repeated measurements:
  MSB and MSW from a one-way ANOVA of the unit answers by item, k0 = (N − Σ n_i²/N)/(S − 1) for unequal counts;
  ICC(1) = (MSB − MSW)/(MSB + (k0 − 1)·MSW) is the agreement of two single seeds, ICC(1,k) = (MSB − MSW)/MSB
  the reliability of the seed-averaged means the analysis ranks. Items answered by fewer than two units are left
  out; 1 when every item was answered identically by all its seeds and items differ; NaN when nothing varies.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from runner.analyze.agreement import masked_mean
from runner.analyze.units import UnitArray
from runner.score.indices import WEIGHTS
from runner.survey.dimensions import DIMENSIONS

__all__ = ["cronbach_alpha", "icc_oneway", "reliability_table"]


def cronbach_alpha(items: np.ndarray) -> float:
    """Alpha of (n, k) item scores over the rows without NaN; NaN when fewer than 2 such rows or no total variance."""
    x = np.asarray(items, dtype=np.float64)
    x = x[np.isfinite(x).all(axis=1)]
    k = x.shape[1]
    if x.shape[0] < 2 or k < 2:
        return float("nan")
    total = x.sum(axis=1).var(ddof=1)
    if total == 0:
        return float("nan")
    return float(k / (k - 1) * (1.0 - x.var(axis=0, ddof=1).sum() / total))


def icc_oneway(groups: list[np.ndarray]) -> tuple[float, float, int]:
    """(ICC(1), ICC(1,k), subjects used) of one-way data: one 1-D array of repeated measurements per subject."""
    used = [np.asarray(g, dtype=np.float64) for g in groups]
    used = [g[np.isfinite(g)] for g in used]
    used = [g for g in used if g.size >= 2]
    s = len(used)
    if s < 2:
        return float("nan"), float("nan"), s
    n = np.array([g.size for g in used], dtype=np.float64)
    total = n.sum()
    means = np.array([g.mean() for g in used])
    grand = float(np.concatenate(used).mean())
    msb = float((n * (means - grand) ** 2).sum() / (s - 1))
    msw = float(sum(((g - m) ** 2).sum() for g, m in zip(used, means, strict=True)) / (total - s))
    k0 = (total - (n**2).sum() / total) / (s - 1)
    if msb == 0 and msw == 0:
        return float("nan"), float("nan"), s
    return (msb - msw) / (msb + (k0 - 1.0) * msw), (msb - msw) / msb if msb > 0 else float("nan"), s


def reliability_table(units: UnitArray) -> pl.DataFrame:
    """Per condition: alpha per dimension (``units`` and ``countries`` levels) and the seeds' ICC(1), ICC(1,k).

    Long rows ``factors…, measure, dimension, value, n`` (``n``: rows for alpha, items for the ICC; dimension
    null for the ICC).
    """
    present = units.present()
    rows = []
    signs = np.sign(WEIGHTS)  # (24, 6)
    for c, factors in enumerate(units.conditions.to_dicts()):
        ks = [k for k in range(len(units.countries)) if present[c, k].any()]
        if not ks:
            continue
        pooled = np.concatenate([units.values[c, k][present[c, k]] for k in ks])  # (units, 24)
        country_means = np.stack([masked_mean(units.values[c, k][present[c, k]], axis=0) for k in ks])
        for j, d in enumerate(DIMENSIONS):
            q = np.flatnonzero(signs[:, j])
            for level, data in (("units", pooled), ("countries", country_means)):
                if level == "countries" and len(ks) < 3:
                    continue
                items = data[:, q] * signs[q, j]
                rows.append(
                    {
                        **factors,
                        "measure": f"cronbach_alpha_{level}",
                        "dimension": d,
                        "value": cronbach_alpha(items),
                        "n": int(np.isfinite(items).all(axis=1).sum()),
                    }
                )
        groups = [units.values[c, k][present[c, k], q] for k in ks for q in range(units.values.shape[3])]
        single, averaged, subjects = icc_oneway(groups)
        for measure, value in (("icc1", single), ("icc1k", averaged)):
            rows.append({**factors, "measure": measure, "dimension": None, "value": value, "n": subjects})
    schema = {
        **dict(units.conditions.schema),
        "measure": pl.String,
        "dimension": pl.String,
        "value": pl.Float64,
        "n": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, nan_to_null=False) if rows else pl.DataFrame(schema=schema)
