"""runner/escape.py: each output format's one escaping function, checked against that format's own rules.

LaTeX output is tokenised as TeX reads it (only the control sequences hofcat writes may appear, every special is
escaped, braces balance), Markdown output as CommonMark reads a line (every special is backslash-escaped), figure
text through matplotlib's own mathtext test, CSV cells against the spreadsheet formula rule, HTML through
MarkupSafe's escaping, file names against POSIX path rules.
"""

from __future__ import annotations

import io
import re
import string
import sys
import unicodedata

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.escape import (
    Markup,
    TerminalText,
    csv_cell,
    csv_cells,
    figure_text,
    file_name,
    html,
    html_join,
    latex,
    markdown,
    terminal,
    terminal_stream,
)

# Hostile strings of every class the outputs meet; the property tests add arbitrary text.
PAYLOADS = [
    r"^^5cinput^^7b/etc/passwd^^7d",
    r"\input{/etc/passwd}",
    r"\immediate\write18{touch /tmp/pwned}",
    r"$x^2$ ~ {} & % _ # \\ \relax",
    "^^M^^J^^^^",
    '<img src=x onerror="alert(1)">',
    "\"'><script>alert(1)</script>",
    "[x](javascript:alert(1)) | <b>bold</b> `code` *em* ~~s~~ $m$",
    '=HYPERLINK("http://evil")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\tTAB",
    "\rCR",
    r"$\undefinedmacro$",
    "meta-llama/Llama-3.1-8B",
    "../../etc/passwd",
    "a\x00b",
    "",
    ".",
    "..",
    "Ünïcödé ß Æ ł 中文 العربية 🙂 \u202e\u200b",
    "line\nbreak\r\nand\x0bmore",
    "\x1b]0;title\x07\x1b[2J\x1b[31mred\x1b]52;c;cHduZWQ=\x07\x1b]8;;https://evil\x1b\\link\x1b]8;;\x1b\\",
    "[/] [bold]b[/bold] [link=https://evil]x[/link]",  # rich's console markup
    "x\ufffey\uffff\ufdd0\u2028\u2066\u200f",
]
LONG = "<b>$x$ \x1b[2J\u202e |=@" * 6_250  # 10^5 characters, hostile throughout
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)


def _not_text(char: str) -> bool:
    """A character that acts instead of showing: control, format, separator, surrogate, noncharacter."""
    code = ord(char)
    noncharacter = 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE
    return unicodedata.category(char) in {"Cc", "Cf", "Cs", "Zl", "Zp"} or noncharacter


# --- LaTeX -------------------------------------------------------------------------------------------------

_COMMANDS = {"textbackslash", "textasciicircum", "textasciitilde", "textless", "textgreater", "textbar"}
_COMMANDS |= {"ss", "ae", "AE", "o", "O", "oe", "OE", "l", "L", "i", "j"}
_ACCENT_SYMBOLS = set("`'^~=.\"")
_ACCENT_WORDS = {"u", "r", "H", "v", "c"}
_ESCAPED_SYMBOLS = set("{}$&%#_")


def _tex_tokens_ok(tex: str) -> None:
    """Read ``tex`` as TeX does with standard catcodes; fail on anything but the sequences ``latex`` writes."""
    assert all(" " <= c <= "~" for c in tex), "only printable ASCII"
    assert "^^" not in tex.replace(r"\textasciicircum{}", "")
    depth, i = 0, 0
    while i < len(tex):
        c = tex[i]
        if c == "\\":
            word = re.match(r"[A-Za-z]+", tex[i + 1 :])
            if word:
                name = word.group()
                assert name in _COMMANDS | _ACCENT_WORDS, f"control word \\{name} in {tex!r}"
                i += 1 + len(name)
                if name in _ACCENT_WORDS:
                    assert tex[i] == "{", "an accent command takes a braced letter"
                elif name not in {"i", "j"} or tex[i] == "{":
                    assert tex[i : i + 2] == "{}", f"\\{name} ends with {{}}"
                continue
            symbol = tex[i + 1]
            assert symbol in _ESCAPED_SYMBOLS | _ACCENT_SYMBOLS, f"control symbol \\{symbol}"
            if symbol in _ACCENT_SYMBOLS:
                assert tex[i + 2] == "{", "an accent takes a braced letter"
            i += 2
            continue
        assert c not in "$&%#^_~", f"unescaped {c!r} in {tex!r}"  # math, alignment, comment, parameter, ...
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            assert depth >= 0, "unbalanced braces"
        i += 1
    assert depth == 0, "unbalanced braces"


