"""Report figures: each function takes analysis tables and returns PNG bytes (or None when not applicable).

All figures use matplotlib's Agg backend and its bundled DejaVu font, so nothing is fetched at render time.
"""

from __future__ import annotations

import io

import numpy as np
import polars as pl

from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet
from runner.survey.vocab import QUESTIONS

__all__ = [
    "dimension_scores",
    "grid_heatmap",
    "kendall_intervals",
    "respondent_embedding",
    "ssh_heatmap",
    "status_breakdown",
]

MAX_PANELS = 8  # beyond this, figures show the first conditions and the tables carry the rest


def _png(fig) -> bytes:
    """Render and close a figure."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _plt():
    """pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(row: dict, factors: list[str]) -> str:
    """``factor=value`` of one condition, or 'all'."""
    return ", ".join(f"{f}={row[f]}" for f in factors) or "all"


def dimension_scores(indices: pl.DataFrame, factors: list[str], reference: ReferenceSet) -> bytes | None:
    """Grouped bars: each condition's index per dimension and country, and the reference's (papers' Figure 2)."""
    if indices.height == 0:
        return None
    plt = _plt()
    conditions = indices.select(factors).unique(maintain_order=True).to_dicts() if factors else [{}]
    conditions = conditions[:MAX_PANELS]
    countries = sorted(indices["country"].unique().to_list())
    fig, axes = plt.subplots(len(conditions) + 1, 1, figsize=(9, 2.6 * (len(conditions) + 1)), squeeze=False)
    width = 0.8 / len(countries)
    x = np.arange(len(DIMENSIONS))
    panels = [("reference: " + reference.name, reference.matrix(countries))]
    for cond in conditions:
        sub = indices
        for f in factors:
            sub = sub.filter(pl.col(f) == cond[f])
        block = np.full((len(countries), 6), np.nan)
        for row in sub.iter_rows(named=True):
            block[countries.index(row["country"])] = [row[d] for d in DIMENSIONS]
        panels.append((_label(cond, factors), block))
    for ax, (title, block) in zip(axes[:, 0], panels, strict=True):
        for k, country in enumerate(countries):
            ax.bar(x + k * width - 0.4 + width / 2, np.nan_to_num(block[k]), width, label=country)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(x, [d.upper() for d in DIMENSIONS])
        ax.axhline(0, color="black", linewidth=0.5)
    axes[0, 0].legend(fontsize=7, ncol=min(len(countries), 5), loc="upper right")
    fig.tight_layout()
    return _png(fig)


def kendall_intervals(kendall: pl.DataFrame, factors: list[str]) -> bytes | None:
    """Tau per dimension with its bootstrap interval, one marker series per condition."""
    if kendall.height == 0:
        return None
    plt = _plt()
    conditions = (kendall.select(factors).unique(maintain_order=True).to_dicts() if factors else [{}])[:MAX_PANELS]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    offsets = np.linspace(-0.3, 0.3, len(conditions)) if len(conditions) > 1 else [0.0]
    for off, cond in zip(offsets, conditions, strict=True):
        sub = kendall
        for f in factors:
            sub = sub.filter(pl.col(f) == cond[f])
        sub = sub.with_columns(
            pl.col("dimension")
            .replace_strict({d: i for i, d in enumerate(DIMENSIONS)}, return_dtype=pl.Int64)
            .alias("_j")
        ).sort("_j")
        tau, low, high = (sub[c].to_numpy().astype(float) for c in ("tau", "ci_low", "ci_high"))
        err = np.vstack([np.nan_to_num(tau - low), np.nan_to_num(high - tau)])
        ax.errorbar(
            sub["_j"].to_numpy() + off, tau, yerr=np.clip(err, 0, None), fmt="o", capsize=3, label=_label(cond, factors)
        )
    ax.set_xticks(range(6), [d.upper() for d in DIMENSIONS])
    ax.set_ylim(-1.1, 1.1)
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set_ylabel("Kendall tau-b")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


