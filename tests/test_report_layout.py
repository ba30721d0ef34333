"""The report at scale: a 60-condition, 2-model run and a 1-condition run, rendered in headless Chromium.

Checked at 1,280 px and 400 px: no horizontal overflow, no image wider than the page, every model in every
per-model figure, every section without data absent; SVG and PDF beside every PNG; the CSV downloads hold the
analysis tables' numbers. The screenshots are kept in ``$HOFCAT_ARTIFACTS`` (default ``.ci/artifacts``).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import require_program
from runner.cli import main
from test_analysis_core import make_answers

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("HOFCAT_ARTIFACTS", ROOT / ".ci" / "artifacts"))


def _analysed(root: Path, frame: pl.DataFrame) -> Path:
    (root / "answers").mkdir(parents=True)
    frame.write_parquet(root / "answers" / "part-000001.parquet")
    assert main(["analyze", str(root), "--resamples", "50", "--permutations", "19", "--seed", "1"]) == 0
    assert main(["report", str(root)]) == 0
    return root


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    """2 models × 5 temperatures × 3 top_p × 2 languages = 60 conditions, 4 countries, 3 seeds."""
    frames = []
    for language in ("en", "zh"):
        for top_p in (0.5, 0.75, 1.0):
            frame = make_answers(
                hash((language, top_p)) % 1000,
                models=("model-a", "model-b"),
                countries=("U.S.A.", "China", "Japan", "Saudi Arabia"),
                seeds=3,
                temps=(0.0, 0.25, 0.5, 0.75, 1.0),
                refusal=0.03,
            )
            frames.append(frame.with_columns(top_p=pl.lit(top_p), language=pl.lit(language)))
    return _analysed(tmp_path_factory.mktemp("big"), pl.concat(frames))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    frame = make_answers(2, models=("only",), countries=("U.S.A.", "China", "Japan"), seeds=4)
    return _analysed(tmp_path_factory.mktemp("small"), frame.drop("model"))


def _page(run: Path) -> str:
    return (run / "report" / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_sixty_conditions_two_models_every_figure_shows_both(big):
    page = _page(big)
    conditions = json.loads((big / "analysis" / "summary.json").read_text())["conditions"]
    assert conditions == 60
    shows = dict(re.findall(r'<figure id="fig-([a-z_]+)" data-shows="([^"]*)"', page))
    assert {"kendall", "scores", "grid", "status", "cat_forest", "cat_by_factor"} <= set(shows)
    drawn = html.unescape(shows["kendall"]).split("|")  # every condition, by the analysis' own name
    assert len(set(drawn)) == 60 and sum("model=model-a" in d for d in drawn) == 30
    assert len(html.unescape(shows["cat_forest"]).split("|")) == 60
    assert page.index("<h2>Summary</h2>") < page.index("<h2>Ranking agreement</h2>")
    assert "hofstede-2015 lacks some dimensions for: Saudi Arabia" in page
    for name in shows:
        for kind in ("png", "svg", "pdf"):
            assert (big / "report" / "figures" / f"{name}.{kind}").stat().st_size > 0, (name, kind)


@pytest.mark.slow
def test_a_one_condition_run_leaves_out_sections_without_data(small):
    page = _page(small)
    assert "<h2>Sampling grid</h2>" not in page  # the design varies neither temperature nor top_p
    assert "not applicable" not in page
    assert "<h2>Summary</h2>" in page and "<h2>Ranking agreement</h2>" in page


@pytest.mark.slow
def test_csv_downloads_round_trip_to_the_analysis_numbers(big):
    page = _page(big)
    links = dict(re.findall(r'download="([a-z_]+)\.csv" href="data:text/csv;charset=utf-8;base64,([^"]+)"', page))
    assert {"headline", "misranked", "error_percentage", "conditions"} <= set(links)
    # a table too long for the page (60 conditions x 4 countries x 24 questions) is linked beside it
    assert 'download="questions.csv" href="tables/questions.csv"' in page
    rows = list(csv.DictReader(io.StringIO(base64.b64decode(links["error_percentage"]).decode())))
    table = pl.read_parquet(big / "analysis" / "error_percentage.parquet")
    assert len(rows) == table.height
    for row, (country, pct) in zip(rows, table.select("country", "error_pct").iter_rows(), strict=True):
        assert row["country"] == country and float(row["error_pct"]) == pytest.approx(pct, rel=1e-12)
    questions = pl.read_csv(big / "report" / "tables" / "questions.csv")
    expected = pl.read_parquet(big / "analysis" / "questions.parquet")
    assert questions.height == expected.height
    assert np.allclose(questions["mean"].to_numpy(), expected["mean"].to_numpy(), equal_nan=True, rtol=1e-12)
    for kind in ("md", "tex"):
        assert (big / "report" / "tables" / f"headline.{kind}").is_file()


MEASURE = """
<script>
window.addEventListener('load', function () {
  var width = document.documentElement.clientWidth, widest = 0;
  document.querySelectorAll('img').forEach(function (i) {
    widest = Math.max(widest, i.getBoundingClientRect().right);
  });
  var out = document.createElement('pre'); out.id = 'measure';
  out.textContent = JSON.stringify({scroll: document.documentElement.scrollWidth, client: width, widest: widest,
                                    images: document.images.length});
  document.body.appendChild(out);
});
</script>
"""


@pytest.mark.slow  # drives Chromium (CI)
@pytest.mark.parametrize("width", [1280, 400])
@pytest.mark.parametrize("which", ["big", "small"])
def test_chromium_renders_without_overflow(which, width, request, tmp_path):
    chromium = require_program("chromium")
    run = request.getfixturevalue(which)
    probe = run / "report" / f"measure-{width}.html"  # beside the page, so its relative links resolve
    probe.write_text(_page(run).replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},2000"]
    try:
        dom = subprocess.run(
            [*base, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
            text=True,
        ).stdout
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"report-{which}-{width}px.png"
        subprocess.run([*base, f"--screenshot={shot}", probe.as_uri()], check=True, capture_output=True, timeout=120)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="measure">([^<]*)</pre>', dom)
    assert found, "the measuring script did not run"
    m = json.loads(found.group(1).replace("&quot;", '"'))
    assert m["images"] == _page(run).count("<img")
    assert m["scroll"] <= m["client"], f"horizontal overflow at {width} px: {m}"
    assert m["widest"] <= m["client"] + 1, f"an image is wider than the page at {width} px: {m}"
    assert shot.stat().st_size > 0
