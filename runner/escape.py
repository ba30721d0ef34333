"""Escaping by construction: one function per output format that a string from a spec, a server or a reply reaches.

Every such string is data. Each output format has exactly one function here, and every writer of that format
calls it (the safe path is the only path):

- HTML: ``html(template, *values)`` builds markup from a literal template and escapes every value (text and
  attribute alike; MarkupSafe's ``Markup``), unless the value is already markup built the same way. Joining
  with ``html_join`` escapes plain strings too, so a forgotten escape shows tags as text instead of running them.
- LaTeX: ``latex`` escapes every special character (``\\ { } $ & % # _ ^ ~`` and the ones OT1 fonts misprint)
  and writes only printable ASCII: accented Latin letters become accent commands, other characters ``U+XXXX``.
  No input can form a control sequence, TeX's ``^^`` notation or a math shift: a table uses only LaTeX's own
  text commands (any engine) and never reads a file.
- Markdown: ``markdown`` backslash-escapes the characters that make links, emphasis, code, math, HTML and table
  cells, and turns line breaks into spaces: a cell stays one cell of plain text.
- CSV: ``csv_cells`` neutralises cells a spreadsheet would evaluate as a formula — text beginning with
  ``= + - @``, a tab or a carriage return gets a leading ``'`` (OWASP's advice; plain numbers such as ``-0.5``
  are left alone). Machine pipelines may opt out (``hofcat export --format csv --raw``); Parquet always keeps
  raw values.
- Figure text: ``figure_text`` keeps matplotlib from reading ``$…$`` as mathtext and replaces control
  characters, so a label is drawn as written and can neither crash nor restyle a figure.
- File names: ``file_name`` derives a safe slug plus a short hash from any string (slashes, dots, NUL, any
  length or script); a name never becomes a path, and two names never share a file.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc
from markupsafe import Markup

__all__ = ["Markup", "csv_cell", "csv_cells", "figure_text", "file_name", "html", "html_join", "latex", "markdown"]


# --- HTML ------------------------------------------------------------------------------------------------


def html(template: str, /, *values: object, **named: object) -> Markup:
    """Markup from a literal ``str.format`` template: every value escaped unless it is already ``Markup``."""
    return Markup(template).format(*values, **named)


def html_join(parts: Iterable[object], separator: str = "") -> Markup:
    """``parts`` joined as markup: ``Markup`` parts kept, anything else escaped."""
    return Markup(separator).join(parts)


# --- LaTeX -----------------------------------------------------------------------------------------------

_LATEX = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "^": r"\textasciicircum{}",  # with ``^`` escaped no input can spell TeX's ^^5c (a backslash) notation
    "~": r"\textasciitilde{}",
    "<": r"\textless{}",  # OT1 fonts print < > | as other glyphs
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}
# Combining marks LaTeX's own accent commands draw in every font encoding, and letters that do not decompose.
_ACCENTS = {
    "\u0300": "`",
    "\u0301": "'",
    "\u0302": "^",
    "\u0303": "~",
    "\u0304": "=",
    "\u0306": "u",
    "\u0307": ".",
    "\u0308": '"',
    "\u030a": "r",
    "\u030b": "H",
    "\u030c": "v",
    "\u0327": "c",
}
_LETTERS = {"ß": r"\ss{}", "æ": r"\ae{}", "Æ": r"\AE{}", "ø": r"\o{}", "Ø": r"\O{}", "œ": r"\oe{}", "Œ": r"\OE{}"}
_LETTERS |= {"ł": r"\l{}", "Ł": r"\L{}", "ı": r"\i{}"}


def latex(text: str) -> str:
    """``text`` as LaTeX that prints it: specials escaped, printable ASCII only (accents as commands, other
    characters as ``U+XXXX``), control characters and line breaks as spaces."""
    out = []
    for char in text:
        if char in _LATEX:
            out.append(_LATEX[char])
        elif " " <= char <= "~":
            out.append(char)
        elif char in _LETTERS:
            out.append(_LETTERS[char])
        elif unicodedata.category(char)[0] in "CZ":  # controls, format characters, separators
            out.append(" ")
        else:
            out.append(_latex_letter(char))
    return "".join(out)


def _latex_letter(char: str) -> str:
    """One non-ASCII character: an ASCII letter under accent commands where it decomposes so, else U+XXXX."""
    base, *marks = unicodedata.normalize("NFD", char)
    if " " < base <= "~" and base.isalpha() and marks and all(m in _ACCENTS for m in marks):
        if base in "ij" and marks:
            base = "\\" + base  # dotless i/j under an accent
        for mark in marks:
            base = f"\\{_ACCENTS[mark]}{{{base}}}"
        return base
    return f"U+{ord(char):04X}"


# --- Markdown --------------------------------------------------------------------------------------------

# Every ASCII punctuation character CommonMark / GitHub-flavoured Markdown gives a meaning inside a line:
# emphasis, code, links and images, autolinks and raw HTML, entities, strikethrough, math, table cells.
_MARKDOWN = re.compile(r"([\\`*_\[\]<>()!|~&$#{}])")


def markdown(text: str) -> str:
    """``text`` as the plain text of one Markdown table cell or line: no markup, no raw HTML, no line breaks."""
    return _MARKDOWN.sub(r"\\\1", " ".join(text.splitlines()) if text else text).replace("\x00", " ")


# --- CSV -------------------------------------------------------------------------------------------------

_FORMULA = r"^[=+\-@\t\r]"  # what makes Excel, LibreOffice and Google Sheets evaluate a cell
_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"  # a plain number stays as it is: nothing to evaluate


def csv_cell(text: str) -> str:
    """One CSV cell a spreadsheet shows as written: a cell that would be read as a formula gets a leading ``'``."""
    if re.match(_FORMULA, text) and not re.match(_NUMBER, text):
        return "'" + text
    return text


def csv_cells(table: pa.Table) -> pa.Table:
    """``table`` with ``csv_cell`` applied to every text column (vectorised; other columns unchanged)."""
    columns = []
    for field, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_dictionary(field.type):
            col = col.cast(field.type.value_type)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            risky = pc.and_(pc.match_substring_regex(col, _FORMULA), pc.invert(pc.match_substring_regex(col, _NUMBER)))
            quote, joint = pa.scalar("'", col.type), pa.scalar("", col.type)
            col = pc.if_else(risky, pc.binary_join_element_wise(quote, col, joint), col)
        columns.append(col)
    return pa.Table.from_arrays(columns, names=table.column_names)


# --- figure text -----------------------------------------------------------------------------------------


def figure_text(text: str) -> str:
    """``text`` for a matplotlib label, title or tick: ``$`` escaped (never mathtext), control characters as
    spaces."""
    clean = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and c != "\n" else c for c in text)
    return clean.replace("$", r"\$")


# --- file names ------------------------------------------------------------------------------------------

_SLUG_CHARS = 40  # the readable part of a file name; the hash keeps names apart


def file_name(text: str, suffix: str = "") -> str:
    """A file name (and HTML id) for ``text``: its ASCII letters, digits, ``.-_`` as a slug of at most 40
    characters, then ``-`` and 8 hex digits of its SHA-256, then ``suffix`` (``"llama/3" → "llama-3-1c9f…"``)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", ascii_text).strip(".-")[:_SLUG_CHARS].strip(".-")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug or 'name'}-{digest}{suffix}"
