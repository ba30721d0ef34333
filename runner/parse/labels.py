"""Option labels (and their aliases) of one question found in reply text, mapped to option IDs.

Labels and aliases come from the instrument file of the prompt's language; English serves as a fallback for
models that answer a translated prompt in English. Longer phrases win over the shorter ones inside them
("strongly disagree" over "disagree", "非常不重要或无关紧要" over "非常重要"), and a label preceded by a negation
("not very important", "不是非常重要") does not count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from runner.instrument import load_instrument
from runner.parse.normalize import bare, normalize

# Scripts without spaces between words match labels anywhere; the others need word boundaries.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_NEGATION_BEFORE = re.compile(r"(?:\bnot|n't|\bnie|\bnie je|\bne|ليس|غير|لست|不|并不|不是|沒有)\s*$")


@dataclass(frozen=True, slots=True)
class LabelMatcher:
    """Finds the labels of one scale in normalised text."""

    pattern: re.Pattern[str] | None
    option_of: dict[str, int]  # normalised phrase -> option ID
    bare_option_of: dict[str, int]  # punctuation-free phrase -> option ID, for whole-reply matches

    def find(self, text: str) -> list[tuple[int, int, int]]:
        """(start, end, option ID) of each non-negated label occurrence in normalised ``text``, in order."""
        if self.pattern is None:
            return []
        found = []
        for match in self.pattern.finditer(text):
            phrase = match.group(0)
            start = match.start()
            if _NEGATION_BEFORE.search(text, max(0, start - 8), start):
                continue
            found.append((start, match.end(), self.option_of[" ".join(phrase.split())]))
        return found


@lru_cache(maxsize=None)
def matcher(language: str, scale: str) -> LabelMatcher:
    """The label matcher of ``scale`` in ``language`` (labels plus aliases from the instrument file)."""
    instrument = load_instrument(language)
    question = next(q for q in instrument.questions.values() if q.scale == scale)
    phrases: dict[str, int] = {}
    for option in question.options:
        phrases[" ".join(normalize(option.label).split())] = option.id
    for option_id, aliases in question.aliases:
        for alias in aliases:
            phrases.setdefault(" ".join(normalize(alias).split()), option_id)
    ordered = sorted(phrases, key=len, reverse=True)
    parts = []
    for phrase in ordered:
        body = re.escape(phrase).replace(r"\ ", r"\s+")
        parts.append(body if _CJK.search(phrase) else rf"(?<!\w){body}(?!\w)")
    pattern = re.compile("|".join(parts)) if parts else None
    bare_phrases = {bare(p): o for p, o in phrases.items()}
    return LabelMatcher(pattern, phrases, bare_phrases)
