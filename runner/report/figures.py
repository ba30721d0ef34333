"""Report figures of agreement with the reference: each takes analysis tables and a ``ReportDesign`` and returns a
``Plot`` (or None when there is nothing to draw).

Each figure chooses its form from the design: a few conditions are drawn one by one with a legend of their
varying factors; many are drawn as forest (caterpillar) plots sorted by value, coloured by one factor, with every
condition's row in the Conditions table; small multiples share their axes and split by the design's facets.
Nothing is left out silently — a figure that cannot draw something says what in its ``note``. Axes are labelled
with units; index scores are compared as ranks (what the agreement measures), since indices without the
reference's constants are not on its scale. matplotlib's Agg backend and bundled DejaVu font: nothing is fetched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from runner.escape import figure_text
from runner.report.design import OKABE_ITO, ReportDesign, full_label, level
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet

__all__ = [
    "RC",
    "Plot",
    "cat_by_factor",
    "cat_differences",
    "cat_forest",
    "groups",
    "kendall_intervals",
    "level_legend",
    "panel_grid",
    "pyplot",
    "rank_scores",
    "where",
]

# Sizes for print: 8 pt text at the figure's size (figures are at most 7.5 inches wide: a page's text width).
RC = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "svg.fonttype": "none",  # text stays text in the SVG: editable for a paper, measurable in a browser
}
WIDTH = 7.5  # inches
SERIES = len(OKABE_ITO)  # conditions drawn one by one, each in its own colour, before a figure becomes a forest plot
LABELLED_ROWS = 40  # a forest plot names its rows up to this many conditions; beyond, the table does
TAU_LABEL = "Kendall tau-b (unitless, −1…1)"
CAT_LABEL = "CAT score: mean Kendall tau-b of the six dimensions (−1…1)"


@dataclass(frozen=True, slots=True)
class Plot:
    """A figure, what it shows (one entry per panel or series), and what it leaves out."""

    fig: Any  # matplotlib.figure.Figure
    shows: tuple[str, ...]
    note: str = ""


def pyplot():
    """pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def groups(frame: pl.DataFrame, keys: tuple[str, ...] | list[str]) -> list[dict]:
    """The distinct values of ``keys`` in sorted order ([{}] when there are no keys)."""
    if not keys:
        return [{}]
    return frame.select(keys).unique().sort(list(keys), nulls_last=True).to_dicts()


def where(frame: pl.DataFrame, values: dict) -> pl.DataFrame:
    """The rows of ``frame`` whose columns equal ``values`` (None matches null)."""
    for f, v in values.items():
        frame = frame.filter(pl.col(f).is_null() if v is None else pl.col(f) == v)
    return frame


