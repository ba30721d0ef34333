"""Data strings on their way into the report, one function per output format.

Every string that comes from a spec, a server or the analysis passes through the function of the format it lands
in, so that it is shown as written and never read as markup: ``html_text`` for the page, ``figure_text`` for
matplotlib (where ``$`` would start mathematics).
"""

from __future__ import annotations

import html

__all__ = ["figure_text", "html_text"]


def html_text(value: object) -> str:
    """``value`` as HTML text or attribute content (``&<>"'`` escaped)."""
    return html.escape(str(value), quote=True)


def figure_text(value: object) -> str:
    """``value`` as matplotlib text shown literally: each ``$`` escaped (two would start mathtext; matplotlib
    turns an escaped one back into ``$`` and leaves other backslashes as they are)."""
    return str(value).replace("$", r"\$")
