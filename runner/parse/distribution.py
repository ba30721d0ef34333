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

- ``option_probs``: the distribution the reply is drawn from. Raw log-probabilities (temperature 1) are
  drawn at the request's temperature, each token ∝ p^(1/T); probabilities a server reports after its samplers
  (llama.cpp's ``post_sampling_probs``, ``responses.logprobs_sampled``) are taken as they are. Renormalised over
  the options the list names (they sum to 1 within float rounding).
- An option none of whose tokens is listed is never 0: its element is null, the cell's status ``partial`` and
  ``option_bound`` the most it can hold in the drawn distribution (each unlisted token has at most the smallest
  listed alternative's probability, and at most what the list leaves of 1). A list that holds all the
  probability (a server that lists only the tokens its grammar admits, the simulator) is exact: unlisted
  options are 0 because nothing is left for them. How a partial cell is scored is the policy's
  ``partial`` (runner/parse/policy.py): its reply's own option (default) or dropped.
- ``option_mass``: the probability the listed option tokens held among the alternatives, in [0, 1].
- Status ``low_mass`` when ``option_mass < MIN_OPTION_MASS`` and the reply was not constrained: the model
  mostly wanted to say something else, and the renormalised numbers describe a small part of what it would
  say. The probabilities are still recorded; the default policy does not score the cell. With a constraint
  that admits only option tokens the server cannot emit anything else, so the cell is ``ok`` (or ``partial``)
  whatever the mass. No option token among the alternatives at all: ``low_mass`` without probabilities.

``with_distributions`` applies this to an answers table after the text parse, and ``scored_value`` is the
analysis's per-answer value: the expected option under ``option_probs`` where the cell has them, else the
scored option of ``runner.parse.policy``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from runner.parse.blocks import is_provider_block
from runner.parse.normalize import bare
from runner.parse.policy import DEFAULT_POLICY, PARTIAL, Policy, scored_option
from runner.survey.cell import CANONICAL_ORDER, position_marks
from runner.survey.instrument import HEALTH_QUESTIONS

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "DIGIT_LABELS",
    "MIN_OPTION_MASS",
    "PARTIAL",
    "OptionReading",
    "option_distribution",
    "scored_value",
    "token_label",
    "with_distributions",
]

MIN_OPTION_MASS = 0.5  # below this share of probability on option tokens an unconstrained cell is "low_mass"
DIGIT_LABELS: tuple[str, ...] = ("1", "2", "3", "4", "5")  # the label of each displayed position
_WORD_START = str.maketrans({"\u2581": " ", "\u0120": " ", "\u010a": " "})  # ▁ Ġ Ċ (tokenizer space marks)
# optional response columns the parse stage reads when a part has them (distributions, letter labels)
DISTRIBUTION_COLUMNS = ("measurement", "top_logprobs", "logprobs_sampled", "temperature", "constraint", "option_labels")
# Below this, the most an unlisted option can hold is not worth a status: the reading counts as exact (the
# bound, not a guess, puts it at 0).
EXACT_TOLERANCE = 1e-9
LOW_MASS = "low_mass"  # the distribution measurement's statuses beside the parser's own (and PARTIAL)


def token_label(token: str) -> str:
    """The label a token spells: word-start marks, spaces, punctuation and case gone, digits made ASCII."""
    return bare(token.translate(_WORD_START))


class OptionReading(NamedTuple):
    """What one reply's listed alternatives say about the five options (canonical order 1-5).

    ``probs``: the distribution the reply is drawn from at the request's temperature, renormalised over the
    options the list names; an option whose token is not listed is ``None`` (never 0) unless the list proves
    it negligible (then 0.0). None as a whole when no option token is listed. ``mass``: the probability the
    listed option tokens held among all alternatives, in [0, 1]. ``bound``: None when ``probs`` is exact,
    else the most probability any unlisted option can have in the drawn distribution (the smallest listed
    alternative's, at the request's temperature, relative to the listed options plus itself).
    """

    probs: tuple[float | None, ...] | None
    mass: float
    bound: float | None


def option_distribution(
    top_logprobs: Sequence[tuple[str, float]],
    option_order: Sequence[int] = CANONICAL_ORDER,
    labels: Sequence[str] = DIGIT_LABELS,
    temperature: float = 1.0,
) -> OptionReading:
    """The options' drawn distribution from (token, natural-log probability) pairs, most likely first.

    ``labels[i]`` is the label shown at position i + 1, which displays option ID ``option_order[i]``.
    ``temperature`` is the power the server applied to the listed probabilities before drawing: the request's
    temperature for raw model log-probabilities, 1.0 for probabilities reported after the samplers. Each token
    is drawn with probability ∝ p^(1/T), so an option's share is the sum over its tokens, renormalised over
    the options; at T = 0 the likeliest listed token's option has it all. An option none of whose tokens is
    listed is bounded, not zeroed: it has at most u = min(smallest listed p, 1 − Σ listed p) per token (the
    list is the top k, and probabilities sum to 1), i.e. at most u^(1/T) / (W + u^(1/T)) of the drawn
    distribution, W the listed options' weight. When every unlisted option's bound is below ``EXACT_TOLERANCE``
    (a list that holds all the probability, or a bound crushed by a low temperature) the reading is exact
    with those options at 0.0. ``mass`` is the summed probability of the option tokens, clipped to [0, 1].
    """
    wanted = [token_label(label) for label in labels]
    exact = {label: i for i, label in enumerate(wanted)}
    listed: list[list[float]] = [[] for _ in wanted]  # each position's tokens' log-probabilities
    for token, logprob in top_logprobs:
        position = exact.get(token_label(token))
        if position is not None:
            listed[position].append(logprob)
    mass = math.fsum(math.exp(lp) for lps in listed for lp in lps)
    if mass <= 0.0:
        return OptionReading(None, 0.0, None)
    unlisted = [i for i, lps in enumerate(listed) if not lps]
    leftover = 1.0 - math.fsum(math.exp(lp) for _, lp in top_logprobs)
    smallest = min(lp for _, lp in top_logprobs)
    log_u = min(smallest, math.log(leftover)) if leftover > 0.0 else -math.inf  # an unlisted token's most
    weights, share = _drawn_weights(listed, log_u, temperature)
    bound = share if unlisted and share * len(unlisted) > EXACT_TOLERANCE else None
    probs: list[float | None] = [None] * len(CANONICAL_ORDER)
    for position, w in enumerate(weights):
        probs[option_order[position] - 1] = None if (w is None and bound is not None) else (w or 0.0)
    return OptionReading(tuple(probs), min(mass, 1.0), bound)


def _drawn_weights(listed: list[list[float]], log_u: float, temperature: float) -> tuple[list[float | None], float]:
    """Per position, its share of the listed options' drawn weight (None: no token listed), and the share one
    unlisted token of log-probability at most ``log_u`` can have beside them, both at ``temperature``."""
    top = max(lp for lps in listed for lp in lps)
    if temperature <= 0.0:  # greedy: the likeliest listed token, unless an unlisted one could reach it
        winner = next(i for i, lps in enumerate(listed) if top in lps)
        return [None if not lps else float(i == winner) for i, lps in enumerate(listed)], float(log_u >= top)
    sums = [math.fsum(math.exp((lp - top) / temperature) for lp in lps) if lps else None for lps in listed]
    total = math.fsum(w for w in sums if w is not None)
    bound_w = math.exp((log_u - top) / temperature) if log_u > -math.inf else 0.0
    return [None if w is None else w / total for w in sums], bound_w / (total + bound_w)


def with_distributions(answers: pa.Table, responses: pa.Table, min_mass: float = MIN_OPTION_MASS) -> pa.Table:
    """``answers`` (``AnswerRow`` schema) with the distribution cells of ``responses`` filled in.

    For each response row with measurement ``distribution`` and stored ``top_logprobs``: ``option_probs``,
    ``option_mass`` and ``option_bound`` set (``option_distribution`` at the row's temperature, or at 1 where
    ``logprobs_sampled`` says the server reported them after its samplers); status ``low_mass`` (option null),
    ``partial`` (an option's token was not listed: the parsed option kept, the distribution bounded) or ``ok``
    with the parsed option, or the most likely one where the text did not parse (see the module docstring).
    Other rows are returned as they were.
    """
    names = responses.column_names
    if "top_logprobs" not in names or "measurement" not in names:
        return answers
    is_dist = pc.fill_null(pc.equal(responses.column("measurement"), "distribution"), False)
    if not pc.any(is_dist).as_py():
        return answers
    chosen = responses.filter(is_dist)

    def column(name: str, default: object = None) -> list:
        return chosen.column(name).to_pylist() if name in names else [default] * chosen.num_rows

    found: dict[str, tuple[OptionReading, str]] = {}
    for key, top, order, constraint, labels, finish, temperature, sampled in zip(
        *(column(name) for name in ("cell_key", "top_logprobs", "option_order", "constraint", "option_labels")),
        column("finish_reason"),
        column("temperature", 1.0),
        column("logprobs_sampled", False),
        strict=True,
    ):
        if top is None:  # the server did not return them: the cell stays a parsed sample
            continue
        if is_provider_block(finish):  # the provider refused: a refusal, whatever the first token's odds
            continue
        marks = position_marks(labels or "digits") or DIGIT_LABELS
        power = 1.0 if sampled or temperature is None else temperature
        reading = option_distribution([(t["token"], t["logprob"]) for t in top], order, marks, power)
        constrained = constraint not in (None, "none")
        if reading.probs is None or not (constrained or reading.mass >= min_mass):
            found[key] = (reading, LOW_MASS)
        else:
            found[key] = (reading, "ok" if reading.bound is None else PARTIAL)
    if not found:
        return answers
    orders = dict(zip(chosen.column("cell_key").to_pylist(), chosen.column("option_order").to_pylist(), strict=True))
    keys = answers.column("cell_key").to_pylist()
    status = answers.column("status").to_pylist()
    option = answers.column("option_id").to_pylist()
    displayed = answers.column("displayed").to_pylist()
    probs_col = answers.column("option_probs").to_pylist()
    mass_col = answers.column("option_mass").to_pylist()
    bound_col = [None] * len(keys)
    for i, key in enumerate(keys):
        hit = found.get(key)
        if hit is None:
            continue
        (probs, mass, bound), verdict = hit
        probs_col[i], mass_col[i], bound_col[i] = probs, mass, bound
        if verdict == LOW_MASS:
            status[i], option[i], displayed[i] = LOW_MASS, None, None
        elif verdict == PARTIAL:  # the reply's own option (its parse) stays; the distribution is not known
            parsed = status[i] == "ok" and option[i] is not None
            status[i] = PARTIAL
            if not parsed:
                option[i], displayed[i] = None, None
        else:
            if status[i] != "ok" or option[i] is None:  # the text did not parse: the most likely option
                option[i] = 1 + max(range(len(probs)), key=lambda k: (probs[k], -k))
                displayed[i] = 1 + list(orders[key]).index(option[i])
            status[i] = "ok"
    schema = answers.schema
    replaced = {"status": status, "option_id": option, "displayed": displayed}
    replaced |= {"option_probs": probs_col, "option_mass": mass_col, "option_bound": bound_col}
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
