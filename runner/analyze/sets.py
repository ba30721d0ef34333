"""Experiment-set comparisons (value-differences study, Sections 3.2–3.3, Appendix F) plus PERMANOVA/PERMDISP.

A *set* is one condition; its data points are respondents (one per country × unit) with a 24-d vector of
question means, or the 6-d vector of their VSM scores. Measures:

- centroid correlation: Pearson r and p between two sets' mean 24-d vectors;
- disparity: σ across nations of the national VSM scores per dimension, D = mean σ, MCD = D_set / D_human;
- separation of two sets: Davies–Bouldin, silhouette (6-d VSM scores of respondents) and SS_h (national means
  against the human reference's inter-nation distances);
- PERMANOVA + PERMDISP on the 24-d respondent vectors: does one factor (language, shuffle, model, …) change the
  answers, tested separately inside every combination of the other factors (so no other factor is confounded).

Set pairs are those that differ in exactly one factor (the comparisons the paper makes), which keeps the number
of pairs linear in the number of conditions.
"""

from __future__ import annotations

import numpy as np
import polars as pl

import stats_core
from runner.analyze.agreement import masked_mean
from runner.analyze.units import UnitArray
from runner.score.indices import indices_from_means
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet
from runner.survey.vocab import QUESTIONS

__all__ = ["centroid_correlations", "disparity", "factor_tests", "respondent_table", "set_pairs", "set_separation"]