@pytest.mark.parametrize("text", PAYLOADS)
def test_latex_writes_only_sequences_that_print_text(text):
    _tex_tokens_ok(latex(text))


@settings(deadline=None)  # timing on a busy machine says nothing about escaping
@given(TEXT)
def test_latex_of_any_text_reads_as_plain_text_in_tex(text):
    _tex_tokens_ok(latex(text))


def test_latex_keeps_plain_ascii_and_spells_the_rest_readably():
    plain = "".join(c for c in string.ascii_letters + string.digits + " .,;:!?()[]+-=/'@*") + '"`'
    assert latex(plain) == plain
    assert latex("^^5c") == r"\textasciicircum{}\textasciicircum{}5c"
    assert latex("é ï í ç ß ł") == r"\'{e} \"{\i} \'{\i} \c{c} \ss{} \l{}"
    assert latex("中🙂") == "U+4E2DU+1F642"
    assert latex("a\nb\x00c\u202ed") == "a b c d"


# --- Markdown ----------------------------------------------------------------------------------------------

_MARKDOWN_SPECIALS = set("\\`*_[]<>()!|~&$#{}")


def _markdown_plain(text: str) -> None:
    """Every Markdown special character in ``text`` is backslash-escaped (CommonMark: then it is literal)."""
    assert "\n" not in text and "\r" not in text
    i = 0
    while i < len(text):
        if text[i] == "\\":
            # CommonMark: a backslash before ASCII punctuation makes it literal (``\\-`` where a line would open a list)
            assert i + 1 < len(text) and text[i + 1] in string.punctuation, f"stray backslash in {text!r}"
            i += 2
            continue
        assert text[i] not in _MARKDOWN_SPECIALS, f"unescaped {text[i]!r} in {text!r}"
        i += 1


@pytest.mark.parametrize("text", PAYLOADS)
def test_markdown_cells_hold_no_markup_html_or_cell_breaks(text):
    _markdown_plain(markdown(text))


@settings(deadline=None)  # timing on a busy machine says nothing about escaping
@given(TEXT)
def test_markdown_of_any_text_is_one_plain_cell(text):
    out = markdown(text)
    _markdown_plain(out)
    unescaped = re.sub(r"\\(.)", r"\1", out)  # what CommonMark shows
    assert unescaped == "".join(" " if _not_text(c) else c for c in " ".join(text.splitlines())).lstrip(" \t")


BLOCK_STARTS = ["- item", "+ item", "-", "1. first", "12.", "    code", "\tcode", "---", "- - -", "=", "> quote"]
BLOCK_STARTS += ["# head", "```", "~~~", "<div>", "[a]: https://evil", "* item", "| a |", "|---|", "***"]


@pytest.mark.parametrize("text", PAYLOADS + BLOCK_STARTS + ["-0.5", "1.5", "+3"])
def test_markdown_renders_as_one_paragraph_or_cell_of_its_own_text(text):
    from markdown_it import MarkdownIt  # CommonMark with GFM tables (rich's own Markdown reader)

    out = markdown(text)
    doc = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(f"{out}\n\n| h |\n|---|\n| {out} |\n")
    blocks = [t.type for t in doc if t.level == 0 and t.nesting >= 0]
    assert blocks == (["paragraph_open", "table_open"] if out else ["table_open"]), (text, blocks)
    inline = [t for t in doc if t.type == "inline"]
    shown = "".join(" " if _not_text(c) else c for c in " ".join(text.splitlines())).lstrip(" \t").rstrip(" \t")
    for token in inline[:1] if out else []:  # the line: one plain text run, exactly the text
        assert [c.type for c in token.children] == ["text"] * len(token.children)
        assert "".join(c.content for c in token.children) == shown
    assert markdown("-0.5") == "-0.5" and markdown("1.5") == "1.5"  # numbers in cells stay as they are


# --- CSV ---------------------------------------------------------------------------------------------------

