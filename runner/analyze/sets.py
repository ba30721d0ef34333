"""Experiment-set comparisons (value-differences study, Sections 3.2–3.3, Appendix F) plus PERMANOVA/PERMDISP.

A *set* is one condition; its data points are respondents (one per country × unit) with a 24-d vector of
question means, or the 6-d vector of their VSM scores. Measures:

- centroid correlation: Pearson r and p between two sets' mean 24-d vectors;
- disparity: σ across nations of the national VSM scores per dimension, D = mean σ, MCD = D_set / D_human;
- separation of two sets: Davies–Bouldin, silhouette (6-d VSM scores of respondents) and SS_h (national means
  against the human reference's inter-nation distances);
- PERMANOVA + PERMDISP on the 24-d respondent vectors: does one factor (language, shuffle, model, …) change the
  answers, tested separately inside every combination of the other factors (so no other factor is confounded),
  with permutations blocked within country by default (so differences between countries, which every level
  shares, do not drown the factor's effect), R² and ω² per test, and PERMDISP beside it as the dispersion
  check (a PERMANOVA difference with a significant PERMDISP may be a difference in spread, not in location).

Set pairs are those that differ in exactly one factor (the comparisons the paper makes), which keeps the number
of pairs linear in the number of conditions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

import stats_core
from runner.analyze.agreement import masked_mean
from runner.analyze.units import UnitArray
from runner.errors import InputError
from runner.escape import condition_label
from runner.score.indices import indices_from_means
from runner.score.intervals import unreachable_note
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet
from runner.survey.vocab import QUESTIONS

__all__ = [
    "centroid_correlations",
    "disparity",
    "factor_groups",
    "factor_tests",
    "identity_codes",
    "identity_correlations",
    "respondent_table",
    "set_pairs",
    "set_separation",
]


POINTS = ("identity", "seed")
# Figure 2d of the value-differences study: sets that differ in the model *and* the language.
CROSS_PAIRS = (("language", ("model", "endpoint")),)


def identity_codes(units: UnitArray) -> tuple[np.ndarray, list[str]]:
    """Per unit, the code of its identity — its unit values other than ``seed`` — and each identity's label.

    Without identity columns every unit of a country is one identity (the country itself, as a persona).
    """
    columns = [c for c in units.units.columns if c != "seed"]
    rows = units.units.select(columns).rows() if columns else [()] * units.units.height
    distinct = sorted(set(rows), key=lambda row: tuple((v is not None, v) for v in row))
    index = {row: i for i, row in enumerate(distinct)}
    labels = [condition_label(zip(columns, row, strict=True)) or "all" for row in distinct]
    return np.array([index[row] for row in rows], dtype=np.int64), labels


def _unit_labels(units: UnitArray) -> list[str]:
    """Readable unit names (``seed=1, gender=female, age=25``)."""
    columns = units.units.columns
    return [condition_label(zip(columns, row, strict=True)) for row in units.units.rows()]


def _points(
    units: UnitArray, c: int, max_points: int | None, seed: int, codes: tuple[np.ndarray, list[str]] | None
) -> tuple[np.ndarray, ...]:
    """Complete 24-d points of condition ``c``, their country codes and their identity (or unit) codes.

    With ``codes`` (``identity_codes(units)``: ``points="identity"``, the value-differences study): one point
    per country × identity, the mean of its seeds' answers per question; without (``"seed"``): one point per
    country × unit (each seed of each identity). With ``max_points``, a larger set is subsampled without
    replacement (``default_rng([seed, c])``): distance measures cost O(points²) memory, so their size is
    bounded by this setting, not by the run.
    """
    block = units.values[c]  # (K, U, 24)
    if codes is not None:
        of_unit, labels = codes
        block = np.stack([masked_mean(block[:, of_unit == g], axis=1) for g in range(len(labels))], axis=1)
    complete = np.isfinite(block).all(axis=2)
    k_idx, u_idx = np.nonzero(complete)
    if max_points is not None and len(k_idx) > max_points:
        keep = np.sort(np.random.default_rng([seed, c]).choice(len(k_idx), size=max_points, replace=False))
        k_idx, u_idx = k_idx[keep], u_idx[keep]
    return block[k_idx, u_idx], k_idx, u_idx


def _set_points(
    units: UnitArray, max_points: int | None, seed: int, points: str
) -> Callable[[int], tuple[np.ndarray, ...]]:
    """``_points`` of a condition, made once per condition however many pairs or strata it is in (the identity
    codes once for all): the function for one measure over every set."""
    if points not in POINTS:
        raise InputError(f"points: expected one of {POINTS}, got {points!r}")
    codes = identity_codes(units) if points == "identity" else None
    made: dict[int, tuple[np.ndarray, ...]] = {}

    def of(c: int) -> tuple[np.ndarray, ...]:
        if c not in made:
            made[c] = _points(units, c, max_points, seed, codes)
        return made[c]

    return of


def respondent_table(
    units: UnitArray, *, max_points: int | None = None, seed: int = 0, points: str = "identity"
) -> pl.DataFrame:
    """Complete points (at most ``max_points`` per set): ``set``, ``country``, ``unit``, ``identity``,
    ``q1``…``q24`` (question means) and ``pdi``…``ivr`` (their VSM scores, the paper's Figure 1 input)."""
    labels = units.condition_labels()
    points_of = _set_points(units, max_points, seed, points)
    names = identity_codes(units)[1] if points == "identity" else _unit_labels(units)
    parts = []
    for c in range(units.conditions.height):
        x, k_idx, units_of = points_of(c)
        scores = indices_from_means(x) if len(x) else np.empty((0, len(DIMENSIONS)))
        parts.append(
            pl.DataFrame(
                {
                    "set": [labels[c]] * len(x),
                    "country": [units.countries[k] for k in k_idx],
                    "unit": units_of.astype(np.int64),
                    "identity": [names[u] for u in units_of],
                    **{f"q{q + 1}": x[:, q] for q in range(24)},
                    **{d: scores[:, i] for i, d in enumerate(DIMENSIONS)},
                },
                schema={
                    "set": pl.String,
                    "country": pl.String,
                    "unit": pl.Int64,
                    "identity": pl.String,
                    **{f"q{q}": pl.Float64 for q in QUESTIONS},
                    **dict.fromkeys(DIMENSIONS, pl.Float64),
                },
            )
        )
    return pl.concat(parts) if parts else pl.DataFrame()


def factor_groups(units: UnitArray) -> list[tuple[str, ...]]:
    """The factors, with aliased ones merged: factors whose values map one-to-one across the conditions.

    Two endpoints serving two models vary ``endpoint`` and ``model`` together; as one group they are one
    factor, so their sets still form pairs (and tests) that differ in one factor.
    """
    factors = [f for f in units.conditions.columns if f != "_all"]
    rows = units.conditions.to_dicts()
    groups: list[list[str]] = []
    for f in factors:
        for group in groups:
            g = group[0]
            if len({(r[f], r[g]) for r in rows}) == len({r[f] for r in rows}) == len({r[g] for r in rows}):
                group.append(f)
                break
        else:
            groups.append([f])
    return [tuple(g) for g in groups]


def set_pairs(units: UnitArray, *, cross: bool = False) -> list[tuple[int, int, str]]:
    """Condition pairs (a, b, factor) that differ in exactly one factor (aliased factors count as one, named
    ``endpoint/model``); with ``cross``, also those that differ in exactly a language and a model/endpoint
    factor (named ``language × model``: the value-differences study's Figure 2d)."""
    rows = units.conditions.to_dicts()
    groups = factor_groups(units)
    pairs = []
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            diff = [g for g in groups if any(rows[a][f] != rows[b][f] for f in g)]
            if len(diff) == 1:
                pairs.append((a, b, "/".join(diff[0])))
            elif cross and len(diff) == 2 and _is_cross(diff):
                pairs.append((a, b, " × ".join("/".join(g) for g in diff)))
    return pairs


def _is_cross(diff: list[tuple[str, ...]]) -> bool:
    """Whether two differing factor groups are one of CROSS_PAIRS (a language group and a model group)."""
    for first, second in CROSS_PAIRS:
        for x, y in (diff, diff[::-1]):
            if first in x and any(name in y for name in second):
                return True
    return False


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
    units: UnitArray,
    human: ReferenceSet,
    *,
    max_points: int | None = None,
    seed: int = 0,
    points: str = "identity",
    permutations: int = 999,
) -> pl.DataFrame:
    """Davies–Bouldin and silhouette (points' VSM scores), SS_h (national scores) and SS_h's permutation test.

    Pairs: sets differing in one factor, and in a language and a model (``set_pairs(cross=True)``). The SS_h
    test (``stats_core.ss_h_test``) re-deals each nation's points between the two sets: ``ss_h_null_mean`` is
    the SS_h of sets that do not differ, ``ss_h_p`` = (k + 1)/(permutations + 1) (seed ``seed``).
    """
    labels = units.condition_labels()
    points_of = _set_points(units, max_points, seed, points)  # a set is in many pairs: its points made once
    out = []
    for a, b, factor in set_pairs(units, cross=True):
        (pa, ka, _), (pb, kb, _) = points_of(a), points_of(b)
        # point clouds for distances: float products suffice (no tie is ranked), ~20x cheaper than exact
        xa, xb = indices_from_means(pa, exact=False), indices_from_means(pb, exact=False)
        row = {
            "set_a": labels[a],
            "set_b": labels[b],
            "factor": factor,
            "n_a": len(xa),
            "n_b": len(xb),
            "davies_bouldin": None,
            "silhouette": None,
            "ss_h": None,
            "ss_h_null_mean": None,
            "ss_h_p": None,
            "ss_h_exact": None,
        }
        if len(xa) >= 2 and len(xb) >= 2:
            x = np.vstack([xa, xb])
            lab = np.repeat([0, 1], [len(xa), len(xb)])
            row["davies_bouldin"] = float(stats_core.davies_bouldin(x, lab))
            row["silhouette"] = float(stats_core.silhouette(stats_core.pdist(x), lab))
        nations = _common_nations(units, human, [a, b])
        if len(nations) >= 2:
            matrix = human.matrix(nations)
            row["ss_h"] = float(stats_core.ss_h(_national(units, a, nations), _national(units, b, nations), matrix))
            codes = [units.countries.index(n) for n in nations]
            keep_a, keep_b = np.isin(ka, codes), np.isin(kb, codes)
            position = {k: i for i, k in enumerate(codes)}
            na = np.array([position[k] for k in ka[keep_a]], dtype=np.int64)
            nb = np.array([position[k] for k in kb[keep_b]], dtype=np.int64)
            if permutations and len(set(na)) == len(set(nb)) == len(nations):  # a point per nation in each set
                test = stats_core.ss_h_test(xa[keep_a], na, xb[keep_b], nb, matrix, permutations, seed)
                row["ss_h_null_mean"] = float(np.mean(test.null_distribution))
                row["ss_h_p"] = test.pvalue
                row["ss_h_exact"] = test.exact
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
        "ss_h_null_mean": pl.Float64,
        "ss_h_p": pl.Float64,
        "ss_h_exact": pl.Boolean,
    }
    return pl.DataFrame(out, schema=schema)


