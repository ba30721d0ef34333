"""The distribution measurement: a reply's first-token log-probabilities → probabilities of the five options.

A ``distribution`` cell asks the endpoint for the top-k alternatives of the first reply token
(``runner.sweep.providers.logprobs``). Each alternative whose token is a displayed option label maps to that
option: ``bare`` folds case, full-width and Arabic-Indic digits and strips punctuation, and the tokenizer's
word-start marks (SentencePiece "▁", byte-level BPE "Ġ") and spaces go too, so "3", " 3", "▁3", "Ġ3", "３"
and "(3" are all the label "3". Several tokens of one label add up. Labels are the displayed positions'
marks (digits 1-5 by default, letters A-E where the prompt shows those; a token counts when it spells a label
exactly). Words-only prompts have no distribution: a first word does not name one option, so the spec refuses
``option_labels = "words"`` with ``measurement = "distribution"`` (``runner.sweep.spec``). Probabilities are
summed per option in canonical option order (the display order is undone with the cell's ``option_order``).

- ``option_mass``: the probability the option tokens held (before renormalising), in [0, 1].
- ``option_probs``: the five probabilities divided by that mass (they sum to 1 within float rounding).
- Status ``low_mass`` when ``option_mass < MIN_OPTION_MASS`` and the reply was not constrained: the model
  mostly wanted to say something else, and the renormalised numbers describe a small part of what it would
  say. The probabilities are still recorded; the default policy does not score the cell. With a constraint
  that admits only option tokens (llama.cpp's grammar) the server cannot emit anything else, so the
  renormalised probabilities are exactly the distribution the constrained reply is drawn from and the cell is
  ``ok`` whatever the mass (the mass is kept and reported). No option token among the alternatives at all:
  ``low_mass`` without probabilities.

``with_distributions`` applies this to an answers table after the text parse, and ``scored_value`` is the
analysis's per-answer value: the expected option under ``option_probs`` where the cell has them, else the
scored option of ``runner.parse.policy``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from runner.parse.blocks import is_provider_block
from runner.parse.normalize import bare
from runner.parse.policy import DEFAULT_POLICY, Policy, scored_option
from runner.survey.cell import CANONICAL_ORDER, position_marks
from runner.survey.instrument import HEALTH_QUESTIONS

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "DIGIT_LABELS",
    "MIN_OPTION_MASS",
    "OptionDistribution",
    "option_distribution",
    "scored_value",
    "token_label",
    "with_distributions",
]

MIN_OPTION_MASS = 0.5  # below this share of probability on option tokens an unconstrained cell is "low_mass"
DIGIT_LABELS: tuple[str, ...] = ("1", "2", "3", "4", "5")  # the label of each displayed position
_WORD_START = str.maketrans({"\u2581": " ", "\u0120": " ", "\u010a": " "})  # ▁ Ġ Ċ (tokenizer space marks)
# optional response columns the parse stage reads when a part has them (distributions, letter labels)
DISTRIBUTION_COLUMNS = ("measurement", "top_logprobs", "constraint", "option_labels")

OptionDistribution = tuple[tuple[float, ...] | None, float]  # (option_probs in canonical order, option_mass)


def token_label(token: str) -> str:
    """The label a token spells: word-start marks, spaces, punctuation and case gone, digits made ASCII."""
    return bare(token.translate(_WORD_START))


def option_distribution(
    top_logprobs: Sequence[tuple[str, float]],
    option_order: Sequence[int] = CANONICAL_ORDER,
    labels: Sequence[str] = DIGIT_LABELS,
) -> OptionDistribution:
    """(option_probs, option_mass) from (token, natural-log probability) pairs.

    ``labels[i]`` is the label shown at position i + 1, which displays option ID ``option_order[i]``.
    ``option_probs`` (None when no token is an option label) has five float64 probabilities for option IDs 1-5
    that sum to 1; ``option_mass`` is the summed probability of the option tokens before dividing, clipped to
    [0, 1]. The same token text listed twice (a server that reports token IDs) counts once per entry.
    """
    wanted = [token_label(label) for label in labels]
    exact = {label: i for i, label in enumerate(wanted)}
    per_position = [0.0] * len(wanted)
    for token, logprob in top_logprobs:
        position = exact.get(token_label(token))
        if position is not None:
            per_position[position] += math.exp(logprob)
    mass = math.fsum(per_position)
    if mass <= 0.0:
        return None, 0.0
    probs = [0.0] * len(CANONICAL_ORDER)
    for position, p in enumerate(per_position):
        probs[option_order[position] - 1] = p / mass
    return tuple(probs), min(mass, 1.0)


def with_distributions(answers: pa.Table, responses: pa.Table, min_mass: float = MIN_OPTION_MASS) -> pa.Table:
    """``answers`` (``AnswerRow`` schema) with the distribution cells of ``responses`` filled in.

    For each response row with measurement ``distribution`` and stored ``top_logprobs``: ``option_probs`` and
    ``option_mass`` set; status ``low_mass`` (option null) or ``ok`` with the parsed option, or the most likely
    one where the text did not parse (see the module docstring). Other rows are returned as they were.
    """
    names = responses.column_names
    if "top_logprobs" not in names or "measurement" not in names:
        return answers
    is_dist = pc.fill_null(pc.equal(responses.column("measurement"), "distribution"), False)
    if not pc.any(is_dist).as_py():
        return answers
    chosen = responses.filter(is_dist)
    constraints = chosen.column("constraint").to_pylist() if "constraint" in names else [None] * chosen.num_rows
    labelling = chosen.column("option_labels").to_pylist() if "option_labels" in names else [None] * chosen.num_rows
    finishes = chosen.column("finish_reason").to_pylist() if "finish_reason" in names else [None] * chosen.num_rows
    found: dict[str, tuple[tuple[float, ...] | None, float, bool]] = {}
    for key, top, order, constraint, labels, finish in zip(
        chosen.column("cell_key").to_pylist(),
        chosen.column("top_logprobs").to_pylist(),
        chosen.column("option_order").to_pylist(),
        constraints,
        labelling,
        finishes,
        strict=True,
    ):
        if top is None:  # the server did not return them: the cell stays a parsed sample
            continue
        if is_provider_block(finish):  # the provider refused: a refusal, whatever the first token's odds
            continue
        marks = position_marks(labels or "digits") or DIGIT_LABELS
        probs, mass = option_distribution([(t["token"], t["logprob"]) for t in top], order, marks)
        constrained = constraint not in (None, "none")
        found[key] = (probs, mass, probs is not None and (constrained or mass >= min_mass))
    if not found:
        return answers
    orders = dict(zip(chosen.column("cell_key").to_pylist(), chosen.column("option_order").to_pylist(), strict=True))
    keys = answers.column("cell_key").to_pylist()
    status = answers.column("status").to_pylist()
    option = answers.column("option_id").to_pylist()
    displayed = answers.column("displayed").to_pylist()
    probs_col = answers.column("option_probs").to_pylist()
    mass_col = answers.column("option_mass").to_pylist()
    for i, key in enumerate(keys):
        hit = found.get(key)
        if hit is None:
            continue
        probs, mass, usable = hit
        probs_col[i], mass_col[i] = probs, mass
        if not usable:
            status[i], option[i], displayed[i] = "low_mass", None, None
            continue
        if status[i] != "ok" or option[i] is None:  # the text did not parse: the most likely option
            option[i] = 1 + max(range(len(probs)), key=lambda k: (probs[k], -k))
            displayed[i] = 1 + list(orders[key]).index(option[i])
        status[i] = "ok"
    schema = answers.schema
    replaced = {"status": status, "option_id": option, "displayed": displayed}
    replaced |= {"option_probs": probs_col, "option_mass": mass_col}
    arrays = [pa.array(replaced[f.name], type=f.type) if f.name in replaced else answers.column(f.name) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def scored_value(policy: Policy = DEFAULT_POLICY, *, has_probs: bool = True) -> pl.Expr:
    """The Float64 value an answer row contributes to a question mean, named ``scored``.

    The expected option ID Σ k·p_k under ``option_probs`` for ok rows that have them (the distribution
    measurement); otherwise ``scored_option(policy)`` (the option itself, 3, or null). Health items pinned by
    the policy score 3 either way. ``has_probs`` False: the frame has no ``option_probs`` column.
    """
    import polars as pl

    sampled = scored_option(policy).cast(pl.Float64)
    if not has_probs:
        return sampled.alias("scored")
    probs = pl.col("option_probs")
    expected = pl.sum_horizontal([probs.list.get(k, null_on_oob=True) * (k + 1) for k in range(5)])
    usable = (pl.col("status") == "ok") & probs.is_not_null()
    if policy.health_items == "neutral":
        usable = usable & ~pl.col("question").is_in(HEALTH_QUESTIONS)
    return pl.when(usable).then(expected).otherwise(sampled).alias("scored")


def scored_square(policy: Policy = DEFAULT_POLICY, *, has_probs: bool = True) -> pl.Expr:
    """E[X²] of an answer row, named ``scored_sq``: Σ k²·p_k under ``option_probs``, else ``scored_value``²."""
    import polars as pl

    value = scored_value(policy, has_probs=has_probs)
    if not has_probs:
        return (value * value).alias("scored_sq")
    probs = pl.col("option_probs")
    second = pl.sum_horizontal([probs.list.get(k, null_on_oob=True) * float((k + 1) ** 2) for k in range(5)])
    usable = (pl.col("status") == "ok") & probs.is_not_null()
    if policy.health_items == "neutral":
        usable = usable & ~pl.col("question").is_in(HEALTH_QUESTIONS)
    return pl.when(usable).then(second).otherwise(value * value).alias("scored_sq")
