"""The parsed-answers dataset: stored responses → one row per (cell, question) via the parser.

The prompt cell is rebuilt from the response row's own factor columns, so any stored run can be re-parsed
with a newer parser without the spec.
"""

from __future__ import annotations

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


def parse_responses(responses: pa.Table) -> pa.Table:
    """Answers rows (``ANSWER_SCHEMA``) for every response row, in row then question order."""
    from runner.parse import parse_reply

    out: dict[str, list] = {name: [] for name in ANSWER_SCHEMA.names}
    for row in responses.select(list(_CELL_COLUMNS)).to_pylist():
        result = parse_reply(row["response_text"] or "", prompt_cell(row))
        for a in result.answers:
            for name, value in (("cell_key", row["cell_key"]), ("question", a.question), ("option_id", a.option_id),
                                ("status", a.status), ("hedged", a.hedged), ("displayed", a.displayed),
                                ("parser_version", result.parser_version)):
                out[name].append(value)
    return pa.Table.from_pydict(out, schema=ANSWER_SCHEMA)


def parser_version() -> str:
    """The version of the parser that writes the answers dataset."""
    from runner.parse import PARSER_VERSION

    return PARSER_VERSION
