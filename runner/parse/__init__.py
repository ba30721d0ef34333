"""Reply text + the cell that asked it -> one answer (option ID 1-5 or none, with a status) per question.

Public API: ``parse_reply``, ``is_provider_block``, ``apply_policies``, ``Policy``, ``Answer``, ``ParseResult``,
``PARSER_VERSION``, ``STATUSES``. The raw text is only read; parsing is pure and versioned, so stored runs can be
re-parsed. Module map: blocks (provider-side blocks: refusals by finish reason), normalize (digits, scripts),
labels (option labels), markers (cues, hedges, refusals), jsonreply, scan (an item reply's candidates, found by
position), item (one question), echo (which item a line restates), survey (lists aligned to items, JSON lists),
policy.
"""

from __future__ import annotations

from runner.parse.blocks import blocked_result, is_provider_block
from runner.parse.item import context, parse_item
from runner.parse.policy import Policy, PolicyError, apply_policies
from runner.parse.result import PARSER_VERSION, STATUSES, Answer, ParseResult, Status
from runner.parse.survey import parse_survey
from runner.survey.cell import PromptCell

__all__ = [
    "PARSER_VERSION",
    "STATUSES",
    "Answer",
    "ParseResult",
    "Policy",
    "PolicyError",
    "Status",
    "apply_policies",
    "is_provider_block",
    "parse_reply",
]


def parse_reply(text: str, cell: PromptCell, finish_reason: str | None = None) -> ParseResult:
    """Parse ``text``, the reply to ``cell``, into one ``Answer`` per question in ``cell.questions``.

    Total over the reply: any text (NUL bytes, lone surrogates, JSON nested past any recursion limit, megabytes
    of junk) yields a status per question, in time linear in its length. ``None`` reads as an empty reply and
    bytes as UTF-8 (invalid bytes replaced); any other non-text value is ``invalid_format``. A
    ``finish_reason`` that says the provider blocked the reply (``runner.parse.blocks``) is a ``refusal``
    for every question, whatever the text.
    """
    if finish_reason is not None and is_provider_block(finish_reason):
        return blocked_result(cell)
    if not isinstance(text, str):
        if text is None or isinstance(text, (bytes, bytearray)):
            text = bytes(text or b"").decode("utf-8", "replace")
        else:
            return ParseResult(tuple(Answer(q, None, "invalid_format") for q in cell.questions))
    if cell.mode == "item":
        question = cell.questions[0]
        ctx = context(cell.language, question, cell.option_order, cell.reply_format)
        return ParseResult((parse_item(text, ctx),))
    return ParseResult(parse_survey(text, cell))
