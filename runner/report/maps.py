"""Report figures of the design's surface: the sampling grid, the respondents' embedding, set separation and the
parse statuses — each aggregated to what a reader can take in at any number of conditions (see figures.py).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from runner.escape import figure_text, label_parts
from runner.report.design import OKABE_ITO, ReportDesign, full_label, level
from runner.report.figures import WIDTH, Plot, groups, panel_grid, pyplot, where
from runner.survey.vocab import QUESTIONS

__all__ = ["grid_heatmap", "respondent_embedding", "ssh_by_factor", "status_breakdown"]

GRID = ("temperature", "top_p")


def grid_heatmap(cat: pl.DataFrame, design: ReportDesign) -> Plot | None:
    """CAT score over temperature × top_p: a panel per level of the most important other factor, each cell the
    mean over the conditions there (with its interval where a cell holds one condition). A panel shows only the
    temperatures and top_p values its conditions used."""
    if not set(GRID) <= set(design.factors) or cat.height == 0:
        return None
    plt = pyplot()
    rest = design.rest(*GRID)
    by = next((f for f in design.facets if f not in GRID), None) or (
        max(rest, key=lambda f: np.nan_to_num(design.importance[f], nan=-1.0)) if rest else None
    )
    panels = groups(cat, (by,) if by else ())
    over = [f for f in rest if f != by]
    fig, axes = panel_grid(plt, len(panels), 2.5, 2.2, sharey=False)
    image = None
    for ax, panel in zip(axes, panels, strict=True):
        sub = where(cat, panel).with_columns(pl.col("cat_score").cast(pl.Float64).fill_nan(None))
        cells = sub.group_by(GRID).agg(
            mean=pl.col("cat_score").mean(), n=pl.col("cat_score").count(), low=pl.col("ci_low").first(),
            high=pl.col("ci_high").first(),
        )  # fmt: skip
        temps = sorted(cells["temperature"].unique().to_list())
        tops = sorted(cells["top_p"].unique().to_list())
        grid = np.full((len(temps), len(tops)), np.nan)
        for row in cells.iter_rows(named=True):
            i, j = temps.index(row["temperature"]), tops.index(row["top_p"])
            grid[i, j] = np.nan if row["mean"] is None else row["mean"]
            if row["mean"] is None:
                text = "no score"
            elif row["n"] == 1 and row["low"] is not None:
                text = f"{row['mean']:.2f}\n[{row['low']:.2f}, {row['high']:.2f}]"
            else:
                text = f"{row['mean']:.2f}\nn={row['n']}"
            ax.text(j, i, text, ha="center", va="center", fontsize=6.5)
        image = ax.imshow(grid, cmap="PuOr", vmin=-1, vmax=1, origin="lower", aspect="auto")
        ax.set_xticks(range(len(tops)), [figure_text(level(v)) for v in tops])
        ax.set_yticks(range(len(temps)), [figure_text(level(v)) for v in temps])
        ax.set_xlabel("top_p")
        ax.set_ylabel("temperature")
        if by:
            ax.set_title(figure_text(design.panel_title(panel, (by,))))
    fig.colorbar(image, ax=list(axes), label="CAT score (−1…1)", shrink=0.8)
    note = f"Cells with n = k average the CAT of k conditions over {', '.join(over)}." if over else ""
    return Plot(fig, tuple(design.panel_title(p, (by,)) if by else "all" for p in panels), note)


TSNE_POINTS = 1000  # t-SNE is slow in absolute terms: embed a seeded sample beyond this (the caption says so)
TSNE_ITERATIONS = 500  # the layout settles well before scikit-learn's default 1,000 at these sizes; half the time


def respondent_embedding(
    respondents: pl.DataFrame, cat: pl.DataFrame, design: ReportDesign, *, seed: int = 0, columns: list[str] | None
) -> Plot | None:
    """2-D t-SNE of the respondents' points (24 items, or ``columns``), coloured by the design's colour factor
    (or by set where sets are few); a legend, never a label per point."""
    if respondents.height < 5:
        return None
    note = ""
    if respondents.height > TSNE_POINTS:
        note = f"A seeded sample of {TSNE_POINTS} of {respondents.height} respondents is embedded."
        respondents = respondents.sample(TSNE_POINTS, seed=seed)
    from sklearn.manifold import TSNE

    plt = pyplot()
    x = respondents.select(columns or [f"q{q}" for q in QUESTIONS]).to_numpy()
    perplexity = float(min(30, max(2, (len(x) - 1) // 3)))
    xy = TSNE(
        n_components=2, perplexity=perplexity, random_state=seed, init="pca", max_iter=TSNE_ITERATIONS
    ).fit_transform(x)
    sets = respondents["set"].cast(pl.String).to_list()
    fig, ax = plt.subplots(figsize=(5.5, 4.2), layout="constrained")
    factor = design.colour_by
    if factor is not None:  # each point's set is a condition: its level of the colour factor
        level_of = {full_label(r, design.factors): r[factor] for r in cat.iter_rows(named=True)}
        values = [level_of.get(s) for s in sets]
        names = list(design.levels[factor])
        colour_of = {v: design.colour(factor, v) for v in names}
        title = factor
    else:
        values, names = sets, list(dict.fromkeys(sets))
        colour_of = {v: OKABE_ITO[i % len(OKABE_ITO)] for i, v in enumerate(names)}
        title = "set"
    for name in names:
        mask = np.array([v == name for v in values])
        if mask.any():
            ax.scatter(xy[mask, 0], xy[mask, 1], s=8, color=colour_of[name], label=figure_text(level(name)), lw=0)
    if len(names) > 1:
        fig.legend(title=figure_text(str(title)), loc="outside right upper")
    ax.set_xlabel(f"t-SNE 1 (perplexity {perplexity:g}, seed {seed}; no units)")
    ax.set_ylabel("t-SNE 2")
    ax.set_xticks([])
    ax.set_yticks([])
    shows = tuple(str(n) for n in names)
    return Plot(fig, shows, note)


HEATMAP_SETS = 12  # set × set heatmaps up to this many sets; beyond, SS_h by the factor a pair differs in


def ssh_by_factor(separation: pl.DataFrame, design: ReportDesign) -> Plot | None:
    """SS_h between set pairs: a heatmap of the pairs for a few sets (value-differences Figure 2), else per factor
    the SS_h of every pair of sets that differ only in it (a dot each, a bar at the mean)."""
    if "ss_h" not in separation.columns:
        return None
    rows = separation.filter(pl.col("ss_h").is_not_null() & pl.col("ss_h").is_finite())
    if rows.height == 0:
        return None
    plt = pyplot()
    names = sorted(set(rows["set_a"]) | set(rows["set_b"]))
    if len(names) <= HEATMAP_SETS:
        n = len(names)
        grid = np.full((n, n), np.nan)
        for row in rows.iter_rows(named=True):
            i, j = names.index(row["set_a"]), names.index(row["set_b"])
            grid[i, j] = grid[j, i] = row["ss_h"]
        fig, ax = plt.subplots(figsize=(min(WIDTH, 0.45 * n + 3.5), 0.4 * n + 2.5), layout="constrained")
        image = ax.imshow(grid, cmap="Purples")
        for (i, j), value in np.ndenumerate(grid):
            if not np.isnan(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6.5)
        short = [_short_set(s, design) for s in names]
        ax.set_xticks(range(n), short, rotation=90)
        ax.set_yticks(range(n), short)
        ax.set_xlabel(figure_text(design.key()))
        fig.colorbar(image, ax=ax, label="SS_h (unitless)", shrink=0.8)
        return Plot(fig, tuple(names))
    factors = rows["factor"].unique(maintain_order=True).to_list()
    fig, ax = plt.subplots(figsize=(5.5, 0.45 * len(factors) + 1.3), layout="constrained")
    rng = np.random.default_rng(0)
    for i, factor in enumerate(factors):
        ss = rows.filter(pl.col("factor") == factor)["ss_h"].to_numpy()
        ax.scatter(ss, i + rng.uniform(-0.2, 0.2, len(ss)), s=5, color=OKABE_ITO[0], alpha=0.6, lw=0)
        ax.vlines(ss.mean(), i - 0.3, i + 0.3, color="black", lw=1.2)
    ax.set_yticks(range(len(factors)), [figure_text(str(f)) for f in factors])
    ax.set_ylim(-0.6, len(factors) - 0.4)
    ax.set_xlabel("SS_h between two sets that differ only in this factor (unitless)")
    ax.set_ylabel("factor the pair differs in")
    return Plot(fig, tuple(factors), f"{rows.height} set pairs; each pair's SS_h is in the Set separation table.")


def _short_set(name: str, design: ReportDesign) -> str:
    """A set's label as the values of the varying factors (the analysis names it ``f=v, ...``)."""
    parts = label_parts(name)
    return figure_text(" · ".join(level(parts.get(f, "?")) for f in design.factors) if parts else name)


