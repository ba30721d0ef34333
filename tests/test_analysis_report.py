"""``hofcat analyze`` + ``hofcat report`` on a small run: outputs written, HTML self-contained, Chromium renders it."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import polars as pl
import pytest

from conftest import require_program
from runner.cli import main
from test_analysis_core import make_answers


@pytest.fixture(scope="module")
def analysed_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    frame = make_answers(1, countries=("U.S.A.", "China", "Japan", "Germany"), temps=(0.0, 1.0), refusal=0.05)
    frame = pl.concat([frame.with_columns(top_p=pl.lit(p)) for p in (0.5, 1.0)])
    parts = run / "answers"
    parts.mkdir()
    frame.head(2000).write_parquet(parts / "part-0.parquet")  # a folder of parts, as the store writes
    frame.slice(2000).write_parquet(parts / "part-1.parquet")
    assert main(["analyze", str(run), "--resamples", "100", "--permutations", "49", "--seed", "3"]) == 0
    return run, frame


def test_analyze_writes_tables_and_provenance(analysed_run):
    run, frame = analysed_run
    out = run / "analysis"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reference"]["name"] == "hofstede-2015" and summary["undefined_tau"] == "nan"
    assert summary["bootstrap"] == {
        "n_resamples": 100,
        "confidence_level": 0.95,
        "method": "percentile",
        "unit": ["seed"],
        "seed": 3,
        "stream": ("stats_core.bootstrap_indices(units per country, n_resamples, (seed, condition))"),
    }
    assert summary["policy"] == {"unparseable": "drop", "health_items": "answered", "partial": "sample"}
    assert summary["design"]["factors"] == ["model", "temperature", "top_p"]
    assert summary["answers"] == frame.height and summary["conditions"] == 8
    cat = pl.read_parquet(out / "cat.parquet")
    assert cat.height == 8 and cat["cat_score"].is_between(-1, 1).all()
    assert (cat["ci_low"] <= cat["cat_score"]).all() and (cat["cat_score"] <= cat["ci_high"]).all()
    kendall = pl.read_parquet(out / "kendall.parquet")
    assert kendall.height == 8 * 6
    questions = pl.read_parquet(out / "questions.parquet")
    assert questions.height == 8 * 4 * 24
    assert int(questions["status_ok"].sum() + questions["status_refusal"].sum()) == frame.height


def test_analysis_keeps_the_reference_scores_it_ranked_against(analysed_run):
    from runner.survey.reference import ReferenceSet, load_reference

    run, _ = analysed_run
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    stored = ReferenceSet.from_table(
        summary["reference"], pl.read_parquet(run / "analysis" / "reference_scores.parquet")
    )
    shipped = load_reference("hofstede-2015")
    assert stored.name == shipped.name and stored.countries == shipped.countries
    np.testing.assert_array_equal(stored.values, shipped.values)  # NaN where unpublished, in the same places


@pytest.mark.slow  # renders the report twice
def test_report_reads_the_reference_from_the_run_directory_never_from_a_path_it_names(analysed_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(analysed_run[0], run, ignore=shutil.ignore_patterns("report"))
    outside = tmp_path / "private.csv"  # a file of the machine showing the run, in the reference CSV's format
    outside.write_text("country,pdi,idv,mas,uai,lto,ivr\nPRIVATE-ROW,1,2,3,4,5,6\n")
    summary_path = run / "analysis" / "summary.json"
    summary = json.loads(summary_path.read_text())
    summary["reference"]["name"] = str(outside)
    summary_path.write_text(json.dumps(summary))
    assert main(["report", str(run)]) == 0  # the stored scores are used: the path is not read
    page = next((run / "report").glob("*.html")).read_text()
    assert "PRIVATE-ROW" not in page
    capsys.readouterr()
    (run / "analysis" / "reference_scores.parquet").unlink()  # an analysis from before the table, or tampered
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert "run hofcat analyze again" in err and "PRIVATE-ROW" not in err and "Traceback" not in err


def test_analyze_bad_run_dir(tmp_path, capsys):
    assert main(["analyze", str(tmp_path)]) == 2
    assert "no parsed-answers dataset" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "run `hofcat analyze" in capsys.readouterr().err


@pytest.mark.slow  # renders the report, then drives Chromium (CI)
def test_report_is_self_contained_and_renders_in_chromium(analysed_run, tmp_path):
    run, _ = analysed_run
    assert main(["report", str(run)]) == 0
    page = (run / "report" / "index.html").read_text()
    names = (
        "cat_forest",
        "cat_by_factor",
        "kendall",
        "scores",
        "cat_differences",
        "grid",
        "tsne",
        "ssh",
        "status",
        "variance_partition",
    )
    for name in names:
        assert f'id="fig-{name}"' in page and (run / "report" / "figures" / f"{name}.png").is_file()
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', page)) == len(names)
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched from outside
    assert "per dimension and CAT score (papers&#39; Table 1)" in page and "hofstede-2015" in page

    chromium = require_program("chromium")
    # the control: the same page with every figure's image left out (what a page of text alone colours)
    blank = run / "report" / "blank.html"
    blank.write_text(re.sub(r'src="data:image/png;base64,[^"]*"', 'src=""', page), encoding="utf-8")
    shots = {}
    for name, url in (("shot", run / "report" / "index.html"), ("blank", blank)):
        shots[name] = tmp_path / f"{name}.png"
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--screenshot={shots[name]}",
                "--window-size=1280,4000",
                url.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    blank.unlink()
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--dump-dom",
            (run / "report" / "index.html").as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
        text=True,
    ).stdout
    assert dom.count("<img") == page.count("<img")
    import matplotlib.image

    def saturated(shot):  # saturated pixels: markers, intervals, heatmaps (and a little coloured text)
        pixels = matplotlib.image.imread(shot)[..., :3]
        return pixels, (pixels.max(axis=2) - pixels.min(axis=2)) > 0.3

    pixels, coloured = saturated(shots["shot"])
    assert coloured.mean() > 2 * saturated(shots["blank"])[1].mean() + 0.001, "the screenshot shows no figures"
    assert np.unique((pixels[coloured] * 8).astype(int), axis=0).shape[0] >= 4  # several distinct colours
