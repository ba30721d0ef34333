"""End to end: the value-differences study's design against two simulated model sizes, analysed as the paper does.

The example spec (runner/data/examples/value_differences.toml: 54 identities = 9 nations × 2 genders × ages
25/35/45, English and Chinese, JSON replies) runs against two simulators that differ in signal strength (a small
model that expresses national differences weakly, a large one that expresses them strongly), with fewer seeds to
keep the test short. The analysis uses ``AnalysisOptions.value_differences()``: the paper's answer policy, one
point per identity, t-SNE of the six VSM scores; the simulator ignores language, gender and age, so the truth is
known: models differ, languages do not, identities within a nation answer alike.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from benches.value_differences_run import two_model_sizes
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.report.html import render_report
from runner.sweep.session import run_sweep

pytestmark = pytest.mark.slow  # a 10,000-request sweep and a full analysis (~40 s)

SEEDS = 2


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    run = tmp_path_factory.mktemp("valuediff") / "run"
    with two_model_sizes(seeds=SEEDS) as spec:
        run_sweep(spec, run, live=False)
    out = analyze_run(run, AnalysisOptions.value_differences(n_resamples=50, permutations=199))
    return run, out


def test_the_paper_choices_are_recorded(analysis):
    _, out = analysis
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == {"unparseable": "neutral", "health_items": "neutral", "partial": "sample"}
    assert (summary["points"], summary["embedding"]) == ("identity", "vsm")
    assert summary["permutations"]["blocks"] == "country"
    assert summary["design"]["units"] == ["seed", "gender", "age"]
    respondents = pl.read_parquet(out / "respondents.parquet")
    assert respondents.group_by("set").len()["len"].to_list() == [54] * 4  # one point per identity per set
    assert {"pdi", "idv", "mas", "uai", "lto", "ivr"} <= set(respondents.columns)


def test_model_sizes_differ_and_languages_do_not(analysis):
    _, out = analysis
    tests = pl.read_parquet(out / "factor_tests.parquet")
    model = tests.filter(pl.col("factor") == "endpoint/model")
    language = tests.filter(pl.col("factor") == "language")
    assert model.height == 2 and language.height == 2
    assert (model["permanova_p"] <= 0.01).all(), model
    assert (model["permanova_omega2"] > language["permanova_omega2"].max()).all()
    assert (language["permanova_omega2"] < 0.02).all()
    separation = pl.read_parquet(out / "set_separation.parquet")
    assert sorted(set(separation["factor"])) == ["endpoint/model", "endpoint/model × language", "language"]
    cross = separation.filter(pl.col("factor") == "endpoint/model × language")
    assert cross.height == 2 and cross["ss_h"].is_not_null().all()  # Figure 2d: pairs differing in two factors
    differing = separation.filter(pl.col("factor") != "language")
    assert (differing["ss_h_p"] <= 0.01).all() and (differing["ss_h"] > differing["ss_h_null_mean"]).all()
    same = separation.filter(pl.col("factor") == "language")
    # sets that do not differ sit at SS_h's null baseline, which is not 0 (about −0.2 for the large model)
    assert ((same["ss_h"] - same["ss_h_null_mean"]).abs() < 0.05).all() and (same["ss_h_p"] > 0.05).all()
    assert same["ss_h_null_mean"].min() < -0.1


def test_identity_contexts_correlate_as_in_table_5(analysis):
    _, out = analysis
    table = pl.read_parquet(out / "identity_correlations.parquet")
    assert table.height == 4 * 3 and set(table["context"]) == {"country", "gender", "age"}
    by_context = table.group_by("context").agg(pl.col("mean_r").mean()).sort("context")
    r = dict(by_context.iter_rows())
    # the simulator ignores gender and age: their groups share every nation's answers; nations differ
    assert r["gender"] > r["country"] and r["age"] > r["country"]


def test_report_shows_the_value_differences_analyses(analysis):
    run, _ = analysis
    page = render_report(run).read_text(encoding="utf-8")
    assert "identity-context correlations" in page.lower()
    assert "ss_h_p" in page and "endpoint/model × language" in page
    assert "t-SNE of the six VSM scores" in page
