"""A run whose spec and server are hostile: every output format shows their strings as data, nothing more.

A real sweep against a loopback server: endpoint names, model names and the run name carry HTML, LaTeX, Markdown,
CSV-formula, mathtext and path payloads, and the server answers with formula cells in the fields it controls
(``served_model``, ``system_fingerprint``). ``hofcat analyze``, ``report`` and ``export`` then run as a user would;
the report is opened in headless Chromium with console logging (no payload may run: positive controls show the
detector sees a payload that does), its .tex tables are read as TeX reads them, its Markdown as CommonMark, its
CSVs and the export's CSV as a spreadsheet would, and the files written are all inside the run directory.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import polars as pl
import pytest

from _loopback_server import LoopbackServer
from conftest import require_program
from runner.cli import main
from runner.escape import csv_cell, file_name, latex, markdown
from test_escape import _markdown_plain, _not_text, _spreadsheet_safe, _tex_tokens_ok

pytestmark = pytest.mark.slow  # a sweep, its analysis and report, then Chromium

MARK = "PW" + "NED"  # what an executed payload writes; never in the page as such (the payloads spell it in halves)
RUN_HTML = """<script>console.log("PW"+"NED")</script>"""
ENDPOINTS = {  # endpoint name → model name: each a class of hostile string
    """<img src=x onerror="document.body.dataset.p='PW'+'NED'">""": """"><svg onload="console.log('PW'+'NED')">""",
    r"^^5cinput^^7b/etc/passwd^^7d": r"$\undefinedmacro$ \input{/etc/passwd} ~{}&%_#",
    "meta-llama/Llama-3.1-8B\x1b]0;PW\x07": "../../outside\x00\x1b[2J\u202eevil\ufffe",  # terminal, bidi, XML
    '=HYPERLINK("http://evil")': "@SUM(A1)|[x](javascript:alert(1)) <b>md</b>",
}
SERVED = "+cmd|' /C calc'!A0"  # the server controls these fields
FINGERPRINT = '=HYPERLINK("http://evil/?leak")'
PERSONAS = ["United States", "China", "Japan", "Germany", "Brazil"]


def _answer(body, seq):
    text = str(1 + (seq * 7 + len(json.dumps(body))) % 5)
    reply = {
        "model": SERVED,
        "system_fingerprint": FINGERPRINT,
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 1},
    }
    return 200, reply, {}


def _spec(base_url: str) -> str:
    lines = ["[run]", f"name = {json.dumps(RUN_HTML + ' $x$ ^^5c =1+1')}", "seed = 3", "determinism_probe = true"]
    for name, model in ENDPOINTS.items():
        lines += ["[[endpoints]]", f"name = {json.dumps(name)}", 'provider = "openai"']
        lines += [f"base_url = {json.dumps(base_url)}", f"model = {json.dumps(model)}", "max_concurrency = 8"]
        lines += [f"served_models = [{json.dumps(SERVED)}]"]  # the server's hostile model name, accepted as such
    lines += ["[design]", f"personas = {json.dumps(PERSONAS)}", "seeds = [1, 2]", "temperature = [0.0]"]
    return "\n".join(lines) + "\n"


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """(run directory, files around it before the commands, after them)."""
    base = tmp_path_factory.mktemp("hostile")
    (base / "neighbour").mkdir()
    (base / "neighbour" / "keep.txt").write_text("untouched")
    run = base / "run"
    with LoopbackServer(_answer) as server:
        (base / "spec.toml").write_text(_spec(server.base_url), encoding="utf-8")
        before = _tree(base)
        assert main(["run", str(base / "spec.toml"), "--out", str(run)]) == 0
    assert main(["analyze", str(run), "--resamples", "50", "--permutations", "19"]) == 0
    assert main(["report", str(run)]) == 0
    assert main(["export", str(run), "--format", "csv"]) == 0
    assert main(["export", str(run), "--format", "csv", "--raw", "--out", str(run / "export" / "raw.csv")]) == 0
    return run, before, _tree(base)


def test_every_file_written_is_inside_the_run_directory(hostile_run):
    run, before, after = hostile_run
    outside = {p for p in after - before if not p.startswith("run")}
    assert outside == set()
    assert (run.parent / "neighbour" / "keep.txt").read_text() == "untouched"
    probes = sorted(p.name for p in (run / "report" / "tables").glob("probe_*.csv"))
    assert probes == sorted(f"probe_{file_name(name)}.csv" for name in ENDPOINTS)


def _chromium(page: Path) -> tuple[str, str]:
    """(DOM after scripts ran, Chromium's log with the page's console messages) of ``page``."""
    chromium = require_program("chromium")
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=3000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return done.stdout, done.stderr


def test_no_payload_runs_in_the_report_in_chromium(hostile_run, tmp_path):
    run, _, _ = hostile_run
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert MARK not in page
    for name in ENDPOINTS:  # the probe's endpoint names are shown, escaped, with their table's derived id
        assert f'id="table-probe_{file_name(name)}"' in page
    dom, log = _chromium(run / "report" / "index.html")
    assert "<table" in dom and "hofcat report" in dom
    assert MARK not in dom and MARK not in log
    # the detector sees a payload that runs: the same payloads written unescaped
    control = tmp_path / "control.html"
    control.write_text(f"<html><body>{RUN_HTML}{''.join(ENDPOINTS)}{''.join(ENDPOINTS.values())}</body></html>")
    dom, log = _chromium(control)
    assert f'data-p="{MARK}"' in dom and f'"{MARK}"' in log


