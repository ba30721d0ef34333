"""``render_report``: RUN_DIR/analysis → RUN_DIR/report/ (index.html, figures/ as PNG+SVG+PDF, tables/ as CSV+MD+TeX).

The page starts with a summary — what was asked, the headline results, data quality, caveats — and then the
papers' figures and tables for whatever the design varies. A section with no data is left out. The page uses no
scripts, fonts or styles from outside the file, so it opens offline.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from runner.analyze.agreement import MIN_COUNTRIES
from runner.errors import InputError
from runner.escape import Markup, file_name, html, html_join
from runner.report import figures
from runner.report.measurement import measurement_blocks
from runner.report.page import Page, analysis_table, fmt_value
from runner.rundir import RunWriter, read_output_json
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet, load_reference
from runner.sweep.accounting import failed_for_good

__all__ = ["render_report"]

TABLES = (
    "indices",
    "kendall",
    "cat",
    "misranked",
    "error_percentage",
    "questions",
    "status_rates",
    "respondents",
    "centroid_correlations",
    "disparity",
    "set_separation",
    "factor_tests",
    "cat_differences",
    "kendall_differences",
    "identity_correlations",
    "countries_without_reference",
    "warnings",
    "reliability",
)


def _condition(frame: pl.DataFrame, factors: list[str]) -> pl.Expr:
    """A readable label of each row's condition (``model=a, temperature=0.5``), 'all' without factors."""
    present = [f for f in factors if f in frame.columns]
    if not present:
        return pl.lit("all")
    return pl.concat_str(
        [pl.format(f"{f}={{}}", pl.col(f).cast(pl.String).fill_null("none")) for f in present], separator=", "
    )


def _interval(value: str, low: str = "ci_low", high: str = "ci_high") -> pl.Expr:
    """'value [low, high]' with two decimals, N/A for missing."""
    parts = [pl.col(c).round(2).cast(pl.String).fill_null("N/A") for c in (value, low, high)]
    return pl.format("{} [{}, {}]", *parts)


def _tau_table(kendall: pl.DataFrame, cat: pl.DataFrame, factors: list[str]) -> pl.DataFrame:
    """Papers' Table 1 layout, transposed to stay narrow: one row per condition, one column per dimension + CAT."""
    if kendall.height == 0:
        return pl.DataFrame()
    wide = kendall.with_columns(condition=_condition(kendall, factors), cell=_interval("tau")).pivot(
        "dimension", index="condition", values="cell"
    )
    if cat.height:
        scores = cat.select(condition=_condition(cat, factors), CAT=_interval("cat_score"))
        wide = wide.join(scores, on="condition", how="left")
    return wide


