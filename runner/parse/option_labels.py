"""Replies to letter-labelled prompts (``design.option_labels = "letters"``): "B" means the option shown second.

The text parser reads numbers as displayed positions and option words as options; a letter-labelled prompt
shows "A = …" … "E = …" and asks for the letter. The parse stage (``answers_table``) reads those replies
through ``letters_as_positions``: every standalone capital A-E (not part of a word, as in "B", "**C**", "(D)",
"Answer: E") becomes the position it marks, and the result is parsed like a digit-labelled reply, so cues,
hedges, refusals and ambiguity work as for numbers. (An English reply opening with the article "A" reads as
position 1 only when no other letter or number follows; the letter-labelled instruction asks for the bare
letter.) Words-only prompts need nothing here: the parser already matches option words.
"""

from __future__ import annotations

import re

from runner.survey.cell import LETTERS

__all__ = ["letters_as_positions"]

_LETTER = re.compile(r"(?<![A-Za-z\u00c0-\u024f])([A-E])(?![A-Za-z\u00c0-\u024f'])")


def letters_as_positions(text: str) -> str:
    """``text`` with each standalone capital A-E replaced by its position digit 1-5."""
    return _LETTER.sub(lambda m: str(LETTERS.index(m.group(1)) + 1), text)
