"""One question's answer from reply text: numbers, labels, hedges, JSON, refusals (see docs/parsing.md).

Candidates are the numbers 1-5 (displayed positions, mapped to option IDs through the cell's order), number
words and ordinals, and the option labels in the text. A candidate is *committed* when a cue precedes it
("Answer:", "I'd rate it a", "我选择"), when it is in bold, when it opens the reply or fills its own line. The
first committed candidate is the answer (the first candidate at all when none is committed). A different later
candidate makes the parse ``ambiguous`` unless a hedge word stands between them ("a 2, maybe even a 1" → 2,
hedged); uncommitted mentions cannot contradict a committed answer. Before that: reasoning traces go, restated
questions and scales are blanked (``_without_restatements``), and a reply that concludes or corrects itself is
read from its last conclusion or correction on (``_concluded``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
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
_OPTION_ID_FIELD = re.compile(r"\"option_?id\"\s*:\s*\"?(\d+)")  # in chatter: only the field the prompt names
# Key words of option fields a JSON reply may use beyond ``_JSON_KEYS`` ("option_number", "selected_answer").
_KEY_WORDS = ("option", "answer", "choice", "select", "rating", "score")
# A pair restating one displayed option ("3 = of moderate importance", "3. never", "(3) never", "3 (never)").
_PAIR = re.compile(r"(?<![\d.])\(?([1-5])\)?[ \t]*(?:\*\*)?[ \t]*(?:[=:.)\-–—]|(?=\())?[ \t]*\(?(?:\*\*)?[ \t]*")
# Between two restated pairs of one scale: separators, "to" ("from 1 = always to 5 = never").
_PAIR_GAP = re.compile(r"[\s,;*|/>\-–—.)(]*(?:(?:to|through|and|až|到|至|الى|و)[\s,;*|/>\-–—.)(]*)?")
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
# A stated option field in JSON that does not decode (truncated, or written with single quotes: {'answer': 3}):
# the keys a decoded reply is read by, and "option_number", each underscore optional ("optionid").
_OPTION_FIELD = re.compile(
    "[\"'](?:"
    + "|".join(sorted({re.escape(k).replace("_", "_?") for k in (*_JSON_KEYS, "option_number")}, key=len, reverse=True))
    + ")[\"']\\s*:\\s*[\"']?(\\d+)"
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
    spelled: tuple[tuple[str, ...], ...] = ()  # per position: its option's label and aliases, longest first
    echoes: tuple[str, ...] = ()  # the normalised question text and section intro (a restatement is no answer)


@lru_cache(maxsize=4096)
def context(language: str, question: int, order: tuple[int, ...], reply_format: str) -> Context:
    """The cached parsing context of ``question`` asked in ``language`` with options in ``order``."""
    instrument = load_instrument(language)
    item = instrument.questions[question]
    fallback = matcher("en", item.scale) if language != "en" and "en" in _languages() else None
    labels = matcher(language, item.scale)
    spelled = tuple(tuple(p for p, o, _ in labels.phrases if o == option) for option in order)
    intro = instrument.section_of(question).intro
    echoes = tuple(normalize(text).strip().rstrip("?.:：？") for text in (item.text, intro) if text)
    return Context(question, order, labels, fallback, reply_format == "json", echoes=echoes, spelled=spelled)


@lru_cache(maxsize=1)
def _languages() -> frozenset[str]:
    from runner.survey.instrument import languages

    return frozenset(languages())


def parse_item(text: str, ctx: Context) -> Answer:
    """The answer to ``ctx.question`` in ``text`` (already normalised or raw: normalisation is idempotent)."""
    t = without_reasoning(normalize(text))
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
    t = _without_restatements(t, ctx, has_digit)
    return _from_text(t, ctx, _DIGIT.search(t) is not None, conclude=True)


# How far back from the end a long reply is searched for a conclusion or a self-correction (they close a reply;
# the search costs ~0.1 us per character, so a megabyte reply is searched in its tail only).
_MARKER_REACH = 65_536


def _concluded(t: str, ctx: Context, lo: int = 0, hi: int | None = None) -> Answer | None:
    """The answer after the reply's last conclusion ("Final answer: 3", a last "Answer:" line, "\\boxed{3}") or
    self-correction ("2… actually, 3") ending in ``[lo, hi)``, where the text from there on states one; None
    otherwise.

    A conclusion's reading stands whatever it is (ok, ambiguous "Final answer: 2 or 3", out of range); a
    self-correction replaces the earlier answer only with an ok one.
    """
    hi = len(t) if hi is None else hi
    lo = max(lo, hi - _MARKER_REACH)
    region = t[lo:hi]
    marks = []
    for pattern, hints, conclusive in (
        (markers.CONCLUSION, markers.CONCLUSION_HINTS, True),
        (markers.REVISION, markers.REVISION_HINTS, False),
    ):
        if any(hint in region for hint in hints):
            last = None
            for last in pattern.finditer(t, lo, hi):  # noqa: B007 - the last one is wanted
                pass
            if last is not None:
                marks.append((last.end(), conclusive))
    for end, conclusive in sorted(marks, reverse=True):  # the later marker first
        rest = t[markers.AFTER_MARKER.match(t, end).end() :]
        if not rest.strip():
            continue
        found = _from_text(rest, ctx, _DIGIT.search(rest) is not None)
        if conclusive and found.status in ("ok", "ambiguous", "out_of_range"):
            return found
        if found.status == "ok" and not markers.ATTRIBUTED.search(rest, 0, 160):  # not "actually, many would say 4"
            return found
    return None


def _without_restatements(t: str, ctx: Context, has_digit: bool) -> str:
    """``t`` with the restated question text and a restated scale blanked out: they name options without
    choosing one ("How often are you happy? Sometimes.", "1 = always, 2 = usually, … 5 = never. My answer: 2").

    A restated scale is a run of at least three "position, displayed label" pairs ("3 = never", "3. never", "(3)
    never") or the scale's two ends ("from 1 = always to 5 = never"); a bold pair in it stays ("**3 =
    sometimes**"; a cue before the run introduces the list: "I can't choose: 1 = always, …").
    """
    for echo in ctx.echoes:
        if len(t) > len(echo) > 8 and echo in t:
            t = t.replace(echo, " " * len(echo))
    # two pairs need two digits 1-5 (five C-level counts) and two options' words: most replies stop here
    if not has_digit or sum(t.count(d) for d in "12345") < 2 or not _two_in(ctx.spelled, t):
        return t
    pairs = []
    for m in _PAIR.finditer(t):
        for label in ctx.spelled[int(m.group(1)) - 1]:  # the displayed label, or an alias of its option
            end = m.end() + len(label)
            if t.startswith(label, m.end()) and not (end < len(t) and _glues(t[end])):
                pairs.append((m.start(), end + (t[end : end + 1] == ")"), int(m.group(1))))
                break
    if len(pairs) < 2:
        return t
    runs: list[list[tuple[int, int, int]]] = [[pairs[0]]]
    for pair in pairs[1:]:
        gap = runs[-1][-1][1]
        if pair[0] - gap <= 16 and _PAIR_GAP.fullmatch(t, gap, pair[0]):
            runs[-1].append(pair)
        else:
            runs.append([pair])
    pieces, at = [], 0
    for run in runs:
        if len(run) < 3 and not (len(run) == 2 and run[0][2] == 1 and run[1][2] == 5):
            continue
        for start, end, _ in run:
            if t[max(0, start - 2) : start] == "**":  # a cue before the run introduces the list ("选择：1 = …")
                continue
            pieces += [t[at:start], " " * (end - start)]
            at = end
    return "".join(pieces) + t[at:] if pieces else t


def _two_in(groups: tuple[tuple[str, ...], ...], t: str) -> bool:
    """Whether phrases of at least two of ``groups`` occur in ``t``."""
    seen = False
    for group in groups:
        if any(phrase in t for phrase in group):
            if seen:
                return True
            seen = True
    return False


def _glues(char: str) -> bool:
    return char.isalnum() and not "\u3040" <= char <= "\u9fff"


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
        starts_json = t.lstrip("`json \n").startswith("{")
        field = (_OPTION_FIELD if starts_json else _OPTION_ID_FIELD).search(t)
        if field:  # truncated or malformed JSON ({'answer': 3}) that still states its option field
            return _from_number(small_int(field.group(1)), ctx)
        if ctx.json_expected and starts_json:
            return _answer(ctx.question, None, "invalid_format")
        return None
    return from_json_object(obj, t, ctx)


def from_json_object(obj: dict, t: str, ctx: Context, depth: int = 0) -> Answer:
    """The answer stated by a decoded JSON object ``obj`` ({"option_id": 3, ...}) found in reply ``t``: its
    option field (``_JSON_KEYS``, else a key naming an option, answer or choice: "option_number"), or the one
    object it wraps ({"response": {"option_id": 3}}, two levels deep at most)."""
    key = next((k for k in _JSON_KEYS if k in obj), None)
    if key is None:
        key = next(
            (k for k in obj if isinstance(k, str) and any(w in k for w in _KEY_WORDS) and "reason" not in k), None
        )
    if key is None:
        inner = [v for v in obj.values() if isinstance(v, dict)]
        if len(inner) == 1 and depth < 2:
            return from_json_object(inner[0], t, ctx, depth + 1)
        return _answer(ctx.question, None, "invalid_format")
    return from_json_value(obj[key], t, ctx, depth)


def from_json_value(value: object, t: str, ctx: Context, depth: int = 0) -> Answer:
    """The answer a JSON option value states: an integer position, a digit string, a label, or an object that
    states one."""
    if isinstance(value, dict) and depth < 2:
        return from_json_object(value, t, ctx, depth + 1)
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


def _from_text(t: str, ctx: Context, has_digit: bool, conclude: bool = False) -> Answer:
    """The answer in reply text ``t``; with ``conclude``, read from its conclusion or self-correction where the
    reply names more than one option (``_concluded``)."""
    lead = len(t) - len(t.lstrip(_MARKUP))
    echo = t.count("=") >= 3  # the model echoed the scale ("1 = always, 2 = usually, ...")
    labels = _without_label_runs(label_candidates(t, ctx.labels, echo), t)
    scan = Scan(t, ctx.order, labels, lead, has_digit, echo)
    if (
        ctx.fallback is not None
        and not labels
        and not any(c.option for c in scan.stream())  # no labels yet: numbers and numerals only
    ):
        scan.relabel(_without_label_runs(label_candidates(t, ctx.fallback, echo), t))
    if conclude:
        region = _marker_region(scan)
        if region is not None:
            found = _concluded(t, ctx, *region)
            if found is not None:
                return found
    return _decide(scan, ctx)


def _marker_region(scan: Scan) -> tuple[int, int] | None:
    """Where a conclusion or self-correction that could change the reading may end, or None where none could.

    A long reply: anywhere. A short reply: between its first candidate and its last, and only where it names two
    different things — a marker before every candidate, or after them all, leaves the reading as it is (the
    common case: no marker search at all).
    """
    every = scan.every
    if every is None:
        return 0, len(scan.t)
    if not every:
        return None
    first = (every[0].kind, every[0].option)
    if all((c.kind, c.option) == first for c in every):
        return None
    return every[0].start, every[-1].start


# Between the labels of a restated scale: separators and "or" ("always, usually, sometimes, seldom or never?").
_LABEL_GAP = re.compile(
    r"[\s,;/|*\-–—.?]*(?:(?:or|and|to|或者|还是|或|和|到|او|ام|و|alebo|či|a|až)(?!\w)[\s,;/|*\-–—.?]*)?"
)


def _without_label_runs(labels: list[Candidate], t: str) -> list[Candidate]:
    """``labels`` without the runs of three or more different labels in a row ("always, usually, sometimes …"):
    a restated scale names the options without choosing one; a bold label in it stays."""
    if len(labels) < 3:
        return labels
    runs, current = [], [labels[0]]
    for c in labels[1:]:
        gap = current[-1].end
        if c.start - gap <= 12 and _LABEL_GAP.fullmatch(t, gap, c.start):
            current.append(c)
        else:
            runs.append(current)
            current = [c]
    runs.append(current)
    kept = []
    for run in runs:
        if len({c.option for c in run}) < 3:
            kept += run
            continue
        # only a bold label stays: a cue before the run introduces the list ("I can't pick: always, usually, …")
        kept += [c for c in run if t[max(0, c.start - 2) : c.start] == "**"]
    return kept


def _hedge_end(scan: Scan, position: int) -> int:
    """Where the first hedge word after ``position`` ends, passing over those inside a label ("of very little
    or no importance", "非常不重要或无关紧要": the label's own "or" hedges nothing)."""
    labels, t = scan.labels, scan.t
    while True:
        end = markers.hedge_end(t, position)
        if end > len(t) or not labels:
            return end
        i = bisect_right(labels, end - 1, key=_start) - 1  # the last label starting before the hedge's end
        if i < 0 or labels[i].end < end:  # not inside that label
            return end
        position = labels[i].end


def _start(c: Candidate) -> int:
    return c.start


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
    hedge_end = _hedge_end(scan, chosen.end)

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
