"""The report at three design sizes — 1, ~100 and ~1,000 conditions — read from the page headless Chromium renders.

Checked from the rendered page and figures: no two text labels of a figure overlap (their extents measured in the
browser from the SVG files, whose text stays text), every condition appears in the Conditions table with its
factor values, the page requests nothing from outside, every figure exists as PNG, SVG and PDF, only the varying
factors are named and a panel shows only the levels it has. A control figure with overlapping labels shows the
measurement can fail. The 1,000-condition design is marked slow (its analysis alone takes minutes on 2 busy cores).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest

from benches.report_designs import analysed, conditions
from conftest import require_program

MEASURE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{figures}
<script>
window.addEventListener('load', function () {
  var out = {};
  document.querySelectorAll('div.fig').forEach(function (div) {
    var boxes = [];
    div.querySelectorAll('text').forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (t.textContent.trim() && r.width > 0 && r.height > 0) {
        boxes.push([t.textContent, r.left, r.top, r.right, r.bottom]);
      }
    });
    out[div.id] = boxes;
  });
  var pre = document.createElement('pre'); pre.id = 'measure'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body></html>"""


def _chromium_dom(page: Path) -> str:
    chromium = require_program("chromium")
    return subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000", "--dump-dom",
         page.as_uri()],
        check=True, capture_output=True, timeout=300, text=True,
    ).stdout  # fmt: skip


def _overlaps(boxes: list[list]) -> list[tuple[str, str]]:
    """Pairs of labels whose boxes share more than a sliver (1 px wide, a quarter of the lower one's height)."""
    found = []
    for i, (a, l1, t1, r1, b1) in enumerate(boxes):
        for b, l2, t2, r2, b2 in boxes[i + 1 :]:
            wide, high = min(r1, r2) - max(l1, l2), min(b1, b2) - max(t1, t2)
            if wide > 1 and high > 0.25 * min(b1 - t1, b2 - t2):
                found.append((a, b))
    return found


def _label_boxes(svgs: dict[str, Path], where: Path) -> dict[str, list[list]]:
    """Each SVG's text extents as Chromium lays them out (inline SVG in one page written in ``where``)."""
    prolog = re.compile(r"<\?xml[^>]*>|<!DOCTYPE[^>]*>")
    body = "".join(
        f'<div class="fig" id="{name}">{prolog.sub("", p.read_text(encoding="utf-8"))}</div>'
        for name, p in svgs.items()
    )
    page = where / "measure-labels.html"
    page.write_text(MEASURE.replace("{figures}", body), encoding="utf-8")
    try:
        dom = _chromium_dom(page)
    finally:
        page.unlink()
    found = re.search(r'<pre id="measure">([^<]*)</pre>', dom)
    assert found, "the measuring script did not run"
    return json.loads(html.unescape(found.group(1)))


