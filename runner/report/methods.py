"""The report's "Agreement between measurement methods" section: one figure and its tables.

Reads the analysis tables ``method_divergence`` and ``method_agreement`` (runner/analyze/methods.py); empty (and
the section left out) when the sweep did not cross measurements. The figure's form does not depend on the
number of conditions, so it reads the same at 1 and at 1,000: left, each method pair's per-cell total variation
as a cumulative distribution beside that of its noise floor (what sampling alone would give); right, the CAT
score each method gives per condition, one point per condition and pair, on the identity line where they agree,
ringed where the conclusions differ. No point is labelled; every condition's numbers are in the table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from runner.escape import Markup, html
from runner.escape import figure_text as ft
from runner.report.design import OKABE_ITO
from runner.report.figures import RC, WIDTH, Plot, pyplot
from runner.report.page import Page, analysis_table

__all__ = ["method_blocks", "method_figure"]

_MAX_PAIRS = len(OKABE_ITO)  # pairs drawn in their own colours (three methods give three pairs)


def method_figure(divergence: pl.DataFrame, agreement: pl.DataFrame) -> Plot | None:
    """Per-cell TV against its noise floor (ECDFs) and CAT per method (scatter); None without two methods."""
    if divergence.height == 0 and agreement.height == 0:
        return None
    plt = pyplot()
    pairs = sorted({(str(a), str(b)) for a, b in agreement.select("method_a", "method_b").iter_rows()})
    shown, left_out = pairs[:_MAX_PAIRS], pairs[_MAX_PAIRS:]
    with plt.rc_context(RC):
        fig, (tv_ax, cat_ax) = plt.subplots(1, 2, figsize=(WIDTH, 3.2), layout="constrained")
        for colour, (a, b) in zip(OKABE_ITO, shown, strict=False):
            cells = divergence.filter((pl.col("method_a") == a) & (pl.col("method_b") == b))
            name = ft(f"{a} vs {b}")
            _ecdf(tv_ax, cells["tv"], colour, "-", f"{name}: TV")
            if (cells["tv_floor"].drop_nulls().drop_nans().max() or 0.0) > 0.0:  # an exact pair has no floor
                _ecdf(tv_ax, cells["tv_floor"], colour, ":", f"{name}: noise floor")
            rows = agreement.filter((pl.col("method_a") == a) & (pl.col("method_b") == b))
            x, y = rows["cat_a"].cast(pl.Float64).to_numpy(), rows["cat_b"].cast(pl.Float64).to_numpy()
            alpha = 0.9 if rows.height <= 30 else max(0.15, 30 / rows.height)
            cat_ax.scatter(x, y, s=14 if rows.height <= 100 else 5, color=colour, alpha=alpha, label=name, lw=0)
            differ = rows["cat_conclusions_differ"].fill_null(False).to_numpy()
            if differ.any():
                cat_ax.scatter(x[differ], y[differ], s=40, facecolors="none", edgecolors="#000000", lw=0.8)
        tv_ax.set_xlim(-0.02, 1.0)  # a pair in full agreement (TV 0) stays visible beside the axis
        tv_ax.set_ylim(0.0, 1.0)
        tv_ax.set_xlabel("total variation between the methods' option distributions (0…1)")
        tv_ax.set_ylabel("share of cells (condition × country × item) at most x")
        tv_ax.legend(loc="best", framealpha=0.85)  # an ECDF can run anywhere; "best" keeps off its steps
        cat_ax.plot([-1, 1], [-1, 1], color="#888888", lw=0.6, zorder=0)
        cat_ax.set_xlim(-1.05, 1.05)
        cat_ax.set_ylim(-1.05, 1.05)
        cat_ax.set_aspect("equal")
        cat_ax.set_xlabel("CAT, first method of the pair (−1…1)")
        cat_ax.set_ylabel("CAT, second method (−1…1)")
        cat_ax.legend(loc="lower right", frameon=False, title="ringed: conclusions differ")
        cat_ax.set_title(f"{agreement.height} condition × method-pair comparisons", fontsize=7)
    note = f"{len(left_out)} method pair(s) beyond {_MAX_PAIRS} are not drawn (see the table)." if left_out else ""
    return Plot(fig, tuple(f"{a} vs {b}" for a, b in shown), note)


def _ecdf(ax, values: pl.Series, colour: str, style: str, label: str) -> None:
    """A step ECDF of the finite ``values``."""
    data = np.sort(values.drop_nulls().drop_nans().to_numpy())
    if data.size == 0:
        return
    steps = np.arange(1, data.size + 1) / data.size
    ax.step(np.r_[0.0, data], np.r_[0.0, steps], where="post", color=colour, ls=style, lw=1.1, label=label)


def method_blocks(page: Page, run_dir: Path) -> list[Markup]:
    """HTML blocks: a sentence with the counts, the figure, the per-condition table and the per-cell one."""
    divergence = analysis_table(run_dir, "method_divergence")
    agreement = analysis_table(run_dir, "method_agreement")
    if agreement.height == 0:
        return []
    differ = agreement.filter(pl.col("statistics_differing").fill_null(0) > 0).height
    above = divergence.filter(pl.col("tv") > 2 * pl.col("tv_floor").fill_null(0.0) + 0.05).height
    blocks = [
        html(
            "<p>{:,} of {:,} condition × method-pair comparisons reach incompatible results on the CAT score or "
            "some dimension's tau (both significant with opposite signs, or disjoint intervals); in {:,} one method "
            "is significant where the other is not (often a difference in precision: sampled answers over a few "
            "seeds are noisier than stated distributions); {:,} of {:,} cells differ in their option "
            "distributions by more than twice the sampling noise floor plus 0.05 total variation.</p>",
            differ,
            agreement.height,
            agreement.filter(pl.col("significance_differing").fill_null(0) > 0).height,
            above,
            divergence.height,
        )
    ]
    plot = method_figure(divergence, agreement)
    if plot is not None:
        caption = (
            "Agreement between measurement methods. Left: per cell, the total variation between two methods' "
            "option distributions (solid) and the total variation sampling noise alone would give (dotted: the "
            "sample measurement's frequencies are n draws). Right: the CAT score each method gives per condition; "
            "points off the diagonal disagree, ringed ones reach a different conclusion."
        )
        blocks.append(page.figure("method_agreement", plot.fig, caption, shows=plot.shows))
        if plot.note:
            blocks.append(html("<p class=warn>{}</p>", plot.note))
    blocks.append(
        page.table(
            "method_agreement",
            agreement,
            "Per condition (its factors without the measurement) and method pair: cells compared, mean total "
            "variation, mean noise floor, mean Jensen–Shannon divergence (bits), the CAT each method gives, "
            "whether the CAT conclusions differ, and of the seven statistics (CAT, six taus) how many reach "
            "incompatible results and how many differ in significance only",
        )
    )
    blocks.append(
        page.table(
            "method_divergence",
            divergence,
            "Per cell and method pair: answers, whether each side is empirical (sampled answers), total "
            "variation, Jensen–Shannon divergence (bits) and the total variation of sampling noise alone",
            collapse=True,
        )
    )
    return blocks
