"""Answer candidates of one item reply, found by position and on demand, so a parse costs time linear in the reply.

Candidates are the numbers 1-5 (displayed positions, mapped to option IDs through the cell's order), numbers out
of range, "between" spans (2-3, 2.5), Chinese numerals and option labels, in text order (the rules are in
``runner.parse.item``). A long reply may hold millions of numbers ("1. 1\\n2. 2\\n…"), and per-candidate Python
work on each of them is what made a 5 MB reply slow. The decision needs far less: the first *committed*
candidate, which can only stand where something commits it (the reply's start, bold markup, a cue word, a label
glued to a number), and then the first later candidate that disagrees. So committed candidates are looked for
only in windows around those sites (found by C-level searches), and the full candidate stream is walked lazily,
stopping at the first disagreement.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from runner.parse import markers
from runner.parse.labels import LabelMatcher

_QUESTION_HINTS = ("q", "otáz", "سؤال", "问题")  # some question word may stand in the text
_CJK_DIGITS = "一二三四五"
_CJK_NUMERALS_PRESENT = re.compile(f"[{_CJK_DIGITS}]")
_CJK_NUMERAL = re.compile(rf"(?:^|选择|选项|答案[是为:]?|选|第)\s*([{_CJK_DIGITS}])(?=个|号|项|$|[。.,!！\s(（])")
_AFTER_NUMBER = re.compile(r"\d\s*[-=:.(]*\s*$")
# Cue words, searched forward as a plain alternation (a C-level scan; leading look-behinds make it ~30x slower):
# a superset of where ``markers.committed_by_cue`` can hold, which then decides exactly.
_CUE_WORDS = re.compile("|".join(re.escape(w) for w in sorted(markers.CUES, key=len, reverse=True)))
_BOLD = re.compile(r"\*\*|__")
# A lone number on its own line ("1\n3": two answers, not an answer and a mention), with markup around it.
_LINE_BEFORE = re.compile(r"[ \t*_>#`\"'(\[]*")
_LINE_AFTER = re.compile(r"[ \t*_.)`\"'\]]*(?:\n|$)")
# "this one", "the one" are not the number one
_NOT_ONE = ("this ", "that ", "the ", "each ", "which ", "any ", "every ", "no ", "a ")
_CUE_REACH = 48  # committed_by_cue looks 40 characters back from a candidate; a little more is harmless
_CHUNK = 4096  # characters of candidates materialised at a time by ``stream``
_AHEAD = 256  # a window's number search runs this far past it (the number's own match never needs more)
_BACK = 32  # a scan restarted at a window starts this far before it, so "1 to 5" or "4/5" spanning in still skips


@dataclass(slots=True)
class Candidate:
    """One possible answer in the reply: its span, option ID (None when out of range or between two) and kind."""

    start: int
    end: int
    option: int | None  # None for out-of-range numbers and for "between" spans
    kind: str  # "num" | "label" | "bad" (out of range) | "between" (2-3, 2.5)


class Scan:
    """The candidates of one normalised reply ``t`` for one question: lazily, in text order, and by window."""

    __slots__ = (
        "cjk",
        "echo",
        "every",
        "has_digit",
        "labels",
        "lead",
        "may_number_question",
        "may_reference",
        "order",
        "spelled",
        "t",
    )

    def __init__(
        self, t: str, order: tuple[int, ...], labels: list[Candidate], lead: int, has_digit: bool, echo: bool
    ) -> None:
        self.t = t
        self.order = order
        self.lead = lead
        self.echo = echo  # the model echoed the scale ("1 = always, 2 = usually, ...")
        self.has_digit = has_digit
        self.labels = labels
        self.may_reference = any(word in t for word in _QUESTION_HINTS)
        self.may_number_question = "题" in t or "題" in t or "问" in t  # "第3题"
        self.cjk = _CJK_NUMERALS_PRESENT.search(t) is not None
        # number words and ordinals: looked for in every short reply, and in the windows that can commit one in
        # a long reply (an alternation of many words costs ~0.1 us per character: a whole-text pass is too slow)
        if len(t) <= _CHUNK:
            self.spelled = not markers.SPELLED_SET.isdisjoint(markers.WORD.findall(t))
        else:
            self.spelled = any(hint in t for hint in markers.SPELLED_HINTS)
        # Most replies are short: all their candidates at once cost less than finding the few that matter.
        self.every = self.window(0, len(t) + 1) if len(t) <= _CHUNK else None

    def numbers(self, lo: int, hi: int) -> Iterator[Candidate]:
        """Number candidates starting in ``[lo, hi)``, leaving out the scale's range, denominators, question
        references and echoes."""
        if not self.has_digit:
            return
        t, order, positions = self.t, self.order, len(self.order)
        skip_until = -1
        # Bounded search: an unbounded one from every window rescanned the rest of a reply without numbers.
        for match in markers.NUMBER.finditer(t, max(0, lo - _BACK), hi + _AHEAD):
            start, end = match.span()
            if start >= hi:
                return
            if (
                start < skip_until
                or (self.may_reference and markers.question_reference(t, start))
                or (self.may_number_question and markers.QUESTION_AFTER.match(t, end))
            ):
                continue
            value = int(match.group(1))
            if value == 5 and markers.denominator(t, start):
                continue
            if self.echo and markers.ECHO_SIGN.match(t, end):
                continue
            if match.group(2) and match.group(2).strip("0"):
                if start >= lo:
                    yield Candidate(start, end, None, "between")  # "2.5": between two options
                continue
            if 1 <= value <= 5:
                over = markers.OUT_OF_5.match(t, end)
                if over:  # "4/5": the 4 counts, the 5 does not
                    skip_until = over.end()
                elif value == 1 and (scale := markers.RANGE_TO_5.match(t, end)):
                    skip_until = scale.end()  # "1 to 5" is the scale, not an answer
                    continue
                else:
                    pair = markers.BETWEEN.match(t, end) or markers.COMMA_PAIR.match(t, end)
                    if pair and int(pair.group(1)) != value:
                        if start >= lo:
                            yield Candidate(start, pair.end(), None, "between")
                        skip_until = pair.end()
                        continue
            if start < lo:
                continue
            if 1 <= value <= positions:
                yield Candidate(start, end, order[value - 1], "num")
            elif value <= 99:
                yield Candidate(start, end, None, "bad")

    def cjk_numerals(self, lo: int, hi: int) -> Iterator[Candidate]:
        """ "选择二", "选项三", "第四个", or a lone "三" starting in ``[lo, hi)`` (elsewhere 一 is a word)."""
        if not self.cjk:
            return
        for m in _CJK_NUMERAL.finditer(self.t, max(0, lo - 4), hi + 2):
            if m.start(1) >= hi:
                return
            if m.start(1) >= lo:
                yield Candidate(m.start(1), m.end(1), self.order[_CJK_DIGITS.index(m.group(1))], "num")

    def spelled_numbers(self, lo: int, hi: int) -> Iterator[Candidate]:
        """Number words and ordinals starting in ``[lo, hi)``: "the third option", "option three", a committed
        cardinal that ends its phrase ("Answer: three.", "**Drei**"; never "three reasons" or "this one"), an
        ordinal alone after a cue ("I'd go with the first.")."""
        t = self.t
        for m in markers.SPELLED.finditer(t, max(0, lo), min(len(t), hi + 24)):
            if m.start() >= hi:
                return
            start = m.start()
            if m.group(5):  # a cardinal inside a phrase: only right after an option noun ("option three is")
                if not markers.ends_with(markers.OPTION_BEFORE, t, start, 24):
                    continue
                values = _spelled_values(m.group(5))
            elif m.group(1) or m.group(4):  # a cardinal ending its phrase, or a lone ordinal: where committed
                words, lone_ordinal = m.group(1) or m.group(4), m.group(1) is None
                c = Candidate(start, m.end(), None, "num")
                if words == "one" and t[max(0, start - 6) : start].endswith(_NOT_ONE):
                    continue
                named = not lone_ordinal and markers.ends_with(markers.OPTION_BEFORE, t, start, 24)
                if words == "one" and not named and not self._by_form(c):
                    continue  # "choose one, …", "I can't pick one": a pronoun after a verb, not option 1
                if lone_ordinal:
                    if not markers.committed_by_cue(t, start):
                        continue
                elif not (named or self.strong(c)):
                    continue
                values = _spelled_values(words)
            elif m.group(2):  # "the second or the third option"
                values = _spelled_values(m.group(2))
            else:
                values = [markers.SPELLED_VALUE[m.group(3)]]
            if not values:
                continue
            if len(set(values)) > 1:  # "two or three", "the second or the third option": between two
                yield Candidate(start, m.end(), None, "between")
            elif values[0] <= len(self.order):
                yield Candidate(start, m.end(), self.order[values[0] - 1], "num")

    def relabel(self, labels: list[Candidate]) -> None:
        """Use ``labels`` (the English fallback's) as the label candidates instead."""
        self.labels = labels
        if self.every is not None:
            self.every = self.window(0, len(self.t) + 1)

    def window(self, lo: int, hi: int, labels: bool = True, spelled: bool = True) -> list[Candidate]:
        """The candidates starting in ``[lo, hi)``, in text order (numbers before labels at the same start)."""
        found = list(self.numbers(lo, hi)) if self.has_digit else []
        if self.cjk:
            found += self.cjk_numerals(lo, hi)
            found.sort(key=_start)
        if spelled and self.spelled:
            words = list(self.spelled_numbers(lo, hi))
            if words:
                found += words
                found.sort(key=_start)
        if labels and self.labels:  # labels are in text order: slice the window instead of filtering them all
            all_labels = self.labels
            found += all_labels[bisect_left(all_labels, lo, key=_start) : bisect_left(all_labels, hi, key=_start)]
            found.sort(key=_start)
        return found

    def stream(self, lo: int = 0) -> Iterator[Candidate]:
        """Every candidate starting at or after ``lo``, in text order, found a chunk at a time (callers stop early)."""
        if self.every is not None:
            return iter(self.every[bisect_left(self.every, lo, key=_start) :])
        return self._chunks(lo)

    def _chunks(self, lo: int) -> Iterator[Candidate]:
        end = len(self.t) + 1
        while lo < end:
            yield from self.window(lo, lo + _CHUNK, spelled=False)
            lo += _CHUNK

    def strong(self, c: Candidate) -> bool:
        """Whether ``c`` is committed: it opens the reply, is bold, follows a cue, or is a label glued to a number."""
        t = self.t
        if self._by_form(c):
            return True
        if markers.committed_by_cue(t, c.start):
            return not markers.attributed(t, c.start)  # "many would pick 4" is others' answer, not the reply's
        if c.kind == "label":
            return _AFTER_NUMBER.search(t, max(0, c.start - 6), c.start) is not None
        return self._alone_on_line(c)

    def _by_form(self, c: Candidate) -> bool:
        """Whether ``c`` is committed by where it stands, not by a verb: it opens the reply, is bold, follows a
        colon ("Answer: one") or fills its line."""
        t = self.t
        if c.start <= self.lead or t[c.start - 2 : c.start] in ("**", "__") or t[c.end : c.end + 2] == "**":
            return True
        return t[max(0, c.start - 4) : c.start].rstrip(" *").endswith((":", "：")) or self._alone_on_line(c)

    def _alone_on_line(self, c: Candidate) -> bool:
        """Whether ``c`` is all its line holds, but for markup ("2", "**3.**"): a line-long answer."""
        t = self.t
        before = t[max(0, c.start - 8) : c.start]
        newline = before.rfind("\n")
        if newline < 0 and c.start > 8:
            return False
        if not _LINE_BEFORE.fullmatch(before, newline + 1):
            return False
        return _LINE_AFTER.match(t, c.end) is not None

    def committed(
        self, lo: int = 0, hi: int | None = None, keep: Callable[[Candidate], bool] | None = None
    ) -> Iterator[Candidate]:
        """The committed candidates starting in ``[lo, hi)`` (that ``keep`` accepts), in text order: numbers are
        looked for only in windows around the sites that can commit one (the start, bold markup, cue words)."""
        hi = len(self.t) + 1 if hi is None else hi

        def wanted(c: Candidate) -> bool:
            return (keep is None or keep(c)) and self.strong(c)  # the cheap test first

        if self.every is not None:  # a short reply: its candidates are at hand, test each
            every = self.every
            return (
                c for c in every[bisect_left(every, lo, key=_start) : bisect_left(every, hi, key=_start)] if wanted(c)
            )
        labels = self.labels
        numbers = (c for c in self._window_numbers(lo, hi) if wanted(c))
        if not labels:
            return numbers
        labels = labels[bisect_left(labels, lo, key=_start) : bisect_left(labels, hi, key=_start)]
        return _two_way(numbers, (c for c in labels if wanted(c)))

    def _window_numbers(self, lo: int, hi: int) -> Iterator[Candidate]:
        """Number and numeral candidates in ``[lo, hi)`` near the sites that can commit one."""
        if not (self.has_digit or self.cjk):
            return
        t = self.t
        windows = [(0, self.lead + 1)] if lo <= self.lead else []
        windows += _sites(_BOLD, t, max(0, lo - 2), hi + 2, 64, 1)
        windows += _sites(_CUE_WORDS, t, max(0, lo - _CUE_REACH), hi, 0, _CUE_REACH)
        windows.sort()
        seen = -1
        for a, b in _merged(windows):
            if a >= hi:
                return
            yield from self.window(max(a, lo, seen + 1), min(b, hi), labels=False)
            seen = min(b, hi) - 1


def _spelled_values(words: str) -> list[int]:
    """The values of the number words or ordinals in ``words`` ("two or three" → [2, 3]); unknown words skipped."""
    return [v for w in markers.JOINED.split(words) if (v := markers.SPELLED_VALUE.get(w)) is not None]


def _two_way(first: Iterator[Candidate], second: Iterator[Candidate]) -> Iterator[Candidate]:
    """Two candidate iterators in text order merged into one (cheaper than ``heapq.merge`` for two)."""
    a, b = next(first, None), next(second, None)
    while a is not None and b is not None:
        if b.start < a.start:
            yield b
            b = next(second, None)
        else:
            yield a
            a = next(first, None)
    if a is not None:
        yield a
        yield from first
    if b is not None:
        yield b
        yield from second


def _start(c: Candidate) -> int:
    return c.start


def _sites(pattern: re.Pattern[str], t: str, lo: int, hi: int, before: int, after: int) -> list[tuple[int, int]]:
    """Merged windows from ``before`` characters before to ``after`` past each match of ``pattern`` in
    ``[lo, hi)``."""
    windows: list[tuple[int, int]] = []
    a = b = -1
    for m in pattern.finditer(t, lo, hi):
        start = m.start() - before
        if start <= b:  # fixed reach and matches in order: windows only ever extend
            b = m.end() + after
            continue
        if b >= 0:
            windows.append((a, b))
        a, b = max(0, start), m.end() + after
    if b >= 0:
        windows.append((a, b))
    return windows


def _merged(windows: Iterable[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Windows sorted by start, with overlapping ones merged."""
    current: list[int] | None = None
    for a, b in windows:
        if current is not None and a <= current[1]:
            current[1] = max(current[1], b)
            continue
        if current is not None:
            yield current[0], current[1]
        current = [max(0, a), b]
    if current is not None:
        yield current[0], current[1]


def label_candidates(t: str, labels: LabelMatcher, echo: bool) -> list[Candidate]:
    """The label candidates of ``labels`` in ``t``, leaving out labels of an echoed scale ("1 = always")."""
    return [
        Candidate(start, end, option, "label")
        for start, end, option in labels.find(t)
        if not (echo and markers.after_echo_sign(t, start))
    ]
