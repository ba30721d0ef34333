"""The parsed-answers dataset: stored responses → one row per (cell, question) via the parser.

The prompt cell is rebuilt from the response row's own factor columns, so any stored run can be re-parsed
with a newer parser without the spec.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa

from runner.cell import Framing, PromptCell

ANSWER_SCHEMA = pa.schema([
    ("cell_key", pa.string()),
    ("question", pa.int16()),
    ("option_id", pa.int16()),  # 1-5, null unless status is "ok"
    ("status", pa.string()),  # ok | refusal | no_answer | ambiguous | out_of_range | invalid_format
    ("hedged", pa.bool_()),
    ("displayed", pa.int16()),  # position (1-5) the chosen option had in the prompt
    ("parser_version", pa.string()),
])

_CELL_COLUMNS = ("cell_key", "language", "mode", "questions", "framing", "country", "age", "gender",
                 "option_order", "reply_format", "response_text")


def prompt_cell(row: dict) -> PromptCell:
    """The ``PromptCell`` a stored response row answered (from its factor columns)."""
    return PromptCell(
        language=row["language"], mode=row["mode"], questions=tuple(row["questions"]),
        framing=Framing(row["framing"], row["country"], row["age"], row["gender"]),
        option_order=tuple(row["option_order"]), reply_format=row["reply_format"],
    )


def answer_rows(cell_key: str, text: str, prompt: PromptCell) -> list[tuple]:
    """Rows (``ANSWER_SCHEMA`` order) of the parser's reading of reply ``text`` to ``prompt``."""
    return [(cell_key, *answer) for answer in _parsed(text, prompt)]


def answers_table(rows: list[tuple]) -> pa.Table:
    """Answer rows as an Arrow table with ``ANSWER_SCHEMA``."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(ANSWER_SCHEMA)
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, ANSWER_SCHEMA, strict=True)],
                                schema=ANSWER_SCHEMA)


def parse_responses(responses: pa.Table) -> pa.Table:
    """Answers (``ANSWER_SCHEMA``) for every stored response row, in row then question order."""
    rows: list[tuple] = []
    for row in responses.select(list(_CELL_COLUMNS)).to_pylist():
        rows.extend(answer_rows(row["cell_key"], row["response_text"] or "", prompt_cell(row)))
    return answers_table(rows)


@lru_cache(maxsize=65536)
def _parsed(text: str, prompt: PromptCell) -> tuple[tuple, ...]:
    """The parse of one reply (pure, so identical short replies to one prompt are parsed once)."""
    from runner.parse import parse_reply

    result = parse_reply(text, prompt)
    return tuple((a.question, a.option_id, a.status, a.hedged, a.displayed, result.parser_version)
                 for a in result.answers)


def parser_version() -> str:
    """The version of the parser that writes the answers dataset."""
    from runner.parse import PARSER_VERSION

    return PARSER_VERSION