def _points(units: UnitArray, c: int, max_points: int | None = None, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Complete 24-d respondent vectors of condition ``c``, their country and unit codes.

    With ``max_points``, a larger set is subsampled without replacement (``default_rng([seed, c])``): distance
    measures cost O(points²) memory, so their size is bounded by this setting, not by the run.
    """
    block = units.values[c]  # (K, U, 24)
    complete = np.isfinite(block).all(axis=2)
    k_idx, u_idx = np.nonzero(complete)
    if max_points is not None and len(k_idx) > max_points:
        keep = np.sort(np.random.default_rng([seed, c]).choice(len(k_idx), size=max_points, replace=False))
        k_idx, u_idx = k_idx[keep], u_idx[keep]
    return block[k_idx, u_idx], k_idx, u_idx


def respondent_table(units: UnitArray, *, max_points: int | None = None, seed: int = 0) -> pl.DataFrame:
    """Complete respondents (at most ``max_points`` per set): ``set``, ``country``, ``unit``, ``q1``…``q24``."""
    labels = units.condition_labels()
    parts = []
    for c in range(units.conditions.height):
        x, k_idx, units_of = _points(units, c, max_points, seed)
        parts.append(
            pl.DataFrame(
                {
                    "set": [labels[c]] * len(x),
                    "country": [units.countries[k] for k in k_idx],
                    "unit": units_of.astype(np.int64),
                    **{f"q{q + 1}": x[:, q] for q in range(24)},
                },
                schema={
                    "set": pl.String,
                    "country": pl.String,
                    "unit": pl.Int64,
                    **{f"q{q}": pl.Float64 for q in QUESTIONS},
                },
            )
        )
    return pl.concat(parts) if parts else pl.DataFrame()


def set_pairs(units: UnitArray) -> list[tuple[int, int, str]]:
    """Condition pairs (a, b, factor) that differ in exactly one factor."""
    rows = units.conditions.to_dicts()
    pairs = []
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            diff = [f for f in rows[a] if rows[a][f] != rows[b][f]]
            if len(diff) == 1:
                pairs.append((a, b, diff[0]))
    return pairs


def centroid_correlations(units: UnitArray) -> pl.DataFrame:
    """Pearson r and two-sided p between the 24-d centroids of each set pair (``None`` if a centroid is flat)."""
    from scipy.stats import pearsonr

    labels = units.condition_labels()
    out = []
    for a, b, factor in set_pairs(units):
        # every unit's answers count, also those of respondents with a missing question
        ca, cb = (masked_mean(units.values[c].reshape(-1, 24), axis=0) for c in (a, b))
        r = p = None
        if np.isfinite(ca).all() and np.isfinite(cb).all() and ca.std() > 0 and cb.std() > 0:
            res = pearsonr(ca, cb)
            r, p = float(res.statistic), float(res.pvalue)
        out.append({"set_a": labels[a], "set_b": labels[b], "factor": factor, "pearson_r": r, "pvalue": p})
    return pl.DataFrame(
        out,
        schema={
            "set_a": pl.String,
            "set_b": pl.String,
            "factor": pl.String,
            "pearson_r": pl.Float64,
            "pvalue": pl.Float64,
        },
    )


def _national(units: UnitArray, c: int, nations: list[str]) -> np.ndarray:
    """(N, 6) VSM scores of condition ``c`` per nation (indices of the national question means)."""
    idx = [units.countries.index(n) for n in nations]
    means = np.stack([masked_mean(units.values[c, k], axis=0) for k in idx])
    return indices_from_means(means)


def _common_nations(units: UnitArray, human: ReferenceSet, conditions: list[int]) -> list[str]:
    """Countries of the human reference answered (every question) in all ``conditions``."""
    out = []
    for name in units.countries:
        k = units.countries.index(name)
        try:
            human.resolve(name)
        except ValueError:
            continue
        if all(np.isfinite(masked_mean(units.values[c, k], axis=0)).all() for c in conditions):
            out.append(name)
    return out


def disparity(units: UnitArray, human: ReferenceSet) -> pl.DataFrame:
    """Per set: σ across nations per dimension (ddof 1), D, the human D over the same nations, and MCD."""
    labels = units.condition_labels()
    out = []
    for c in range(units.conditions.height):
        nations = _common_nations(units, human, [c])
        if len(nations) < 2:
            continue
        result = stats_core.mcd(_national(units, c, nations), human.matrix(nations))
        out.append(
            {
                "set": labels[c],
                "nations": len(nations),
                **{f"sigma_{d}": float(s) for d, s in zip(DIMENSIONS, result.model_sigma, strict=True)},
                "d_model": result.model_disparity,
                "d_human": result.human_disparity,
                "mcd": result.statistic,
            }
        )
    return pl.DataFrame(out, infer_schema_length=None)


def set_separation(
    units: UnitArray, human: ReferenceSet, *, max_points: int | None = None, seed: int = 0
) -> pl.DataFrame:
    """Davies–Bouldin and silhouette (respondents' VSM scores) and SS_h (national scores) per set pair."""
    labels = units.condition_labels()
    out = []
    for a, b, factor in set_pairs(units):
        xa, xb = (indices_from_means(_points(units, c, max_points, seed)[0]) for c in (a, b))
        row = {
            "set_a": labels[a],
            "set_b": labels[b],
            "factor": factor,
            "n_a": len(xa),
            "n_b": len(xb),
            "davies_bouldin": None,
            "silhouette": None,
            "ss_h": None,
        }
        if len(xa) >= 2 and len(xb) >= 2:
            x = np.vstack([xa, xb])
            lab = np.repeat([0, 1], [len(xa), len(xb)])
            row["davies_bouldin"] = float(stats_core.davies_bouldin(x, lab))
            row["silhouette"] = float(stats_core.silhouette(stats_core.pdist(x), lab))
        nations = _common_nations(units, human, [a, b])
        if len(nations) >= 2:
            row["ss_h"] = float(
                stats_core.ss_h(_national(units, a, nations), _national(units, b, nations), human.matrix(nations))
            )
        out.append(row)
    schema = {
        "set_a": pl.String,
        "set_b": pl.String,
        "factor": pl.String,
        "n_a": pl.Int64,
        "n_b": pl.Int64,
        "davies_bouldin": pl.Float64,
        "silhouette": pl.Float64,
        "ss_h": pl.Float64,
    }
    return pl.DataFrame(out, schema=schema)


def factor_tests(
    units: UnitArray, *, permutations: int = 999, seed: int = 0, max_points: int | None = None
) -> pl.DataFrame:
    """PERMANOVA and PERMDISP of the 24-d respondent vectors across each factor's levels, per stratum.

    A stratum is one combination of the other factors; tests run where at least two levels have two or more
    respondents. Each test's permutation seed is ``seed`` (recorded in the table); ``max_points`` caps each
    level's respondents (seeded subsample).
    """
    rows = units.conditions.to_dicts()
    factors = [f for f in units.conditions.columns if f != "_all"]
    out = []
    for factor in factors:
        strata: dict[tuple, list[int]] = {}
        for c, row in enumerate(rows):
            strata.setdefault(tuple((f, row[f]) for f in factors if f != factor), []).append(c)
        for stratum, members in strata.items():
            blocks = [(rows[c][factor], _points(units, c, max_points, seed)[0]) for c in members]
            blocks = [(level, x) for level, x in blocks if len(x) >= 2]
            if len(blocks) < 2:
                continue
            x = np.vstack([x for _, x in blocks])
            labels = np.repeat(np.arange(len(blocks)), [len(x) for _, x in blocks])
            dist = stats_core.pdist(x)
            pm = stats_core.permanova(dist, labels, permutations, seed)
            pd_ = stats_core.permdisp(dist, labels, permutations, seed)
            out.append(
                {
                    "factor": factor,
                    "stratum": ", ".join(f"{f}={v}" for f, v in stratum) or "all",
                    "levels": [str(level) for level, _ in blocks],
                    "n": int(len(x)),
                    "permanova_f": float(pm.statistic),
                    "permanova_p": float(pm.pvalue),
                    "permdisp_f": float(pd_.statistic),
                    "permdisp_p": float(pd_.pvalue),
                    "permutations": permutations,
                    "seed": seed,
                }
            )
    schema = {
        "factor": pl.String,
        "stratum": pl.String,
        "levels": pl.List(pl.String),
        "n": pl.Int64,
        "permanova_f": pl.Float64,
        "permanova_p": pl.Float64,
        "permdisp_f": pl.Float64,
        "permdisp_p": pl.Float64,
        "permutations": pl.Int64,
        "seed": pl.Int64,
    }
    return pl.DataFrame(out, schema=schema)