_EVALUATED = tuple("=+-@\t\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _spreadsheet_safe(cell: str) -> bool:
    return not cell.startswith(_EVALUATED) or bool(_NUMBER.fullmatch(cell))


@pytest.mark.parametrize("text", PAYLOADS)
def test_csv_cells_a_spreadsheet_would_evaluate_get_a_quote(text):
    out = csv_cell(text)
    assert _spreadsheet_safe(out)
    assert out == text or out == "'" + text


def test_csv_leaves_numbers_and_plain_text_alone():
    for text in ("-0.5", "+3", "1e-3", "-.5", "plain", "a=b", "'quoted"):
        assert csv_cell(text) == text
    for text in ("-1+2", "=1", "@x", "-", "+", "\t1"):
        assert csv_cell(text) == "'" + text


@settings(deadline=None)  # pyarrow's regex kernels compile per call: slow on a busy machine, never wrong
@given(st.lists(st.one_of(st.none(), TEXT, st.sampled_from(PAYLOADS)), max_size=30))
def test_csv_cells_of_a_table_are_the_cells_one_by_one(values):
    table = pa.table({"text": pa.array(values, pa.string()), "n": pa.array(range(len(values)), pa.int64())})
    out = csv_cells(table)
    assert out.column("text").to_pylist() == [None if v is None else csv_cell(v) for v in values]
    assert out.column("n").equals(table.column("n"))
    for other in (pa.array(values, pa.string()).dictionary_encode(), pa.array(values, pa.large_string())):
        assert csv_cells(pa.table({"text": other})).column("text").to_pylist() == out.column("text").to_pylist()


def test_csv_header_row_a_pivot_names_by_its_levels_is_neutralised_too():
    table = csv_cells(pa.table({"=cmd": ["x"], "-1": ["y"], "plain": ["@z"]}))
    assert table.column_names == ["'=cmd", "-1", "plain"] and table.column("plain").to_pylist() == ["'@z"]


# --- figure text -------------------------------------------------------------------------------------------


def _drawn(text: str) -> tuple[str, bool]:
    """What matplotlib draws for a label ``text`` and whether it parses it as mathtext (its own test)."""
    from matplotlib.text import Text

    return Text(0, 0, text)._preprocess_math(text)


@pytest.mark.parametrize("text", PAYLOADS)
def test_figure_text_is_drawn_as_written_never_as_mathtext(text):
    shown, math = _drawn(figure_text(text))
    assert math is False
    assert shown == "".join(" " if c != "\n" and _not_text(c) else c for c in text)


@settings(deadline=None)  # timing on a busy machine says nothing about escaping
@given(TEXT)
def test_figure_text_of_any_label_is_not_mathtext(text):
    shown, math = _drawn(figure_text(text))
    assert math is False and len(shown) == len(text)


def test_a_mathtext_label_would_have_crashed_without_escaping():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_title(r"$\undefinedmacro$")
    with pytest.raises(ValueError, match="Unknown symbol"):
        fig.canvas.draw()
    ax.set_title(figure_text(r"$\undefinedmacro$"))
    fig.canvas.draw()
    plt.close(fig)


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")  # CJK and emoji payloads: DejaVu lacks them
def test_figure_text_keeps_an_svg_well_formed():
    import xml.etree.ElementTree as ElementTree

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_xticks(range(len(PAYLOADS)), [figure_text(p[:80]) for p in PAYLOADS])
    ax.set_title(figure_text("x\ufffey\uffff"))  # U+FFFE is no XML character: drawn raw, the SVG did not parse
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as text, as the report writes it
        fig.savefig(buf, format="svg")
    plt.close(fig)
    ElementTree.fromstring(buf.getvalue())


# --- file names --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", PAYLOADS)
def test_file_names_are_one_safe_path_component(text):
    name = file_name(text, ".csv")
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.csv", name), name
    assert "/" not in name and "\x00" not in name and not name.startswith(".") and len(name) <= 53


@settings(deadline=None)  # timing on a busy machine says nothing about escaping
@given(TEXT, TEXT)
def test_file_names_of_two_names_differ_and_one_name_is_stable(a, b):
    assert file_name(a) == file_name(a)
    assert (file_name(a) == file_name(b)) == (a == b)
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*-[0-9a-f]{8}", file_name(a))


def test_file_names_read_like_their_names():
    assert file_name("meta-llama/Llama-3.1-8B").startswith("meta-llama-Llama-3.1-8B-")
    assert file_name("../../etc/passwd").startswith("etc-passwd-")
    assert file_name("a/b") != file_name("a-b")


# --- HTML --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", PAYLOADS)
def test_html_escapes_every_value_in_text_and_attributes(text):
    out = str(html("<p title=\"{}\" data-x='{}'>{}</p>", text, text, text))
    # only the template's own quotes and brackets remain: no value can close an attribute or open a tag
    assert out.count('"') == 2 and out.count("'") == 2
    assert out.count("<") == 2 and out.count(">") == 2


def test_html_keeps_markup_built_the_same_way_and_escapes_plain_strings_when_joining():
    inner = html("<b>{}</b>", "<i>")
    assert html("<p>{}</p>", inner) == Markup("<p><b>&lt;i&gt;</b></p>")
    assert html_join([inner, "<script>"]) == Markup("<b>&lt;i&gt;</b>&lt;script&gt;")


# --- HTML: characters that are not text ------------------------------------------------------------------


@pytest.mark.parametrize("text", PAYLOADS)
def test_html_shows_controls_and_bidi_overrides_as_escapes(text):
    out = str(html("<p>{}</p>", text))
    assert not any(_not_text(c) for c in out if c not in "\t\n\r")
    assert html("{}", "a\u202eb\x1bc") == Markup("a\\u202eb\\u001bc")  # readable: a reader sees what was there


@pytest.mark.parametrize(
    "word",
    ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "\u0915\u094d\u200d\u0937", "\U0001f469\u200d\U0001f52c"],
    ids=["persian ZWNJ", "devanagari ZWJ", "emoji ZWJ sequence"],
)
def test_joiners_that_shape_words_stay_text_in_html_markdown_and_the_terminal(word):
    assert str(html("{}", word)) == word and terminal(word) == word and markdown(word) == word
    assert terminal(word + "\u202e") == word + "\\u202e"  # a bidi override beside them is still shown, not obeyed


