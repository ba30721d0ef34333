"""The report's summary: what was asked, the headline per model (and language / framing where they vary), data
quality, and the caveats grouped by kind with counts — the first screen a reader sees.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from runner.analyze.agreement import MIN_COUNTRIES
from runner.escape import Markup, html, html_join
from runner.report.design import ReportDesign
from runner.report.page import fmt_value
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet

__all__ = ["alignment", "asked", "caveats", "facts", "headline", "quality"]


def asked(manifest: dict[str, Any], summary: dict[str, Any], design: ReportDesign) -> list[str]:
    """What the run asked, as short facts (from the manifest's spec; the analysis alone when there is none):
    the factors that vary with their number of levels, and what was held constant."""
    spec = manifest.get("spec") or {}
    facts = []
    models = [f"{e.get('model')} ({e.get('name')}, {e.get('provider')})" for e in spec.get("endpoints", [])]
    if models:
        facts.append("models: " + "; ".join(models))
    for endpoint, entry in sorted((summary.get("served_models") or {}).items()):  # what the replies said answered
        named = ", ".join(f"{name} ({n:,} replies)" for name, n in sorted(entry["served"].items()))
        unreported = f"{entry['unreported']:,} replies named no model" if entry["unreported"] else ""
        facts.append(f"served by {endpoint}: " + "; ".join(x for x in (named, unreported) if x))
    facts.extend(  # a combined analysis of several runs (``hofcat analyze R1 R2 --out``)
        f"run {run['label']}: {run['run_dir']} (spec {run.get('spec_hash')}, parser {run.get('parser_version')})"
        for run in summary.get("runs", [])
    )
    plan = manifest.get("plan") or {}
    if plan.get("cells") is not None:
        facts.append(f"cells planned: {plan['cells']:,}")
    facts.append(f"answers analysed: {summary['answers']:,} in {summary['conditions']} condition(s)")
    if design.factors:
        facts.append(
            "varied: "
            + "; ".join(f"{f} ({len(design.levels[f])} levels)" for f in design.factors)
            + f" — figures name conditions by these values in this order ({design.key()})"
        )
    if design.constants:
        facts.append("held constant: " + "; ".join(f"{k} = {v}" for k, v in design.constants.items()))
    return facts


def quality(status: pl.DataFrame, failures: int) -> list[str]:
    """Parse rate, refusals and failures, as short facts."""
    facts = []
    if status.height:
        totals = status.group_by("status").agg(pl.col("count").sum())
        total = int(totals["count"].sum())
        counts = dict(totals.iter_rows())
        facts.append(f"parsed (status ok): {counts.get('ok', 0) / total:.1%} of {total:,} answers")
        if counts.get("refusal"):
            facts.append(f"refusals: {counts['refusal'] / total:.1%}")
        other = total - counts.get("ok", 0) - counts.get("refusal", 0)
        if other:
            facts.append(f"other unparsed (no answer, ambiguous, …): {other / total:.1%}")
    facts.append(f"requests failed for good: {failures:,}")
    return facts


def _smallest_p(kendall: pl.DataFrame, n: int) -> float:
    """The smallest two-sided tau p-value the design can reach: the analysis' exact attainable minima (ties
    counted), or for an analysis without them 2 / n! (``n`` untied countries)."""
    if kendall.height and "kendall_p_min" in kendall.columns:
        return float(kendall["kendall_p_min"].min())
    return min(1.0, 2 / math.factorial(n)) if n >= 2 else 1.0


LISTED = 6  # conditions or countries named in one summarising caveat line; the Warnings table has them all


def caveats(t: dict[str, pl.DataFrame], summary: dict[str, Any], reference: ReferenceSet) -> list[str]:
    """What a reader must know before trusting the numbers: the analysis' warnings, plus design limits.

    Each fact is said once: the analysis' warnings are grouped by kind, one line per kind with its count (the
    "few countries" and "missing reference" kinds name what they concern); every one stays in the Warnings table."""
    warned = [w if isinstance(w, dict) else {"message": str(w)} for w in summary.get("warnings", [])]
    by_kind: dict[str, list[dict[str, Any]]] = {"few_countries": [], "missing_reference": []}
    plain = []
    for w in warned:
        (by_kind[w["kind"]] if w.get("kind") in by_kind else plain).append(w)
    kinds: dict[str, list[str]] = {}
    for w in plain:
        kinds.setdefault(str(w.get("kind") or "other"), []).append(str(w.get("message", w)))
    notes = [str(c) for c in summary.get("caveats", [])]  # what thin data could not support (analyze/coverage)
    notes += [
        messages[0]
        if len(messages) == 1
        else f"{len(messages)} warnings of kind {kind}, e.g. {messages[0]} (every one in the Warnings table, appendix)"
        for kind, messages in kinds.items()
    ]
    if few := by_kind["few_countries"]:
        conditions = [str(w.get("condition")) for w in few]
        notes.append(
            f"{len(few)} condition(s) with fewer than {MIN_COUNTRIES} countries with reference scores (not ranked, "
            f"or tau only ±1 there): {_listed(conditions)}"
        )
    cat = t["cat"]
    if cat.height and "n_countries" in cat.columns:
        n = int(cat["n_countries"].min())
        if n >= MIN_COUNTRIES and (smallest := _smallest_p(t["kendall"], n)) > 0.05:
            notes.append(
                f"with {n} countries the smallest attainable two-sided p-value is {smallest:.3f}: no dimension "
                "can be significant at 0.05 in this design"
            )
    missing = t["countries_without_reference"]
    if missing.height:
        notes.append("countries without reference scores (left out of tau): " + ", ".join(missing["country"]))
    if gaps := by_kind["missing_reference"]:
        dimensions: dict[str, list[str]] = {}
        for w in gaps:
            dims = dimensions.setdefault(str(w.get("country")), [])
            if w.get("dimension") and str(w["dimension"]).upper() not in dims:
                dims.append(str(w["dimension"]).upper())
        named = [f"{c} ({', '.join(d)})" if d else c for c, d in dimensions.items()]
        notes.append(
            f"{reference.name} lacks some dimensions for: {_listed(named)} (left out of those dimensions' tau; "
            "drawn as n/a)"
        )
    extraction = summary.get("extractions")  # the extractor fallback (runner/extract): used or left unused
    if extraction and extraction.get("used"):
        who = ", ".join(
            f"{e['answers']} {e['parse_status']} by {e['endpoint']} ({e['model']})" for e in extraction["by_extractor"]
        )
        notes.append(
            f"{extraction['replaced']} answers the parser could not read are scored from an extractor model's "
            f"restatement (status extracted: {who or 'none'})"
        )
    elif extraction:
        notes.append(
            f"{extraction['stored']} extracted answers are stored but not scored (hofcat analyze --use-extracted)"
        )
    return notes


def alignment(error: pl.DataFrame) -> list[str]:
    """The best and worst aligned countries (fewest and most mis-ranked dimensions over conditions)."""
    if error.height == 0:
        return []
    ranked = error.drop_nulls("error_pct").sort("error_pct")
    if ranked.height == 0:
        return []
    best, worst = ranked.row(0, named=True), ranked.row(-1, named=True)
    return [
        f"best aligned: {best['country']} ({best['error_pct']:.0f} % of dimensions mis-ranked)",
        f"worst aligned: {worst['country']} ({worst['error_pct']:.0f} % of dimensions mis-ranked)",
    ]


def _listed(names: list[str]) -> str:
    """The first ``LISTED`` of ``names``, joined, with how many more there are."""
    more = len(names) - LISTED
    return "; ".join(names[:LISTED]) + (f"; … {more} more in the Warnings table (appendix)" if more > 0 else "")


def facts(items: list[str], cls: str = "") -> Markup:
    """A bulleted list of ``items`` (escaped), or nothing."""
    if not items:
        return Markup()
    return html('<ul class="facts {}">{}</ul>', cls, html_join(html("<li>{}</li>", i) for i in items))


HEADLINE_ROWS = 24  # rows of the headline table: grouping factors are dropped from the end until it fits
HEADLINE_BY = ("endpoint", "model", "language", "framing")


def _cell(values: pl.Series, low: pl.Series, high: pl.Series, *, spread: bool = True) -> str:
    """One condition: 'estimate [low, high]'; several: 'median (min … max)', or the median alone."""
    v = values.cast(pl.Float64).fill_nan(None).drop_nulls()
    if v.len() == 0:
        return "N/A"
    if values.len() == 1:
        return f"{v[0]:.2f} [{fmt_value(low[0])}, {fmt_value(high[0])}]"
    return f"{v.median():.2f} ({v.min():.2f} … {v.max():.2f})" if spread else f"{v.median():.2f}"


def headline(cat: pl.DataFrame, kendall: pl.DataFrame, design: ReportDesign) -> tuple[pl.DataFrame, str]:
    """CAT and tau per model (and language / framing where they vary): one condition's estimate with its
    interval and p, or over several conditions the median and range, and how many are significant; and the
    caption saying which."""
    if cat.height == 0:
        return pl.DataFrame(), ""
    by = [f for f in HEADLINE_BY if f in design.factors]
    while by and cat.select(by).unique().height > HEADLINE_ROWS:
        by.pop()
    rows = []
    several = cat.height > (cat.select(by).unique().height if by else 1)
    for group in cat.select(by).unique().sort(by).to_dicts() if by else [{}]:
        sub = cat
        tau = kendall
        for f, v in group.items():
            sub, tau = sub.filter(pl.col(f) == v), tau.filter(pl.col(f) == v)
        row: dict[str, Any] = {**{f: str(v) for f, v in group.items()}, "conditions": sub.height}
        row["CAT"] = _cell(sub["cat_score"], sub["ci_low"], sub["ci_high"])
        if "cat_p" in sub.columns:
            adjusted = "cat_p_holm" if "cat_p_holm" in sub.columns else "cat_p"
            if several:
                row["Holm p ≤ 0.05"] = f"{int((sub[adjusted] <= 0.05).sum())} of {sub.height}"
            else:
                row["p"] = fmt_value(sub["cat_p"][0])
        for dim in DIMENSIONS:
            d = tau.filter(pl.col("dimension") == dim) if tau.height else tau
            row[dim.upper()] = _cell(d["tau"], d["ci_low"], d["ci_high"], spread=False) if d.height else "N/A"
        rows.append(row)
    caption = (
        "CAT score and Kendall tau-b per dimension"
        + (f" per {', '.join(by)}" if by else "")
        + (
            ": over the conditions of each row, the median CAT (smallest … largest estimate), how many conditions "
            "have a Holm-adjusted CAT p ≤ 0.05, and the median tau per dimension; each condition's own estimates, "
            "intervals and p are in the Conditions and Kendall tau tables below"
            if several
            else ": estimate [interval], exact permutation p"
        )
    )
    return pl.DataFrame(rows), caption
