"""How much of the variance of the answer profiles each design factor explains (docs/analysis.md, Variance partition).

Units: one *profile* per condition × country × unit (seed, and simulated identity where the design has one) that
answered all 24 questions — its 24 item means (``profile = "items"``) or its six VSM indices (``"indices"``). Each
profile column is standardised (z-scored over the scope's profiles; constant columns dropped), so every item or
index weighs the same, and profiles are compared by Euclidean distance: PERMANOVA's sums of squares are then the
multivariate (trace) sums of squares of a linear model of the standardised profiles on the factors.

Terms: every factor that varies (runner/analyze/partition_design.py, which merges aliased factors and refuses
confounded ones before any statistic). ``stats_core.permanova_terms`` gives, per term, the *marginal* share
(``by = "margin"``: the variance the term explains beyond all the others, type III — the headline, because it
does not depend on the arbitrary order of a sweep's factors) with F, ω² and its permutation p, and the
*sequential* share (``by = "terms"``, type I, in role order: country first; a share only, no test).

Scopes: ``all`` (every profile; permutations blocked within the model when several models answered, so the
model's own large effect cannot lend significance to the others — the model term itself then has no p), and one
scope per model when several did (free permutations).

Cost rule: a permutation of ``stats_core.permanova_terms`` costs about n²/2 + min(C² · s, n²/2 · (terms + 1))
operations (n profiles, C occupied cells of the terms, s = rank × (terms + 1) vectors of the marginal models: its
cell-sum kernels, or its object-space forms where cells are many). A scope keeps at most
``max_profiles`` profiles (a seeded uniform subsample beyond: the estimand stays the scope's shares), and the
permutation count is ``permutations`` capped at ``WORK / cost``; when that leaves fewer than
``MIN_PERMUTATIONS``, the subsample shrinks by 30 % at a time until it does (or reaches ``MIN_PROFILES``). The
table records the profiles used and available and the permutations run, so the smallest attainable p is visible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

import stats_core
from runner.analyze.partition_design import Terms, admit_terms, join_note, level_codes, nested_within
from runner.analyze.units import UnitArray
from runner.score.indices import indices_from_means
from runner.score.intervals import unreachable_note
from stats_core.errors import InvalidInputError

__all__ = ["PARTITION_COLUMNS", "partition_headline", "variance_partition"]

PROFILES = ("items", "indices")
MAX_PROFILES = 1000
WORK = 5 * 10**8  # operations per scope and profile (≈ 4 s on a busy 2-core machine; benches/RESULTS.md)
MIN_PERMUTATIONS = 199  # p resolution 0.005
MIN_PROFILES = 60
MODEL_COLUMNS = ("model", "endpoint")
ALPHA = 0.05

PARTITION_COLUMNS = {
    "scope": pl.String,
    "profile": pl.String,
    "term": pl.String,
    "role": pl.String,
    "levels": pl.Int64,
    "df": pl.Int64,
    "r2": pl.Float64,  # marginal share (type III): the headline
    "f": pl.Float64,
    "omega2": pl.Float64,
    "p": pl.Float64,
    "r2_sequential": pl.Float64,  # sequential share (type I) in the table's term order
    "rank": pl.Int64,
    "p_min": pl.Float64,
    "profiles": pl.Int64,
    "profiles_available": pl.Int64,
    "permutations": pl.Int64,
    "blocks": pl.String,
    "note": pl.String,
}


@dataclass(frozen=True)
class _Scope:
    name: str
    rows: np.ndarray  # indices into the complete profiles
    blocks: str | None  # the factor permutations are blocked within
    fixed: str | None = None  # the factor the scope holds fixed (left out of its terms)


def _profile_columns(units: UnitArray, c: np.ndarray, k: np.ndarray, u: np.ndarray) -> dict[str, list[object]]:
    """Each profile's design values: condition factors, country and unit columns (the constant ``_all`` left out)."""
    columns: dict[str, list[object]] = {}
    for name in units.conditions.columns:
        if name != "_all":
            values = units.conditions[name].to_list()
            columns[name] = [values[i] for i in c]
    columns["country"] = [units.countries[i] for i in k]
    for name in units.units.columns:
        values = units.units[name].to_list()
        columns[name] = [values[i] for i in u]
    return columns