IDENTITY_CONTEXTS = ("country", "gender", "age", "respondent")


def identity_correlations(units: UnitArray, *, points: str = "identity") -> pl.DataFrame:
    """Within each set, how alike the answers of different identity contexts are (value-differences Table 5).

    For each context variable (nation, gender, age — those with ≥ 2 values) the set's points are grouped by its
    value, each group's mean 24-d vector taken, and Pearson r computed between every two groups' means:
    ``mean_r`` (the paper's number), ``min_r``, ``max_p`` over those ``pairs``.
    """
    from scipy.stats import pearsonr

    labels = units.condition_labels()
    unit_rows = units.units
    codes, _ = identity_codes(units)
    points_of = _set_points(units, None, 0, points)
    out = []
    for c in range(units.conditions.height):
        x, k_idx, u_idx = points_of(c)
        for context in IDENTITY_CONTEXTS:
            if context == "country":
                values = [units.countries[k] for k in k_idx]
            elif context in unit_rows.columns:
                column = unit_rows[context].to_list()
                if points == "identity":  # an identity's context value is that of any of its units
                    of_identity: dict[int, object] = {}
                    for u, g in enumerate(codes.tolist()):
                        of_identity.setdefault(g, column[u])
                    values = [of_identity[int(g)] for g in u_idx]
                else:
                    values = [column[int(u)] for u in u_idx]
            else:
                continue
            groups = sorted(set(values), key=str)
            if len(groups) < 2:
                continue
            means = [x[[v == g for v in values]].mean(axis=0) for g in groups]
            rs, ps = [], []
            for i in range(len(groups)):
                for j in range(i + 1, len(groups)):
                    if means[i].std() > 0 and means[j].std() > 0:
                        res = pearsonr(means[i], means[j])
                        rs.append(float(res.statistic))
                        ps.append(float(res.pvalue))
            out.append(
                {
                    "set": labels[c],
                    "context": context,
                    "groups": len(groups),
                    "pairs": len(rs),
                    "mean_r": float(np.mean(rs)) if rs else None,
                    "min_r": float(np.min(rs)) if rs else None,
                    "max_p": float(np.max(ps)) if ps else None,
                }
            )
    schema = {
        "set": pl.String,
        "context": pl.String,
        "groups": pl.Int64,
        "pairs": pl.Int64,
        "mean_r": pl.Float64,
        "min_r": pl.Float64,
        "max_p": pl.Float64,
    }
    return pl.DataFrame(out, schema=schema)


