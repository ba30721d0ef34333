"""Agreement between elicitation methods, where a sweep crosses measurements (sample, distribution, verbalized).

A *cell* here is a condition without its measurement × country × question: the same prompt design asked by
different methods. Each method's option distribution in a cell, over its ``ok`` answers:

- ``distribution`` and ``verbalized``: the mean of the answers' ``option_probs`` (over seeds and other units);
- ``sample`` (and a distribution cell measured by K sampled replies): the empirical answer frequencies over the
  cell's n answers — an estimate with sampling noise.

``method_divergence``: per cell and pair of methods, the total variation distance TV = ½ Σ|p − q| and the
Jensen–Shannon divergence JS = ½ KL(p‖m) + ½ KL(q‖m), m = (p + q)/2, in bits (base 2, so in [0, 1]; the square
of ``scipy.spatial.distance.jensenshannon(p, q, base=2)``). ``tv_floor`` is the TV the pair shows when both
methods measure one distribution r and differ only by sampling noise: E TV(p̂_n, r) for an empirical side of n
answers, exactly Σ_k E|X_k/n − r_k| / 2 with X_k ~ Binomial(n, r_k) (de Moivre's mean absolute deviation), r the
exact side's distribution; with two empirical sides r is their pooled frequencies and the floor the sum of both
sides' (an upper bound, by the triangle inequality); two exact sides have floor 0. TV well above ``tv_floor`` is
disagreement; TV near it is what the finite sample would show anyway.

``method_conclusions``: per condition without measurement, pair of methods and statistic (the CAT score, ``cat``,
and tau per dimension) the values each method gives — the per-condition tau / CAT tables of
``runner.analyze.agreement``, in which measurement is one design factor — and whether the conclusions differ:

- ``sign_differs``: both permutation p-values are at most α = 1 − confidence level and the signs are opposite;
- ``intervals_disjoint``: their intervals (``ci_low``…``ci_high``, each covering its method's population value)
  do not overlap;
- ``conclusions_differ``: either of the two — the methods' results are incompatible. A sign flip between two
  non-significant values is noise, not a different conclusion, so it does not count.
- ``significance_differs`` (reported, not counted in ``conclusions_differ``): one method is significant and the
  other is not. Under the null of one shared distribution this happens often where the methods differ in
  precision — the sample measurement's frequencies over a few seeds attenuate tau that the exact distributions
  keep (measured on the simulator: 12 of 42 statistics at 12 seeds and six countries) — so it says "one method
  has the power the other lacks", not "they measure different things".

Raw p-values: the families' adjusted ones are in the tau and CAT tables (runner/analyze/multiplicity.py).

``method_agreement``: per condition without measurement and pair, the cells compared, their mean TV, mean
``tv_floor``, mean JS and the CAT comparison — the table the report draws.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import polars as pl
from scipy.stats import binom

from runner.survey.vocab import MEASUREMENTS

__all__ = [
    "expected_tv",
    "jensen_shannon",
    "method_agreement",
    "method_conclusions",
    "method_divergence",
    "method_summary",
    "method_tables",
    "total_variation",
]

OPTIONS = 5
CELL = ("country", "question")
_P = [f"p{k}" for k in range(1, OPTIONS + 1)]


def total_variation(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """½ Σ_k |p_k − q_k| per row of two (rows × options) arrays of distributions, in [0, 1]."""
    return np.clip(0.5 * np.abs(p - q).sum(axis=-1), 0.0, 1.0)


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen–Shannon divergence in bits per row of two (rows × options) arrays of distributions, in [0, 1]."""
    m = 0.5 * (p + q)

    def kl(a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(a > 0.0, a * np.log2(np.where(a > 0.0, a, 1.0) / np.where(m > 0.0, m, 1.0)), 0.0)
        return terms.sum(axis=-1)

    return np.clip(0.5 * kl(p) + 0.5 * kl(q), 0.0, 1.0)


def expected_tv(n: np.ndarray, r: np.ndarray) -> np.ndarray:
    """E TV(p̂_n, r): the expected total variation between the frequencies of n draws from r and r itself.

    Per row: ½ Σ_k E|X_k − n r_k| / n with X_k ~ Binomial(n, r_k), E|X − n r| = 2 v (1 − r) Binomial(v; n, r) at
    v = ⌊n r⌋ + 1 (de Moivre). ``n``: draws per row (0 gives NaN); ``r``: rows × options.
    """
    n = np.asarray(n, dtype=np.int64)[:, None]
    r = np.clip(np.asarray(r, dtype=float), 0.0, 1.0)
    v = np.floor(n * r).astype(np.int64) + 1
    mad = 2.0 * v * (1.0 - r) * binom.pmf(v, n, r)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n[:, 0] > 0, 0.5 * mad.sum(axis=-1) / n[:, 0], np.nan)


