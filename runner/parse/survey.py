"""Survey replies: all asked questions answered in one reply, as a numbered list or as JSON.

A numbered list may restart its numbering per section, as the prompts of the CAT papers did (1-10, 1-4,
1-6, 1-4; GPT-4 sample in CAT v2 Appendix I): when a number is below the previous one, the entries continue
with the next instrument section not yet begun; the same number twice is the same question answered twice.
A parenthesised question number ("1. (11) 2": above 5, or equal to the question the entry maps to) is that
number, not the answer. Lists that stop early leave the rest ``no_answer``.
"""

from __future__ import annotations

import re
from functools import lru_cache

from runner.parse import markers
from runner.parse.item import Context, context, from_json_object, from_json_value, parse_item
from runner.parse.jsonreply import first_json
from runner.parse.normalize import normalize, without_reasoning
from runner.parse.result import Answer
from runner.survey.cell import PromptCell
from runner.survey.instrument import load_instrument

_HEADER = re.compile(
    r"^[ \t>*_#•|\-]*(?:(?:question|q|otázka|问题|السؤال|سؤال)\s*)?"
    r"(?:[(\[](\d{1,2})[)\]]|第\s*(\d{1,2})\s*[题個个]|(\d{1,2})\s*(?:\*\*)?\s*(?:[.):|\-](?!\d)|(?=\*\*)))"
    r"[ \t]*(.*)$",
    re.MULTILINE,
)
_PAREN_NUMBER = re.compile(r"[*\s]*[(\[]\s*(?:q|question)?\s*(\d{1,2})\s*[)\]]\s*:?\s*(.*)", re.DOTALL)
_INLINE = re.compile(r"(?<!\d)(\d{1,2})\s*[.):]\s*(\d)(?!\d)")
_INLINE_START = re.compile(r"\s+(?=\d{1,2}\s*[.)]\s*\d(?!\d))")
_QUESTION_KEY = re.compile(r"\D*(\d{1,2})$")


def parse_survey(text: str, cell: PromptCell) -> tuple[Answer, ...]:
    """One answer per question in ``cell.questions`` (in that order) from a survey reply."""
    t = normalize(text)
    if "<think" in t:
        t = without_reasoning(t)
    contexts = {q: context(cell.language, q, cell.option_order, cell.reply_format) for q in cell.questions}
    found: dict[int, Answer] = {}
    if "[" in t or "{" in t:
        found = _from_json(t, contexts)
    if not found:
        found = _from_list(t, cell, contexts)
    if not found:
        status = "refusal" if markers.REFUSAL.search(t) else "no_answer"
        return tuple(Answer(q, None, status) for q in cell.questions)
    return tuple(found.get(q) or Answer(q, None, "no_answer") for q in cell.questions)


def _record(found: dict[int, Answer], answer: Answer) -> None:
    """Keep the first answer to a question; a later, different answer to it makes it ambiguous."""
    earlier = found.get(answer.question)
    if earlier is None:
        found[answer.question] = answer
    elif earlier.option_id != answer.option_id and answer.status != "no_answer":
        found[answer.question] = Answer(answer.question, None, "ambiguous")


def _from_json(t: str, contexts: dict[int, Context]) -> dict[int, Answer]:
    value = first_json(t, "[") if "[" in t and ("{" not in t or t.index("[") < t.index("{")) else None
    if value is None:
        value = first_json(t, "{")
    if isinstance(value, dict) and isinstance(value.get("answers"), (list, dict)):
        value = value["answers"]
    found: dict[int, Answer] = {}
    asked = list(contexts)
    if isinstance(value, list):
        for index, item in enumerate(value):
            question = _json_question(item, index, asked)
            if question in contexts:
                ctx = contexts[question]
                answer = from_json_object(item, t, ctx) if isinstance(item, dict) else from_json_value(item, t, ctx)
                _record(found, answer)
    elif isinstance(value, dict):
        for key, item in value.items():
            match = _QUESTION_KEY.match(str(key))
            if match and int(match.group(1)) in contexts:
                ctx = contexts[int(match.group(1))]
                answer = from_json_object(item, t, ctx) if isinstance(item, dict) else from_json_value(item, t, ctx)
                _record(found, answer)
    return found


def _json_question(item: object, index: int, asked: list[int]) -> int | None:
    if isinstance(item, dict):
        for key in ("question", "question_id", "q", "number", "item"):
            value = item.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str):
                match = _QUESTION_KEY.match(value)
                if match:
                    return int(match.group(1))
    return asked[index] if index < len(asked) else None


def _from_list(t: str, cell: PromptCell, contexts: dict[int, Context]) -> dict[int, Answer]:
    if "\n" not in t.strip():  # "1. 2 2. 3 3. 1 ...": the whole list on one line
        t = _INLINE_START.sub("\n", t)
    entries = _entries(t)
    if not entries:
        lines = [line for line in t.splitlines() if line.strip()]
        if len(lines) == len(cell.questions) and all(len(line.strip()) <= 3 for line in lines):
            entries = [(i, line) for i, line in enumerate(lines, start=1)]  # bare answers, one per line
        else:
            entries = [(int(m.group(1)), m.group(2)) for m in _INLINE.finditer(t)]
    asked = set(cell.questions)
    starts, echoes = _layout(cell.language, cell.questions)
    found: dict[int, Answer] = {}
    previous, base, highest = 0, 0, 0
    for number, content in entries:
        if number < previous:  # numbering restarted: continue with the next section not yet begun
            following = [s for s in starts if s > highest]
            if not following:
                break
            base = following[0] - 1
        previous = number
        question = base + number
        paren = _PAREN_NUMBER.match(content)
        if paren and paren.group(2).strip():
            named = int(paren.group(1))
            # "1. (11) 2": a parenthesised number that cannot be an answer, or that equals the question
            # this entry maps to, is the question's own number; "3. (2) very important" keeps its (2).
            if named == question or (named > 5 and named in asked):
                question, content = named, paren.group(2)
        if question not in asked:
            continue
        highest = max(highest, question)
        ctx = contexts[question]
        echo = echoes[question]
        if echo and echo in content:
            content = content.replace(echo, " ")
        _record(found, _parse_entry(content, ctx))
    return found


@lru_cache(maxsize=256)
def _layout(language: str, questions: tuple[int, ...]) -> tuple[list[int], dict[int, str]]:
    """The first asked question of each section, and each question's normalised text (to drop echoes)."""
    instrument = load_instrument(language)
    asked = set(questions)
    starts = [
        min(q for q in s.questions if q in asked) for s in instrument.sections if any(q in asked for q in s.questions)
    ]
    echoes = {q: normalize(instrument.questions[q].text).rstrip("?.:") for q in questions}
    return starts, echoes


def _entries(t: str) -> list[tuple[int, str]]:
    """(number, content) per list entry; content runs to the next entry (continuation lines included)."""
    matches = list(_HEADER.finditer(t))
    entries = []
    for i, match in enumerate(matches):
        number = int(match.group(1) or match.group(2) or match.group(3))
        end = matches[i + 1].start() if i + 1 < len(matches) else len(t)
        first = match.group(4)
        rest = t[match.end() : end]
        entries.append((number, first if not rest.strip() else f"{first}\n{rest}"))
    return entries


def _parse_entry(content: str, ctx: Context) -> Answer:
    first, _, rest = content.partition("\n")
    answer = parse_item(first, ctx)
    if answer.status == "no_answer" and rest.strip():
        answer = parse_item(content, ctx)
    return answer