def _scopes(columns: dict[str, list[object]], n: int) -> list[_Scope]:
    """``all``, and one scope per model when several models (or endpoints) answered."""
    model = next((m for m in MODEL_COLUMNS if m in columns and len(set(columns[m])) > 1), None)
    everything = np.arange(n)
    if model is None:
        return [_Scope("all", everything, None)]
    values = columns[model]
    levels = sorted(set(values), key=lambda v: (v is None, str(v)))
    per_model = [_Scope(f"{model}={v}", np.array([i for i in range(n) if values[i] == v]), None, model) for v in levels]
    return [_Scope("all", everything, model), *per_model]


def _standardised(x: np.ndarray) -> np.ndarray:
    """Columns z-scored over the rows (ddof 1); constant columns dropped (all of them below two rows)."""
    if len(x) < 2:
        return x[:, :0]
    sd = x.std(axis=0, ddof=1)
    keep = sd > 1e-12 * np.maximum(1.0, np.abs(x).max(axis=0))
    return (x[:, keep] - x[:, keep].mean(axis=0)) / sd[keep]


def variance_partition(
    units: UnitArray, *, permutations: int = 999, seed: int = 0, max_profiles: int = MAX_PROFILES
) -> pl.DataFrame:
    """The variance partition table: per scope, profile kind and term, the shares of variance (module docstring)."""
    complete = np.isfinite(units.values).all(axis=3)
    c, k, u = np.nonzero(complete)
    items = units.values[c, k, u, :]
    profiles = {"items": items, "indices": indices_from_means(items, exact=False) if len(items) else items[:, :6]}
    columns = _profile_columns(units, c, k, u)
    rows: list[dict] = []
    for s, scope in enumerate(_scopes(columns, len(c))):
        rng = np.random.default_rng([seed, s])
        chosen = scope.rows
        size = min(len(chosen), max_profiles)
        while True:  # the cost rule (module docstring): shrink the subsample until enough permutations fit
            if size < len(chosen):  # seeded uniform subsample, nested in the previous one
                chosen = np.sort(rng.choice(chosen, size, replace=False))
            design = {name: [values[i] for i in chosen] for name, values in columns.items() if name != scope.fixed}
            terms = admit_terms(design)
            perms = _affordable(terms, len(chosen), permutations)
            if perms >= min(permutations, MIN_PERMUTATIONS) or size <= MIN_PROFILES:
                break
            size = max(MIN_PROFILES, int(size * 0.7))
        blocks = None if scope.blocks is None else level_codes(design[scope.blocks])
        stream = int(np.random.SeedSequence([seed, s]).generate_state(1)[0])  # the scope's permutations
        for profile in PROFILES:
            z = _standardised(profiles[profile][chosen])
            rows += _scope_rows(scope, profile, z, terms, blocks, len(scope.rows), perms, stream)
    return pl.DataFrame(rows, schema=PARTITION_COLUMNS)


