"""Stored response rows → answer rows: rebuild each row's prompt cell from its factor columns and parse it.

The cell is rebuilt from the response row's own columns, so any stored run can be re-parsed by a newer
parser without its spec.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa

from runner.parse import PARSER_VERSION, Answer, ParseResult, parse_reply
from runner.rundir.schema import AnswerRow, table
from runner.survey.cell import Framing, PromptCell

__all__ = ["CELL_COLUMNS", "CURRENT", "Parser", "answers_table", "prompt_cell"]

# The response columns a parse needs: the cell's factors and the reply.
CELL_COLUMNS = (
    "cell_key",
    "language",
    "mode",
    "questions",
    "framing",
    "country",
    "age",
    "gender",
    "option_order",
    "reply_format",
    "response_text",
)
VERSION_KEY = "hofcat.parser_version"  # answers parts carry their parser's version in the schema metadata


@dataclass(frozen=True, slots=True)
class Parser:
    """A parser and the version it writes into the answers it produces."""

    version: str
    parse: Callable[[str, PromptCell], ParseResult]


CURRENT = Parser(PARSER_VERSION, parse_reply)


def prompt_cell(row: dict[str, Any]) -> PromptCell:
    """The ``PromptCell`` a stored response row answered (from its factor columns)."""
    return PromptCell(
        language=row["language"],
        mode=row["mode"],
        questions=tuple(row["questions"]),
        framing=Framing(row["framing"], row["country"], row["age"], row["gender"]),
        option_order=tuple(row["option_order"]),
        reply_format=row["reply_format"],
    )


def answers_table(responses: pa.Table, parser: Parser = CURRENT) -> pa.Table:
    """Answers (``AnswerRow`` schema, parser version in the metadata) of every response row, in row order."""
    rows: list[AnswerRow] = []
    for row in responses.select(list(CELL_COLUMNS)).to_pylist():
        key = row["cell_key"]
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
            for a in _parsed(parser, row["response_text"] or "", prompt_cell(row))
        )
    return table(rows, AnswerRow, {VERSION_KEY: parser.version})


@lru_cache(maxsize=65536)
def _parsed(parser: Parser, text: str, prompt: PromptCell) -> tuple[Answer, ...]:
    """The answers in one reply (pure, so identical replies to one prompt are parsed once)."""
    return parser.parse(text, prompt).answers
