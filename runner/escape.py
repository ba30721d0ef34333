"""Escaping by construction: one function per output format that a string from a spec, a server or a reply reaches.

Every such string is data. Each output format has exactly one function here, and every writer of that format
calls it (the safe path is the only path):

- HTML: ``html(template, *values)`` builds markup from a literal template and escapes every value (text and
  attribute alike; MarkupSafe's ``Markup``), unless the value is already markup built the same way. Joining
  with ``html_join`` escapes plain strings too, so a forgotten escape shows tags as text instead of running them.
  A value's characters that are not text (controls, bidi overrides, noncharacters) are shown as escapes
  (``\\u202e``): no name can reverse or hide the text around it.
- LaTeX: ``latex`` escapes every special character (``\\ { } $ & % # _ ^ ~`` and the ones OT1 fonts misprint)
  and writes only printable ASCII: accented Latin letters become accent commands, other characters ``U+XXXX``.
  No input can form a control sequence, TeX's ``^^`` notation or a math shift: a table uses only LaTeX's own
  text commands (any engine) and never reads a file.
- Markdown: ``markdown`` backslash-escapes the characters that make links, emphasis, code, math, HTML and table
  cells, and turns line breaks and other characters that are not text into spaces: a cell stays one cell of
  plain text.
- CSV: ``csv_cells`` neutralises cells a spreadsheet would evaluate as a formula — text beginning with
  ``= + - @``, a tab or a carriage return gets a leading ``'`` (OWASP's advice; plain numbers such as ``-0.5``
  are left alone). Machine pipelines may opt out (``hofcat export --format csv --raw``); Parquet always keeps
  raw values.
- Figure text: ``figure_text`` keeps matplotlib from reading ``$…$`` as mathtext and replaces characters that
  are not text (controls; U+FFFE, which no SVG file may hold), so a label is drawn as written and can neither
  crash nor restyle a figure nor break its SVG.
- File names: ``file_name`` derives a safe slug plus a short hash from any string (slashes, dots, NUL, any
  length or script); a name never becomes a path, and two names never share a file.
- Condition labels (``model=a, temperature=0.5``, the analysis' names of conditions, sets and strata):
  ``condition_label`` JSON-quotes a level holding ``,`` or ``"``, so a name cannot pose as more factors and two
  conditions never share a label; ``label_parts`` reads one back.
- Terminal: ``terminal`` writes control characters (ANSI/OSC escape sequences, carriage returns, bidi overrides)
  as visible JSON escapes (``\\u001b``: JSON a command prints stays valid). The ``hofcat`` command writes all
  its output through ``TerminalText`` (``terminal_streams``), so no run name, endpoint name or server message
  can drive the terminal.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO

import markupsafe
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "Markup",
    "TerminalText",
    "condition_label",
    "csv_cell",
    "csv_cells",
    "figure_text",
    "file_name",
    "html",
    "html_join",
    "label_parts",
    "label_value",
    "latex",
    "markdown",
    "terminal",
    "terminal_process",
    "terminal_stream",
    "terminal_streams",
    "unwrapped",
    "visible",
]


# --- characters that are not text ------------------------------------------------------------------------

# Controls (C0, C1: ESC starts terminal sequences), format characters (bidi overrides and isolates, zero-width),
# line and paragraph separators, surrogates (an undecodable byte of a file name).
_NOT_TEXT = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


# Format characters that are part of writing itself, kept: the zero-width non-joiner and joiner shape Persian,
# Arabic and Indic words and join emoji; they neither reorder nor hide the text around them.
_JOINERS = frozenset("\u200c\u200d")


def _not_text(char: str) -> bool:
    """Whether ``char`` acts on the text around it instead of being shown: a control, format (but a joiner) or
    separator character, a surrogate, or a noncharacter (U+FDD0-U+FDEF, U+xFFFE, U+xFFFF: XML and SVG refuse
    U+FFFE)."""
    code = ord(char)
    return (
        (unicodedata.category(char) in _NOT_TEXT and char not in _JOINERS)
        or 0xFDD0 <= code <= 0xFDEF
        or code & 0xFFFE == 0xFFFE
    )


def visible(text: str, keep: str = "") -> str:
    """``text`` with each character that is not text (but those in ``keep``) as its JSON escape (``\\u001b``,
    ``\\u202e``): what was there stays readable, nothing acts on what surrounds it, and JSON a command prints
    stays valid JSON with the same values."""
    # the usual cases at C speed: printable text excludes every character escaped here (and line breaks and
    # tabs, so many-line text kept as it is is checked without them)
    if text.isprintable() or (keep and text.translate(_DROP.get(keep) or _drop(keep)).isprintable()):
        return text
    return "".join(_json_escape(c) if c not in keep and _not_text(c) else c for c in text)


_DROP: dict[str, dict[int, None]] = {}


def _drop(keep: str) -> dict[int, None]:
    """The ``str.translate`` table deleting ``keep``'s characters (made once per ``keep``)."""
    return _DROP.setdefault(keep, dict.fromkeys(map(ord, keep)))


