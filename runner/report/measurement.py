"""The report's "Measurement and bias controls" section: how answers were measured, baselines, position bias.

Reads the analysis tables ``measurement``, ``baselines`` and ``position_bias`` (runner/analyze/measurement.py,
runner/analyze/baselines.py) and the run manifest's ``measurement_fallback``; every block is empty (and the
section left out) when the analysis has none of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from runner.escape import Markup, html, html_join
from runner.report.page import Page, analysis_table
from runner.rundir import read_output_json

__all__ = ["measurement_blocks"]


def measurement_blocks(page: Page, run_dir: Path, manifest: dict[str, Any]) -> list[Markup]:
    """HTML blocks: measurement per endpoint, fallbacks, beyond-chance scores and position bias."""
    blocks = []
    measured = analysis_table(run_dir, "measurement")
    fallback = manifest.get("measurement_fallback") or {}
    if fallback:
        items = html_join(
            html("<li>{}: measurement distribution falls back to {}</li>", name, str(how))
            for name, how in fallback.items()
        )
        blocks.append(html("<ul class=warn>{}</ul>", items))
    if measured.height and (measured["measurement"] != "sample").any():
        blocks.append(
            page.table(
                "measurement",
                measured,
                "Answers per measurement: sampled, or option probabilities from first-token log-probabilities "
                "or stated by the model (verbalized) (with_probs); mean option mass before renormalising; share "
                "below the low-mass threshold; share partial (an option's token not among the alternatives: "
                "bounded, never 0, and scored by the policy's partial rule, by default the reply's own option)",
            )
        )
        blocks.extend(_partial_note(run_dir, measured))
    baselines = analysis_table(run_dir, "baselines")
    if baselines.height:
        cat = baselines.filter(pl.col("dimension") == "cat").drop("dimension")
        blocks.append(
            page.table(
                "baselines_cat",
                cat,
                "CAT score beyond chance: the observed score against content-free respondents answering the same "
                "cells (uniform: every option alike; position: the model's own position preference); q95 = the "
                "baseline's 95th percentile over its draws, beyond_chance = observed − q95, p = share of draws "
                "at least as high; NaN where the baseline's indices are constant (it ranks nothing)",
            )
        )
        blocks.append(
            page.table(
                "baselines",
                baselines.filter(pl.col("dimension") != "cat"),
                "Kendall tau per dimension beyond chance",
                collapse=True,
            )
        )
    bias = analysis_table(run_dir, "position_bias")
    if bias.height:
        blocks.append(
            page.table(
                "position_bias",
                bias,
                "Position bias per condition: share of answers at each displayed position (p1 first … p5 last), "
                "total variation from uniform, recency = p5 − p1; separates position from content only where the "
                "option order varies (design.option_order)",
            )
        )
    return blocks


_PARTIAL_RULES = {
    "sample": "scored by their replies' own options (one draw each from the distribution that was not fully listed)",
    "drop": "scored as unparseable answers (the policy's unparseable rule)",
}


def _partial_note(run_dir: Path, measured: pl.DataFrame) -> list[Markup]:
    """A warning line naming how many answers were partial distributions and the rule the analysis scored them by."""
    if "partial_share" not in measured.columns:
        return []
    partial = round(float((measured["partial_share"] * measured["answers"]).sum()))
    if partial == 0:
        return []
    summary = read_output_json(run_dir, "analysis", "summary.json") or {}
    rule = (summary.get("policy") or {}).get("partial", "sample")
    how = _PARTIAL_RULES.get(rule, f"scored by the partial rule {rule!r}")
    note = html(
        "<p class=warn>{:,} distribution answer(s) are partial: an option's token was not among the listed "
        "alternatives, so its probability is bounded (option_bound), never 0. With partial = {} they are {}.</p>",
        partial,
        str(rule),
        how,
    )
    return [note]
