"""Baseline respondents and position bias: how much of an agreement score is more than chance and order bias.

Two content-free respondents answer exactly the cells the run answered (same conditions, countries, units,
questions, option orders and measurement), computed from the run's own data with no extra requests:

- ``uniform``: every option equally likely;
- ``position``: the model's own measured preference for displayed positions in that condition (pooled over
  countries, questions and units), whatever the question or persona says — position i shows option
  ``order[i]``, so with the given order it answers every question alike and with varied orders it follows them.

A sampled cell of the run becomes one draw from the baseline's option distribution; a distribution cell its
expected option. Each of ``replicates`` seeded draws is scored like the run (unit means → country means →
indices → Kendall tau-b per dimension against the reference, CAT = mean tau), giving the baseline's null
distribution for this design. ``beyond_chance`` = observed − the baseline's 95th percentile (> 0: the observed
score is beyond what the baseline reaches in 95 % of draws); ``p_baseline`` = (k + 1) / (replicates + 1) with k the
draws at least as high as the observed. A baseline whose every draw is undefined (constant indices: the
position respondent under one fixed order with distribution cells) has NaN quantiles.

``position_bias``: per condition, the share of answers at each displayed position (sampled answers count their
position, distribution cells their position probabilities), ``tv_from_uniform`` (total variation distance from
0.2 each) and ``recency`` = P(last position) − P(first). Only designs that vary the option order separate a
position preference from a preference for the options' content.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import polars as pl

from runner.analyze.design import Design
from runner.analyze.units import UnitArray
from runner.parse.policy import PARTIAL
from runner.score.indices import indices_from_means
from runner.score.ranking import rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import ReferenceSet

__all__ = ["BASELINES", "ORDER_CODE", "baseline_tables", "order_code_expr"]

BASELINES = ("uniform", "position")
ORDER_CODE = "option_order_code"  # the displayed order as a 5-digit integer (5 4 3 2 1 → 54321)
_OPTIONS = 5
_POW = 10 ** np.arange(_OPTIONS - 1, -1, -1)
_BLOCK = 1 << 22  # answer × replicate values drawn at once
_CODES = 10**_OPTIONS  # order codes are below this (five digits)


def order_code_expr(column: str = "option_order") -> pl.Expr:
    """Int32 code of a list column of option IDs in displayed order (1 2 3 4 5 → 12345)."""
    return pl.sum_horizontal([pl.col(column).list.get(i).cast(pl.Int32) * int(_POW[i]) for i in range(_OPTIONS)]).alias(
        ORDER_CODE
    )


def _orders(codes: np.ndarray) -> np.ndarray:
    """(N, 5) option IDs in displayed order from their codes."""
    return ((codes[:, None] // _POW[None, :]) % 10).astype(np.int8)


def baseline_tables(
    answers: pl.LazyFrame,
    units: UnitArray,
    design: Design,
    reference: ReferenceSet,
    observed: dict[str, pl.DataFrame],
    *,
    replicates: int = 200,
    seed: int = 0,
    undefined_tau: str = "nan",
) -> dict[str, pl.DataFrame]:
    """Tables ``baselines`` (condition, baseline, dimension incl. "cat": observed, baseline mean, q95, p, beyond
    chance) and ``position_bias`` for the ok answers in ``answers`` (needs ``ORDER_CODE``)."""
    n_cond = units.conditions.height
    cells = _answered_cells(answers, units, design)
    c = cells["_c"].to_numpy().astype(np.int64)
    orders = _orders(cells[ORDER_CODE].to_numpy().astype(np.int64))
    members = cells["m"].to_numpy().astype(np.int64)
    is_dist = cells["is_dist"].to_numpy()
    # position weights of each group: its answers at the sampled answer's position, or the distributions' sums
    option = cells["option_id"].to_numpy().astype(np.int8)
    position = np.zeros((n_cond, _OPTIONS))
    for i in range(_OPTIONS):  # one position at a time: no (groups, 5) float copy
        weight = np.where(orders[:, i] == option, members, 0).astype(np.float64)
        if is_dist.any():
            weight[is_dist] = cells[_WEIGHTS[i]].to_numpy()[is_dist]
        position[:, i] = np.bincount(c, weights=weight, minlength=n_cond)
    del option, weight
    counts = np.bincount(c, weights=members, minlength=n_cond).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        position = position / position.sum(axis=1, keepdims=True)
    bias_rows = []
    for ci, row in enumerate(units.conditions.to_dicts()):
        p = position[ci]
        bias_rows.append(
            {
                **{f: v for f, v in row.items() if f != "_all"},
                "n_answers": int(counts[ci]),
                **{f"p{i + 1}": float(p[i]) for i in range(_OPTIONS)},
                "tv_from_uniform": float(0.5 * np.abs(p - 1.0 / _OPTIONS).sum()),
                "recency": float(p[-1] - p[0]),
            }
        )
    shape = (len(units.countries), units.units.height, 24)  # one condition's (K, U, 24) cells
    cell = np.ravel_multi_index(
        (
            cells["_k"].to_numpy().astype(np.int64),
            cells["_u"].to_numpy().astype(np.int64),
            cells["question"].to_numpy().astype(np.int64) - 1,
        ),
        shape,
    )
    # answers of each group's unit and question, whatever their order (one count per cell of the unit array)
    flat = c * int(np.prod(shape)) + cell
    per_cell = np.bincount(flat, weights=members, minlength=n_cond * int(np.prod(shape))).astype(np.int64)[flat]
    del cells, flat
    rows = []
    for b, name in enumerate(BASELINES):
        tau = np.full((n_cond, replicates, len(DIMENSIONS)), np.nan)
        cat = np.full((n_cond, replicates), np.nan)
        for ci in range(n_cond):
            mine = np.flatnonzero(c == ci)
            p = np.full(_OPTIONS, 1.0 / _OPTIONS) if name == "uniform" else position[ci]
            if mine.size == 0 or not np.isfinite(p).all():
                continue
            rng = np.random.default_rng([seed, 14, b, ci])  # one stream per baseline and condition
            groups = _Groups(orders[mine], is_dist[mine], cell[mine], per_cell[mine], members[mine])
            means = _replicates(p, groups, shape, replicates, rng)
            tau[ci], cat[ci] = _score(means, reference, units, undefined_tau)
        rows.extend(_summaries(name, tau, cat, units, observed))
    return {"baselines": pl.DataFrame(rows), "position_bias": pl.DataFrame(bias_rows)}


_WEIGHTS = [f"_w{i}" for i in range(_OPTIONS)]  # a group's summed probability at each displayed position


def _answered_cells(answers: pl.LazyFrame, units: UnitArray, design: Design) -> pl.DataFrame:
    """The ok answers (and partial distribution cells, by their reply's own option) counted per (condition,
    country, unit, question, order, option, distribution or not).

    Columns ``_c``, ``_k``, ``_u`` (the unit array's axes), ``question``, ``ORDER_CODE``, ``option_id``,
    ``is_dist`` (an ok row with a full, finite ``option_probs``), ``m`` (answers) and, for distribution rows,
    ``_w0…_w4`` (their summed probability at each displayed position). Streamed: memory follows the number of
    groups — at most the unit array's cells times the orders and options they used — not the answers.
    """
    factors = list(design.factors) or ["_all"]
    probs = "option_probs" in answers.collect_schema().names()
    lazy = answers if design.factors else answers.with_columns(_all=pl.lit(1))
    if probs:
        full = pl.col("option_probs").list.len() == _OPTIONS
        finite = pl.col("option_probs").list.eval(pl.element().is_finite()).list.all()
        exact = pl.col("status") == "ok"  # a partial cell's null elements are unknown, not 0: it counts as sampled
        is_dist = (exact & pl.col("option_probs").is_not_null() & full & finite).fill_null(False)
        digit = [(pl.col(ORDER_CODE) // int(_POW[i])) % 10 - 1 for i in range(_OPTIONS)]
        weights = [
            pl.when(pl.col("is_dist")).then(pl.col("option_probs").list.get(digit[i], null_on_oob=True)).sum().alias(w)
            for i, w in enumerate(_WEIGHTS)
        ]
    else:
        is_dist, weights = pl.lit(False), []
    keys = ["_c", "_k", "_u", "question", ORDER_CODE, "option_id", "is_dist"]
    grouped = (
        lazy.filter(
            pl.col("status").is_in(("ok", PARTIAL))
            & pl.col("question").is_between(1, 24)
            & pl.col("option_id").is_not_null()
        )
        .join(units.conditions.with_row_index("_c").lazy(), on=factors, nulls_equal=True)
        .join(
            pl.DataFrame({"country": list(units.countries)}, schema={"country": pl.String}).with_row_index("_k").lazy(),
            on="country",
        )
        .join(units.units.with_row_index("_u").lazy(), on=list(design.units), nulls_equal=True)
        .with_columns(is_dist=is_dist)
        .group_by(keys)
        .agg(pl.len().alias("m"), *weights)
        .collect(engine="streaming")
    )
    return grouped


class _Groups(NamedTuple):
    """One condition's answers as groups of alike answers (rows of ``_answered_cells``)."""

    orders: np.ndarray  # (G, 5) option IDs in displayed order
    is_dist: np.ndarray  # (G,) distribution answers
    cell: np.ndarray  # (G,) flat (country, unit, question) index
    per_cell: np.ndarray  # (G,) answers of that unit and question
    members: np.ndarray  # (G,) answers in the group


def _replicates(
    p: np.ndarray,
    answered: _Groups,
    shape: tuple[int, int, int],
    replicates: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """(R, K, 24) country means of ``replicates`` draws of a respondent choosing position i with ``p[i]``.

    ``answered``: one condition's answered cells (``_Groups``), with ``cell`` their flat (country, unit,
    question) index in ``shape``. As the analysis takes them: a unit's mean over its answers, then the mean
    over the country's units. A distribution answer adds its expected option Σ p_i·order_i; the sampled
    answers that share a (country, question), an order and their unit's answer count n are exchangeable, so
    their draws are one multinomial count vector per group, weighted 1/n: the cost is per group, not per answer.
    """
    n_units = shape[1]
    k, u, q = np.unravel_index(answered.cell, shape)
    orders, is_dist, per_cell = answered.orders, answered.is_dist, answered.per_cell
    kq = k * shape[2] + q
    units_of = np.bincount(np.unique(kq * n_units + u) // n_units, minlength=shape[0] * shape[2])  # units per kq
    weight = answered.members / per_cell
    fixed = np.bincount(kq[is_dist], weights=(orders[is_dist] @ p) * weight[is_dist], minlength=len(units_of))
    sampled = ~is_dist
    # (kq, order code, n) as one int64 whose order is theirs, lexicographic: np.unique of one column, not of rows
    span_n = int(per_cell.max(initial=0)) + 1
    key = (kq[sampled] * _CODES + orders[sampled].astype(np.int64) @ _POW) * span_n + per_cell[sampled]
    unique, inverse = np.unique(key, return_inverse=True)
    del key
    members = np.bincount(inverse, weights=answered.members[sampled], minlength=len(unique)).astype(np.int64)
    rest, n_of = np.divmod(unique, span_n)
    group_kq, group_code = np.divmod(rest, _CODES)
    values = _orders(group_code).astype(np.float64)  # (G, 5) option at each position
    group_weight = 1.0 / n_of
    out = np.full((replicates, shape[0], shape[2]), np.nan)
    present = units_of > 0
    k_of, q_of = np.divmod(np.flatnonzero(present), shape[2])
    block = max(1, _BLOCK // max(len(unique) * _OPTIONS, 1))
    for start in range(0, replicates, block):
        b = min(block, replicates - start)
        counts = rng.multinomial(members, p, size=(b, len(unique)))  # (b, G, 5) positions drawn
        drawn = np.einsum("bgi,gi->bg", counts, values) * group_weight  # (b, G) weighted sums
        sums = np.zeros((b, len(units_of)))
        np.add.at(sums, (slice(None), group_kq), drawn)
        means = (sums + fixed) / np.maximum(units_of, 1)
        out[start : start + b, k_of, q_of] = means[:, present]
    return out


def _score(
    means: np.ndarray, reference: ReferenceSet, units: UnitArray, undefined_tau: str
) -> tuple[np.ndarray, np.ndarray]:
    """Taus (R, 6) and CAT scores (R,) of one condition's (R, K, 24) country means (countries with references)."""
    seen = np.isfinite(means).any(axis=(0, 2))
    ks = [i for i, name in enumerate(units.countries) if seen[i] and reference.knows(name)]
    if len(ks) < 2:
        return np.full((means.shape[0], len(DIMENSIONS)), np.nan), np.full(means.shape[0], np.nan)
    ref = reference.matrix([units.countries[i] for i in ks])
    agree = rank_agreement(indices_from_means(means[:, ks], exact=False), ref, undefined_tau=undefined_tau)
    return agree.kendall, agree.cat_score


def _summaries(
    name: str, tau: np.ndarray, cat: np.ndarray, units: UnitArray, observed: dict[str, pl.DataFrame]
) -> list[dict]:
    """One row per condition × (dimension, cat) comparing the observed score with the baseline's draws."""
    factors = [f for f in units.conditions.columns if f != "_all"]
    kendall, cat_table = observed.get("kendall"), observed.get("cat")
    out = []
    for ci, row in enumerate(units.conditions.to_dicts()):
        keys = {f: row[f] for f in factors}
        for j, dim in enumerate((*DIMENSIONS, "cat")):
            draws = cat[ci] if dim == "cat" else tau[ci, :, j]
            table = cat_table if dim == "cat" else kendall
            value = _observed(table, keys, None if dim == "cat" else dim, "cat_score" if dim == "cat" else "tau")
            finite = draws[np.isfinite(draws)]
            q95 = float(np.quantile(finite, 0.95)) if finite.size else float("nan")
            p = float((np.sum(finite >= value - 1e-12) + 1) / (finite.size + 1)) if finite.size else float("nan")
            out.append(
                {
                    **keys,
                    "baseline": name,
                    "dimension": dim,
                    "observed": value,
                    "baseline_mean": float(finite.mean()) if finite.size else float("nan"),
                    "baseline_q95": q95,
                    "beyond_chance": value - q95,
                    "p_baseline": p,
                    "undefined_share": float(1.0 - finite.size / max(draws.size, 1)),
                }
            )
    return out


def _observed(table: pl.DataFrame | None, keys: dict, dimension: str | None, column: str) -> float:
    """The observed score of one condition (and dimension) in an agreement table; NaN when absent."""
    if table is None or table.height == 0:
        return float("nan")
    mask = pl.lit(True)
    for f, v in keys.items():
        if f in table.columns:
            mask = mask & (pl.col(f).is_null() if v is None else pl.col(f) == v)
    if dimension is not None:
        mask = mask & (pl.col("dimension") == dimension)
    hit = table.filter(mask)
    value = hit[column][0] if hit.height else None
    return float("nan") if value is None else float(value)
