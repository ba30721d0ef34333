"""Replies to letter-labelled prompts (``design.option_labels = "letters"``): "B" means the option shown second.

The text parser reads numbers as displayed positions and option words as options; a letter-labelled prompt
shows "A = …" … "E = …" and asks for the letter. The parse stage (``answers_table``) reads those replies
through ``letters_as_positions``: every standalone capital A-E (not part of a word, as in "B", "**C**", "(D)",
"Answer: E") becomes the position it marks, and the result is parsed like a digit-labelled reply, so cues,
hedges, refusals and ambiguity work as for numbers. Full-width letters (Ａ-Ｅ) and a lower-case letter in
parentheses ("(c)") count too. An "A" followed by a
lower-case word ("A reasonable choice is D", "A good manager…", Slovak "A tiež…") is the article (or "and"), not a
letter; before a conjunction or a verb it is the letter ("A or B", "A is closest"). A reply naming the label
after an article-like "A" ("A strongly agree") is still read by the label. Words-only prompts need nothing here:
the parser already matches option words.
"""

from __future__ import annotations

import re

from runner.survey.cell import LETTERS

__all__ = ["letters_as_positions"]

# A capital letter standing alone, or a lower-case one in parentheses ("(c)": how some models write the label).
_LETTER = re.compile(r"(?<![A-Za-z\u00c0-\u024f])([A-EＡ-Ｅ])(?![A-Za-z\u00c0-\u024f'])|\(([a-e])\)")
# "A reasonable …": what follows an article "A" (not a conjunction or verb, which follow the letter: "A or B", "A is")
_NOT_ARTICLE = r"(?:or|and|to|vs|is|was|would|seems|fits|because|since|as|but|for|alebo|aj|je|lebo|až)\b"
_ARTICLE = re.compile(rf"[ \t]+(?!{_NOT_ARTICLE})[a-z\u00df-\u024f]")
_FULL_WIDTH_A = ord("Ａ")


def letters_as_positions(text: str) -> str:
    """``text`` with each standalone capital A-E (or Ａ-Ｅ, or "(c)") replaced by its position digit 1-5, but an
    article "A"."""
    pieces, at = [], 0
    for m in _LETTER.finditer(text):
        letter = m.group(1)
        if letter is None:  # "(c)"
            pieces += [text[at : m.start(2)], str(LETTERS.index(m.group(2).upper()) + 1)]
            at = m.end(2)
            continue
        position = ord(letter) - _FULL_WIDTH_A if letter >= "Ａ" else LETTERS.index(letter)
        if position == 0 and _ARTICLE.match(text, m.end()):
            continue
        pieces += [text[at : m.start()], str(position + 1)]
        at = m.end()
    return "".join(pieces) + text[at:] if pieces else text
