"""Stored response rows → answer rows: rebuild each row's prompt cell from its factor columns and parse it.

The cell is rebuilt from the response row's own columns, so any stored run can be re-parsed by a newer
parser without its spec.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from runner.parse import PARSER_VERSION, Answer, ParseResult, parse_reply
from runner.parse.blocks import blocked_result, is_provider_block
from runner.parse.option_labels import letters_as_positions
from runner.rundir.schema import AnswerRow, table
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
    columns = responses.select(list(CELL_COLUMNS)).to_pydict()
    finishes, labels = (
        responses.column(name).to_pylist() if name in responses.column_names else [None] * responses.num_rows
        for name in ("finish_reason", "option_labels")
    )
    # Few distinct prompts, and many identical short replies to each: build each cell and parse each
    # (reply, cell) once per table, keyed by the flat factor tuple (cheaper to hash than the cell).
    cells: dict[tuple[Any, ...], PromptCell] = {}
    parsed: dict[tuple[str, tuple[Any, ...]], tuple[Answer, ...]] = {}
    rows: list[AnswerRow] = []
    for finish, labelled, key, text, *factors in zip(finishes, labels, *columns.values(), strict=True):
        factors[2], factors[7] = tuple(factors[2]), tuple(factors[7])  # questions, option_order
        factor_key, text = tuple(factors), text or ""
        if labelled == "letters":  # "B" is the option shown second: read as its position
            text = letters_as_positions(text)
        blocked = finish is not None and is_provider_block(finish)
        answers = None if blocked else parsed.get((text, factor_key))
        if answers is None:
            prompt = cells.get(factor_key)
            if prompt is None:
                prompt = cells[factor_key] = _prompt_cell(factor_key)
            if blocked:
                answers = blocked_result(prompt).answers
            else:
                answers = parsed[text, factor_key] = parser.parse(text, prompt).answers
        rows.extend(
            AnswerRow(
                cell_key=key,
                question=a.question,
                option_id=a.option_id,
                status=a.status,
                hedged=a.hedged,
                displayed=a.displayed,
                parser_version=parser.version,
            )
            for a in answers
        )
    return table(rows, AnswerRow, {VERSION_KEY: parser.version})