def _asked(manifest: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """What the run asked, as short facts (from the manifest's spec; the analysis alone when there is none)."""
    spec = manifest.get("spec") or {}
    design = spec.get("design") or {}
    facts = []
    models = [f"{e.get('model')} ({e.get('name')}, {e.get('provider')})" for e in spec.get("endpoints", [])]
    if models:
        facts.append("models: " + "; ".join(models))
    for endpoint, entry in sorted((summary.get("served_models") or {}).items()):  # what the replies said answered
        named = ", ".join(f"{name} ({n:,} replies)" for name, n in sorted(entry["served"].items()))
        unreported = f"{entry['unreported']:,} replies named no model" if entry["unreported"] else ""
        facts.append(f"served by {endpoint}: " + "; ".join(x for x in (named, unreported) if x))
    for key, label in (
        ("mode", "mode"),
        ("measurement", "measurement"),
        ("languages", "languages"),
        ("personas", "personas"),
        ("identities", "identities"),
        ("reply_format", "reply format"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("seeds", "seeds"),
    ):
        if key in design:
            value = design[key]
            if isinstance(value, dict):
                value = ", ".join(f"{k} = {fmt_value(v)}" for k, v in value.items())
            facts.append(f"{label}: {fmt_value(value)}")
    if "measurement" not in design and design:
        facts.append("measurement: sample (one sampled answer per request)")
    facts.extend(  # a combined analysis of several runs (``hofcat analyze R1 R2 --out``)
        f"run {run['label']}: {run['run_dir']} (spec {run.get('spec_hash')}, parser {run.get('parser_version')})"
        for run in summary.get("runs", [])
    )
    plan = manifest.get("plan") or {}
    if plan.get("cells") is not None:
        facts.append(f"cells planned: {plan['cells']:,}")
    facts.append(f"answers analysed: {summary['answers']:,} in {summary['conditions']} condition(s)")
    return facts


def _quality(status: pl.DataFrame, failures: int) -> list[str]:
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


CAVEATS_SHOWN = 12
LISTED = 6  # conditions or countries named in one summarising caveat line; the Warnings table has them all


def _caveats(t: dict[str, pl.DataFrame], summary: dict[str, Any], reference: ReferenceSet) -> list[str]:
    """What a reader must know before trusting the numbers: the analysis' warnings, plus design limits.

    Each fact is said once: the analysis' per-condition "few countries" and per-country "missing reference"
    warnings are summed up in one line each (every one of them stays in the Warnings table)."""
    warned = [w if isinstance(w, dict) else {"message": str(w)} for w in summary.get("warnings", [])]
    by_kind: dict[str, list[dict[str, Any]]] = {"few_countries": [], "missing_reference": []}
    plain = []
    for w in warned:
        (by_kind[w["kind"]] if w.get("kind") in by_kind else plain).append(w)
    notes = [str(c) for c in summary.get("caveats", [])]  # what thin data could not support (analyze/coverage)
    notes += [str(w.get("message", w)) for w in plain[:CAVEATS_SHOWN]]
    if len(plain) > CAVEATS_SHOWN:
        notes.append(f"… {len(plain) - CAVEATS_SHOWN} more warnings in the Warnings table (appendix)")
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


def _headline(t: dict[str, pl.DataFrame], factors: list[str]) -> pl.DataFrame:
    """CAT score per condition with its interval (and p-value where the analysis gives one)."""
    cat = t["cat"]
    if cat.height == 0:
        return pl.DataFrame()
    cols = [_condition(cat, factors).alias("condition"), _interval("cat_score").alias("CAT [interval]")]
    cols += [
        pl.col(c) for c in ("interval_note", "cat_p", "cat_p_min", "cat_p_holm", "n_countries") if c in cat.columns
    ]
    return cat.select(cols)


def _tau_tests(kendall: pl.DataFrame, factors: list[str]) -> pl.DataFrame:
    """Per dimension and condition: tau, its interval and its note, the exact p with the attainable minimum,
    and the Holm / Benjamini–Hochberg adjusted p of the family."""
    if kendall.height == 0 or "kendall_p" not in kendall.columns:
        return pl.DataFrame()
    keep = ["interval_note", "kendall_p", "kendall_p_min", "kendall_p_holm", "kendall_p_bh", "p_method", "n_countries"]
    return kendall.select(
        _condition(kendall, factors).alias("condition"),
        pl.col("dimension"),
        _interval("tau").alias("tau [interval]"),
        *[pl.col(c) for c in keep if c in kendall.columns],
    )


def _alignment(error: pl.DataFrame) -> list[str]:
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


def _facts(items: list[str], cls: str = "") -> Markup:
    if not items:
        return Markup()
    return html('<ul class="facts {}">{}</ul>', cls, html_join(html("<li>{}</li>", i) for i in items))


def _determinism(page: Page, summary: dict[str, Any], manifest: dict[str, Any]) -> list[Markup]:
    """The temperature-0 agreement and the endpoints' determinism probes as tables."""
    blocks = []
    zero = summary.get("temperature_zero") or {}
    if zero.get("groups"):
        frame = pl.DataFrame({"measure": list(zero), "value": [fmt_value(v) for v in zero.values()]})
        blocks.append(page.table("temperature_zero", frame, "Repeated temperature-0 answers that disagree"))
    for name, probe in sorted((manifest.get("determinism_probe") or {}).items()):
        if "error" in probe:
            blocks.append(html("<p>Endpoint <b>{}</b>: probe failed: {}</p>", name, str(probe["error"])))
            continue
        blocks.append(
            html(
                "<h3>Determinism probe: {} ({})</h3><p>Seed <b>{}</b>; identical share at temperature 0 without a "
                "seed {}; {} repeats of {} tokens per condition.</p>",
                name,
                str(probe.get("model")),
                str(probe.get("seed")),
                fmt_value(probe.get("greedy_identical_share")),
                str(probe.get("repeats")),
                str(probe.get("max_tokens")),
            )
        )
        # the endpoint's name is data: its table's files and id are derived from it, never spelled by it
        conditions = pl.DataFrame(probe.get("conditions", []))
        blocks.append(page.table("probe_" + file_name(str(name)), conditions, f"Probe conditions of {name}"))
    return blocks


def render_report(run_dir: str | Path) -> Path:
    """Write ``RUN_DIR/report/index.html`` (and its figures and tables) from ``RUN_DIR/analysis``; the HTML path."""
    root = Path(run_dir)
    summary = read_output_json(root, "analysis", "summary.json")
    if summary is None:
        raise InputError(f"{root}: no analysis/summary.json; run `hofcat analyze {root}` first")
    with RunWriter.attach(root) as writer:
        try:
            return _render(writer, summary)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:  # a summary.json from elsewhere
            raise InputError(
                f"{root}/analysis/summary.json: not what this hofcat's analyze writes ({type(exc).__name__}: "
                f"{str(exc)[:200]}); run `hofcat analyze {root}` again"
            ) from None


def _failures(root: Path) -> int:
    """Cells failed for good (a failure and no stored response; a cell retried and stored is not one)."""
    try:
        return len(failed_for_good(root))
    except (OSError, KeyError, ValueError):  # analysis of a bare answers table: no store beside it
        return 0


def _render(out: RunWriter, summary: dict) -> Path:
    """Write the report's page, figures and tables through ``out``; returns the page's path."""
    root = out.run_dir
    factors = list(summary["design"]["factors"])
    reference = load_reference(summary["reference"]["name"])
    manifest = summary.get("run_manifest") or {}
    t = {name: analysis_table(root, name) for name in TABLES}
    boot = summary["bootstrap"]
    seed = int(boot["seed"])
    estimand = summary.get("intervals") or {}
    if estimand:  # the estimand's interval (coverage measured in benches/coverage.py); the bootstrap kept beside
        interval = (
            f"{boot['confidence_level']:.0%} intervals for {estimand.get('estimand', 'the population tau')} "
            f"({estimand.get('method', '')}; measured coverage in docs/analysis.md; the percentile bootstrap "
            f"over {', '.join(boot['unit'])} is in the tables as boot_low/boot_high)"
        )
    else:
        interval = (
            f"{boot['confidence_level']:.0%} {boot.get('method', 'percentile')} bootstrap intervals over "
            f"{', '.join(boot['unit'])} ({boot['n_resamples']} resamples, seed {seed})"
        )
    title = manifest.get("run_name") or root.name
    page = Page(out)

    page.raw(html("<h1>hofcat report: {}</h1>", str(title)))
    page.section(
        "Summary",
        html("<h3>What was asked</h3>{}", _facts(_asked(manifest, summary))),
        html(
            "<h3>Headline results</h3><p class=caption>Reference {}; {}.</p>{}{}",
            reference.name,
            interval,
            page.table("headline", _headline(t, factors), "CAT score per condition"),
            _facts(_alignment(t["error_percentage"])),
        ),
        html("<h3>Data quality</h3>{}", _facts(_quality(t["status_rates"], _failures(root)))),
        html("<h3>Caveats</h3>{}", _facts(caveats, "warn")) if (caveats := _caveats(t, summary, reference)) else "",
    )

    kendall = figures.kendall_intervals(t["kendall"], factors)
    scores = figures.dimension_scores(t["indices"], factors, reference)
    n_countries = t["indices"]["country"].n_unique() if t["indices"].height else 0
    page.section(
        "Ranking agreement",
        _plot(
            page,
            "kendall",
            kendall,
            f"Kendall tau-b between the model's and the reference's country ranking per "
            f"dimension (unitless, −1…1), {interval}; one panel per model.",
        ),
        page.table(
            "tau_tests",
            _tau_tests(t["kendall"], factors),
            "Kendall tau-b per dimension: interval and its note, exact permutation p against no association "
            "(with the smallest p the design can attain), Holm and Benjamini-Hochberg adjusted p",
            collapse=True,
        ),
        page.table(
            "tau_table",
            _tau_table(t["kendall"], t["cat"], factors),
            "Kendall tau-b [interval] per dimension and CAT score (papers' Table 1)",
        ),
        _plot(
            page,
            "scores",
            scores,
            f"VSM13 index scores per country ({n_countries} countries; index points): the "
            "reference as a dark bar, each condition of each model as a dot; missing reference values are n/a.",
        ),
        page.table("misranked", t["misranked"], "Mis-ranked dimensions per country (CAT Tables 2/4)"),
        page.table("error_percentage", t["error_percentage"], "Error percentage per country over conditions"),
    )
    page.section(
        "Comparisons between conditions",
        page.table(
            "cat_differences",
            t["cat_differences"],
            "CAT score of condition a minus condition b (conditions one factor apart, over their shared countries): "
            f"{boot['confidence_level']:.0%} interval, exact paired swap p, smallest attainable p, Holm and "
            "Benjamini-Hochberg adjusted p",
        ),
        page.table("kendall_differences", t["kendall_differences"], "The same per dimension (tau)", collapse=True),
    )
    grid = figures.grid_heatmap(t["cat"], factors)
    page.section(
        "Sampling grid",
        _plot(page, "grid", grid, f"CAT score (unitless, −1…1) over temperature × top_p with {interval}."),
    )
    # the value-differences study's Figure 1 embeds each point's six VSM scores; "items" embeds its 24 answers
    vsm = summary.get("embedding", "items") == "vsm" and set(DIMENSIONS) <= set(t["respondents"].columns)
    tsne = figures.respondent_embedding(t["respondents"], seed=seed, columns=list(DIMENSIONS) if vsm else None)
    ssh = figures.ssh_heatmap(t["set_separation"])
    page.section(
        "Experiment sets",
        _plot(
            page,
            "tsne",
            tsne,
            f"t-SNE of respondents ({t['respondents'].height} points"
            + (", the six VSM scores of each: t-SNE of the six VSM scores" if vsm else ", 24 answers each")
            + f"; points per {summary.get('points', 'seed')}), one colour per set (value-differences Figure 1).",
        ),
        _plot(page, "ssh", ssh, "SS_h between set pairs (unitless; value-differences Figure 2)."),
        page.table("centroid_correlations", t["centroid_correlations"], "Centroid correlation (Pearson, 24-d)"),
        page.table("disparity", t["disparity"], "Disparity across nations (σ per dimension, D, MCD)"),
        page.table("set_separation", t["set_separation"], "Separation between sets (Davies–Bouldin, silhouette, SS_h)"),
        page.table("factor_tests", t["factor_tests"], "PERMANOVA and PERMDISP per factor"),
        page.table(
            "identity_correlations",
            t["identity_correlations"],
            "Identity-context correlations within each set: mean Pearson r between the mean answers of each two "
            "nations, genders, ages (value-differences Table 5)",
        ),
    )
    status = figures.status_breakdown(t["status_rates"])
    questions = t["questions"]
    page.section(
        "Answers",
        _plot(page, "status", status, "Parse-status shares of answers per group."),
        page.table("status_rates", t["status_rates"], "Parse statuses"),
    )
    page.section("Measurement and bias controls", *measurement_blocks(page, root, manifest))
    page.section(
        "Reliability",
        page.table(
            "reliability",
            t["reliability"],
            "Cronbach's alpha per dimension (the VSM13 is known for low alpha) and the agreement of repeated seeds "
            "(ICC(1), ICC(1,k)) per condition",
        ),
    )
    page.section("Determinism", *_determinism(page, summary, manifest))
    page.section(
        "Appendix",
        page.table(
            "questions",
            questions.select([c for c in questions.columns if c != "status_ok"]) if questions.height else questions,
            "Per-question mean, standard deviation and n (papers' Tables 5–17)",
            collapse=True,
        ),
        page.table(
            "indices", t["indices"], "Index scores per condition and country, with standard errors", collapse=True
        ),
        page.table("warnings", t["warnings"], "Warnings the analysis raised", collapse=True),
        html("<details><summary>Provenance (analysis summary.json)</summary><pre>{}</pre></details>", _json(summary)),
    )
    return page.write(f"hofcat report: {title}")


def _plot(page: Page, name: str, plot: figures.Plot | None, caption: str) -> Markup:
    """A figure with its caption, plus what it leaves out."""
    if plot is None:
        return Markup()
    return page.figure(name, plot.fig, f"{caption} {plot.note}".strip(), shows=plot.shows)


def _json(summary: dict) -> str:
    import json

    return json.dumps(summary, indent=2, default=str)
