"""One question's answer from reply text: numbers, labels, hedges, JSON, refusals (see docs/parsing.md).

Candidates are the numbers 1-5 (displayed positions, mapped to option IDs through the cell's order) and the
option labels in the text. A candidate is *committed* when a cue precedes it ("Answer:", "I'd rate it a",
"我选择"), when it is in bold, or when it opens the reply. The first committed candidate is the answer (the
first candidate at all when none is committed). A different later candidate makes the parse ``ambiguous``
unless a hedge word stands between them ("a 2, maybe even a 1" → 2, hedged); uncommitted mentions cannot
contradict a committed answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from runner.parse import markers
from runner.parse.jsonreply import first_json
from runner.parse.labels import LabelMatcher, matcher
from runner.parse.normalize import normalize, squash, without_reasoning
from runner.parse.result import Answer
from runner.survey.instrument import load_instrument

_BARE = re.compile(r"[\s*(\[\"'`]*(\d{1,3})[\s.)\]*\"'`]*")
_OPTION_FIELD = re.compile(r"\"option_?id\"\s*:\s*\"?(\d+)")
_JSON_KEYS = (
    "option_id",
    "optionid",
    "option",
    "answer",
    "choice",
    "selected_option",
    "response",
    "id",
    "rating",
    "score",
    "value",
)
_MARKUP = " \t\n*#>\"'`(["
_DIGIT = re.compile(r"\d")
_QUESTION_HINTS = ("q", "otáz", "سؤال", "问题")  # some question word may stand in the text
_CJK_DIGITS = "一二三四五"
_CJK_NUMERALS_PRESENT = re.compile(f"[{_CJK_DIGITS}]")
_CJK_NUMERAL = re.compile(rf"(?:^|选择|选项|答案[是为:]?|选|第)\s*([{_CJK_DIGITS}])(?=个|号|项|$|[。.,!！\s(（])")
_AFTER_NUMBER = re.compile(r"\d\s*[-=:.(]*\s*$")


@dataclass(frozen=True, slots=True)
class Context:
    """What parsing one question needs: its number, the displayed order and its label matchers."""

    question: int
    order: tuple[int, ...]  # order[i] is the option ID displayed at position i + 1
    labels: LabelMatcher
    fallback: LabelMatcher | None  # English labels, for models that answer a translated prompt in English
    json_expected: bool


@lru_cache(maxsize=4096)
def context(language: str, question: int, order: tuple[int, ...], reply_format: str) -> Context:
    """The cached parsing context of ``question`` asked in ``language`` with options in ``order``."""
    scale = load_instrument(language).questions[question].scale
    fallback = matcher("en", scale) if language != "en" and "en" in _languages() else None
    return Context(question, order, matcher(language, scale), fallback, reply_format == "json")


@lru_cache(maxsize=1)
def _languages() -> frozenset[str]:
    from runner.survey.instrument import languages

    return frozenset(languages())


@dataclass(slots=True)
class _Candidate:
    start: int
    end: int
    option: int | None  # None for out-of-range numbers and for "between" spans
    kind: str  # "num" | "label" | "bad" (out of range) | "between" (2-3, 2.5)
    strong: bool | None = None  # committed? computed only when candidates disagree (see _decide)


def parse_item(text: str, ctx: Context) -> Answer:
    """The answer to ``ctx.question`` in ``text`` (already normalised or raw: normalisation is idempotent)."""
    t = normalize(text).strip()
    if "<think" in t:
        t = without_reasoning(t)
    if not t:
        return _answer(ctx.question, None, "no_answer")
    bare_number = _BARE.fullmatch(t)
    if bare_number:
        return _from_number(int(bare_number.group(1)), ctx)
    if "{" in t:
        found = _from_json(t, ctx)
        if found is not None:
            return found
    has_digit = _DIGIT.search(t) is not None
    if not has_digit and len(t) < 80:  # the whole reply may be one label ("**Disagree**.")
        option = ctx.labels.bare_option_of.get(squash(t))
        if option is not None:
            return _ok(ctx, option, False)
    return _from_text(t, ctx, has_digit)


def _ok(ctx: Context, option: int, hedged: bool) -> Answer:
    return _answer(ctx.question, option, "ok", hedged, ctx.order.index(option) + 1)


# Answers are immutable and few (24 questions x 5 options x statuses): reuse them instead of rebuilding.
_answer = lru_cache(maxsize=4096)(Answer)


def _from_number(value: int, ctx: Context) -> Answer:
    if 1 <= value <= len(ctx.order):
        return _ok(ctx, ctx.order[value - 1], False)
    return _answer(ctx.question, None, "out_of_range")


def _from_json(t: str, ctx: Context) -> Answer | None:
    obj = first_json(t, "{")
    if not isinstance(obj, dict):
        field = _OPTION_FIELD.search(t)
        if field:  # truncated or malformed JSON that still states its option_id
            return _from_number(int(field.group(1)), ctx)
        if ctx.json_expected and t.lstrip("`json \n").startswith("{"):
            return _answer(ctx.question, None, "invalid_format")
        return None
    return from_json_object(obj, t, ctx)


def from_json_object(obj: dict, t: str, ctx: Context) -> Answer:
    """The answer stated by a decoded JSON object ``obj`` ({"option_id": 3, ...}) found in reply ``t``."""
    key = next((k for k in _JSON_KEYS if k in obj), None)
    if key is None:
        return _answer(ctx.question, None, "invalid_format")
    return from_json_value(obj[key], t, ctx)


def from_json_value(value: object, t: str, ctx: Context) -> Answer:
    """The answer a JSON option value states: an integer position, a digit string or a label."""
    if value is None:
        status = "refusal" if markers.REFUSAL.search(t) else "no_answer"
        return _answer(ctx.question, None, status)
    if isinstance(value, bool):
        return _answer(ctx.question, None, "invalid_format")
    if isinstance(value, int):
        return _from_number(value, ctx)
    if isinstance(value, float):
        if value.is_integer():
            return _from_number(int(value), ctx)
        return _answer(ctx.question, None, "ambiguous")
    if isinstance(value, str) and value.strip():
        found = parse_item(value, ctx)
        return (
            found
            if found.status in ("ok", "out_of_range", "ambiguous")
            else _answer(ctx.question, None, "invalid_format")
        )
    return _answer(ctx.question, None, "invalid_format")


def _from_text(t: str, ctx: Context, has_digit: bool) -> Answer:
    echo = t.count("=") >= 3  # the model echoed the scale ("1 = always, 2 = usually, ...")
    lead = len(t) - len(t.lstrip(_MARKUP))
    candidates = _numbers(t, ctx, lead, echo) if has_digit else []
    if _CJK_NUMERALS_PRESENT.search(t):
        candidates = sorted(candidates + _cjk_numerals(t, ctx), key=lambda c: c.start)
    labels = _labels(t, ctx.labels, lead, echo)
    if ctx.fallback is not None and not labels and not any(c.option for c in candidates):
        labels = _labels(t, ctx.fallback, lead, echo)
    if labels:
        candidates = sorted(candidates + labels, key=lambda c: c.start)
    return _decide(t, candidates, ctx, lead)


def _strong(t: str, start: int, end: int, lead: int) -> bool:
    if start <= lead or t[start - 2 : start] in ("**", "__") or t[end : end + 2] == "**":
        return True
    return markers.committed_by_cue(t, start)


def _numbers(t: str, ctx: Context, lead: int, echo: bool) -> list[_Candidate]:
    """Number candidates, leaving out the scale's range, denominators, question references and echoes."""
    found: list[_Candidate] = []
    positions = len(ctx.order)
    skip_until = -1
    may_reference = any(word in t for word in _QUESTION_HINTS)
    may_number_question = "题" in t or "題" in t or "问" in t  # "第3题"
    for match in markers.NUMBER.finditer(t):
        start, end = match.span()
        if (
            start < skip_until
            or (may_reference and markers.question_reference(t, start))
            or (may_number_question and markers.QUESTION_AFTER.match(t, end))
        ):
            continue
        value = int(match.group(1))
        if value == 5 and markers.denominator(t, start):
            continue
        if echo and markers.ECHO_SIGN.match(t, end):
            continue
        if match.group(2) and match.group(2).strip("0"):
            found.append(_Candidate(start, end, None, "between"))  # "2.5": between two options
            continue
        if 1 <= value <= 5:
            over = markers.OUT_OF_5.match(t, end)
            if over:  # "4/5": the 4 counts, the 5 does not
                skip_until = over.end()
            elif value == 1 and markers.RANGE_TO_5.match(t, end):
                skip_until = markers.RANGE_TO_5.match(t, end).end()  # "1 to 5" is the scale, not an answer
                continue
            else:
                pair = markers.BETWEEN.match(t, end)
                if pair and int(pair.group(1)) != value:
                    found.append(_Candidate(start, pair.end(), None, "between"))
                    skip_until = pair.end()
                    continue
        if 1 <= value <= positions:
            found.append(_Candidate(start, end, ctx.order[value - 1], "num"))
        elif value <= 99:
            found.append(_Candidate(start, end, None, "bad"))
    return found


