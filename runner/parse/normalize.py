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


# Reasoning traces, in the forms reasoning models and their servers print them (all on normalised text):
# <think>/<thinking>/<thought>/<reasoning> blocks, <|begin_of_thought|> … <|end_of_thought|>, Kimi's ◁think▷ … ◁/think▷,
# and Ollama's "Thinking... … ...done thinking." An unclosed block runs to the end (a truncated reply). Each block is
# one lazy match that ends at its closing tag or the end of the text, so the pass is linear.
_REASONING = re.compile(
    r"<(think|thinking|thought|reasoning)>.*?(?:</\1>|$)|<\|begin_of_thought\|>.*?(?:<\|end_of_thought\|>|$)|"
    r"◁think▷.*?(?:◁/think▷|$)|\A\s*thinking(?:\.\.\.|…)[ \t]*\n.*?(?:(?:\.\.\.|…)done thinking\.?|$)",
    re.DOTALL,
)
# Where a reasoning trace may stand (cheap substring tests before the regex runs at all).
_REASONING_HINTS = ("<think", "<thought", "<reasoning", "begin_of_thought", "\u25c1think", "thinking...", "thinking…")
# A closing tag with no opening one: servers that put "<think>" in the prompt (DeepSeek-R1 distills under vLLM or
# Ollama templates) return the reasoning followed by "</think>" and the answer.
_CLOSERS = ("</think>", "</thinking>", "</thought>", "</reasoning>", "<|end_of_thought|>", "\u25c1/think\u25b7")


def without_reasoning(normalized: str) -> str:
    """``normalized`` without its reasoning trace (see ``_REASONING``; an unclosed one runs to the end), stripped.

    Reasoning models weigh several options before answering; only the text after the trace is the reply. Text
    before an unmatched closing tag ("… </think> 3") is the trace too.
    """
    t = normalized
    if "<" not in t and "\u25c1" not in t and "thinking" not in t:  # every trace form holds one of these
        return t.strip()
    if any(hint in t for hint in _REASONING_HINTS):
        t = _REASONING.sub(" ", t)
    cut = max(t.rfind(closer) + len(closer) if closer in t else -1 for closer in _CLOSERS)
    if cut > 0:
        t = t[cut:]
    return t.strip()