def _affordable(terms: Terms, n: int, permutations: int) -> int:
    """Permutations within ``WORK`` for a scope of ``n`` profiles and these terms (at least 1 unless none were
    asked for: ``--permutations 0`` means no test, never one permutation's p of 0.5 or 1)."""
    if not terms.terms:
        return permutations
    cells = len(set(zip(*(t.codes.tolist() for t in terms.terms), strict=True)))
    rank = terms.rank
    forms = len(terms.terms) + 1  # the full model and each model without one term
    cost = n * n / 2 + min(cells * cells * rank * forms, n * n / 2 * forms)
    return min(permutations, max(1, int(WORK // cost)))


def _scope_rows(
    scope: _Scope,
    profile: str,
    z: np.ndarray,
    terms: Terms,
    blocks: np.ndarray | None,
    available: int,
    perms: int,
    seed: int,
) -> list[dict]:
    """The rows of one scope × profile: a row per term, Residual and Total, and one per refused factor."""
    n = len(z)
    base = {
        "scope": scope.name,
        "profile": profile,
        "profiles": n,
        "profiles_available": available,
        "blocks": scope.blocks or "none",
    }
    refused = [{**base, "term": f, "note": why} for f, why in terms.refused.items()]
    df_model = terms.rank
    df_residual = n - 1 - df_model
    problem = None
    if not terms.terms:
        problem = "no factor varies among the profiles: nothing to partition"
    elif z.shape[1] == 0:
        problem = "every profile is the same: no variance to partition"
    elif df_residual < 1:
        problem = f"no residual degrees of freedom ({n} profiles, {df_model} design df): shares cannot be tested"
    if problem is not None:
        return [{**base, "term": "(all)", "note": problem}, *refused]
    distances = stats_core.pdist(z)
    factors = {f"t{i}": t.codes for i, t in enumerate(terms.terms)}
    results = {}
    for by, count in (("margin", perms), ("terms", 0)):  # the sequential shares are not tested: no permutations
        try:
            result = stats_core.permanova_terms(
                distances, factors, list(factors), by=by, permutations=count, seed=seed, strata=blocks
            )
        except InvalidInputError as exc:  # a design the checks above did not foresee: said, not raised
            return [{**base, "term": "(all)", "note": f"not partitioned: {exc}"}, *refused]
        results[by] = {row["term"]: row for row in result.to_polars().to_dicts()}
        if by == "margin":
            ran = result.permutations  # fewer than asked where every distinct relabelling fits (exact p)
    out = []
    for i, term in enumerate(terms.terms):
        margin, sequential = results["margin"][f"t{i}"], results["terms"][f"t{i}"]
        note = term.note
        # the smallest p: one over the permutations run, or over the term's distinct relabellings if fewer
        p_min = max(1.0 / (perms + 1), math.exp(-min(stats_core.log_relabellings(term.codes, blocks), 700.0)))
        p = _finite(margin["p_value"])
        if blocks is not None and nested_within(blocks, term.codes):  # every block holds one level: constant
            p = None
            note = join_note(note, f"permutations within {scope.blocks} leave it fixed: no p (R² only)")
        elif p_min > ALPHA:
            note = join_note(note, unreachable_note(p_min, ALPHA))
        out.append(
            {
                **base,
                "term": term.name,
                "role": term.role,
                "levels": term.levels,
                "df": int(margin["df"]),
                "r2": margin["r_squared"],
                "f": _finite(margin["f"]),
                "omega2": _finite(margin["omega_squared"]),
                "p": p,
                "r2_sequential": sequential["r_squared"],
                "p_min": p_min,
                "permutations": ran,
                "note": note,
            }
        )
    ranked = sorted(range(len(out)), key=lambda i: -(out[i]["r2"] if out[i]["r2"] is not None else -1.0))
    for place, i in enumerate(ranked, start=1):
        out[i]["rank"] = place
    for name in ("Residual", "Total"):
        margin, sequential = results["margin"][name], results["terms"][name]
        out.append(
            {
                **base,
                "term": name,
                "df": int(margin["df"]),
                "r2": margin["r_squared"],
                "r2_sequential": sequential["r_squared"],
                "permutations": perms,
            }
        )
    return [*out, *refused]


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def partition_headline(table: pl.DataFrame) -> pl.DataFrame:
    """Per model (the ``all`` scope when one model answered) and profile: does the cultural factor (country)
    explain more variance than the prompt-design factors together (the sum of their marginal shares)?"""
    scopes = [s for s in table["scope"].unique(maintain_order=True).to_list() if s != "all"] or ["all"]
    rows = []
    for scope in scopes:
        for profile in PROFILES:
            part = table.filter(
                (pl.col("scope") == scope) & (pl.col("profile") == profile) & pl.col("role").is_not_null()
            )
            if part.is_empty() and table.filter(pl.col("scope") == scope).is_empty():
                continue
            cultural = part.filter(pl.col("role") == "cultural")
            design = part.filter(pl.col("role") == "prompt design").sort("r2", descending=True, nulls_last=True)
            r2_c = float(cultural["r2"][0]) if cultural.height else None
            r2_d = float(design["r2"].fill_null(0.0).sum()) if design.height else None
            if r2_c is None or r2_d is None:
                verdict = "not comparable"
            elif not _significant(cultural["p"][0]) and not any(_significant(p) for p in design["p"]):
                # Shares of chance alone grow with a factor's df: comparing them would crown the bigger factor.
                verdict = "neither significant"
            else:
                verdict = "cultural" if r2_c > r2_d else "prompt design"
            rows.append(
                {
                    "scope": scope,
                    "profile": profile,
                    "cultural_term": cultural["term"][0] if cultural.height else None,
                    "cultural_r2": r2_c,
                    "cultural_p": cultural["p"][0] if cultural.height else None,
                    "design_r2": r2_d,
                    "design_terms": design["term"].to_list(),
                    "top_design_term": design["term"][0] if design.height else None,
                    "top_design_r2": design["r2"][0] if design.height else None,
                    "top_design_p": design["p"][0] if design.height else None,
                    "verdict": verdict,
                }
            )
    schema = {
        "scope": pl.String,
        "profile": pl.String,
        "cultural_term": pl.String,
        "cultural_r2": pl.Float64,
        "cultural_p": pl.Float64,
        "design_r2": pl.Float64,
        "design_terms": pl.List(pl.String),
        "top_design_term": pl.String,
        "top_design_r2": pl.Float64,
        "top_design_p": pl.Float64,
        "verdict": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def _significant(p: float | None) -> bool:
    """Whether a permutation p reaches ALPHA (None or NaN: untested, so no)."""
    return p is not None and not math.isnan(p) and p <= ALPHA


def _share(r2: float | None, p: float | None) -> str:
    text = "n/a" if r2 is None else f"{100 * r2:.1f}%"
    return text if p is None or math.isnan(p) else f"{text} (p = {p:.3g})"


def headline_sentence(row: dict) -> str:
    """One headline row in words: the cultural factor's share against the prompt design's (plain text)."""
    what = "the 24 item means" if row["profile"] == "items" else "the six indices"
    scope = "" if row["scope"] == "all" else f"{row['scope']}: "
    if row["cultural_r2"] is None:
        return f"{scope}the respondent's country does not vary (or is confounded): no cultural share of {what}."
    share = _share(row["cultural_r2"], row["cultural_p"])
    cultural = f"the respondent's country explains {share} of the variance of {what}"
    if row["design_r2"] is None:
        return f"{scope}{cultural}; no prompt-design factor varies."
    top = f"largest: {row['top_design_term']} {_share(row['top_design_r2'], row['top_design_p'])}"
    more = {
        "cultural": "the cultural factor explains more",
        "prompt design": "the prompt design explains more",
        "neither significant": f"neither the country nor any prompt-design factor is significant at "
        f"{ALPHA:g}, so the shares say nothing about which explains more",
    }[row["verdict"]]
    return f"{scope}{cultural}; the prompt-design factors {100 * row['design_r2']:.1f}% together ({top}): {more}."


def partition_summary(headline: pl.DataFrame, seed: int) -> dict:
    """What ``summary.json`` records of the partition: its definition and the headline in words."""
    return {
        "profiles": "condition × country × unit with all 24 questions answered: 24 item means, or the six indices",
        "distance": "Euclidean on profiles z-scored per column over the scope (constant columns dropped)",
        "headline_ss": "marginal (type III, by = 'margin'): each factor's share beyond all others",
        "sequential_ss": "type I (by = 'terms') in role order: country, model, respondent, prompt design, seed",
        "blocks": "scope 'all' permutes within the model when several models answered; model scopes permute freely",
        "max_profiles": MAX_PROFILES,
        "seed": seed,
        "headline": [headline_sentence(row) for row in headline.filter(pl.col("profile") == "items").to_dicts()],
    }
