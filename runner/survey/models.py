"""Is the model a server says answered the model the spec asked for? One rule for the sweep and the analysis.

Providers answer a request for a model family with a dated or numbered snapshot of it: OpenAI ``gpt-4o`` →
``gpt-4o-2024-08-06`` (and ``gpt-4-0613``), Anthropic ``claude-3-5-sonnet`` → ``claude-3-5-sonnet-20240620``,
Gemini ``gemini-1.5-flash`` → ``gemini-1.5-flash-002`` (sometimes as ``models/…``), Vertex ``…@20240620``. Those
count as the model asked for; anything else (a local server that answers every request with the one model it
loaded, a typo a gateway mapped to a default) does not, unless the spec lists it in the endpoint's
``served_models`` (``["*"]`` accepts any).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["SNAPSHOT", "is_requested_model"]

# what may follow "<requested>-" (or "@") in a snapshot's name: a date, a compact date, MMDD, a 3-digit version
SNAPSHOT = re.compile(r"(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|\d{3}|latest)")


def is_requested_model(requested: str, served: str, accepted: Iterable[str] = ()) -> bool:
    """True when ``served`` (the reply's model) is ``requested``, a snapshot of it (module docstring), or listed
    in ``accepted`` (``"*"``: any)."""
    accepted = tuple(accepted)
    if served == requested or served in accepted or "*" in accepted:
        return True
    name = served.removeprefix("models/")
    if name == requested.removeprefix("models/"):
        return True
    base = requested.removeprefix("models/")
    tail = name[len(base) + 1 :]
    return name[: len(base) + 1] in (base + "-", base + "@") and SNAPSHOT.fullmatch(tail) is not None