def _json_escape(char: str) -> str:
    """``char`` as JSON's ``\\uXXXX`` (a surrogate pair past U+FFFF)."""
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


# --- HTML ------------------------------------------------------------------------------------------------


class Markup(markupsafe.Markup):
    """MarkupSafe's ``Markup`` whose escaping also shows a value's characters that are not text as escapes
    (``visible``): a bidi override in a model's name cannot reverse the sentence it is quoted in."""

    __slots__ = ()

    @classmethod
    def escape(cls, s: object) -> Markup:
        """``s`` escaped (markup kept as it is); the one escape every ``Markup`` operation calls."""
        if not hasattr(s, "__html__"):
            s = visible(str(s), keep="\t\n\r")  # HTML's own white space stays
        return cls(markupsafe.escape(s))


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


# Where a line's start would open a block — a list item (``- x``, ``+``, ``1. x``), a thematic break (``---``), a
# setext underline (``=``) — a backslash goes before the marker; a number such as ``-0.5`` or ``1.5`` opens none.
_BLOCK_START = re.compile(r"^(?:(?=[-+][ \t]|[-+]$|=|-[- \t]*$)|\d{1,9}(?=\.(?:[ \t]|$)))")


def markdown(text: str) -> str:
    """``text`` as the plain text of one Markdown table cell or line: no markup, no raw HTML, no line breaks,
    nothing that starts a block (leading blanks, which would start a code block, are dropped)."""
    line = "".join(" " if _not_text(c) else c for c in " ".join(text.splitlines())).lstrip(" \t")
    return _BLOCK_START.sub(lambda m: m[0] + "\\", _MARKDOWN.sub(r"\\\1", line))


# --- CSV -------------------------------------------------------------------------------------------------

_FORMULA = r"^[=+\-@\t\r]"  # what makes Excel, LibreOffice and Google Sheets evaluate a cell
_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"  # a plain number stays as it is: nothing to evaluate


def csv_cell(text: str) -> str:
    """One CSV cell a spreadsheet shows as written: a cell that would be read as a formula gets a leading ``'``."""
    if re.match(_FORMULA, text) and not re.match(_NUMBER, text):
        return "'" + text
    return text


def csv_cells(table: pa.Table) -> pa.Table:
    """``table`` with ``csv_cell`` applied to every text column (vectorised; other columns unchanged) and to the
    column names, which become the header row (a table pivoted on a level is named by it)."""
    columns = []
    for field, col in zip(table.schema, table.columns, strict=True):
        if pa.types.is_dictionary(field.type):
            col = col.cast(field.type.value_type)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            risky = pc.and_(pc.match_substring_regex(col, _FORMULA), pc.invert(pc.match_substring_regex(col, _NUMBER)))
            quote, joint = pa.scalar("'", col.type), pa.scalar("", col.type)
            col = pc.if_else(risky, pc.binary_join_element_wise(quote, col, joint), col)
        columns.append(col)
    return pa.Table.from_arrays(columns, names=[csv_cell(name) for name in table.column_names])


# --- figure text -----------------------------------------------------------------------------------------


