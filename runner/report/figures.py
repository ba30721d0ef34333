"""Report figures: each function takes analysis tables and returns a ``Plot`` (or None when there is nothing to draw).

Figures scale with the design: they facet by model (and by language where it varies) as small multiples with
shared axes, colour with a palette as large as the number of series, draw missing values as missing, and never
cut silently — when a figure must leave something out, its ``note`` says what, and the page's table holds it.
All figures use matplotlib's Agg backend and its bundled DejaVu font, so nothing is fetched at render time.
Every label drawn from data goes through ``runner.escape.figure_text`` (never parsed as mathtext).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from runner.escape import figure_text
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet
from runner.survey.vocab import QUESTIONS

__all__ = [
    "Plot",
    "dimension_scores",
    "facet_factors",
    "grid_heatmap",
    "kendall_intervals",
    "respondent_embedding",
    "ssh_heatmap",
    "status_breakdown",
]

MAX_SERIES = 12  # conditions drawn per panel; the rest are named in the note and listed in the table
MAX_PANELS = 24  # panels per figure, same rule
LEGEND_ENTRIES = 20  # beyond this, points are labelled directly instead of through a legend
PANEL_LEGEND = 6  # a legend inside a small panel hides the data beyond this many entries


@dataclass(frozen=True, slots=True)
class Plot:
    """A figure, what it shows (one entry per facet: every model it draws), and what it leaves out."""

    fig: Any  # matplotlib.figure.Figure
    shows: tuple[str, ...]
    note: str = ""


def _plt():
    """pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def colours(n: int) -> list:
    """``n`` distinct colours: tab10 or tab20 when they suffice, else evenly spaced along a perceptual map."""
    import matplotlib

    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(n)]
    return [matplotlib.colormaps["turbo"](x) for x in np.linspace(0.03, 0.97, n)]


def _label(row: dict, factors: list[str]) -> str:
    """``factor=value`` of one condition, or 'all'."""
    return ", ".join(f"{f}={row[f]}" for f in factors) or "all"


def _wrap(text: str, width: int = 32) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def facet_factors(frame: pl.DataFrame, factors: list[str]) -> list[str]:
    """The factors figures facet by: model, and language where it takes more than one value."""
    return [f for f in ("model", "language") if f in factors and f in frame.columns and frame[f].n_unique() > 1]


def _groups(frame: pl.DataFrame, keys: list[str]) -> list[dict]:
    """The distinct values of ``keys`` in first-seen order ([{}] when there are no keys)."""
    return frame.select(keys).unique(maintain_order=True).to_dicts() if keys else [{}]


def _where(frame: pl.DataFrame, values: dict) -> pl.DataFrame:
    for f, v in values.items():
        frame = frame.filter(pl.col(f).is_null() if v is None else pl.col(f) == v)
    return frame


def _cut(items: list, limit: int, what: str) -> tuple[list, str]:
    """The first ``limit`` items and a note naming how many were left out (empty when none)."""
    if len(items) <= limit:
        return items, ""
    return items[:limit], f"{len(items) - limit} of {len(items)} {what} not drawn (see the table)."


def _grid(plt, panels: int, width: float, height: float, *, sharey: bool = True):
    """A wrapped grid of ``panels`` axes (at most 4 per row), unused ones hidden; (fig, flat axes)."""
    cols = min(4, panels)
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, sharey=sharey)
    flat = axes.ravel()
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def kendall_intervals(kendall: pl.DataFrame, factors: list[str]) -> Plot | None:
    """Kendall tau-b per dimension with its interval: a panel per model (× language), a series per condition."""
    if kendall.height == 0:
        return None
    plt = _plt()
    facets = facet_factors(kendall, factors)
    rest = [f for f in factors if f not in facets]
    panels = _groups(kendall, facets)
    fig, axes = _grid(plt, len(panels), 4.6, 3.2)
    drawn = total = 0
    for ax, panel in zip(axes, panels, strict=True):
        sub = _where(kendall, panel)
        every = _groups(sub, rest)
        conditions = every[:MAX_SERIES]
        drawn, total = drawn + len(conditions), total + len(every)
        offsets = np.linspace(-0.3, 0.3, len(conditions)) if len(conditions) > 1 else [0.0]
        for off, cond, colour in zip(offsets, conditions, colours(len(conditions)), strict=True):
            rows = _where(sub, cond)
            j = rows["dimension"].replace_strict({d: i for i, d in enumerate(DIMENSIONS)}, return_dtype=pl.Int64)
            tau, low, high = (rows[c].cast(pl.Float64).to_numpy() for c in ("tau", "ci_low", "ci_high"))
            err = np.clip(np.vstack([tau - low, high - tau]), 0, None)  # NaN stays NaN: no bar is drawn
            ax.errorbar(
                j.to_numpy() + off,
                tau,
                yerr=err,
                fmt="o",
                ms=3,
                capsize=2,
                color=colour,
                label=figure_text(_label(cond, rest)),
            )
        ax.set_xticks(range(6), [d.upper() for d in DIMENSIONS], fontsize=8)
        ax.set_ylim(-1.1, 1.1)
        ax.axhline(0, color="grey", linewidth=0.5)
        ax.set_title(figure_text(_wrap(_label(panel, facets))), fontsize=9)
        if len(conditions) <= PANEL_LEGEND and rest:
            ax.legend(fontsize=6, loc="lower left")
    axes[0].set_ylabel("Kendall tau-b")
    fig.tight_layout()
    note = (
        ""
        if drawn == total
        else f"{total - drawn} of {total} condition series not drawn (at most {MAX_SERIES} per panel)."
    )
    if any(len(_groups(_where(kendall, p), rest)) > PANEL_LEGEND for p in panels):
        note += " Series follow the order of the Table 1 rows; colours are not listed where a panel has many."
    return Plot(fig, tuple(_label(p, facets) for p in panels), note.strip())


