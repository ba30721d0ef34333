"""Reply texts: the chosen options written as a model would write them (plain, chatty, refusing).

Answers are written as the *displayed position* of the chosen option ID, because that is the number the
prompt shows next to the option; with shuffled options the parser maps the position back to the ID.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from runner.endpoints.sim.seeding import Draws
from runner.survey.cell import PromptCell, position_marks

REFUSALS: dict[str, str] = {
    "en": "As an AI, I do not have personal preferences or feelings, so I cannot answer this question.",
    "zh": "作为一个人工智能，我没有个人偏好或感受，因此无法回答这个问题。",
    "ar": "بصفتي نموذج ذكاء اصطناعي، ليست لدي تفضيلات أو مشاعر شخصية، لذلك لا يمكنني الإجابة على هذا السؤال.",
    "sk": "Ako umelá inteligencia nemám osobné preferencie ani pocity, preto na túto otázku nemôžem odpovedať.",
}
REASONS: dict[str, str] = {
    "en": "This reflects the values of the respondent described.",
    "zh": "这反映了所描述的受访者的价值观。",
    "ar": "هذا يعكس قيم المستجيب الموصوف.",
    "sk": "Odráža to hodnoty opísaného respondenta.",
}
# Chatty item replies; {n} is the displayed number, {label} the option's text in the prompt's language.
CHATTY_ITEM = (
    "Sure! I'd say {n} ({label}).",
    "**{n}**",
    "My answer: {n} — {label}.",
    "Answer: {n}\n\nThis option ({label}) fits best.",
)
CHATTY_SURVEY_INTRO = ("Here are my answers:\n\n", "Sure! Below are my responses.\n\n")
UNKNOWN_PROMPT = "I'm sorry, I could not find a survey question in your message. Could you rephrase it?"


def displayed(cell: PromptCell, option_id: int) -> int:
    """The position (1…5) at which the prompt shows ``option_id``."""
    return cell.option_order.index(option_id) + 1


def plain_reply(cell: PromptCell, answers: Sequence[int], words: Sequence[str] | None = None) -> str:
    """The terse reply in the requested format: a number, a JSON object, or a numbered list (survey).

    Letter-labelled prompts get the option's letter, words-only prompts its words (``words``: the option texts
    in option-ID order).
    """
    numbers = [displayed(cell, a) for a in answers]
    reason = REASONS.get(cell.language, REASONS["en"])
    if cell.mode == "item":
        if cell.reply_format == "json":
            return json.dumps({"option_id": numbers[0], "reason": reason}, ensure_ascii=False)
        if cell.labels == "words" and words:
            return words[answers[0] - 1]
        marks = position_marks(cell.labels) or position_marks("digits")
        return marks[numbers[0] - 1]
    if cell.reply_format == "json":
        return json.dumps(
            [{"question": q, "option_id": n} for q, n in zip(cell.questions, numbers, strict=True)],
            ensure_ascii=False,
        )
    return "\n".join(f"{q}. {n}" for q, n in zip(cell.questions, numbers, strict=True))


def chatty_reply(cell: PromptCell, answers: Sequence[int], labels: Sequence[str] | None, rng: Draws) -> str:
    """The same answers wrapped as chatty models do: prose, markdown bold, fenced JSON with trailing text.

    ``labels``: option texts of the (single) question in option-ID order, for item replies; None if unknown.
    """
    style = rng.randrange(len(CHATTY_ITEM))
    if cell.reply_format == "json":
        return f"```json\n{plain_reply(cell, answers)}\n```\nI hope this helps!"
    if cell.mode == "survey":
        intro = CHATTY_SURVEY_INTRO[style % len(CHATTY_SURVEY_INTRO)]
        lines = (f"{q}. **{displayed(cell, a)}**" for q, a in zip(cell.questions, answers, strict=True))
        return intro + "\n".join(lines)
    template = CHATTY_ITEM[style] if labels else CHATTY_ITEM[1]
    label = labels[answers[0] - 1] if labels else ""
    return template.format(n=displayed(cell, answers[0]), label=label)


def ambiguous_reply(cell: PromptCell, answers: Sequence[int]) -> str:
    """The plain reply with its first answer written beside the next displayed position, "2 or 3" ("5 or 1" for
    the last; not "4 / 5", which reads as a score out of 5): two options, which the parser reads as ``ambiguous``."""
    first = displayed(cell, answers[0])
    both = f"{first} or {first % len(cell.option_order) + 1}"
    if cell.mode == "item":
        return both
    lines = plain_reply(cell, answers).split("\n")
    return "\n".join([f"{cell.questions[0]}. {both}", *lines[1:]])


def refusal_reply(language: str) -> str:
    """A refusal in the prompt's language (English when the language has none)."""
    return REFUSALS.get(language, REFUSALS["en"])


def estimate_tokens(text: str) -> int:
    """A cheap token count: 4 characters per token for ASCII text, 2 for other scripts (at least 1)."""
    per_token = 4 if text.isascii() else 2
    return max(1, -(-len(text) // per_token))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The prefix of ``text`` that fits ``max_tokens`` by ``estimate_tokens``'s rule."""
    per_token = 4 if text.isascii() else 2
    return text[: max_tokens * per_token]