def grid_heatmap(cat: pl.DataFrame, factors: list[str]) -> bytes | None:
    """CAT score over temperature × top_p, one panel per combination of the other factors (CAT ablations)."""
    if not {"temperature", "top_p"} <= set(factors) or cat.height == 0:
        return None
    plt = _plt()
    others = [f for f in factors if f not in ("temperature", "top_p")]
    groups = (cat.select(others).unique(maintain_order=True).to_dicts() if others else [{}])[:MAX_PANELS]
    temps = sorted(cat["temperature"].unique().to_list())
    tops = sorted(cat["top_p"].unique().to_list())
    fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 3.4), squeeze=False)
    for ax, group in zip(axes[0], groups, strict=True):
        sub = cat
        for f in others:
            sub = sub.filter(pl.col(f) == group[f])
        grid = np.full((len(temps), len(tops)), np.nan)
        for row in sub.iter_rows(named=True):
            grid[temps.index(row["temperature"]), tops.index(row["top_p"])] = row["cat_score"]
        image = ax.imshow(grid, cmap="RdBu", vmin=-1, vmax=1, origin="lower")
        for (i, j), value in np.ndenumerate(grid):
            ax.text(j, i, "N/A" if np.isnan(value) else f"{value:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(tops)), tops)
        ax.set_yticks(range(len(temps)), temps)
        ax.set_xlabel("top_p")
        ax.set_ylabel("temperature")
        ax.set_title(_label(group, others), fontsize=9)
    fig.colorbar(image, ax=axes[0].tolist(), label="CAT score")
    return _png(fig)


TSNE_POINTS = 1500  # t-SNE is O(n log n) per step but slow in absolute terms: embed a seeded sample beyond this


def respondent_embedding(respondents: pl.DataFrame, *, seed: int = 0) -> bytes | None:
    """2-D t-SNE of the respondents' 24-d answer vectors, coloured by set (value-differences Figure 1)."""
    if respondents.height < 5:
        return None
    if respondents.height > TSNE_POINTS:
        respondents = respondents.sample(TSNE_POINTS, seed=seed)
    from sklearn.manifold import TSNE

    plt = _plt()
    x = respondents.select([f"q{q}" for q in QUESTIONS]).to_numpy()
    perplexity = float(min(30, max(2, (len(x) - 1) // 3)))
    xy = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(x)
    fig, ax = plt.subplots(figsize=(7, 5))
    sets = respondents["set"].to_list()
    for name in dict.fromkeys(sets):
        mask = np.array([s == name for s in sets])
        ax.scatter(xy[mask, 0], xy[mask, 1], s=14, label=name)
    ax.set_title(f"t-SNE of respondents (perplexity {perplexity:g}, seed {seed})", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xticks([])
    ax.set_yticks([])
    return _png(fig)


def ssh_heatmap(separation: pl.DataFrame) -> bytes | None:
    """SS_h between the set pairs that differ in one factor, as a symmetric heatmap (value-differences Fig. 2)."""
    if "ss_h" not in separation.columns:
        return None
    rows = separation.filter(pl.col("ss_h").is_not_null())
    if rows.height == 0:
        return None
    plt = _plt()
    names = sorted(set(rows["set_a"]) | set(rows["set_b"]))
    grid = np.full((len(names), len(names)), np.nan)
    for row in rows.iter_rows(named=True):
        i, j = names.index(row["set_a"]), names.index(row["set_b"])
        grid[i, j] = grid[j, i] = row["ss_h"]
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 3, 1.0 * len(names) + 2))
    image = ax.imshow(grid, cmap="Reds")
    for (i, j), value in np.ndenumerate(grid):
        if not np.isnan(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    fig.colorbar(image, ax=ax, label="SS_h")
    return _png(fig)


def status_breakdown(rates: pl.DataFrame) -> bytes | None:
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
    groups = list(dict.fromkeys(labelled["_group"].to_list()))
    statuses = sorted(labelled["status"].unique().to_list())
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(groups) + 1.5))
    left = np.zeros(len(groups))
    for status in statuses:
        share = np.array(
            [labelled.filter((pl.col("_group") == g) & (pl.col("status") == status))["share"].sum() for g in groups]
        )
        ax.barh(groups, share, left=left, label=status)
        left += share
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of answers")
    ax.legend(fontsize=7, ncol=len(statuses), loc="lower right")
    return _png(fig)