@pytest.fixture(scope="module")
def control_svg(tmp_path_factory) -> Path:
    """A figure whose two labels are drawn on top of each other: the measurement must find them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = tmp_path_factory.mktemp("control") / "control.svg"
    with plt.rc_context({"svg.fonttype": "none"}):
        fig, ax = plt.subplots()
        ax.text(0.5, 0.5, "Kendall tau-b per condition")
        ax.text(0.52, 0.5, "labels on top of each other")
        fig.savefig(path)
        plt.close(fig)
    return path


def _check_report(run: Path, name: str, control: Path) -> None:
    report = run / "report"
    page = (report / "index.html").read_text(encoding="utf-8")
    figures = sorted({p.stem for p in (report / "figures").iterdir()})
    assert figures, "no figures"
    for fig in figures:  # SVG and PDF beside every PNG
        assert (report / "figures" / f"{fig}.pdf").read_bytes()[:5] == b"%PDF-"
        assert (report / "figures" / f"{fig}.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
        assert (report / "figures" / f"{fig}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svgs = {f: report / "figures" / f"{f}.svg" for f in figures} | {"control": control}
    boxes = _label_boxes(svgs, report)
    assert _overlaps(boxes["control"]), "the control's overlapping labels were not found"
    for fig in figures:
        assert boxes[fig], f"{name}/{fig}: no text measured"
        assert not _overlaps(boxes[fig]), f"{name}/{fig}: labels overlap: {_overlaps(boxes[fig])[:5]}"

    dom = _chromium_dom(report / "index.html")
    # nothing from outside the run directory: every link and source is a data URI, a fragment or a relative file
    for attr, value in re.findall(r'\s(src|href|srcset|action|poster|data)="([^"]*)"', dom):
        assert not re.match(r"^\s*([a-z][a-z0-9+.-]*:|//)", value, re.IGNORECASE) or value.startswith("data:"), (
            attr,
            value,
        )
    assert "url(" not in re.sub(r"data:[^\"')]+", "", "".join(re.findall(r"<style>(.*?)</style>", dom, re.DOTALL)))

    # every condition appears, with its factor values, in the Conditions table of the rendered page
    table = re.search(r'<table class="sortable" id="table-conditions">(.*?)</table>', dom, re.DOTALL)
    assert table, "no Conditions table"
    head = [html.unescape(c) for c in re.findall(r"<th[^>]*>(.*?)</th>", table.group(1))]
    rows = [
        [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", table.group(1).split("</thead>")[1])
    ]
    expected = conditions(name) or [{}]
    factors = list(expected[0])
    assert [h for h in head if h in factors] == factors  # only the varying factors are columns
    shown = {tuple(r[head.index(f)] for f in factors) for r in rows}
    assert len(rows) == len(expected)
    assert shown == {tuple(str(c[f]) for f in factors) for c in expected}
    assert "<h3>Headline results</h3>" in page and page.index("Headline results") < page.index("Ranking agreement")


@pytest.mark.slow
def test_one_condition_report_reads_well_in_chromium(tmp_path_factory, control_svg):
    run = analysed(tmp_path_factory.mktemp("one"), "one")
    _check_report(run, "one", control_svg)
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert "fig-status" not in page  # every answer but a few refusals parsed: shown only as a share
    assert "fig-cat_forest" not in page  # one condition: its CAT is the headline, not a forest of one


@pytest.fixture(scope="module")
def medium(tmp_path_factory) -> Path:
    return analysed(tmp_path_factory.mktemp("medium"), "medium")


@pytest.mark.slow
def test_hundred_conditions_report_reads_well_in_chromium(medium, control_svg):
    assert len(conditions("medium")) == 112
    _check_report(medium, "medium", control_svg)


@pytest.mark.slow
def test_panels_show_only_their_levels_and_name_only_varying_factors(medium):
    page = (medium / "report" / "index.html").read_text(encoding="utf-8")
    grid = (medium / "report" / "figures" / "grid.svg").read_text(encoding="utf-8")
    # temperature 0.7 is the local model's alone: a panel of another model has no 0.7 row
    panels = re.findall(r"model: ([a-z-]+)", grid)
    assert panels and ("0.7" in grid) == ("local" in panels)
    assert grid.count(">0.7<") == panels.count("local")
    # panel titles and legends never repeat factor=value strings of every factor
    for svg in (medium / "report" / "figures").glob("*.svg"):
        assert "framing=" not in svg.read_text(encoding="utf-8"), svg.name
    assert "6 levels" not in page and "varied: model (3 levels)" in page


@pytest.mark.slow
def test_comparisons_between_conditions_are_drawn_by_condition_id(medium):
    import polars as pl

    differences = pl.read_parquet(medium / "analysis" / "cat_differences.parquet")
    drawn = differences.filter(pl.col("difference").is_finite())
    assert drawn.height > 40, "the medium design should give many pairs one factor apart"
    svg = (medium / "report" / "figures" / "cat_differences.svg").read_text(encoding="utf-8")
    # rows beyond LABELLED_ROWS are unnamed; the axis says how many pairs are ranked and the table lists them all
    assert f"{drawn.height} pairs, ranked by difference" in svg
    assert "the pair differs in" in svg and "minus condition b" in svg
    page = (medium / "report" / "index.html").read_text(encoding="utf-8")
    assert page.index("Comparisons between conditions") < page.index('id="table-cat_differences"')


@pytest.mark.slow
def test_facets_chosen_on_the_command_line_split_the_small_multiples(medium, tmp_path):
    from runner.cli import main

    assert main(["report", str(medium), "--facets", "language"]) == 0
    svg = (medium / "report" / "figures" / "cat_by_factor.svg").read_text(encoding="utf-8")
    assert svg.count("language: en") == 1 and svg.count("language: zh") == 1
    assert main(["report", str(medium), "--facets", "colour"]) == 2  # not a factor: a located error


@pytest.mark.slow  # ~1,000 conditions: the analysis takes minutes on two busy cores
def test_thousand_conditions_report_reads_well_in_chromium(tmp_path_factory, control_svg):
    assert len(conditions("large")) == 1024
    run = analysed(tmp_path_factory.mktemp("large"), "large")
    _check_report(run, "large", control_svg)
    assert (run / "report" / "index.html").stat().st_size < 10_000_000


def test_spec_report_facets_are_checked():
    from runner.sweep.spec import SpecError, parse_spec

    base = '[run]\nname = "r"\n[[endpoints]]\nname = "e"\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
    base += 'model = "m"\n[design]\npersonas = ["China", "Japan", "Germany"]\n'
    assert parse_spec(base + '[report]\nfacets = ["model", "language"]\n').raw["report"]["facets"] == [
        "model",
        "language",
    ]
    for bad in ('facets = ["a", "b", "c"]', 'facets = "model"', "facets = [1]", 'colour = "model"'):
        with pytest.raises(SpecError, match="report"):
            parse_spec(base + f"[report]\n{bad}\n")


def test_facets_are_the_factors_that_explain_most_of_the_cat_variance():
    import itertools

    import numpy as np
    import polars as pl
    from scipy.stats import f_oneway

    from runner.errors import InputError
    from runner.report.design import OKABE_ITO, report_design

    rng = np.random.default_rng(5)
    rows = [
        {
            "model": m,
            "language": lang,
            "temperature": t,
            "cat_score": 0.3 * (lang == "zh") + 0.1 * m + rng.normal(0, 0.05),
        }
        for m, lang, t in itertools.product((0, 1, 2), ("en", "zh"), (0.0, 0.5, 1.0, 1.5))
    ]
    cat = pl.DataFrame(rows)
    design = report_design(cat, ["model", "language", "temperature"])
    for factor in ("model", "language", "temperature"):  # eta squared from scipy's one-way ANOVA F
        groups = [g["cat_score"].to_numpy() for _, g in cat.group_by(factor)]
        k, n = len(groups), cat.height
        f = f_oneway(*groups).statistic
        assert design.importance[factor] == pytest.approx(f * (k - 1) / (f * (k - 1) + n - k), rel=1e-12)
    assert design.facets == ("language", "model") and design.colour_by == "temperature"
    assert [design.colour("temperature", t) for t in (0.0, 0.5, 1.0, 1.5)] == list(OKABE_ITO[:4])
    assert report_design(cat, ["model", "language", "temperature"], facets=["temperature"]).facets == ("temperature",)
    with pytest.raises(InputError, match="facets"):
        report_design(cat, ["model", "language", "temperature"], facets=["seed"])


def test_a_few_comparisons_name_each_pair_by_its_condition_ids():
    import math

    import polars as pl

    from runner.report import figures
    from runner.report.design import ReportDesign

    design = ReportDesign(("model",), {"model": ("a", "b", "c")}, {"model": 1.0}, (), "model")
    differences = pl.DataFrame(
        {
            "condition_a": ["model=a", "model=a", "model=b"],
            "condition_b": ["model=b", "model=c", "model=c"],
            "factor": ["model"] * 3,
            "difference": [0.4, -0.2, math.nan],
            "ci_low": [0.1, -0.9, math.nan],
            "ci_high": [0.7, 0.5, math.nan],
        }
    )
    ids = {"model=a": "C1", "model=b": "C2", "model=c": "C3"}
    plot = figures.cat_differences(differences, ids, design)
    ticks = [t.get_text() for t in plot.fig.axes[0].get_yticklabels()]
    assert ticks == ["C1 − C3", "C1 − C2"]  # sorted by difference, the pair without one left out and said so
    assert plot.shows == ("C1 − C2", "C1 − C3")
    assert "1 pair(s) without a difference" in plot.note
    assert plot.fig.axes[0].get_xlim() == (-2.05, 2.05)
    figures.pyplot().close(plot.fig)