def _cjk_numerals(t: str, ctx: Context) -> list[_Candidate]:
    """ "选择二", "选项三", "第四个", or a lone "三": Chinese numerals as committed numbers (elsewhere 一 is a word)."""
    return [
        _Candidate(m.start(1), m.end(1), ctx.order[_CJK_DIGITS.index(m.group(1))], "num", True)
        for m in _CJK_NUMERAL.finditer(t)
    ]


def _labels(t: str, labels: LabelMatcher, lead: int, echo: bool) -> list[_Candidate]:
    found = []
    for start, end, option in labels.find(t):
        if echo and markers.after_echo_sign(t, start):
            continue
        found.append(_Candidate(start, end, option, "label"))
    return found


def _decide(work: str, candidates: list[_Candidate], ctx: Context, lead: int) -> Answer:
    if candidates and all(c.option == candidates[0].option for c in candidates) and candidates[0].option:
        return _ok(ctx, candidates[0].option, False)  # every mention agrees: no need to weigh them
    for c in candidates:
        c.strong = _strong(work, c.start, c.end, lead) or (
            # A label glued to a number ("2 - agree", "3 (of moderate importance)") is as committed as it.
            c.kind == "label" and _AFTER_NUMBER.search(work, max(0, c.start - 6), c.start) is not None
        )
    committed = [c for c in candidates if c.strong]
    pool = committed or [c for c in candidates if c.kind != "bad"]
    if not pool:
        status = "refusal" if markers.REFUSAL.search(work) else "no_answer"
        return _answer(ctx.question, None, status)
    chosen = pool[0]
    if chosen.kind == "bad":
        return _answer(ctx.question, None, "out_of_range")
    if chosen.kind == "between":
        return _answer(ctx.question, None, "ambiguous")
    hedged = False
    for other in candidates:
        if other.start < chosen.end or other.kind == "bad" or other.option == chosen.option:
            continue
        if markers.HEDGE.search(work, chosen.end, other.start):
            hedged = True
            continue
        if other.strong or not committed:
            return _answer(ctx.question, None, "ambiguous")
    assert chosen.option is not None
    return _ok(ctx, chosen.option, hedged)
