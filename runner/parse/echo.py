"""Which question a line of a survey reply restates, by its words: models echo the item text before answering.

A question's text is split into tokens (words; single characters in Chinese) weighted by how rare they are among
the 24 items and the section intros, so "nervous" says more than "how" or "often". A line restates question q
when the tokens of q appear in it *in order* (gaps allowed) and carry most of q's weight; where the restated
text ends is where the answer can start ("How often are you happy? Often" → the answer is the second "often").
Matching looks at the first ``REACH`` characters of a line only: an echo precedes its answer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache

from runner.parse.normalize import normalize
from runner.survey.instrument import languages, load_instrument

REACH = 400
_TOKEN = re.compile(r"[\u3400-\u9fff]|[^\W\d_]+")
_MIN_TOKENS = 2  # one shared word is no echo
THRESHOLD = 0.6  # share of a question's token weight a line must restate


@dataclass(frozen=True, slots=True)
class Echo:
    """A restated question in a line: its number, the share of its weight restated, and the span restated."""

    question: int
    coverage: float
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class EchoIndex:
    """The item texts and section intros of one instrument language (plus English), tokenised and weighted."""

    questions: tuple[tuple[int, tuple[str, ...], tuple[float, ...], float], ...]  # (number, tokens, weights, total)
    by_token: dict[str, tuple[tuple[int, float], ...]]  # token -> (index into ``questions``, its weight there)
    intros: tuple[tuple[int, tuple[str, ...], tuple[float, ...], float], ...]  # (section index, ...) likewise

    def find(self, line: str, asked: frozenset[int] | None = None) -> Echo | None:
        """The question ``line`` (normalised) restates best, if any restates at least ``THRESHOLD`` of its weight."""
        tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(line, 0, min(len(line), REACH))]
        if len(tokens) < _MIN_TOKENS:
            return None
        # The weight of a question's tokens present at all bounds what an in-order match can cover: only
        # questions whose bound reaches the threshold are matched in order.
        bound: dict[int, float] = {}
        for token in {t for t, _, _ in tokens}:
            for index, weight in self.by_token.get(token, ()):
                bound[index] = bound.get(index, 0.0) + weight
        best: Echo | None = None
        for index, reach in bound.items():
            number, words, weights, total = self.questions[index]
            if reach < THRESHOLD * total or (asked is not None and number not in asked):
                continue
            found = _in_order(tokens, words, weights, total)
            if found is not None and (best is None or found[0] > best.coverage):
                best = Echo(number, *found)
        return best if best is not None and best.coverage >= THRESHOLD else None

    def restated(self, line: str, question: int) -> Echo | None:
        """How much of ``question``'s own text ``line`` (normalised) restates, in order (two tokens at least)."""
        tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(line, 0, min(len(line), REACH))]
        best: Echo | None = None
        for number, words, weights, total in self.questions:
            if number == question:
                found = _in_order(tokens, words, weights, total)
                if found is not None and (best is None or found[0] > best.coverage):
                    best = Echo(number, *found)
        return best

    def section(self, line: str) -> int | None:
        """The index of the section whose intro ``line`` (normalised) restates, if any."""
        tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(line, 0, min(len(line), REACH))]
        if len(tokens) < _MIN_TOKENS:
            return None
        for index, words, weights, total in self.intros:
            found = _in_order(tokens, words, weights, total)
            if found is not None and found[0] >= THRESHOLD:
                return index
        return None


def _in_order(
    tokens: list[tuple[str, int, int]], words: tuple[str, ...], weights: tuple[float, ...], total: float
) -> tuple[float, int, int] | None:
    """(coverage, start, end) of the in-order match of ``words`` among ``tokens``; None below two tokens."""
    j, covered, count, start, end = 0, 0.0, 0, -1, -1
    for token, a, b in tokens:
        if j >= len(words):
            break
        try:
            k = words.index(token, j)
        except ValueError:
            continue
        j = k + 1
        covered += weights[k]
        count += 1
        start = a if start < 0 else start
        end = b
    if count < _MIN_TOKENS:
        return None
    return covered / total, start, end


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(m.group() for m in _TOKEN.finditer(normalize(text)))


@cache
def echo_index(language: str) -> EchoIndex:
    """The echo index of ``language``'s instrument, with the English texts too (models answer in English)."""
    names = [language] + (["en"] if language != "en" and "en" in languages() else [])
    texts: list[tuple[int, tuple[str, ...]]] = []
    intros: list[tuple[int, tuple[str, ...]]] = []
    for name in names:
        instrument = load_instrument(name)
        texts += [(number, _tokens(q.text)) for number, q in sorted(instrument.questions.items())]
        intros += [(i, _tokens(s.intro)) for i, s in enumerate(instrument.sections) if s.intro]
    documents = [set(words) for _, words in texts + intros]
    weight = {t: math.log(1 + len(documents) / sum(t in d for d in documents)) for d in documents for t in d}

    def weighted(items: list[tuple[int, tuple[str, ...]]]) -> tuple:
        rows = []
        for number, words in items:
            if words:
                w = tuple(weight[t] for t in words)
                rows.append((number, words, w, sum(w)))
        return tuple(rows)

    questions = weighted(texts)
    by_token: dict[str, list[tuple[int, float]]] = {}
    for index, (_, words, weights, _) in enumerate(questions):
        for token in set(words):
            share = sum(w for t, w in zip(words, weights, strict=True) if t == token)
            by_token.setdefault(token, []).append((index, share))
    return EchoIndex(questions, {t: tuple(v) for t, v in by_token.items()}, weighted(intros))
