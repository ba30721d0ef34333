"""Normalisation of reply text and labels into one comparable form (the raw reply is never changed).

Digits: Arabic-Indic (٠-٩), Extended Arabic-Indic (۰-۹) and full-width (０-９) become ASCII, as does all of the
full-width ASCII block (：（）．). Arabic: diacritics and tatweel are dropped and alef/yeh/teh-marbuta variants
folded, so "جداً" matches "جدا". Latin text is lower-cased; Slovak diacritics are kept (they distinguish words).
Every transformation maps one character to at most one character, so positions stay comparable.
"""

from __future__ import annotations

import re

_TABLE: dict[int, int | None] = {}
for _base in (0x0660, 0x06F0, 0xFF10):  # Arabic-Indic, Extended Arabic-Indic, full-width digits
    for _i in range(10):
        _TABLE[_base + _i] = ord("0") + _i
for _code in range(0xFF01, 0xFF5F):  # the rest of the full-width ASCII block
    _TABLE.setdefault(_code, _code - 0xFEE0)
_TABLE.update(
    {
        0x3000: ord(" "),  # ideographic space
        0x3001: ord(","),
        0x060C: ord(","),
        0x061B: ord(";"),
        0x061F: ord("?"),  # 、 ، ؛ ؟
        0x3002: ord("."),
        0x066B: ord("."),  # 。 and the Arabic decimal separator
        0x2018: ord("'"),
        0x2019: ord("'"),
        0x201C: ord('"'),
        0x201D: ord('"'),
        0x300C: ord('"'),
        0x300D: ord('"'),
        0x2013: ord("-"),
        0x2014: ord("-"),
        0x2212: ord("-"),  # en dash, em dash, minus
        0x00A0: ord(" "),
        0x200F: None,
        0x200E: None,
        0x200B: None,
        0x0640: None,  # nbsp, RTL/LTR marks, tatweel
        0x0622: 0x0627,
        0x0623: 0x0627,
        0x0625: 0x0627,
        0x0671: 0x0627,  # alef variants -> alef
        0x0649: 0x064A,
        0x0629: 0x0647,  # alef maksura -> yeh, teh marbuta -> heh
    }
)
for _code in range(0x064B, 0x0653):  # Arabic diacritics (tanween, harakat, shadda, sukun)
    _TABLE[_code] = None
_TABLE[0x0670] = None  # superscript alef

# Anything but letters and digits, for comparing a whole reply with a label ("**Disagree**." == "disagree").
_NON_WORD = re.compile(r"[\W_]+")


def normalize(text: str) -> str:
    """``text`` with digits made ASCII, Arabic folded and letters lower-cased (see module docstring)."""
    if text.isascii():  # most replies: nothing to map, and translate() walks every character
        return text.lower()
    return text.translate(_TABLE).lower()


def bare(text: str) -> str:
    """``normalize(text)`` without punctuation, markup or spaces: the key for whole-reply label matches."""
    return squash(normalize(text))


def squash(normalized: str) -> str:
    """Already normalised text without punctuation, markup or spaces."""
    return _NON_WORD.sub("", normalized)


_REASONING = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|$)", re.DOTALL)


def without_reasoning(normalized: str) -> str:
    """``normalized`` without reasoning blocks (``<think>…</think>``; an unclosed one runs to the end), stripped.

    Reasoning models weigh several options before answering; only the text after the block is the reply.
    """
    return _REASONING.sub(" ", normalized).strip()
