"""Option labels (and their aliases) of one question found in reply text, mapped to option IDs.

Labels and aliases come from the instrument file of the prompt's language; English serves as a fallback for
models that answer a translated prompt in English. Longer phrases win over the shorter ones inside them
("strongly disagree" over "disagree", "非常不重要或无关紧要" over "非常重要"), and a label preceded by a negation
("not very important", "不是非常重要") does not count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from runner.parse.markers import negated
from runner.parse.normalize import bare, normalize
from runner.survey.instrument import load_instrument

# Scripts without spaces between words match labels anywhere; the others need word boundaries.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def _glues(char: str) -> bool:
    """Whether ``char`` would make a spaced-script label part of a longer word (CJK characters do not)."""
    return char.isalnum() and not "\u3040" <= char <= "\u9fff"


@dataclass(frozen=True, slots=True)
class LabelMatcher:
    """Finds the labels of one scale in normalised text."""

    phrases: tuple[tuple[str, int, bool], ...]  # (phrase, option ID, needs word boundaries), longest first
    bare_option_of: dict[str, int]  # punctuation-free phrase -> option ID, for whole-reply matches
    first_words: frozenset[str]  # a label can only occur where one of these does (a cheap pre-check)

    def find(self, text: str) -> list[tuple[int, int, int]]:
        """(start, end, option ID) of each non-negated label occurrence in normalised ``text``, in order.

        Longest phrases claim their span first; ``str.find`` per phrase beats a regex alternation here.
        """
        taken: list[tuple[int, int, int]] = []
        for word in self.first_words:
            if word in text:
                break
        else:
            return taken
        # Characters claimed by a longer phrase: a byte per character makes the overlap test one C-level
        # ``find`` over the span (testing every claimed span instead was quadratic in the number of labels).
        claimed: bytearray | None = None
        for phrase, option, bounded in self.phrases:
            at = text.find(phrase)
            while at != -1:
                end = at + len(phrase)
                if (
                    not bounded
                    or ((at == 0 or not _glues(text[at - 1])) and (end == len(text) or not _glues(text[end])))
                ) and (claimed is None or claimed.find(1, at, end) == -1):
                    if claimed is None:
                        claimed = bytearray(len(text))
                    claimed[at:end] = b"\x01" * (end - at)
                    taken.append((at, end, option))
                at = text.find(phrase, at + 1)
        found = [span for span in taken if not negated(text, span[0])]
        found.sort()
        return found


@cache
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
    ordered = tuple((p, phrases[p], not _CJK.search(p)) for p in sorted(phrases, key=len, reverse=True))
    first_words = frozenset(p[:2] if _CJK.search(p) else p.split()[0] for p in phrases)
    return LabelMatcher(ordered, {bare(p): o for p, o in phrases.items()}, first_words)
