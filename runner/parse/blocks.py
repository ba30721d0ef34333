"""Provider-side blocks: a stored finish reason that says the provider refused to answer, whatever the text.

A blocked reply carries no answer even when it carries text (a partial answer cut by a content filter, an
apology): the parse is a ``refusal`` for every question the cell asked, recorded as such and never retried.
The raw reply and its finish reason stay stored unchanged in the responses part.

Recognised (``finish_reason`` as the provider mappings store it, ``runner/sweep/providers``):

- Gemini: ``blocked`` / ``blocked:<blockReason>`` (``promptFeedback.blockReason``, the prompt itself refused)
  and a candidate's ``finishReason`` ``SAFETY``, ``PROHIBITED_CONTENT``, ``BLOCKLIST``, ``SPII``,
  ``IMAGE_SAFETY`` (``RECITATION`` is a copyright stop, not a refusal: parsed as text).
- OpenAI and Azure OpenAI: ``content_filter``.
- Anthropic: ``stop_reason`` ``refusal``.
"""

from __future__ import annotations

from runner.parse.result import Answer, ParseResult
from runner.survey.cell import PromptCell

__all__ = ["BLOCK_FINISH_REASONS", "blocked_result", "is_provider_block"]

BLOCK_FINISH_REASONS = frozenset(
    {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "content_filter", "refusal", "blocked"}
)


def is_provider_block(finish_reason: object) -> bool:
    """True when the stored ``finish_reason`` (str or None) says the provider blocked or refused the reply."""
    if not isinstance(finish_reason, str):
        return False
    return finish_reason in BLOCK_FINISH_REASONS or finish_reason.startswith("blocked:")


def blocked_result(cell: PromptCell) -> ParseResult:
    """A ``refusal`` for every question of ``cell`` (in its question order): the parse of a blocked reply."""
    return ParseResult(tuple(Answer(q, None, "refusal") for q in cell.questions))