@settings(deadline=None)  # timing on a busy machine says nothing about escaping
@given(TEXT)
def test_html_of_any_text_holds_no_character_that_acts_on_its_neighbours(text):
    for out in (html("<td title='{}'>{}</td>", text, text), html_join([text])):
        assert not any(_not_text(c) for c in str(out) if c not in "\t\n\r")


# --- terminal ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", PAYLOADS)
def test_terminal_text_holds_no_control_sequence(text):
    out = terminal(text)
    assert not any(_not_text(c) for c in out if c not in "\n\t")


@settings(deadline=None)  # timing on a busy machine says nothing about escaping
@given(TEXT)
def test_terminal_keeps_text_and_escapes_only_what_is_not_text(text):
    out = terminal(text)
    assert not any(_not_text(c) for c in out if c not in "\n\t")
    if not any(_not_text(c) for c in text if c not in "\n\t"):
        assert out == text


def test_terminal_stream_escapes_every_write_and_answers_for_its_target():
    target = io.StringIO()
    stream = TerminalText(target)
    print("run \x1b]0;pwned\x07 \x1b[2J\rover \u202eevil", file=stream, flush=True)
    assert target.getvalue() == "run \\u001b]0;pwned\\u0007 \\u001b[2J\\u000dover \\u202eevil\n"
    assert stream.isatty() is False and stream.writable()
    stream.close()  # a wrapper collected late never flushes or closes what it wraps
    target.close()
    del stream
    assert terminal_stream(None) is None  # a process without stdout (pythonw, a daemon) keeps none


def test_the_hofcat_command_prints_through_the_terminal_stream(tmp_path, capsys):
    from runner.cli import main

    hostile = tmp_path / "run\x1b]0;pwned\x07\x1b[2J\u202e"
    assert main(["status", str(hostile)]) == 2
    err = capsys.readouterr().err
    assert "run\\u001b]0;pwned\\u0007\\u001b[2J\\u202e" in err and "\x1b" not in err and "\u202e" not in err
    assert not isinstance(sys.stdout, TerminalText) and not isinstance(sys.stderr, TerminalText)  # restored


def test_a_long_hostile_string_is_escaped_whole_in_every_format():
    assert len(LONG) == 10**5
    tex = latex(LONG)
    assert "$" not in tex.replace(r"\$", "") and "\x1b" not in tex and "\u202e" not in tex
    md = markdown(LONG)
    assert "<" not in md.replace(r"\<", "") and "\x1b" not in md and "|" not in md.replace(r"\|", "")
    page = str(html("<p>{}</p>", LONG))
    assert page.count("<") == 2 and "\u202e" not in page
    assert "\x1b" not in terminal(LONG) and "$" not in figure_text(LONG).replace(r"\$", "")
    assert csv_cell("=" + LONG).startswith("'=") and len(file_name(LONG)) <= 49