PERMUTATION_BLOCKS = ("country", None)


def factor_tests(
    units: UnitArray,
    *,
    permutations: int = 999,
    seed: int = 0,
    max_points: int | None = None,
    blocks: str | None = "country",
    points: str = "identity",
) -> pl.DataFrame:
    """PERMANOVA (F, p, R², ω²) and PERMDISP (F, p) of the 24-d respondent vectors across each factor's levels.

    Tests run per stratum — one combination of the other factors — where at least two levels have two or more
    points (identities by default, see ``_points``). Aliased factors (``factor_groups``) are tested as one.
    ``blocks="country"`` permutes the level labels only among respondents of the same country
    (``adonis2(..., strata = country)``); None permutes freely. Each test's permutation seed is ``seed``
    (recorded in the table, with the blocks); ``max_points`` caps each level's respondents (seeded subsample).
    """
    if blocks not in PERMUTATION_BLOCKS:
        raise InputError(f"permutation blocks: expected one of {PERMUTATION_BLOCKS}, got {blocks!r}")
    rows = units.conditions.to_dicts()
    groups = factor_groups(units)
    points_of = _set_points(units, max_points, seed, points)  # a set is in a stratum of every factor: made once
    out = []
    for group in groups:
        factor = "/".join(group)
        strata: dict[tuple, list[int]] = {}
        for c, row in enumerate(rows):
            strata.setdefault(tuple((f, row[f]) for g in groups if g != group for f in g), []).append(c)
        for stratum, members in strata.items():
            levels = [("/".join(str(rows[c][f]) for f in group), *points_of(c)[:2]) for c in members]
            levels = [(level, x, k) for level, x, k in levels if len(x) >= 2]
            if len(levels) < 2:
                continue
            x = np.vstack([x for _, x, _ in levels])
            labels = np.repeat(np.arange(len(levels)), [len(x) for _, x, _ in levels])
            strata = np.concatenate([k for _, _, k in levels]) if blocks == "country" else None
            dist = stats_core.pdist(x)
            pm = stats_core.permanova(dist, labels, permutations, seed, strata=strata)
            pd_ = stats_core.permdisp(dist, labels, permutations, seed, strata=strata)
            p_min = 1.0 / (pm.permutations + 1)  # exact: one over the distinct relabellings
            out.append(
                {
                    "factor": factor,
                    "stratum": condition_label(stratum) or "all",
                    "levels": [str(level) for level, _, _ in levels],
                    "n": int(len(x)),
                    "permanova_f": float(pm.statistic),
                    "permanova_p": float(pm.pvalue),
                    "permanova_r2": _float(pm.r_squared),
                    "permanova_omega2": _float(pm.omega_squared),
                    "permdisp_f": float(pd_.statistic),
                    "permdisp_p": float(pd_.pvalue),
                    "permutations": pm.permutations,  # relabellings counted: all but the observed one when exact
                    "exact": pm.exact,
                    "p_min": p_min,
                    "blocks": blocks or "none",
                    "seed": seed,
                    "note": unreachable_note(p_min) or None,
                }
            )
    schema = {
        "factor": pl.String,
        "stratum": pl.String,
        "levels": pl.List(pl.String),
        "n": pl.Int64,
        "permanova_f": pl.Float64,
        "permanova_p": pl.Float64,
        "permanova_r2": pl.Float64,
        "permanova_omega2": pl.Float64,
        "permdisp_f": pl.Float64,
        "permdisp_p": pl.Float64,
        "permutations": pl.Int64,
        "exact": pl.Boolean,
        "p_min": pl.Float64,
        "blocks": pl.String,
        "seed": pl.Int64,
        "note": pl.String,
    }
    return pl.DataFrame(out, schema=schema)


def _float(value: float | None) -> float | None:
    """A finite float, else None (an undefined effect size where SS_T = 0)."""
    return float(value) if value is not None and np.isfinite(value) else None
