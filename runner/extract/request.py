"""The extractor's request and the reading of its reply: pure functions, no network.

An extractor request shows the model the question exactly as the respondent saw it (the item prompt in the
cell's language, option order and labels, without persona), the stored raw reply, and asks for the position
of the option the reply chose, or NONE. Where the endpoint can constrain decoding (OpenAI-compatible servers),
the reply is held to one digit or ``NONE`` (llama.cpp ``grammar``, vLLM ``guided_choice``, a JSON schema).
Its reply is read by the item parser itself (same digits, labels and cues), so a position maps back to the
option ID through the cell's option order exactly as a sweep reply does.
"""

from __future__ import annotations

import re
from typing import Any

from runner.parse import parse_reply
from runner.survey.cell import Framing, PromptCell

__all__ = [
    "CONSTRAINTS",
    "DEFAULT_STATUSES",
    "EXTRACTABLE_STATUSES",
    "MAX_REPLY_CHARS",
    "constraint_fields",
    "extractor_messages",
    "read_extraction",
]

# Parse statuses an extractor may be asked to restate. Not ``ok`` (already read), ``refusal`` (declining is the
# answer: an extractor would invent one) nor ``low_mass`` (a distribution cell: its probabilities are the data).
EXTRACTABLE_STATUSES: tuple[str, ...] = ("ambiguous", "no_answer", "out_of_range", "invalid_format")
DEFAULT_STATUSES: tuple[str, ...] = ("ambiguous",)
CONSTRAINTS: tuple[str, ...] = ("none", "grammar", "json_schema", "choice")
MAX_REPLY_CHARS = 12_000  # of a raw reply quoted to the extractor (a 24-item reply with chatter fits)
NONE_WORD = "NONE"

SYSTEM = (
    "You check which answer a reply to a survey question chose. You see the question with its options, then "
    "the reply. Answer with the position of the option the reply chose: 1 for the first option listed, 2 for "
    "the second, and so on. If the reply does not choose exactly one option, answer NONE. Answer with the "
    "number or NONE only."
)
_NONE = re.compile(r"\W*none\b", re.IGNORECASE)


def _question_cell(cell: PromptCell, question: int) -> PromptCell:
    """The item prompt of ``question`` as ``cell`` displayed it: language, option order and labels, no persona."""
    return PromptCell(cell.language, "item", (question,), Framing(), cell.option_order, "number", cell.labels)


def extractor_messages(cell: PromptCell, question: int, reply: str) -> list[dict[str, str]]:
    """Chat messages asking which option of ``question`` the raw ``reply`` (to ``cell``) chose.

    The question block is the item prompt hofcat renders for that question (the words the respondent read);
    a survey reply is quoted whole, with the question's number to look for. Replies beyond ``MAX_REPLY_CHARS``
    are cut there (marked).
    """
    from runner.survey.prompts import build_messages

    shown = build_messages(_question_cell(cell, question))[-1]["content"]
    quoted = reply if len(reply) <= MAX_REPLY_CHARS else reply[:MAX_REPLY_CHARS] + "\n[… reply cut here]"
    where = (
        f"The reply answers a whole questionnaire; read only its answer to this question (question {question}).\n\n"
        if cell.mode == "survey"
        else ""
    )
    last = len(cell.option_order)
    user = (
        f"QUESTION\n\n{shown}\n\n{where}REPLY\n\n<<<\n{quoted}\n>>>\n\n"
        f"Which option did the reply choose? Answer with its position (1-{last}) or NONE."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def constraint_fields(kind: str, options: int = 5) -> dict[str, Any]:
    """Request-body fields holding the extractor's reply to a position 1..``options`` or NONE (OpenAI-compatible
    servers); ``{}`` for ``none``. ``ValueError`` for an unknown kind."""
    choices = [str(i) for i in range(1, options + 1)] + [NONE_WORD]
    if kind == "none":
        return {}
    if kind == "grammar":  # llama.cpp GBNF
        return {"grammar": f'root ::= [1-{options}] | "{NONE_WORD}"\n'}
    if kind == "choice":  # vLLM
        return {"guided_choice": choices}
    if kind == "json_schema":
        schema = {
            "type": "object",
            "properties": {"answer": {"type": "string", "enum": choices}},
            "required": ["answer"],
            "additionalProperties": False,
        }
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "extracted", "strict": True, "schema": schema},
            }
        }
    raise ValueError(f"constraint {kind!r} is not one of {', '.join(CONSTRAINTS)}")


def read_extraction(text: str, cell: PromptCell, question: int) -> tuple[str, int | None, int | None]:
    """(status, option ID, displayed position) of an extractor's reply about ``question`` of ``cell``.

    ``extracted`` with the option when the reply names one position (read by the item parser, so "3",
    "Answer: 3", ``{"answer": "3"}`` and the option's own words all count); ``none`` when it starts with NONE
    (also as a JSON value); ``unreadable`` otherwise (two options, prose, nothing).
    """
    stripped = text.strip()
    if _NONE.match(stripped) or re.fullmatch(r'\{\s*"answer"\s*:\s*"NONE"\s*\}', stripped):
        return "none", None, None
    answer = parse_reply(stripped, _question_cell(cell, question)).answers[0]
    if answer.status == "ok":
        return "extracted", answer.option_id, answer.displayed
    return "unreadable", None, None