def method_distributions(answers: pl.LazyFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Per ``keys`` × country × question × measurement: the method's distribution (p1…p5), its ok answers ``n``
    and ``drawn`` (how many of them are single sampled answers, counted as frequencies)."""
    names = answers.collect_schema().names()
    probs = pl.col("option_probs") if "option_probs" in names else pl.lit(None, dtype=pl.List(pl.Float64))
    usable = (pl.col("status") == "ok") & pl.col("option_id").is_not_null() & (pl.col("question") <= 24)
    shares = [
        pl.when(probs.is_not_null())
        .then(probs.list.get(k, null_on_oob=True))
        .otherwise((pl.col("option_id") == k + 1).cast(pl.Float64))
        .alias(_P[k])
        for k in range(OPTIONS)
    ]
    return (
        answers.filter(usable)
        .select(*keys, *CELL, "measurement", *shares, probs.is_null().alias("_drawn"))
        .group_by([*keys, *CELL, "measurement"])
        .agg(*(pl.col(p).mean() for p in _P), pl.len().alias("n"), pl.col("_drawn").sum().alias("drawn"))
        .collect(engine="streaming")
    )


def _pairs(methods: Sequence[str]) -> list[tuple[str, str]]:
    """Method pairs in vocabulary order (sample, distribution, verbalized, then any others by name)."""
    order = sorted(methods, key=lambda m: (MEASUREMENTS.index(m) if m in MEASUREMENTS else len(MEASUREMENTS), m))
    return list(itertools.combinations(order, 2))


def method_divergence(answers: pl.LazyFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Per cell (``keys`` × country × question) and method pair: n, TV, JS and the noise floor (module doc)."""
    dist = method_distributions(answers, keys)
    on = [*keys, *CELL]
    out = []
    for a, b in _pairs(dist["measurement"].unique().to_list()):
        left = dist.filter(pl.col("measurement") == a).drop("measurement")
        right = dist.filter(pl.col("measurement") == b).drop("measurement")
        both = left.join(right, on=on, suffix="_b", nulls_equal=True)
        if both.height == 0:
            continue
        p = both.select(_P).to_numpy()
        q = both.select([f"{c}_b" for c in _P]).to_numpy()
        n_a, n_b = both["n"].to_numpy(), both["n_b"].to_numpy()
        emp_a = (both["drawn"] == both["n"]).to_numpy()
        emp_b = (both["drawn_b"] == both["n_b"]).to_numpy()
        pooled = (p * n_a[:, None] + q * n_b[:, None]) / (n_a + n_b)[:, None]
        r_a = np.where(emp_b[:, None], pooled, q)  # the distribution the empirical side is drawn from under H0
        r_b = np.where(emp_a[:, None], pooled, p)
        floor = np.where(emp_a, expected_tv(n_a, r_a), 0.0) + np.where(emp_b, expected_tv(n_b, r_b), 0.0)
        mixed = ((both["drawn"] > 0) & ~pl.Series(emp_a)) | ((both["drawn_b"] > 0) & ~pl.Series(emp_b))
        out.append(
            both.select(on).with_columns(
                pl.lit(a).alias("method_a"),
                pl.lit(b).alias("method_b"),
                pl.Series("n_a", n_a, pl.Int64),
                pl.Series("n_b", n_b, pl.Int64),
                pl.Series("empirical_a", emp_a),
                pl.Series("empirical_b", emp_b),
                pl.Series("tv", total_variation(p, q)),
                pl.Series("js", jensen_shannon(p, q)),
                # a side mixing frequencies with stated distributions has no binomial floor: null
                pl.when(mixed.to_numpy()).then(None).otherwise(pl.Series(floor)).alias("tv_floor"),
            )
        )
    return pl.concat(out, how="vertical_relaxed") if out else _empty_divergence(answers, keys)


def _empty_divergence(answers: pl.LazyFrame, keys: Sequence[str]) -> pl.DataFrame:
    schema = answers.collect_schema()
    return pl.DataFrame(
        schema={
            **{k: schema[k] for k in (*keys, *CELL)},
            **dict.fromkeys(("method_a", "method_b"), pl.String),
            **dict.fromkeys(("n_a", "n_b"), pl.Int64),
            **dict.fromkeys(("empirical_a", "empirical_b"), pl.Boolean),
            **dict.fromkeys(("tv", "js", "tv_floor"), pl.Float64),
        }
    )


def _statistics(kendall: pl.DataFrame, cat: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Long form of the per-condition results: keys, measurement, statistic, value, ci_low, ci_high, p."""
    cols = [*keys, "measurement"]
    tau = kendall.select(
        *cols,
        pl.col("dimension").alias("statistic"),
        pl.col("tau").alias("value"),
        "ci_low",
        "ci_high",
        pl.col("kendall_p").alias("p"),
    )
    cats = cat.select(
        *cols,
        pl.lit("cat").alias("statistic"),
        pl.col("cat_score").alias("value"),
        "ci_low",
        "ci_high",
        pl.col("cat_p").alias("p"),
    )
    return pl.concat([cats, tau], how="vertical_relaxed")


def method_conclusions(
    kendall: pl.DataFrame, cat: pl.DataFrame, keys: Sequence[str], *, alpha: float = 0.05
) -> pl.DataFrame:
    """Per condition without measurement, method pair and statistic (cat, each dimension's tau): both values,
    intervals and p-values, and whether the conclusions differ at level ``alpha`` (module docstring)."""
    stats = _statistics(kendall, cat, keys)
    on = [*keys, "statistic"]
    out = []
    for a, b in _pairs(stats["measurement"].unique().to_list()):
        left = stats.filter(pl.col("measurement") == a).drop("measurement")
        right = stats.filter(pl.col("measurement") == b).drop("measurement")
        both = left.join(right, on=on, suffix="_b", nulls_equal=True).rename(
            {c: f"{c}_a" for c in ("value", "ci_low", "ci_high", "p")}
        )
        out.append(both.with_columns(pl.lit(a).alias("method_a"), pl.lit(b).alias("method_b")))
    frame = (
        pl.concat(out, how="vertical_relaxed")
        if out
        else pl.DataFrame(
            schema={
                **{k: kendall.schema.get(k, pl.String) for k in keys},
                "statistic": pl.String,
                **{f"{c}_{s}": pl.Float64 for s in "ab" for c in ("value", "ci_low", "ci_high", "p")},
                "method_a": pl.String,
                "method_b": pl.String,
            }
        )
    )
    sig_a = pl.col("p_a").fill_nan(None).fill_null(1.0) <= alpha
    sig_b = pl.col("p_b").fill_nan(None).fill_null(1.0) <= alpha
    opposite = (pl.col("value_a").sign() * pl.col("value_b").sign()).fill_nan(None).fill_null(0.0) < 0
    ci = {c: pl.col(c).fill_nan(None) for c in ("ci_low_a", "ci_high_a", "ci_low_b", "ci_high_b")}  # NaN: unknown
    disjoint = (ci["ci_high_a"] < ci["ci_low_b"]) | (ci["ci_high_b"] < ci["ci_low_a"])
    return (
        frame.select(
            *keys,
            "method_a",
            "method_b",
            "statistic",
            "value_a",
            "value_b",
            "ci_low_a",
            "ci_high_a",
            "ci_low_b",
            "ci_high_b",
            "p_a",
            "p_b",
        )
        .with_columns(
            (sig_a != sig_b).alias("significance_differs"),
            (sig_a & sig_b & opposite).alias("sign_differs"),
            disjoint.fill_null(False).alias("intervals_disjoint"),
        )
        .with_columns((pl.col("sign_differs") | pl.col("intervals_disjoint")).alias("conclusions_differ"))
    )


def method_agreement(divergence: pl.DataFrame, conclusions: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Per condition without measurement and method pair: cells, mean TV / floor / JS, the CAT each method gives,
    whether the CAT conclusions differ, and of the seven statistics how many conclusions and significances differ."""
    on = [*keys, "method_a", "method_b"]
    cells = divergence.group_by(on).agg(
        pl.len().alias("cells"),
        pl.col("tv").mean().alias("tv_mean"),
        pl.col("tv_floor").mean().alias("tv_floor_mean"),
        pl.col("js").mean().alias("js_mean"),
    )
    cat = conclusions.filter(pl.col("statistic") == "cat").select(
        *on,
        pl.col("value_a").alias("cat_a"),
        pl.col("value_b").alias("cat_b"),
        pl.col("conclusions_differ").alias("cat_conclusions_differ"),
    )
    anywhere = conclusions.group_by(on).agg(
        pl.col("conclusions_differ").sum().alias("statistics_differing"),
        pl.col("significance_differs").sum().alias("significance_differing"),
    )
    return (
        cells.join(cat, on=on, how="full", coalesce=True, nulls_equal=True)
        .join(anywhere, on=on, how="left", nulls_equal=True)
        .sort(on, nulls_last=True)
    )


def method_tables(
    answers: pl.LazyFrame,
    factors: Sequence[str],
    kendall: pl.DataFrame,
    cat: pl.DataFrame,
    *,
    level: float = 0.95,
) -> dict[str, pl.DataFrame]:
    """``method_divergence``, ``method_conclusions`` and ``method_agreement`` of an analysis whose design
    ``factors`` include ``measurement``; empty tables (with their columns) when the measurement does not vary."""
    keys = [f for f in factors if f != "measurement"]
    if "measurement" not in factors:  # one method: nothing to compare (answers without the column, too)
        answers = answers.with_columns(pl.lit("sample").alias("measurement")).filter(pl.lit(False))
        kendall = kendall.with_columns(pl.lit("sample").alias("measurement"))
        cat = cat.with_columns(pl.lit("sample").alias("measurement"))
    divergence = method_divergence(answers, keys)
    conclusions = method_conclusions(kendall, cat, keys, alpha=1.0 - level)
    return {
        "method_divergence": divergence,
        "method_conclusions": conclusions,
        "method_agreement": method_agreement(divergence, conclusions, keys),
    }


def method_summary(agreement: pl.DataFrame, level: float) -> dict[str, object]:
    """The summary's account of method agreement: pairs compared, conditions whose conclusions differ, and the
    definitions (docs/analysis.md, Agreement between methods)."""
    pairs = sorted({(a, b) for a, b in agreement.select("method_a", "method_b").iter_rows()})
    differ = agreement.filter(pl.col("statistics_differing").fill_null(0) > 0).height
    return {
        "pairs": [f"{a} vs {b}" for a, b in pairs],
        "condition_pairs": agreement.height,
        "condition_pairs_differing": differ,
        "alpha": round(1.0 - level, 12),
        "divergence": "TV = 1/2 sum|p - q|; JS in bits (base 2); sample = empirical frequencies over its answers",
        "tv_floor": "E TV(empirical of n draws from r, r): exact binomial mean absolute deviation",
        "conclusions_differ": "both significant with opposite signs, or intervals disjoint",
        "significance_differs": "one method significant at alpha, the other not (often precision, not disagreement)",
    }
