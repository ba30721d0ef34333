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
from runner.parse.scan import Candidate, Scan, label_candidates
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


def small_int(digits: str) -> int:
    """The value of a digit string, or 10**6 for one longer than 6 digits (any of them is out of range, and
    ``int()`` refuses strings past 4,300 digits)."""
    return int(digits) if len(digits) <= 6 else 10**6


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
            return _from_number(small_int(field.group(1)), ctx)
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
    lead = len(t) - len(t.lstrip(_MARKUP))
    echo = t.count("=") >= 3  # the model echoed the scale ("1 = always, 2 = usually, ...")
    labels = label_candidates(t, ctx.labels, echo)
    scan = Scan(t, ctx.order, labels, lead, has_digit, echo)
    if (
        ctx.fallback is not None
        and not labels
        and not any(c.option for c in scan.stream())  # no labels yet: numbers and numerals only
    ):
        scan.relabel(label_candidates(t, ctx.fallback, echo))
    return _decide(scan, ctx)


def _decide(scan: Scan, ctx: Context) -> Answer:
    """The first committed candidate (else the first mention) and whether a later one makes it hedged or ambiguous.

    Same rules as weighing every candidate, in time linear in the reply: committed candidates come from the
    windows that can hold one (``Scan.committed``), and later mentions are walked only up to the first that
    disagrees.
    """
    strong = scan.committed()
    chosen = next(strong, None)
    committed = chosen is not None
    if chosen is None:
        chosen = next((c for c in scan.stream() if c.kind != "bad"), None)
    if chosen is None:
        status = "refusal" if markers.REFUSAL.search(scan.t) else "no_answer"
        return _answer(ctx.question, None, status)
    if chosen.kind == "bad":
        return _answer(ctx.question, None, "out_of_range")
    if chosen.kind == "between":
        return _answer(ctx.question, None, "ambiguous")
    hedge_end = markers.hedge_end(scan.t, chosen.end)

    def differs(c: Candidate) -> bool:
        return c.kind != "bad" and c.option != chosen.option

    # Before the first hedge, a differing candidate makes the answer ambiguous: any of them when none was
    # committed, a committed one otherwise (a mere mention cannot contradict a committed answer).
    if committed:
        if next(scan.committed(chosen.end, hedge_end, differs), None) is not None:
            return _answer(ctx.question, None, "ambiguous")
    else:
        for other in scan.stream(chosen.end):
            if other.start >= hedge_end:
                break
            if differs(other):
                return _answer(ctx.question, None, "ambiguous")
    # After it, any differing candidate is a hedge ("a 2, maybe even a 1" -> 2, hedged).
    hedged = any(differs(c) for c in scan.stream(hedge_end))
    assert chosen.option is not None
    return _ok(ctx, chosen.option, hedged)
