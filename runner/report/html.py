"""``render_report``: RUN_DIR/analysis → RUN_DIR/report/index.html (PNGs embedded as data URIs and saved beside).

The page uses no scripts, fonts or styles from outside the file, so it opens offline.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import polars as pl

from runner.errors import InputError
from runner.report import figures
from runner.rundir import RunWriter, read_output_json, read_output_table
from runner.survey.reference import load_reference

__all__ = ["render_report"]

STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #bbb; padding: 3px 7px; text-align: right; }
th { background: #eee; } td.l, th.l { text-align: left; }
figure { margin: 1em 0 2em; } figcaption { font-size: 13px; color: #555; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 12px; }
"""


def _read(run_dir: Path, name: str) -> pl.DataFrame:
    """One analysis table (empty when the analysis did not produce it)."""
    data = read_output_table(run_dir, "analysis", name)
    return pl.DataFrame() if data is None else pl.from_arrow(data)


def _fmt(value: object) -> str:
    """A table cell: floats to 2 decimals, NaN/None as N/A, lists joined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "N/A"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _table(frame: pl.DataFrame, *, max_rows: int = 200) -> str:
    """An HTML table of a frame (first ``max_rows`` rows, with a note when cut)."""
    if frame.height == 0:
        return "<p><em>not applicable to this run</em></p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
        for row in frame.head(max_rows).iter_rows()
    )
    more = (
        f"<p><em>{frame.height - max_rows} more rows in the Parquet table</em></p>" if frame.height > max_rows else ""
    )
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _figure(out: RunWriter, name: str, png: bytes | None, caption: str) -> str:
    """Save a PNG beside the page and embed it as a data URI with a caption."""
    if png is None:
        return ""
    with out.output_file("report", f"{name}.png") as tmp:
        tmp.write_bytes(png)
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure id="fig-{name}"><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _tau_table(kendall: pl.DataFrame, cat: pl.DataFrame, factors: list[str]) -> pl.DataFrame:
    """Papers' Table 1 layout: one row per dimension (+ CAT), one column per condition, 'tau [low, high]'."""
    if kendall.height == 0:
        return pl.DataFrame()
    key = pl.concat_str([pl.col(f).cast(pl.String) for f in factors], separator=", ") if factors else pl.lit("all")
    cell = pl.format(
        "{} [{}, {}]", *[pl.col(c).round(2).cast(pl.String).fill_null("N/A") for c in ("tau", "ci_low", "ci_high")]
    )
    wide = kendall.with_columns(condition=key, cell=cell).pivot("condition", index="dimension", values="cell")
    cat_row = cat.with_columns(
        condition=key,
        cell=pl.format(
            "{} [{}, {}]",
            *[pl.col(c).round(2).cast(pl.String).fill_null("N/A") for c in ("cat_score", "ci_low", "ci_high")],
        ),
    )
    cat_wide = cat_row.with_columns(dimension=pl.lit("CAT score")).pivot("condition", index="dimension", values="cell")
    return pl.concat([wide, cat_wide], how="diagonal")


def _probe_section(manifest: dict) -> str:
    """The run's determinism probes (``run.determinism_probe``) as a table per endpoint, or a note that none ran."""
    probes = manifest.get("determinism_probe")
    if not probes:
        return "<p><em>no determinism probe in this run (set run.determinism_probe = true)</em></p>"
    parts = []
    for name, probe in sorted(probes.items()):
        if "error" in probe:
            parts.append(f"<p>Endpoint <b>{html.escape(name)}</b>: probe failed: {html.escape(probe['error'])}</p>")
            continue
        parts.append(
            f"<h3>Determinism probe: {html.escape(name)} ({html.escape(str(probe['model']))})</h3>"
            f"<p>Seed <b>{html.escape(probe['seed'])}</b>; identical share at temperature 0 without a seed "
            f"{probe['greedy_identical_share']:.2f}; {probe['repeats']} repeats of {probe['max_tokens']} "
            "tokens per condition.</p>"
        )
        parts.append(_table(pl.DataFrame(probe["conditions"])))
    return "".join(parts)


