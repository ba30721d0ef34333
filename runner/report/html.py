"""``render_report``: RUN_DIR/analysis → RUN_DIR/report/ (index.html, figures/ as PNG+SVG+PDF, tables/ as CSV+MD+TeX).

The page starts with a summary — what was asked, the headline results, data quality, caveats — and then the
papers' figures and tables for whatever the design varies. A section with no data is left out. The page uses no
scripts, fonts or styles from outside the file, so it opens offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from runner.errors import InputError
from runner.escape import Markup, file_name, html, label_value
from runner.report import figures, maps
from runner.report.design import ReportDesign, full_label, report_design
from runner.report.measurement import measurement_blocks
from runner.report.methods import method_blocks
from runner.report.page import Page, analysis_table, fmt_value
from runner.report.partition import partition_blocks, partition_headlines
from runner.report.summary import alignment, asked, caveats, facts, headline, quality
from runner.rundir import RunWriter, read_output_json
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet, load_reference, reference_names
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
    "variance_partition",
    "variance_headline",
)


def _condition(frame: pl.DataFrame, factors: list[str]) -> pl.Expr:
    """A readable label of each row's condition (``model=a, temperature=0.5``), 'all' without factors."""
    present = [f for f in factors if f in frame.columns]
    if not present:
        return pl.lit("all")
    return pl.concat_str(
        [
            pl.format(f"{f}={{}}", pl.col(f).cast(pl.String).fill_null("none").map_elements(label_value, pl.String))
            for f in present
        ],
        separator=", ",
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


def render_report(run_dir: str | Path, *, facets: list[str] | None = None) -> Path:
    """Write ``RUN_DIR/report/index.html`` (and its figures and tables) from ``RUN_DIR/analysis``; the HTML path.

    ``facets``: the one or two varying factors small multiples are split by (default: the spec's ``[report]
    facets``, else chosen from the data; ``runner.report.design``)."""
    root = Path(run_dir)
    summary = read_output_json(root, "analysis", "summary.json")
    if summary is None:
        raise InputError(f"{root}: no analysis/summary.json; run `hofcat analyze {root}` first")
    with RunWriter.attach(root) as writer:
        try:
            return _render(writer, summary, facets)
        except InputError:  # already located (an unknown facet)
            raise
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


def _constants(manifest: dict[str, Any], factors: list[str]) -> dict[str, str]:
    """What the spec held constant: the model of a one-endpoint run and every design key with one value."""
    spec = manifest.get("spec") or {}
    out = {}
    endpoints = spec.get("endpoints") or []
    if len(endpoints) == 1:
        out["model"] = str(endpoints[0].get("model"))
    for key, value in (spec.get("design") or {}).items():
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if key not in factors and not isinstance(value, list | dict):
            out[key] = fmt_value(value)
    if spec.get("design") is not None and "measurement" not in spec["design"]:
        out["measurement"] = "sample (one sampled answer per request)"
    return out


def _conditions(cat: pl.DataFrame, design: ReportDesign) -> pl.DataFrame:
    """One row per condition: its ID, its factor values, CAT [interval], p and adjusted p (the figures' key)."""
    if cat.height == 0:
        return pl.DataFrame()
    keep = [c for c in ("cat_p", "cat_p_holm", "n_countries", "interval_note") if c in cat.columns]
    width = len(str(cat.height))
    return cat.select(
        pl.format("C{}", (pl.int_range(1, cat.height + 1)).cast(pl.String).str.zfill(width)).alias("id"),
        *[pl.col(f).cast(pl.String) for f in design.factors],
        _interval("cat_score").alias("CAT [interval]"),
        *[pl.col(c) for c in keep],
    )


def _condition_ids(cat: pl.DataFrame, factors: list[str], design: ReportDesign) -> dict[str, str]:
    """The analysis' condition names (``model=a, language=en``, as the comparison tables write them) → the
    Conditions table's IDs."""
    if cat.height == 0:
        return {}
    named = [f for f in factors if f in cat.columns and f != "_all"]
    labels = [full_label(row, named) for row in cat.iter_rows(named=True)]
    return dict(zip(labels, _conditions(cat, design)["id"], strict=True))


def _render(out: RunWriter, summary: dict, facets: list[str] | None) -> Path:
    """Write the report's page, figures and tables through ``out``; returns the page's path."""
    plt = figures.pyplot()
    with plt.rc_context(figures.RC):
        return _page(out, summary, facets)


def _reference(root: Path, summary: dict) -> ReferenceSet:
    """The reference set the analysis scored against, from its ``reference_scores`` table; an analysis written
    before that table existed names a shipped set (a path it names is not read: ``InputError``)."""
    about = summary["reference"]
    stored = analysis_table(root, "reference_scores")
    if stored.height:
        return ReferenceSet.from_table(about, stored)
    if about.get("name") in reference_names():
        return load_reference(about["name"])
    raise InputError(
        f"{root}/analysis: the reference scores are not stored with this analysis; run hofcat analyze again"
    )


def _page(out: RunWriter, summary: dict, facets: list[str] | None) -> Path:
    root = out.run_dir
    factors = list(summary["design"]["factors"])
    reference = _reference(root, summary)
    manifest = summary.get("run_manifest") or {}
    t = {name: analysis_table(root, name) for name in TABLES}
    if facets is None:
        facets = ((manifest.get("spec") or {}).get("report") or {}).get("facets") or None
    design = report_design(
        t["cat"], factors, facets=facets, constants=_constants(manifest, factors), answered=t["questions"]
    )
    factors = list(design.factors)
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
    key = f" Conditions are named by {design.key()}." if design.factors else ""
    colour = f" Colour: {design.colour_by}." if design.colour_by else ""

    page.raw(html("<h1>hofcat report: {}</h1>", str(title)))
    top, top_caption = headline(t["cat"], t["kendall"], design)
    page.section(
        "Summary",
        html(
            "<h3>Headline results</h3>{}{}{}<p class=caption>Reference {}; {}.</p>",
            page.table("headline", top, top_caption, collapse=False),
            facts(alignment(t["error_percentage"])),
            facts(partition_headlines(t["variance_headline"])),
            reference.name,
            interval,
        ),
        html("<h3>Data quality</h3>{}", facts(quality(t["status_rates"], _failures(root)))),
        html("<h3>Caveats</h3>{}", facts(notes, "warn")) if (notes := caveats(t, summary, reference)) else "",
        html("<h3>What was asked</h3>{}", facts(asked(manifest, summary, design))),
    )
    n_countries = t["indices"]["country"].n_unique() if t["indices"].height else 0
    page.section(
        "Ranking agreement",
        _plot(
            page,
            "cat_forest",
            figures.cat_forest(t["cat"], design),
            f"CAT score per condition with its interval, sorted ({interval}).{colour}{key}",
        ),
        _plot(
            page,
            "cat_by_factor",
            figures.cat_by_factor(t["cat"], design),
            "CAT score of each condition (dots) and the mean (bar) over the levels of the most important factor "
            f"that is not a facet; panels share their axes.{colour}",
        ),
        _plot(
            page,
            "kendall",
            figures.kendall_intervals(t["kendall"], design),
            f"Kendall tau-b between the model's and the reference's country ranking per dimension, {interval}.{key}",
        ),
        page.table(
            "conditions",
            _conditions(t["cat"], design),
            "Conditions: ID, factor values, CAT score [interval], exact permutation p and Holm-adjusted p",
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
            figures.rank_scores(t["indices"], design, reference),
            f"Ranks of the {n_countries} countries per dimension: the reference's (black bar) and the answers' "
            "(dots: mean rank over the conditions"
            + (f" of each {design.colour_by}" if design.colour_by else "")
            + "). Ranks, not index points: the analysis' indices leave out the VSM constants, so only their order "
            "is comparable with the reference (the Indices table has the index points).",
        ),
        page.table("misranked", t["misranked"], "Mis-ranked dimensions per country (CAT Tables 2/4)"),
        page.table("error_percentage", t["error_percentage"], "Error percentage per country over conditions"),
    )
    ids = _condition_ids(t["cat"], factors, design)
    page.section(
        "Comparisons between conditions",
        _plot(
            page,
            "cat_differences",
            figures.cat_differences(t["cat_differences"], ids, design),
            "CAT score of condition a minus condition b for every pair of conditions one factor apart, over the "
            "countries both answered, with its interval, sorted; colour: the factor the pair differs in. Rows "
            "name the conditions by their IDs in the Conditions table; the table below has every pair with its "
            "exact p and adjusted p.",
        ),
        page.table(
            "cat_differences",
            t["cat_differences"],
            "CAT score of condition a minus condition b (conditions one factor apart, over their shared countries): "
            f"{boot['confidence_level']:.0%} interval, exact paired swap p, smallest attainable p, Holm and "
            "Benjamini-Hochberg adjusted p",
        ),
        page.table("kendall_differences", t["kendall_differences"], "The same per dimension (tau)", collapse=True),
    )
    page.section("Variance partition", *partition_blocks(page, t["variance_partition"], t["variance_headline"]))
    page.section(
        "Sampling grid",
        _plot(page, "grid", maps.grid_heatmap(t["cat"], design), "CAT score (−1…1) over temperature × top_p."),
    )
    # the value-differences study's Figure 1 embeds each point's six VSM scores; "items" embeds its 24 answers
    vsm = summary.get("embedding", "items") == "vsm" and set(DIMENSIONS) <= set(t["respondents"].columns)
    tsne = maps.respondent_embedding(
        t["respondents"], t["cat"], design, seed=seed, columns=list(DIMENSIONS) if vsm else None
    )
    page.section(
        "Experiment sets",
        _plot(
            page,
            "tsne",
            tsne,
            ("t-SNE of the six VSM scores" if vsm else "t-SNE of the 24 answers")
            + f" of each respondent ({t['respondents'].height} points"
            + f"; points per {summary.get('points', 'seed')}; value-differences Figure 1).{colour}",
        ),
        _plot(
            page,
            "ssh",
            maps.ssh_by_factor(t["set_separation"], design),
            "SS_h between sets (value-differences Figure 2).",
        ),
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
    questions = t["questions"]
    page.section(
        "Answers",
        _plot(page, "status", maps.status_breakdown(t["status_rates"], design), "Parse-status shares of answers."),
        page.table("status_rates", t["status_rates"], "Parse statuses"),
    )
    page.section("Measurement and bias controls", *measurement_blocks(page, root, manifest))
    page.section("Agreement between measurement methods", *method_blocks(page, root))
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
