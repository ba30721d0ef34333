"""Replies to letter-labelled prompts (``design.option_labels = "letters"``): "B" means the option shown second.

The text parser reads numbers as displayed positions and option words as options; a letter-labelled prompt
shows "A = …" … "E = …" and asks for the letter. ``with_letters`` re-reads those cells after the text parse:
every standalone capital A-E in the reply (not part of a word, as in "B", "**C**", "(D)", "Answer: E") becomes
the position it marks, and the result is parsed like a digit-labelled reply, so cues, hedges, refusals and
ambiguity work as for numbers. (An English reply opening with the article "A" reads as position 1 only when no
other letter or number follows; the letter-labelled instruction asks for the bare letter.) Words-only prompts
need nothing here: the parser already matches option words.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from runner.parse import parse_reply
from runner.survey.cell import LETTERS, Framing, PromptCell

__all__ = ["letters_as_positions", "with_letters"]

_LETTER = re.compile(r"(?<![A-Za-z\u00c0-\u024f])([A-E])(?![A-Za-z\u00c0-\u024f'])")


def letters_as_positions(text: str) -> str:
    """``text`` with each standalone capital A-E replaced by its position digit 1-5."""
    return _LETTER.sub(lambda m: str(LETTERS.index(m.group(1)) + 1), text)


def with_letters(answers: pa.Table, responses: pa.Table) -> pa.Table:
    """``answers`` (``AnswerRow`` schema) with the item cells of letter-labelled ``responses`` re-parsed."""
    if "option_labels" not in responses.column_names:
        return answers
    chosen = responses.filter(pc.fill_null(pc.equal(responses.column("option_labels"), "letters"), False))
    if chosen.num_rows == 0:
        return answers
    found = {}
    finish = ["finish_reason"] if "finish_reason" in chosen.column_names else []  # a block stays a refusal
    for row in chosen.select(
        ["cell_key", "response_text", "language", "mode", "questions", "framing", "country", "age", "gender"]
        + ["option_order", "reply_format", *finish]
    ).to_pylist():
        cell = PromptCell(
            row["language"],
            row["mode"],
            tuple(row["questions"]),
            Framing(row["framing"], row["country"], row["age"], row["gender"]),
            tuple(row["option_order"]),
            row["reply_format"],
        )
        text = letters_as_positions(row["response_text"] or "")
        for answer in parse_reply(text, cell, row.get("finish_reason")).answers:
            found[(row["cell_key"], answer.question)] = answer
    columns = {name: answers.column(name).to_pylist() for name in ("status", "option_id", "hedged", "displayed")}
    keys = zip(answers.column("cell_key").to_pylist(), answers.column("question").to_pylist(), strict=True)
    for i, key in enumerate(keys):
        answer = found.get(key)
        if answer is not None:
            for name in columns:
                columns[name][i] = getattr(answer, name)
    arrays = [
        pa.array(columns[f.name], type=f.type) if f.name in columns else answers.column(f.name) for f in answers.schema
    ]
    return pa.Table.from_arrays(arrays, schema=answers.schema)