def panel_grid(plt, n: int, panel_w: float, panel_h: float, *, cols: int | None = None, **share):
    """A grid of ``n`` axes, at most ``WIDTH`` wide, unused ones hidden; (fig, flat axes)."""
    cols = cols or max(1, min(n, int(WIDTH // panel_w)))
    rows = -(-n // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(min(WIDTH, panel_w * cols), panel_h * rows + 0.6), squeeze=False,
        layout="constrained", **share,
    )  # fmt: skip
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def level_legend(fig, design: ReportDesign, factor: str | None, levels: list) -> None:
    """A legend of ``factor``'s ``levels`` in their fixed colours, below the panels (never on the data)."""
    if factor is None or len(levels) < 2:
        return
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", ls="", color=design.colour(factor, v)) for v in levels]
    labels = [figure_text(level(v)) for v in levels]
    fig.legend(handles, labels, title=figure_text(str(factor)), loc="outside lower center", ncol=min(len(levels), 6))


def _cut(frame: pl.DataFrame, column: str) -> tuple[pl.DataFrame, int]:
    """Rows with a finite ``column``, and how many had none."""
    kept = frame.filter(pl.col(column).is_not_null() & pl.col(column).cast(pl.Float64).is_finite())
    return kept, frame.height - kept.height


def _forest(
    ax,
    rows: pl.DataFrame,
    value: str,
    design: ReportDesign,
    *,
    labelled: bool,
    colours: list | None = None,
    labels: list[str] | None = None,
    limit: float = 1.05,
) -> None:
    """One forest plot: ``value`` with its interval per row, sorted, coloured by the design's colour factor (or
    ``colours``, one per row of ``rows``) and named by the varying factors (or ``labels``)."""
    if labels is None:
        labels = [design.short(r) for r in rows.iter_rows(named=True)]
    order = np.argsort(rows[value].cast(pl.Float64).to_numpy(), kind="stable")
    rows = rows[order]
    colour = design.colour_by
    if colours is not None:
        colours = [colours[i] for i in order]
    else:
        colours = [design.colour(colour, v) for v in rows[colour]] if colour else [OKABE_ITO[0]] * rows.height
    y = np.arange(rows.height)
    est, low, high = (rows[c].cast(pl.Float64).to_numpy() for c in (value, "ci_low", "ci_high"))
    ok = np.isfinite(low) & np.isfinite(high)
    lw = 0.8 if rows.height <= 100 else 0.35  # many rows: thin lines, so each interval stays one line
    ax.hlines(y[ok], low[ok], high[ok], colors=[c for c, k in zip(colours, ok, strict=True) if k], lw=lw)
    ax.scatter(est, y, s=10 if rows.height <= LABELLED_ROWS else 3, c=colours, zorder=3)
    ax.axvline(0, color="0.5", lw=0.5)
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-0.7, rows.height - 0.3)
    if labelled:
        ax.set_yticks(y, [figure_text(labels[i]) for i in order])
    else:
        ax.set_yticks([])


def kendall_intervals(kendall: pl.DataFrame, design: ReportDesign) -> Plot | None:
    """Kendall tau-b per dimension with intervals: a dot per condition and dimension, a panel per facet, where
    there are at most ``SERIES`` conditions per panel; else a forest plot per dimension, sorted by tau."""
    if kendall.height == 0:
        return None
    plt = pyplot()
    rest = design.rest(*design.facets)
    series = groups(kendall, rest)
    if len(series) > SERIES:
        return _tau_forests(plt, kendall, design)
    panels = groups(kendall, design.facets)
    fig, axes = panel_grid(plt, len(panels), 3.7, 2.4, sharey=True)
    colour_of = {design.short(s, rest): OKABE_ITO[i] for i, s in enumerate(series)}
    for ax, panel in zip(axes, panels, strict=True):
        sub = where(kendall, panel)
        present = groups(sub, rest)
        offsets = np.linspace(-0.3, 0.3, len(present)) if len(present) > 1 else [0.0]
        for off, cond in zip(offsets, present, strict=True):
            rows = where(sub, cond)
            j = rows["dimension"].replace_strict({d: i for i, d in enumerate(DIMENSIONS)}, return_dtype=pl.Int64)
            tau, low, high = (rows[c].cast(pl.Float64).to_numpy() for c in ("tau", "ci_low", "ci_high"))
            err = np.clip(np.vstack([tau - low, high - tau]), 0, None)  # NaN stays NaN: no bar is drawn
            label = design.short(cond, rest)
            ax.errorbar(j.to_numpy() + off, tau, yerr=err, fmt="o", ms=3, capsize=2, color=colour_of[label])
        ax.set_xticks(range(6), [d.upper() for d in DIMENSIONS])
        ax.set_ylim(-1.1, 1.1)
        ax.axhline(0, color="0.5", lw=0.5)
        if design.facets:
            ax.set_title(figure_text(design.panel_title(panel, design.facets)))
    for ax in axes[:: max(1, int(WIDTH // 3.7))]:
        ax.set_ylabel(TAU_LABEL)
    if rest and len(series) > 1:
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], marker="o", ls="", color=c) for c in colour_of.values()]
        fig.legend(
            handles, [figure_text(str(s)) for s in colour_of], title=figure_text(design.key(rest)),
            loc="outside lower center", ncol=2 if len(series) > 3 else len(series),
        )  # fmt: skip
    return Plot(fig, _every_condition(kendall, design))


def _every_condition(frame: pl.DataFrame, design: ReportDesign) -> tuple[str, ...]:
    """The analysis' name of every condition in ``frame`` (what a figure drawing them all shows)."""
    return tuple(full_label(r, design.factors) for r in groups(frame, design.factors))


def _tau_forests(plt, kendall: pl.DataFrame, design: ReportDesign) -> Plot:
    """Six forest plots, one per dimension: every condition's tau and interval, sorted by tau."""
    fig, axes = panel_grid(plt, 6, 2.5, 3.2, cols=3)
    missing = []
    for ax, dim in zip(axes, DIMENSIONS, strict=True):
        rows, dropped = _cut(kendall.filter(pl.col("dimension") == dim), "tau")
        if dropped:
            missing.append(f"{dropped} for {dim.upper()}")
        _forest(ax, rows, "tau", design, labelled=False)
        ax.set_title(dim.upper())
        ax.set_xlabel("tau-b (−1…1)")
        ax.set_ylabel(f"{rows.height} conditions, ranked")
    colour = design.colour_by
    level_legend(fig, design, colour, list(design.levels[colour]) if colour else [])
    note = f"No tau (N/A in the tables) for {', '.join(missing)} conditions." if missing else ""
    return Plot(fig, _every_condition(kendall, design), note)


def cat_forest(cat: pl.DataFrame, design: ReportDesign) -> Plot | None:
    """The CAT score of every condition with its interval, sorted (rows named up to ``LABELLED_ROWS``)."""
    if cat.height < 2:
        return None
    plt = pyplot()
    rows, dropped = _cut(cat, "cat_score")
    labelled = rows.height <= LABELLED_ROWS
    height = 0.16 * rows.height + 1.2 if labelled else 4.5
    fig, ax = plt.subplots(figsize=(WIDTH if labelled else 5.5, height), layout="constrained")
    _forest(ax, rows, "cat_score", design, labelled=labelled)
    ax.set_xlabel(CAT_LABEL)
    if labelled:
        ax.set_ylabel(figure_text(design.key()))
    else:
        ax.set_ylabel(f"{rows.height} conditions, ranked by CAT (each one's row: Conditions table)")
    colour = design.colour_by
    level_legend(fig, design, colour, list(design.levels[colour]) if colour else [])
    note = f"{dropped} condition(s) without a CAT score are not drawn (N/A in the Conditions table)." if dropped else ""
    return Plot(fig, tuple(design.short(r) for r in rows.iter_rows(named=True)), note)


def cat_differences(differences: pl.DataFrame, ids: dict[str, str], design: ReportDesign) -> Plot | None:
    """CAT of condition a minus condition b for each pair one factor apart, with its interval, sorted; coloured
    by the factor the pair differs in, rows named by the Conditions table's IDs (``C003 − C017``)."""
    rows, dropped = _cut(differences, "difference")
    if rows.height == 0:
        return None
    plt = pyplot()
    labelled = rows.height <= LABELLED_ROWS
    height = 0.16 * rows.height + 1.2 if labelled else 4.5
    fig, ax = plt.subplots(figsize=(5.5, height), layout="constrained")
    differing = sorted(set(rows["factor"]))
    palette = {f: OKABE_ITO[i % len(OKABE_ITO)] for i, f in enumerate(differing)}
    labels = [
        f"{ids.get(a, '?')} − {ids.get(b, '?')}" for a, b in zip(rows["condition_a"], rows["condition_b"], strict=True)
    ]
    _forest(
        ax,
        rows,
        "difference",
        design,
        labelled=labelled,
        colours=[palette[f] for f in rows["factor"]],
        labels=labels,
        limit=2.05,
    )
    ax.set_xlabel("CAT score of condition a minus condition b (−2…2)")
    ax.set_ylabel("pair a − b (IDs: Conditions table)" if labelled else f"{rows.height} pairs, ranked by difference")
    if len(differing) > 1 or labelled:
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], marker="o", ls="", color=palette[f]) for f in differing]
        fig.legend(
            handles,
            [figure_text(f) for f in differing],
            title="the pair differs in",
            loc="outside lower center",
            ncol=min(len(differing), 6),
        )
    note = (
        f"{dropped} pair(s) without a difference (too few shared countries) are not drawn; the table says why."
        if dropped
        else ""
    )
    return Plot(fig, tuple(labels), note)  # IDs, not names: a 1,000-condition design has thousands of pairs