def render_report(run_dir: str | Path) -> Path:
    """Write ``RUN_DIR/report/index.html`` from ``RUN_DIR/analysis``; returns the HTML path."""
    root = Path(run_dir)
    summary = read_output_json(root, "analysis", "summary.json")
    if summary is None:
        raise InputError(f"{root}: no analysis/summary.json; run `hofcat analyze {root}` first")
    with RunWriter.attach(root) as writer:
        return _render(writer, summary)


def _render(out: RunWriter, summary: dict) -> Path:
    """Write the report's page and figures through ``out``; returns the page's path."""
    root = out.run_dir
    factors = list(summary["design"]["factors"])
    reference = load_reference(summary["reference"]["name"])
    t = {
        name: _read(root, name)
        for name in (
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
        )
    }
    seed = int(summary["bootstrap"]["seed"])
    parts = [
        f"<h1>hofcat report: {html.escape(root.name)}</h1>",
        (
            f"<p>Reference <b>{html.escape(reference.name)}</b>; undefined tau policy <b>"
            f"{html.escape(summary['undefined_tau'])}</b>; {summary['conditions']} condition(s), "
            f"{summary['answers']} answers; bootstrap {summary['bootstrap']['n_resamples']} resamples of "
            f"{', '.join(summary['bootstrap']['unit'])} ({summary['bootstrap']['confidence_level']:.0%} percentile "
            f"intervals, seed {seed}).</p>"
        ),
        "<h2>Ranking agreement</h2>",
        _figure(
            out,
            "kendall",
            figures.kendall_intervals(t["kendall"], factors),
            "Kendall tau-b per dimension with bootstrap intervals",
        ),
        "<h3>Kendall tau-b and CAT score (papers' Table 1 layout)</h3>",
        _table(_tau_table(t["kendall"], t["cat"], factors)),
        _figure(
            out,
            "scores",
            figures.dimension_scores(t["indices"], factors, reference),
            "Dimension scores per country: reference and each condition (papers' Figure 2)",
        ),
        "<h3>Mis-ranked dimensions per country</h3>",
        _table(t["misranked"]),
        "<h3>Error percentage per country (mean mis-ranked share over conditions)</h3>",
        _table(t["error_percentage"]),
        "<h2>Sampling grid</h2>",
        _figure(out, "grid", figures.grid_heatmap(t["cat"], factors), "CAT score over temperature × top_p")
        or "<p><em>the design does not vary both temperature and top_p</em></p>",
        "<h2>Experiment sets</h2>",
        _figure(
            out,
            "tsne",
            figures.respondent_embedding(t["respondents"], seed=seed),
            "t-SNE of respondents coloured by set (value-differences Figure 1)",
        ),
        _figure(out, "ssh", figures.ssh_heatmap(t["set_separation"]), "SS_h between sets (value-differences Figure 2)"),
        "<h3>Centroid correlation (Pearson, 24-d)</h3>",
        _table(t["centroid_correlations"]),
        "<h3>Disparity across nations (σ per dimension, D, MCD)</h3>",
        _table(t["disparity"]),
        "<h3>Separation between sets (Davies–Bouldin, silhouette, SS_h)</h3>",
        _table(t["set_separation"]),
        "<h3>PERMANOVA and PERMDISP per factor</h3>",
        _table(t["factor_tests"]),
        "<h2>Answers</h2>",
        _figure(out, "status", figures.status_breakdown(t["status_rates"]), "Parse-status breakdown"),
        _table(t["status_rates"]),
        "<h2>Determinism</h2>",
        f"<p>Temperature-0 repeated answers that disagree: {html.escape(json.dumps(summary['temperature_zero']))}</p>",
        _probe_section(summary.get("run_manifest") or {}),
        "<h3>Per-question mean, standard deviation and n (papers' Tables 5–17)</h3>",
        _table(t["questions"].select([c for c in t["questions"].columns if c != "status_ok"]), max_rows=480)
        if t["questions"].height
        else _table(t["questions"]),
        "<h2>Provenance</h2>",
        f"<pre>{html.escape(json.dumps(summary, indent=2, default=str))}</pre>",
    ]
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>hofcat report</title>'
        f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"
    )
    with out.output_file("report", "index.html") as tmp:
        tmp.write_text(page, encoding="utf-8")
    return out.layout.output("report") / "index.html"
