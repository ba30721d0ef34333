"""JSON inside a reply: a bare object, one in a ```json fence, or one followed by chatter."""

from __future__ import annotations

import json
from typing import Any

_DECODER = json.JSONDecoder()


def first_json(text: str, opener: str = "{", decoder: json.JSONDecoder = _DECODER) -> Any | None:
    """The first JSON value starting at an ``opener`` ("{" or "[") in ``text`` that decodes, else None.

    Tries at most the first four openers, so a reply full of braces costs little. Total: JSON nested deeper
    than the decoder's recursion limit, or an integer too long to convert, is "no JSON" (None), not an error.
    ``decoder``: another decoder (one that keeps an object's duplicate keys, say).
    """
    start = text.find(opener)
    tries = 0
    while start != -1 and tries < 4:
        try:
            value, _ = decoder.raw_decode(text, start)
            return value
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested past the C decoder's limit
            tries += 1
            start = text.find(opener, start + 1)
    return None