STATUS_ORDER = ("ok", "refusal", "no_answer", "ambiguous", "invalid_format", "out_of_range", "failed")


def status_breakdown(rates: pl.DataFrame, design: ReportDesign) -> Plot | None:
    """Stacked bars of parse-status shares per group; None when every answer parsed or there is one group (a
    single bar says no more than the summary's Data quality line)."""
    if rates.height == 0 or set(rates["status"].unique().to_list()) == {"ok"}:
        return None
    keys = [c for c in rates.columns if c not in ("status", "count", "share")]
    bars = groups(rates, keys)
    if len(bars) < 2:
        return None
    plt = pyplot()
    statuses = sorted(rates["status"].unique().to_list(), key=lambda s: (s not in STATUS_ORDER, STATUS_ORDER.index(s)
                      if s in STATUS_ORDER else 0, s))  # fmt: skip
    fig, ax = plt.subplots(figsize=(5.5, 0.22 * len(bars) + 1.4), layout="constrained")
    left = np.zeros(len(bars))
    labels = [figure_text(" · ".join(level(b[k]) for k in keys) or "all") for b in bars]
    for k, status in enumerate(statuses):
        share = np.array([where(rates, b).filter(pl.col("status") == status)["share"].sum() for b in bars])
        ax.barh(range(len(bars)), share, left=left, label=figure_text(str(status)), color=OKABE_ITO[k % len(OKABE_ITO)])
        left += share
    ax.set_yticks(range(len(bars)), labels)
    ax.set_ylim(len(bars) - 0.5, -0.5)
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of answers (0…1)")
    if keys:
        ax.set_ylabel(figure_text(" · ".join(keys)))
    fig.legend(title="status", loc="outside lower center", ncol=min(len(statuses), 4))
    return Plot(fig, tuple(labels))