def dimension_scores(indices: pl.DataFrame, factors: list[str], reference: ReferenceSet) -> Plot | None:
    """Index per dimension: a panel per country, the reference as a black bar, each model's conditions as dots."""
    if indices.height == 0:
        return None
    plt = _plt()
    facets = facet_factors(indices, factors)
    series = _groups(indices, facets)
    countries, note = _cut(sorted(indices["country"].unique().to_list()), MAX_PANELS, "countries")
    fig, axes = _grid(plt, len(countries), 4.0, 2.8)
    ref = reference.matrix(countries)
    x = np.arange(len(DIMENSIONS))
    width = 0.8 / (len(series) + 1)
    palette = colours(len(series))
    for ax, country, ref_row in zip(axes, countries, ref, strict=True):
        ax.bar(x - 0.4 + width / 2, ref_row, width, color="0.25", label="reference")
        for k in np.flatnonzero(np.isnan(ref_row)):  # missing reference: marked, never drawn as zero
            ax.text(x[k] - 0.4 + width / 2, 0, "n/a", rotation=90, fontsize=6, ha="center", va="bottom")
        for s, (group, colour) in enumerate(zip(series, palette, strict=True)):
            rows = _where(indices.filter(pl.col("country") == country), group)
            values = rows.select(list(DIMENSIONS)).cast(pl.Float64).to_numpy()  # one row per condition
            xs = np.broadcast_to(x - 0.4 + width * (s + 1.5), values.shape)
            ax.scatter(xs, values, s=9, color=colour, label=figure_text(_label(group, facets)) if facets else "model")
        ax.set_title(figure_text(str(country)), fontsize=9)
        ax.set_xticks(x, [d.upper() for d in DIMENSIONS], fontsize=7)
        ax.axhline(0, color="black", linewidth=0.5)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper center", ncol=min(6, len(labels)), bbox_to_anchor=(0.5, 1.04))
    fig.tight_layout()
    return Plot(fig, tuple(_label(g, facets) for g in series), note)


def grid_heatmap(cat: pl.DataFrame, factors: list[str]) -> Plot | None:
    """CAT score over temperature × top_p with intervals, a panel per combination of the other factors."""
    if not {"temperature", "top_p"} <= set(factors) or cat.height == 0:
        return None
    plt = _plt()
    others = [f for f in factors if f not in ("temperature", "top_p")]
    groups, note = _cut(_groups(cat, others), MAX_PANELS, "panels")
    temps = sorted(cat["temperature"].unique().to_list())
    tops = sorted(cat["top_p"].unique().to_list())
    fig, axes = _grid(plt, len(groups), 0.9 * len(tops) + 1.6, 0.55 * len(temps) + 1.4, sharey=False)
    image = None
    for ax, group in zip(axes, groups, strict=True):
        grid = np.full((len(temps), len(tops)), np.nan)
        text = np.full(grid.shape, "N/A", dtype=object)
        for row in _where(cat, group).iter_rows(named=True):
            i, j = temps.index(row["temperature"]), tops.index(row["top_p"])
            grid[i, j] = np.nan if row["cat_score"] is None else row["cat_score"]
            if row["cat_score"] is not None and not np.isnan(row["cat_score"]):
                text[i, j] = f"{row['cat_score']:.2f}\n[{_num(row.get('ci_low'))}, {_num(row.get('ci_high'))}]"
        image = ax.imshow(grid, cmap="RdBu", vmin=-1, vmax=1, origin="lower", aspect="auto")
        for (i, j), value in np.ndenumerate(text):
            ax.text(j, i, value, ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(tops)), tops, fontsize=7)
        ax.set_yticks(range(len(temps)), temps, fontsize=7)
        ax.set_xlabel("top_p", fontsize=8)
        ax.set_ylabel("temperature", fontsize=8)
        ax.set_title(figure_text(_wrap(_label(group, others), 28)), fontsize=8)
    fig.tight_layout()
    fig.colorbar(image, ax=list(axes), label="CAT score", shrink=0.8)
    models = sorted({str(g["model"]) for g in groups}) if "model" in others else []
    return Plot(fig, tuple(models), note)


