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

from runner.instrument import load_instrument
from runner.parse import markers
from runner.parse.jsonreply import first_json
from runner.parse.labels import LabelMatcher, matcher
from runner.parse.normalize import bare, normalize
from runner.parse.result import Answer

_BARE = re.compile(r"[\s*(\[\"'`]*(\d{1,3})[\s.)\]*\"'`]*")
_ECHO = re.compile(r"\d\s*=\s*[^,\n;=]*")
_OPTION_FIELD = re.compile(r"\"option_?id\"\s*:\s*\"?(\d+)")
_JSON_KEYS = ("option_id", "optionid", "option", "answer", "choice", "id", "rating", "score")
_MARKUP = " \t\n*#>\"'`(["
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
    from runner.instrument import languages

    return frozenset(languages())


@dataclass(slots=True)
class _Candidate:
    start: int
    end: int
    option: int | None  # None for out-of-range numbers and for "between" spans
    kind: str  # "num" | "label" | "bad" (out of range) | "between" (2-3, 2.5)
    strong: bool


def parse_item(text: str, ctx: Context) -> Answer:
    """The answer to ``ctx.question`` in ``text`` (already normalised or raw: normalisation is idempotent)."""
    t = normalize(text).strip()
    if not t:
        return Answer(ctx.question, None, "no_answer")
    bare_number = _BARE.fullmatch(t)
    if bare_number:
        return _from_number(int(bare_number.group(1)), ctx)
    if "{" in t:
        found = _from_json(t, ctx)
        if found is not None:
            return found
    if len(t) < 80:
        option = ctx.labels.bare_option_of.get(bare(t))
        if option is not None:
            return _ok(ctx, option, False)
    return _from_text(t, ctx)


def _ok(ctx: Context, option: int, hedged: bool) -> Answer:
    return Answer(ctx.question, option, "ok", hedged, ctx.order.index(option) + 1)


def _from_number(value: int, ctx: Context) -> Answer:
    if 1 <= value <= len(ctx.order):
        return _ok(ctx, ctx.order[value - 1], False)
    return Answer(ctx.question, None, "out_of_range")


def _from_json(t: str, ctx: Context) -> Answer | None:
    obj = first_json(t, "{")
    if not isinstance(obj, dict):
        field = _OPTION_FIELD.search(t)
        if field:  # truncated or malformed JSON that still states its option_id
            return _from_number(int(field.group(1)), ctx)
        if ctx.json_expected and t.lstrip("`json \n").startswith("{"):
            return Answer(ctx.question, None, "invalid_format")
        return None
    return from_json_object(obj, t, ctx)


def from_json_object(obj: dict, t: str, ctx: Context) -> Answer:
    """The answer stated by a decoded JSON object ``obj`` ({"option_id": 3, ...}) found in reply ``t``."""
    key = next((k for k in _JSON_KEYS if k in obj), None)
    if key is None:
        return Answer(ctx.question, None, "invalid_format")
    return from_json_value(obj[key], t, ctx)


def from_json_value(value: object, t: str, ctx: Context) -> Answer:
    """The answer a JSON option value states: an integer position, a digit string or a label."""
    if value is None:
        status = "refusal" if markers.REFUSAL.search(t) else "no_answer"
        return Answer(ctx.question, None, status)
    if isinstance(value, bool):
        return Answer(ctx.question, None, "invalid_format")
    if isinstance(value, int):
        return _from_number(value, ctx)
    if isinstance(value, float):
        if value.is_integer():
            return _from_number(int(value), ctx)
        return Answer(ctx.question, None, "ambiguous")
    if isinstance(value, str) and value.strip():
        found = parse_item(value, ctx)
        return found if found.status in ("ok", "out_of_range", "ambiguous") else Answer(
            ctx.question, None, "invalid_format")
    return Answer(ctx.question, None, "invalid_format")


def _blank(match: re.Match[str]) -> str:
    return " " * (match.end() - match.start())


def _from_text(t: str, ctx: Context) -> Answer:
    work = t
    if any(c.isdigit() for c in t):
        work = markers.NOT_ANSWERS.sub(_blank, work)
        if work.count("=") >= 3:  # the model echoed the scale ("1 = always, 2 = usually, ...")
            work = _ECHO.sub(_blank, work)
    lead = len(work) - len(work.lstrip(_MARKUP))
    candidates = _candidates(work, ctx, ctx.labels, lead)
    if ctx.fallback is not None and not any(c.option for c in candidates):
        candidates += [_Candidate(s, e, o, "label", _strong(work, s, e, lead))
                       for s, e, o in ctx.fallback.find(work)]
        candidates.sort(key=lambda c: c.start)
    return _decide(work, candidates, ctx)


def _strong(work: str, start: int, end: int, lead: int) -> bool:
    if start <= lead or work[start - 2:start] in ("**", "__") or work[end:end + 2] == "**":
        return True
    return markers.CUE_BEFORE.search(work, max(0, start - 40), start) is not None


def _candidates(work: str, ctx: Context, labels: LabelMatcher, lead: int) -> list[_Candidate]:
    found: list[_Candidate] = []
    if any(c.isdigit() for c in work):
        for match in markers.BETWEEN.finditer(work):
            if match.group(1) != match.group(2):
                found.append(_Candidate(match.start(), match.end(), None, "between",
                                        _strong(work, match.start(), match.end(), lead)))
        spans = [(c.start, c.end) for c in found]
        positions = len(ctx.order)
        for match in markers.NUMBER.finditer(work):
            start, end = match.span()
            if any(s <= start < e for s, e in spans):
                continue
            value = int(match.group(1))
            decimals = match.group(2)
            strong = _strong(work, start, end, lead)
            if decimals and decimals.strip("0"):
                found.append(_Candidate(start, end, None, "between", strong))
            elif 1 <= value <= positions:
                found.append(_Candidate(start, end, ctx.order[value - 1], "num", strong))
            elif value <= 99:
                found.append(_Candidate(start, end, None, "bad", strong))
    for start, end, option in labels.find(work):
        # A label glued to a number ("2 - agree", "3 (of moderate importance)") is as committed as the number.
        strong = _strong(work, start, end, lead) or _AFTER_NUMBER.search(work, max(0, start - 6), start) is not None
        found.append(_Candidate(start, end, option, "label", strong))
    found.sort(key=lambda c: c.start)
    return found


def _decide(work: str, candidates: list[_Candidate], ctx: Context) -> Answer:
    committed = [c for c in candidates if c.strong]
    pool = committed or [c for c in candidates if c.kind != "bad"]
    if not pool:
        status = "refusal" if markers.REFUSAL.search(work) else "no_answer"
        return Answer(ctx.question, None, status)
    chosen = pool[0]
    if chosen.kind == "bad":
        return Answer(ctx.question, None, "out_of_range")
    if chosen.kind == "between":
        return Answer(ctx.question, None, "ambiguous")
    hedged = False
    for other in candidates:
        if other.start < chosen.end or other.kind == "bad" or other.option == chosen.option:
            continue
        if markers.HEDGE.search(work, chosen.end, other.start):
            hedged = True
            continue
        if other.strong or not committed:
            return Answer(ctx.question, None, "ambiguous")
    assert chosen.option is not None
    return _ok(ctx, chosen.option, hedged)
