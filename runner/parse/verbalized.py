"""The verbalized measurement: a reply that states each option's probability as a JSON object → its distribution.

A ``verbalized`` cell asks the model (runner/survey/prompts.py, ``verbalized`` templates) for an object keyed by the
labels the prompt shows, ``{"1": 0.1, "2": 0.6, ...}`` (letters where the prompt shows letters), constrained where
the server allows it (runner/survey/constrained.py). ``read_verbalized`` validates the object and never guesses:

- The first JSON object in the reply (``runner.parse.jsonreply``; a ```json fence or chatter around it is fine).
  None: ``refusal`` where the text refuses (or the provider blocked it), else ``invalid_format``. One wrapper
  object is unwrapped (``{"probabilities": {...}}``); anything nested deeper is ``invalid_format``.
- Every key must name a shown option: keys are compared as ``runner.parse.distribution.token_label`` reads labels
  (case, spaces and punctuation folded: "1", " 1", "(1)", "a" for "A"). A key naming no option, or two keys naming
  the same one, is ``invalid_format``; so is a value that is not a JSON number (a string, a list, true, null).
- A value that is not finite (NaN, 1e999) or is negative: ``out_of_range``. Scale: probabilities are read as they
  are when every value is at most 1; as percentages (divided by 100) when some value exceeds 1, every value is at
  most 100 and they sum to 100 within ``SUM_TOLERANCE`` × 100; otherwise ``out_of_range``.
- An option without a key: ``missing_options`` (never taken as 0 — the model did not say).
- Stated probabilities summing to 0: ``zero_sum``; to more than ``SUM_TOLERANCE`` away from 1: ``bad_sum``
  (the renormalised values are kept for inspection, not scored).
- Otherwise ``ok``: the values renormalised to sum to 1, laid out in canonical option order (the display order
  undone), with the stated sum (after the scale) kept as ``stated_sum``.

``with_verbalized`` applies this to an answers table after the text parse: the distribution goes in the
``option_probs`` column the distribution measurement fills, so scoring reads both alike
(``runner.parse.distribution.scored_value``: the expected option), and the point answer follows the distribution
measurement's rule for a reply that names no option: the most likely option (ties: the lower ID).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from runner.parse import markers
from runner.parse.blocks import is_provider_block
from runner.parse.distribution import DIGIT_LABELS, token_label
from runner.parse.jsonreply import first_json
from runner.parse.normalize import normalize
from runner.survey.cell import CANONICAL_ORDER, position_marks

__all__ = [
    "SUM_TOLERANCE",
    "VERBALIZED_STATUSES",
    "VerbalizedReading",
    "read_verbalized",
    "with_verbalized",
]

SUM_TOLERANCE = 0.1  # stated probabilities summing to within this of 1 are renormalised; beyond it: bad_sum
VERBALIZED_STATUSES: tuple[str, ...] = (
    "ok",
    "refusal",
    "invalid_format",
    "out_of_range",
    "missing_options",
    "zero_sum",
    "bad_sum",
)
# The parse reads at most this much of a reply: a stated object is a few dozen characters, so a megabyte of
# text costs a bounded scan, and the JSON decoder never walks it all.
MAX_READ = 65_536


class VerbalizedReading(NamedTuple):
    """One verbalized reply read: its status, the options' probabilities in canonical order (renormalised; None
    unless ok or bad_sum) and the stated sum on the probability scale (None where there is none)."""

    status: str
    probs: tuple[float, ...] | None
    stated_sum: float | None


_DECODER = json.JSONDecoder(object_pairs_hook=lambda pairs: _Pairs(pairs))


class _Pairs(list):
    """A decoded JSON object as its (key, value) pairs in order, duplicates kept (a dict would keep the last)."""


def read_verbalized(
    text: str,
    option_order: Sequence[int] = CANONICAL_ORDER,
    labels: Sequence[str] = DIGIT_LABELS,
    finish_reason: str | None = None,
) -> VerbalizedReading:
    """The stated distribution of a verbalized reply (see the module docstring for every status).

    ``labels[i]`` is the label shown at position i + 1, which displays option ID ``option_order[i]``.
    """
    if is_provider_block(finish_reason):
        return VerbalizedReading("refusal", None, None)
    head = text[:MAX_READ]
    value = first_json(head, "{", _DECODER)
    if not isinstance(value, _Pairs):
        refused = markers.REFUSAL.search(normalize(head))
        return VerbalizedReading("refusal" if refused else "invalid_format", None, None)
    if len(value) == 1 and isinstance(value[0][1], _Pairs):  # {"probabilities": {...}}: one wrapper
        value = value[0][1]
    wanted = {token_label(label): i for i, label in enumerate(labels)}
    stated: dict[int, float] = {}
    for key, number in value:
        position = wanted.get(token_label(key)) if len(key) <= 16 else None
        if position is None or position in stated or not _is_number(number):
            return VerbalizedReading("invalid_format", None, None)
        stated[position] = float(number) + 0.0  # + 0.0: a stated -0 is the probability 0, never a signed zero
    values = list(stated.values())
    if any(not math.isfinite(v) or v < 0.0 for v in values):
        return VerbalizedReading("out_of_range", None, None)
    if len(stated) < len(labels):
        return VerbalizedReading("missing_options", None, None)
    total = math.fsum(values)
    if max(values) > 1.0:  # percentages, where they read as such
        if max(values) > 100.0 or abs(total - 100.0) > 100.0 * SUM_TOLERANCE:
            return VerbalizedReading("out_of_range", None, None)
        stated = {i: v / 100.0 for i, v in stated.items()}
        total /= 100.0
    if total <= 0.0:
        return VerbalizedReading("zero_sum", None, 0.0)
    probs = [0.0] * len(CANONICAL_ORDER)
    for position, v in stated.items():
        probs[option_order[position] - 1] = v / total
    status = "ok" if abs(total - 1.0) <= SUM_TOLERANCE else "bad_sum"
    return VerbalizedReading(status, tuple(probs), total)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def with_verbalized(answers: pa.Table, responses: pa.Table) -> pa.Table:
    """``answers`` (``AnswerRow`` schema) with the verbalized cells of ``responses`` read by ``read_verbalized``:
    status, ``option_probs`` and ``stated_sum`` set; ``option_id`` (and ``displayed``) the most likely option
    where ok, else null. Other rows are returned as they were."""
    names = responses.column_names
    if "measurement" not in names:
        return answers
    is_verbal = pc.fill_null(pc.equal(responses.column("measurement"), "verbalized"), False)
    if not pc.any(is_verbal).as_py():
        return answers
    chosen = responses.filter(is_verbal)

    def column(name: str) -> list:
        return chosen.column(name).to_pylist() if name in names else [None] * chosen.num_rows

    found: dict[str, tuple[VerbalizedReading, tuple[int, ...]]] = {}
    for key, text, order, labels, finish in zip(
        *(column(n) for n in ("cell_key", "response_text", "option_order", "option_labels", "finish_reason")),
        strict=True,
    ):
        order = tuple(order or CANONICAL_ORDER)
        marks = position_marks(labels or "digits") or DIGIT_LABELS
        found[key] = (read_verbalized(text or "", order, marks, finish), order)
    changed = ("cell_key", "status", "option_id", "displayed", "hedged")
    columns = {name: answers.column(name).to_pylist() for name in changed}
    probs_col = answers.column("option_probs").to_pylist()
    sums = answers.column("stated_sum").to_pylist() if "stated_sum" in answers.column_names else [None] * len(probs_col)
    for i, key in enumerate(columns["cell_key"]):
        hit = found.get(key)
        if hit is None:
            continue
        (status, probs, total), order = hit
        columns["status"][i], probs_col[i], sums[i] = status, probs, total
        option = None
        if status == "ok" and probs is not None:
            option = 1 + max(range(len(probs)), key=lambda k: (probs[k], -k))
        columns["option_id"][i] = option
        columns["displayed"][i] = None if option is None else 1 + order.index(option)
        columns["hedged"][i] = False  # the text parser's hedge reading does not apply to a stated object
    replaced = {**columns, "option_probs": probs_col, "stated_sum": sums}
    schema = answers.schema
    arrays = [pa.array(replaced[f.name], type=f.type) if f.name in replaced else answers.column(f.name) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)