def test_the_live_progress_panel_shows_names_and_server_messages_as_literal_text():
    from rich.console import Console

    from runner.sweep.progress import EndpointStats, Progress, RunStats

    stats = RunStats(total=4)
    name = "bad[/] [link=https://evil]click[/link] \x1b]0;pwned\x07"
    stats.endpoints[name] = EndpointStats(name=name, requests_per_minute=None, max_concurrency=2)
    stats.endpoints[name].last_failure = "HTTP 400: [/bold] \x1b]52;c;cHduZWQ=\x07 \u202eevil"
    target = io.StringIO()
    panel = Progress(stats, stream=TerminalText(target), live=True)._render()  # rich markup raised MarkupError
    Console(file=target, force_terminal=True, width=300, color_system=None).print(panel)
    shown = target.getvalue()
    assert "bad[/] [link=https://evil]click[/link] \\u001b]0;pwned\\u0007" in shown
    assert "HTTP 400: [/bold] \\u001b]52;c;cHduZWQ=\\u0007 \\u202eevil" in shown
    assert "\x1b]" not in shown and "\u202e" not in shown  # no OSC sequence (title, clipboard, hyperlink)


def test_progress_lines_are_escaped_on_any_stream_it_is_given():
    from runner.sweep.progress import Progress, RunStats

    target = io.StringIO()  # the Python API's caller may pass any stream: the display escapes by itself
    Progress(RunStats(total=1), stream=target, live=False).note("server said \x1b]0;pwned\x07\r")
    assert target.getvalue() == "hofcat: server said \\u001b]0;pwned\\u0007\\u000d\n"


def test_the_console_script_escapes_even_a_traceback(monkeypatch):
    import traceback

    from runner.escape import terminal_process

    target = io.StringIO()
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setattr(sys, "stderr", target)
    terminal_process()
    terminal_process()  # once wrapped, stays wrapped once
    assert isinstance(sys.stderr, TerminalText) and sys.stderr.target is target
    traceback.print_exception(RuntimeError("server said \x1b]0;pwned\x07"))  # what the interpreter prints
    assert "RuntimeError: server said \\u001b]0;pwned\\u0007" in target.getvalue() and "\x1b" not in target.getvalue()


# --- condition labels --------------------------------------------------------------------------------------


def test_a_level_cannot_pose_as_another_factor():
    from runner.escape import condition_label, label_parts

    forged = condition_label([("model", "a, endpoint=b"), ("endpoint", "c")])
    honest = condition_label([("model", "a"), ("endpoint", "b, endpoint=c")])
    assert forged != honest  # both read "model=a, endpoint=b, endpoint=c" when levels were written raw
    assert label_parts(forged) == {"model": "a, endpoint=b", "endpoint": "c"}
    assert condition_label([("model", "m1"), ("temperature", 0.5)]) == "model=m1, temperature=0.5"  # as before
    assert label_parts('model="a"b, t=1') == {"model": '"a"b', "t": "1"}  # an analysis written before quoting


@settings(deadline=None)  # timing on a busy machine says nothing about escaping
@given(st.lists(st.tuples(TEXT, TEXT), max_size=3), st.lists(st.tuples(TEXT, TEXT), max_size=3))
def test_condition_labels_read_back_and_never_collide(a, b):
    from runner.escape import condition_label, label_parts

    factors = ["model", "endpoint", "language"]  # hofcat's own factor names; levels are anything
    pairs_a = list(zip(factors, [v for v, _ in a], strict=False))
    pairs_b = list(zip(factors, [v for v, _ in b], strict=False))
    assert label_parts(condition_label(pairs_a)) == dict(pairs_a)
    assert (condition_label(pairs_a) == condition_label(pairs_b)) == (pairs_a == pairs_b)


@settings(deadline=None)  # timing on a busy machine says nothing about escaping
@given(TEXT)
def test_json_a_command_prints_stays_the_same_json_through_the_terminal_stream(text):
    import json

    printed = json.dumps({"text": text, "list": [text]}, ensure_ascii=False, indent=2)  # as parse-text prints
    assert json.loads(terminal(printed)) == {"text": text, "list": [text]}