def cat_by_factor(cat: pl.DataFrame, design: ReportDesign) -> Plot | None:
    """Small multiples: a panel per facet level, the CAT of each condition over the levels of the most important
    other factor (a dot per condition, a bar at the level's mean)."""
    if cat.height < 2 or not design.factors:
        return None
    plt = pyplot()
    rest = design.rest(*design.facets)
    x_factor = max(rest, key=lambda f: np.nan_to_num(design.importance[f], nan=-1.0)) if rest else None
    panels = groups(cat, design.facets)
    fig, axes = panel_grid(plt, len(panels), 2.5, 2.3, sharey=True)
    rng = np.random.default_rng(0)  # jitter only: the same figure every time
    for ax, panel in zip(axes, panels, strict=True):
        sub, _ = _cut(where(cat, panel), "cat_score")
        levels = [v for v in design.levels[x_factor] if v in set(sub[x_factor].to_list())] if x_factor else [None]
        for i, value in enumerate(levels):  # the levels this panel has: no phantom ones
            rows = sub if x_factor is None else where(sub, {x_factor: value})
            y = rows["cat_score"].cast(pl.Float64).to_numpy()
            c = [design.colour(design.colour_by, v) for v in rows[design.colour_by]] if design.colour_by else None
            ax.scatter(i + rng.uniform(-0.25, 0.25, len(y)), y, s=6, c=c, alpha=0.8, lw=0)
            if len(y):
                ax.hlines(y.mean(), i - 0.35, i + 0.35, color="black", lw=1.2)
        ax.set_xticks(range(len(levels)), [figure_text(level(v)) for v in levels] if x_factor else [""])
        ax.tick_params(axis="x", labelrotation=90 if sum(len(str(v)) for v in levels) > 24 else 0)
        ax.set_xlim(-0.6, len(levels) - 0.4)
        ax.set_ylim(-1.05, 1.05)
        ax.axhline(0, color="0.5", lw=0.5)
        if x_factor:
            ax.set_xlabel(figure_text(str(x_factor)))
        if design.facets:
            ax.set_title(figure_text(design.panel_title(panel, design.facets)))
    for ax in axes[:: max(1, int(WIDTH // 2.5))]:
        ax.set_ylabel("CAT score (−1…1)")
    colour = design.colour_by
    if colour and colour != x_factor:
        level_legend(fig, design, colour, list(design.levels[colour]))
    return Plot(fig, tuple(design.panel_title(p, design.facets) for p in panels))


MAX_COUNTRIES = 60  # countries on one rank axis (one full-width panel per dimension beyond 20)


def rank_scores(indices: pl.DataFrame, design: ReportDesign, reference: ReferenceSet) -> Plot | None:
    """Per dimension, each country's rank in the reference (black) and in the answers (the mean rank over the
    conditions of each level of the colour factor): agreement is about ranks, which these are."""
    if indices.height == 0:
        return None
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    countries = sorted(indices["country"].unique().to_list())
    note = ""
    if len(countries) > MAX_COUNTRIES:
        note = f"{len(countries) - MAX_COUNTRIES} of {len(countries)} countries not drawn (see the Indices table)."
        countries = countries[:MAX_COUNTRIES]
    ref = reference.matrix(countries)  # (countries, 6); NaN where the reference lacks a score
    wide = len(countries) > 20
    fig, axes = panel_grid(plt, 6, WIDTH if wide else 2.5, 2.6 + 0.06 * len(countries), cols=1 if wide else 3)
    colour = design.colour_by
    levels = list(design.levels[colour]) if colour else [None]
    keys = list(design.factors)
    for d, (ax, dim) in enumerate(zip(axes, DIMENSIONS, strict=True)):
        known = np.isfinite(ref[:, d])
        order = [countries[i] for i in np.argsort(-np.where(known, ref[:, d], -np.inf), kind="stable")]
        x = {c: i for i, c in enumerate(order)}
        ref_rank = pl.Series(np.where(known, ref[:, d], -np.inf)).rank("average", descending=True).to_numpy().copy()
        ref_rank[~known] = np.nan
        ax.scatter([x[c] for c in countries], ref_rank, marker="_", s=60, color="black", zorder=3)
        ranks = (
            indices.filter(pl.col("country").is_in(countries))
            .select(*keys, "country", pl.col(dim).cast(pl.Float64))
            .with_columns(rank=pl.col(dim).rank("average", descending=True).over(keys or pl.lit(1)))
        )
        for k, value in enumerate(levels):
            rows = ranks if value is None else ranks.filter(pl.col(colour) == value)
            mean = rows.group_by("country").agg(pl.col("rank").mean())
            off = (k - (len(levels) - 1) / 2) * 0.5 / max(1, len(levels))
            ax.scatter(
                [x[c] + off for c in mean["country"]], mean["rank"], s=9, color=design.colour(colour, value), zorder=2
            )
        ax.set_xticks(range(len(order)), [figure_text(level(c)) for c in order], rotation=90)
        ax.set_ylim(len(countries) + 0.5, 0.5)  # rank 1 at the top
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{dim.upper()}: countries in the reference's order")
        ax.set_ylabel("rank (1 = highest index)")
    level_legend(fig, design, colour, levels if colour else [])
    shows = tuple(str(v) for v in levels) if colour else ("all",)
    return Plot(fig, shows, note)
