"""Stored response rows → answer rows: rebuild each row's prompt cell from its factor columns and parse it.

The cell is rebuilt from the response row's own columns, so any stored run can be re-parsed by a newer
parser without its spec.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runner.parse import PARSER_VERSION, Answer, ParseResult, parse_reply
from runner.parse.blocks import blocked_result, is_provider_block
from runner.parse.option_labels import letters_as_positions
from runner.rundir.schema import ANSWER_SCHEMA, AnswerRow, table
from runner.survey.cell import Framing, PromptCell

__all__ = ["CELL_COLUMNS", "CURRENT", "PARSE_COLUMNS", "Parser", "answers_table"]

# The response columns a parse needs, in this order: the key, the reply, the cell's factors.
CELL_COLUMNS = (
    "cell_key",
    "response_text",
    "language",
    "mode",
    "questions",
    "framing",
    "country",
    "age",
    "gender",
    "option_order",
    "reply_format",
)
# What else the parse stage reads: the stored finish reason, where a provider-side block shows (a refusal
# whatever the text: runner.parse.blocks). Parts without the column parse from text alone.
PARSE_COLUMNS = (*CELL_COLUMNS, "finish_reason", "option_labels")
VERSION_KEY = "hofcat.parser_version"  # answers parts carry their parser's version in the schema metadata


@dataclass(frozen=True, slots=True)
class Parser:
    """A parser and the version it writes into the answers it produces."""

    version: str
    parse: Callable[[str, PromptCell], ParseResult]


CURRENT = Parser(PARSER_VERSION, parse_reply)


def _prompt_cell(factors: tuple[Any, ...]) -> PromptCell:
    """The ``PromptCell`` of a stored row's factor values (``CELL_COLUMNS[2:]`` order, lists as tuples)."""
    language, mode, questions, framing, country, age, gender, option_order, reply_format = factors
    return PromptCell(
        language=language,
        mode=mode,
        questions=questions,
        framing=Framing(framing, country, age, gender),
        option_order=option_order,
        reply_format=reply_format,
    )


def answers_table(responses: pa.Table, parser: Parser = CURRENT) -> pa.Table:
    """Answers (``AnswerRow`` schema, parser version in the metadata) of every response row, in row order.

    A row whose ``finish_reason`` (when the table has one) is a provider-side block is a ``refusal`` for each
    of its questions, whatever its text (``runner.parse.blocks``); a reply to a letter-labelled prompt
    (``option_labels``, when the table has it) is read with its letters as positions
    (``runner.parse.option_labels``)."""
    metadata = {VERSION_KEY: parser.version}
    if not responses.num_rows:
        return table([], AnswerRow, metadata)
    # Few distinct prompts, and many identical short replies to each: rows equal in every column the parse
    # reads are one group, parsed once (``_groups``, in Arrow); the groups' answers are then taken into place.
    read = [*CELL_COLUMNS[1:], *(c for c in PARSE_COLUMNS[len(CELL_COLUMNS) :] if c in responses.column_names)]
    first, group = _groups(responses, read)
    values = responses.select(read).take(first).to_pydict()
    finishes, labels = (values.get(name, [None] * len(first)) for name in ("finish_reason", "option_labels"))
    texts, factor_columns = values["response_text"], [values[c] for c in CELL_COLUMNS[2:]]
    cells: dict[tuple[Any, ...], PromptCell] = {}
    parsed: dict[tuple[str, tuple[Any, ...]], tuple[Answer, ...]] = {}
    answers: list[tuple[Answer, ...]] = []
    for finish, labelled, text, *factors in zip(finishes, labels, texts, *factor_columns, strict=True):
        factors[2], factors[7] = tuple(factors[2]), tuple(factors[7])  # questions, option_order
        factor_key, text = tuple(factors), text or ""
        if labelled == "letters":  # "B" is the option shown second: read as its position
            text = letters_as_positions(text)
        blocked = finish is not None and is_provider_block(finish)
        found = None if blocked else parsed.get((text, factor_key))
        if found is None:
            prompt = cells.get(factor_key)
            if prompt is None:
                prompt = cells[factor_key] = _prompt_cell(factor_key)
            if blocked:
                found = blocked_result(prompt).answers
            else:
                found = parsed[text, factor_key] = parser.parse(text, prompt).answers
        answers.append(found)
    return _spread_answers(responses.column("cell_key"), group, answers, metadata)