def _num(value: object) -> str:
    return "N/A" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.2f}"


TSNE_POINTS = 1500  # t-SNE is slow in absolute terms: embed a seeded sample beyond this (the caption says so)


def respondent_embedding(respondents: pl.DataFrame, *, seed: int = 0, columns: list[str] | None = None) -> Plot | None:
    """2-D t-SNE of the respondents' points (24 items, or ``columns``), one colour per set."""
    if respondents.height < 5:
        return None
    note = ""
    if respondents.height > TSNE_POINTS:
        note = f"a seeded sample of {TSNE_POINTS} of {respondents.height} respondents is embedded."
        respondents = respondents.sample(TSNE_POINTS, seed=seed)
    from sklearn.manifold import TSNE

    plt = _plt()
    x = respondents.select(columns or [f"q{q}" for q in QUESTIONS]).to_numpy()
    perplexity = float(min(30, max(2, (len(x) - 1) // 3)))
    xy = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(x)
    sets = respondents["set"].cast(pl.String).to_list()
    names = list(dict.fromkeys(sets))
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    for name, colour in zip(names, colours(len(names)), strict=True):
        mask = np.array([s == name for s in sets])
        ax.scatter(xy[mask, 0], xy[mask, 1], s=12, color=colour, label=figure_text(name))
        if len(names) > LEGEND_ENTRIES:  # direct labels at each set's centre instead of an unreadable legend
            cx, cy = xy[mask].mean(axis=0)
            ax.annotate(figure_text(name), (cx, cy), fontsize=5, ha="center")
    if len(names) <= LEGEND_ENTRIES:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"t-SNE (perplexity {perplexity:g}, seed {seed})", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    return Plot(fig, tuple(names), note)


def ssh_heatmap(separation: pl.DataFrame) -> Plot | None:
    """SS_h between set pairs as a symmetric heatmap (value-differences Fig. 2), at most 12 inches wide."""
    if "ss_h" not in separation.columns:
        return None
    rows = separation.filter(pl.col("ss_h").is_not_null())
    if rows.height == 0:
        return None
    plt = _plt()
    names = sorted(set(rows["set_a"]) | set(rows["set_b"]))
    n = len(names)
    grid = np.full((n, n), np.nan)
    for row in rows.iter_rows(named=True):
        i, j = names.index(row["set_a"]), names.index(row["set_b"])
        grid[i, j] = grid[j, i] = row["ss_h"]
    side = min(12.0, 0.45 * n + 3)
    fig, ax = plt.subplots(figsize=(side, side * 0.9))
    image = ax.imshow(grid, cmap="Reds")
    if n <= 20:
        for (i, j), value in np.ndenumerate(grid):
            if not np.isnan(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
    size = max(3.5, min(8.0, 260 / max(n, 1) / 2))
    labels = [figure_text(str(name)) for name in names]
    ax.set_xticks(range(n), labels, rotation=70, ha="right", fontsize=size)
    ax.set_yticks(range(n), labels, fontsize=size)
    fig.colorbar(image, ax=ax, label="SS_h", shrink=0.8)
    note = "" if n <= 20 else "values are in the table (too many sets to print them in the cells)."
    return Plot(fig, tuple(names), note)


def status_breakdown(rates: pl.DataFrame) -> Plot | None:
    """Stacked bars of parse-status shares per endpoint/model/language group."""
    if rates.height == 0:
        return None
    plt = _plt()
    keys = [c for c in rates.columns if c not in ("status", "count", "share")]
    labelled = rates.with_columns(
        (pl.concat_str([pl.col(k).cast(pl.String) for k in keys], separator=" / ") if keys else pl.lit("all")).alias(
            "_group"
        )
    )
    groups, note = _cut(list(dict.fromkeys(labelled["_group"].to_list())), 40, "groups")
    statuses = sorted(labelled["status"].unique().to_list())
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(groups) + 1.5))
    left = np.zeros(len(groups))
    for status, colour in zip(statuses, colours(len(statuses)), strict=True):
        share = np.array(
            [labelled.filter((pl.col("_group") == g) & (pl.col("status") == status))["share"].sum() for g in groups]
        )
        ax.barh(range(len(groups)), share, left=left, label=figure_text(str(status)), color=colour)
        left += share
    ax.set_yticks(range(len(groups)), [figure_text(str(g)) for g in groups])
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of answers")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=7, ncol=min(len(statuses), 6), loc="upper center", bbox_to_anchor=(0.5, -0.15))
    models = tuple(sorted({str(v) for v in rates["model"]})) if "model" in rates.columns else ()
    return Plot(fig, models, note)