def _tex_cells(tex: str) -> list[str]:
    rows = [line[: -len(r" \\")] for line in tex.splitlines() if line.endswith(r" \\")]
    return [cell for row in rows for cell in row.split(" & ")]


def test_latex_tables_hold_the_strings_as_text_only(hostile_run):
    run, _, _ = hostile_run
    tables = sorted((run / "report" / "tables").glob("*.tex"))
    assert len(tables) > 5
    seen = set()
    for path in tables:
        tex = path.read_text(encoding="ascii")
        assert "^^" not in tex and r"\input" not in tex.replace(r"\textbackslash{}input", "")
        caption = re.search(r"\\caption\{(.*)\}$", tex, re.MULTILINE)
        assert caption is not None
        for cell in [caption.group(1), *_tex_cells(tex)]:
            _tex_tokens_ok(cell)
        seen |= {model for model in ENDPOINTS.values() if latex(model) in tex}
    assert seen == set(ENDPOINTS.values())  # each model's name is in some table, escaped


def test_markdown_tables_hold_no_html_links_or_extra_cells(hostile_run):
    run, _, _ = hostile_run
    for path in sorted((run / "report" / "tables").glob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        _markdown_plain(lines[0])
        header, rule, *rows = lines[2:]
        width = header.count(" | ") + 1
        assert rule == "|" + "---|" * width
        for row in [header, *rows]:
            cells = row[2:-2].split(" | ")
            assert len(cells) == width, (path.name, row)
            for cell in cells:
                _markdown_plain(cell)
    headline = (run / "report" / "tables" / "indices.md").read_text(encoding="utf-8")
    assert markdown(ENDPOINTS['=HYPERLINK("http://evil")']) in headline


def _cells(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def test_csv_tables_open_in_a_spreadsheet_without_evaluating_anything(hostile_run):
    run, _, _ = hostile_run
    for path in sorted((run / "report" / "tables").glob("*.csv")):
        for row in _cells(path):
            assert all(_spreadsheet_safe(cell) for cell in row), (path.name, row)
    model = ENDPOINTS['=HYPERLINK("http://evil")']
    assert csv_cell(model) == "'" + model
    assert any(csv_cell(model) in row for row in _cells(run / "report" / "tables" / "indices.csv"))


def test_export_csv_is_neutralised_raw_on_request_and_parquet_raw_always(hostile_run):
    run, _, _ = hostile_run
    safe = _cells(run / "export" / "answers.csv")
    header, rows = safe[0], safe[1:]
    assert rows and all(_spreadsheet_safe(cell) for row in rows for cell in row)
    served, fingerprint = header.index("served_model"), header.index("system_fingerprint")
    assert {row[served] for row in rows} == {"'" + SERVED} and {row[fingerprint] for row in rows} == {"'" + FINGERPRINT}
    raw = pl.read_csv(run / "export" / "raw.csv", infer_schema=False)
    assert set(raw["served_model"]) == {SERVED} and set(raw["system_fingerprint"]) == {FINGERPRINT}
    assert set(raw["endpoint"]) == set(ENDPOINTS)
    assert main(["export", str(run), "--out", str(run / "export" / "answers.parquet")]) == 0
    parquet = pl.read_parquet(run / "export" / "answers.parquet")
    assert set(parquet["served_model"]) == {SERVED} and set(parquet["model"]) == set(ENDPOINTS.values())


def test_figures_draw_every_name_without_mathtext(hostile_run):
    run, _, _ = hostile_run
    for name in ("kendall", "scores", "cat_forest"):  # cat_forest names each condition (every endpoint) on a row
        for kind in ("png", "svg", "pdf"):
            assert (run / "report" / "figures" / f"{name}.{kind}").stat().st_size > 1000
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    shows = re.search(r'id="fig-kendall" data-shows="([^"]*)"', page)
    assert shows is not None and shows.group(1).count("model=") == len(ENDPOINTS)


def test_no_character_in_the_page_or_a_figure_acts_on_the_text_around_it(hostile_run):
    run, _, _ = hostile_run
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert not [c for c in page if c not in "\t\n\r" and _not_text(c)]  # no bidi override, ESC or U+FFFE
    assert "outside\\u0000\\u001b[2J\\u202eevil\\ufffe" in page  # shown, readably, where the model is named
    svgs = sorted((run / "report" / "figures").glob("*.svg"))
    assert svgs
    for svg in svgs:  # text stays text in the SVGs (svg.fonttype none): each is still well-formed XML
        ElementTree.parse(svg)


def test_status_prints_the_names_as_text_not_terminal_sequences(hostile_run, capsys):
    run, _, _ = hostile_run
    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    assert "meta-llama/Llama-3.1-8B\\u001b]0;PW\\u0007" in out
    assert not [c for c in out if c != "\n" and _not_text(c)]