def figure_text(text: str) -> str:
    """``text`` for a matplotlib label, title or tick: ``$`` escaped (never mathtext), control characters as
    spaces."""
    clean = "".join(" " if c != "\n" and _not_text(c) else c for c in text)
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


# --- condition labels ------------------------------------------------------------------------------------


def label_value(value: object) -> str:
    """A level as a condition label writes it: ``str(value)``, JSON-quoted when it holds ``,`` or ``"`` (which
    would let a model called ``a, endpoint=b`` read as two factors)."""
    text = str(value)
    return json.dumps(text, ensure_ascii=False) if "," in text or '"' in text else text


def condition_label(pairs: Iterable[tuple[str, object]]) -> str:
    """``factor=level`` pairs joined by ``, `` (``model=a, temperature=0.5``), each level through ``label_value``:
    distinct pairs give distinct labels."""
    return ", ".join(f"{factor}={label_value(value)}" for factor, value in pairs)


def label_parts(label: str) -> dict[str, str]:
    """The ``factor → level`` pairs of a ``condition_label`` (quoted levels unquoted); {} for 'all'."""
    parts: dict[str, str] = {}
    i = 0
    while (eq := label.find("=", i)) != -1:
        parts[label[i:eq]], end = _level_at(label, eq + 1)
        i = end + 2
    return parts


def _level_at(label: str, start: int) -> tuple[str, int]:
    """The level beginning at ``label[start]`` and where it ends: a JSON string, else the text up to ``, ``
    (also a raw '"' in a label written before levels were quoted)."""
    if label.startswith('"', start):
        try:
            value, end = json.JSONDecoder().raw_decode(label, start)
        except ValueError:
            pass
        else:
            if end == len(label) or label.startswith(", ", end):
                return value, end
    end = label.find(", ", start)
    end = len(label) if end == -1 else end
    return label[start:end], end


# --- terminal --------------------------------------------------------------------------------------------


def terminal(text: str) -> str:
    """``text`` as a terminal shows it and never obeys it: controls (ESC, CR, BEL), bidi overrides and other
    characters that are not text as visible escapes; line breaks and tabs stay."""
    return visible(text, keep="\n\t")


class TerminalText(io.TextIOBase):
    """A text stream that writes ``terminal(text)`` of everything written to it to ``target``."""

    def __init__(self, target: TextIO) -> None:
        self.target = target

    def write(self, text: str) -> int:
        """Write ``text`` with its control characters shown as escapes; the characters taken."""
        self.target.write(terminal(text))
        return len(text)

    def flush(self) -> None:
        """Flush the target (a reader that went away raises here, as it would without the wrapper)."""
        self.target.flush()

    def writable(self) -> bool:
        """Always: a stream for output."""
        return True

    def close(self) -> None:
        """Nothing: the target belongs to whoever opened it (a wrapper collected late must not flush a closed one)."""

    def isatty(self) -> bool:
        """Whether the target is a terminal (the live progress display asks)."""
        return self.target.isatty()

    def fileno(self) -> int:
        """The target's file descriptor."""
        return self.target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The target's encoding."""
        return self.target.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        """The target's error handler."""
        return self.target.errors


def terminal_stream(stream: TextIO) -> TextIO:
    """``stream`` as a ``TerminalText`` (itself when it is one already; None, a process without one, stays)."""
    return stream if stream is None or isinstance(stream, TerminalText) else TerminalText(stream)


def unwrapped(stream: TextIO) -> TextIO:
    """The stream under a ``TerminalText`` (for a writer of its own control sequences, such as rich), else
    ``stream``; what it writes must pass through ``terminal`` itself."""
    return stream.target if isinstance(stream, TerminalText) else stream


def terminal_process() -> None:
    """This process's ``sys.stdout`` and ``sys.stderr`` as ``TerminalText`` for good (the console script): also
    the interpreter's traceback of an unexpected error, printed after a command's own streams are restored."""
    sys.stdout, sys.stderr = terminal_stream(sys.stdout), terminal_stream(sys.stderr)


@contextmanager
def terminal_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as ``TerminalText`` while the block runs (then as they were)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = terminal_stream(saved[0]), terminal_stream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