def _groups(responses: pa.Table, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Rows equal in every one of ``columns`` (nulls equal to nulls): each group's first row, and each row's
    group (an index into the first)."""
    arrays = [responses.column(name).combine_chunks() for name in columns]
    # the string columns coded in one call, end to end (each Arrow call costs ~20 µs whatever its size)
    strings = [a for a in arrays if a.type == pa.string()]
    coded = iter(np.split(_codes(pa.concat_arrays(strings)), len(strings)) if strings else [])
    code, size = np.zeros(responses.num_rows, np.int64), 1
    for array in arrays:
        codes = next(coded) if array.type == pa.string() else _codes(array)
        levels = int(codes.max()) + 1
        if size * levels >= 1 << 62:  # the combined code would overflow: renumber the groups so far first
            _, code = np.unique(code, return_inverse=True)
            size = int(code.max()) + 1
        code, size = code * levels + codes, size * levels
    _, first, group = np.unique(code, return_index=True, return_inverse=True)
    return first, group


def _codes(array: pa.Array) -> np.ndarray:
    """Each value's index among the array's distinct values (null one more value): equal values, equal codes.
    A list is coded by its elements (``_list_codes``); a type Arrow cannot encode, through Python."""
    try:
        if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
            codes = _list_codes(array)
            if codes is not None:
                return codes
            array = _joined(array)
        return pc.dictionary_encode(array, null_encoding="encode").indices.to_numpy()
    except pa.ArrowNotImplementedError:
        index: dict[Any, int] = {}
        keys = (tuple(v) if isinstance(v, list) else v for v in array.to_pylist())
        return np.array([index.setdefault(k, len(index)) for k in keys], np.int64)


def _list_codes(lists: pa.Array) -> np.ndarray | None:
    """``_codes`` of lists of integers without a null element, from each list's bytes (viewed in place as one
    binary value per row, no copy of the elements); None for other lists."""
    items = lists.values  # the whole child: the offsets below say which elements each row holds
    if not pa.types.is_integer(items.type) or items.null_count:
        return None
    offsets = (lists.offsets.to_numpy().astype(np.int64) + items.offset) * (items.type.bit_width // 8)
    if offsets[-1] > np.iinfo(np.int32).max:
        return None
    as_bytes = pa.Array.from_buffers(
        pa.binary(), len(lists), [None, pa.py_buffer(offsets.astype(np.int32)), items.buffers()[1]]
    )
    codes = pc.dictionary_encode(as_bytes).indices.to_numpy().astype(np.int64)
    if lists.null_count:  # a null list reads as empty bytes: a code of its own
        codes[lists.is_null().to_numpy(zero_copy_only=False)] = codes.max() + 1
    return codes


def _joined(lists: pa.Array) -> pa.Array:
    """Each list of ``lists`` as its elements' text joined by commas (a null element as "null", a null list null),
    so that two lists give the same string exactly when they hold the same values."""
    items = pc.fill_null(pc.list_flatten(lists).cast(pa.string()), "null")  # skips null lists' elements
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy()
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())
    return pc.binary_join(pa.ListArray.from_arrays(offsets, items, mask=lists.is_null()), ",")


def _spread_answers(
    keys: pa.ChunkedArray, group: np.ndarray, answers: list[tuple[Answer, ...]], metadata: dict[str, str]
) -> pa.Table:
    """The answers table of rows keyed ``keys`` whose group's answers are ``answers[group[row]]``: each row's
    answers in order, rows in order (what building an ``AnswerRow`` per answer gives)."""
    counts = np.fromiter(map(len, answers), np.int64, len(answers))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    per_row = counts[group]  # how many answer rows each response row has
    row = np.repeat(np.arange(len(group)), per_row)
    within = np.arange(len(row)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    at = pa.array(np.repeat(starts[group], per_row) + within)
    flat = [_ANSWER(a) for found in answers for a in found]
    schema = ANSWER_SCHEMA.with_metadata(metadata)
    # the answers' fields converted and taken in one call each (as a struct), the columns an answer never sets
    # made null in one
    parsed = pa.array(flat, type=_ANSWER_STRUCT).take(at).flatten()
    unset = pa.nulls(len(row), _UNSET).flatten()
    columns = {
        "cell_key": keys.take(pa.array(row)).cast(schema.field("cell_key").type),
        "parser_version": pa.repeat(pa.scalar(metadata[VERSION_KEY], pa.string()), len(row)),
        **dict(zip(_ANSWER_FIELDS, parsed, strict=True)),
        **dict(zip(_UNSET.names, unset, strict=True)),
    }
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


_ANSWER_FIELDS = ("question", "option_id", "status", "hedged", "displayed")
_ANSWER = attrgetter(*_ANSWER_FIELDS)
_ANSWER_STRUCT = pa.struct([ANSWER_SCHEMA.field(name) for name in _ANSWER_FIELDS])
_UNSET = pa.struct([f for f in ANSWER_SCHEMA if f.name not in {"cell_key", "parser_version", *_ANSWER_FIELDS}])
