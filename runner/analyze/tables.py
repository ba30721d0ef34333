"""Descriptive tables of parsed answers: per-question statistics, parse-status rates, temperature-0 agreement.

Per-question means score answers by the parse policy (``scored_option``); status counts, status rates and the
temperature-0 check describe what the model replied, so they read the statuses and ok answers as parsed.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from runner.parse.distribution import scored_square, scored_value
from runner.parse.policy import DEFAULT_POLICY, Policy
from runner.score.indices import question_stats

__all__ = ["question_table", "status_rates", "temperature_zero_disagreement"]


def question_table(answers: pl.LazyFrame, factors: Sequence[str], policy: Policy = DEFAULT_POLICY) -> pl.LazyFrame:
    """Per condition × country × question: ``mean``, ``std`` (ddof 0), ``n`` of the answers the policy scores
    (``scored_option(policy)``; by default the ok answers) and one count per parse status.

    The papers' per-question tables (CAT v2 Tables 5–17) are this table for one condition.
    """
    keys = [*factors, "country", "question"]
    has_probs = "option_probs" in answers.collect_schema().names()
    scored = answers.with_columns(scored_value(policy, has_probs=has_probs), scored_square(policy, has_probs=has_probs))
    stats = question_stats(scored, [*factors, "country"], value="scored")
    # The answer variance with distribution cells counted exactly: mean E[X²] − (mean E[X])² (ddof 0), which for
    # sampled answers is the population variance of the answers themselves.
    exact = (
        scored.filter(pl.col("scored").is_not_null())
        .group_by(keys)
        .agg(var_exact=(pl.col("scored_sq").mean() - pl.col("scored").mean() ** 2).clip(lower_bound=0.0))
    )
    stats = stats.join(exact, on=keys, how="left", nulls_equal=True)
    counts = (
        answers.group_by([*keys, "status"])
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .collect(engine="streaming")
        .pivot("status", index=keys, values="count")
        .fill_null(0)
        .lazy()
    )
    status_cols = pl.all().exclude(keys).name.prefix("status_")
    counts = counts.select([*[pl.col(k) for k in keys], status_cols])
    return counts.join(stats, on=keys, how="left", nulls_equal=True).with_columns(pl.col("n").fill_null(0)).sort(keys)


def status_rates(answers: pl.LazyFrame, by: Sequence[str]) -> pl.DataFrame:
    """Share of each parse status per ``by`` group (e.g. endpoint × language): ``by…, status, count, share``."""
    keys = list(by)
    counted = answers.group_by([*keys, "status"]).agg(pl.len().cast(pl.Int64).alias("count"))
    total = pl.col("count").sum().over(keys) if keys else pl.col("count").sum()
    return counted.with_columns(share=pl.col("count") / total).sort([*keys, "status"]).collect(engine="streaming")


def temperature_zero_disagreement(answers: pl.LazyFrame, factors: Sequence[str]) -> dict[str, object]:
    """For temperature-0 conditions: share of (condition, country, question) whose repeated ok answers differ.

    Greedy decoding should answer a repeated request identically whatever the seed; a positive share means the
    backend is not deterministic (or ignores the seed). ``None`` when the design has no temperature 0. This checks
    the backend, so it reads the ok answers as parsed, whatever the scoring policy (a pinned item always agrees).
    """
    if "temperature" not in factors:
        return {"groups": 0, "disagreeing": 0, "share": None, "note": "no temperature factor"}
    keys = [*factors, "country", "question"]
    per_item = (
        answers.filter((pl.col("temperature") == 0) & (pl.col("status") == "ok"))
        .group_by(keys)
        .agg(n=pl.len(), distinct=pl.col("option_id").n_unique())
        .filter(pl.col("n") > 1)
        .select(groups=pl.len(), disagreeing=(pl.col("distinct") > 1).sum())
        .collect(engine="streaming")
    )
    groups, disagreeing = int(per_item["groups"][0]), int(per_item["disagreeing"][0])
    return {"groups": groups, "disagreeing": disagreeing, "share": disagreeing / groups if groups else None}
