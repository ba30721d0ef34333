"""The report's variance partition: the headline in words, one figure of the factors ranked by their share, the table.

The figure has one panel per scope (every profile, then each model when several answered; at most
``MAX_PANELS``, the table has the rest) and in each a bar per factor: its marginal share of the variance of the 24
item means, ranked, with the share of the six indices beside it as a diamond and the item share's permutation p
written at the bar's end. Its size follows the number of factors and models, never the number of conditions, so
it reads the same at 1, 100 or 1,000 conditions.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from runner.analyze.partition import headline_sentence
from runner.escape import Markup, figure_text, html
from runner.report.design import OKABE_ITO, level
from runner.report.figures import Plot, panel_grid, pyplot
from runner.report.page import Page

__all__ = ["partition_blocks", "partition_figure", "partition_headlines"]

MAX_PANELS = 9  # "all" and eight models
_SHOWN = ["scope", "profile", "term", "role", "levels", "df", "r2", "p", "r2_sequential", "rank"]


def partition_headlines(headline: pl.DataFrame) -> list[str]:
    """The headline sentences (24 item means) for the report's summary; none without a partition."""
    if headline.height == 0 or "profile" not in headline.columns:
        return []
    return [headline_sentence(row) for row in headline.filter(pl.col("profile") == "items").to_dicts()]


def _p_text(p: float | None, p_min: float | None) -> str:
    if p is None or not np.isfinite(p):
        return "no p"
    if p_min is not None and p <= p_min:
        return f"p ≤ {p_min:.2g}"
    return f"p = {p:.2g}"


def partition_figure(table: pl.DataFrame) -> Plot | None:
    """Factors ranked by marginal R² per scope: bars (item means) with p, diamonds (indices); None without terms."""
    if table.height == 0 or "role" not in table.columns:
        return None
    terms = table.filter(pl.col("role").is_not_null() & pl.col("r2").is_not_null())
    if terms.height == 0:
        return None
    scopes = terms["scope"].unique(maintain_order=True).to_list()
    shown, left = scopes[:MAX_PANELS], scopes[MAX_PANELS:]
    most = max(terms.filter(pl.col("scope") == s)["term"].n_unique() for s in shown)
    plt = pyplot()
    fig, axes = panel_grid(plt, len(shown), 3.7, 0.25 * most + 0.9, cols=min(2, len(shown)))
    top = float(terms["r2"].max() or 0.0)  # one x scale for every panel
    for ax, scope in zip(axes, shown, strict=True):
        part = terms.filter(pl.col("scope") == scope)
        items = part.filter(pl.col("profile") == "items").sort("r2", descending=True)
        indices = {r["term"]: r["r2"] for r in part.filter(pl.col("profile") == "indices").to_dicts()}
        names = items["term"].to_list()
        y = np.arange(len(names))[::-1]
        colours = [OKABE_ITO[1] if r == "cultural" else OKABE_ITO[0] for r in items["role"]]
        ax.barh(y, items["r2"].to_numpy(), color=colours, height=0.6)
        dots = [(indices[t], yy) for t, yy in zip(names, y, strict=True) if indices.get(t) is not None]
        if dots:
            ax.scatter(*zip(*dots, strict=True), marker="D", s=12, color="black", zorder=3)
        for yy, row in zip(y, items.iter_rows(named=True), strict=True):  # p right of both the bar and the diamond
            end = max(row["r2"], indices.get(row["term"]) or 0.0) + 0.02 * max(top, 0.05)
            ax.text(end, yy, _p_text(row["p"], row["p_min"]), va="center", fontsize=6)
        ax.set_yticks(y, [figure_text(level(n)) for n in names])
        ax.set_xlim(0, max(top, 0.05) * 1.45)
        ax.set_ylim(-0.6, len(names) - 0.4)
        blocks = items["blocks"][0] if items.height else "none"
        title = "every profile" if scope == "all" else scope
        ax.set_title(figure_text(level(title) + ("" if blocks == "none" else f" (within {blocks})")))
        ax.set_xlabel("share of variance (marginal R²)")
    fig.legend(
        handles=[
            plt.Rectangle((0, 0), 1, 1, color=OKABE_ITO[1]),
            plt.Rectangle((0, 0), 1, 1, color=OKABE_ITO[0]),
            plt.Line2D([], [], marker="D", ls="", color="black", markersize=4),
        ],
        labels=["country (items)", "other factors (items)", "six indices"],
        loc="outside lower center",
        ncol=3,
    )
    note = f"{len(left)} more model scope(s) are in the table." if left else ""
    return Plot(fig, tuple(shown), note)


def partition_blocks(page: Page, table: pl.DataFrame, headline: pl.DataFrame) -> list[Markup]:
    """The Variance partition section's blocks: the headline sentences, the figure and the tables."""
    if table.height == 0:
        return []
    sentences = partition_headlines(headline)
    plot = partition_figure(table)
    blocks = [html("<ul class=facts>{}</ul>", Markup("").join(html("<li>{}</li>", s) for s in sentences))]
    if plot is not None:
        caption = (
            "Share of the variance of the answer profiles each design factor explains beyond all the others "
            "(marginal R², multi-term PERMANOVA on Euclidean distances of z-scored profiles): bars for the 24 item "
            "means with their permutation p, diamonds for the six indices; one panel per scope. Refused and "
            "aliased factors are named in the table's notes."
        )
        blocks.append(page.figure("variance_partition", plot.fig, f"{caption} {plot.note}".strip(), shows=plot.shows))
    keep = [*_SHOWN, "p_min", "profiles", "profiles_available", "permutations", "blocks", "note"]
    blocks.append(
        page.table(
            "variance_partition",
            table.select([c for c in keep if c in table.columns]),
            "Variance partition per scope, profile and factor: marginal share r2 (type III) with its "
            "permutation p, sequential share (type I, in the order shown, untested), rank, smallest attainable p, the "
            "profiles used, the blocking, and notes (aliased, confounded, too few levels)",
        )
    )
    return blocks
