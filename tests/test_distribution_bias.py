"""Bias controls: the option-order factor (given, reversed, shuffled), the baseline respondents and position bias."""

from __future__ import annotations

import io
import math

import numpy as np
import polars as pl
import pytest

from _runner_support import make_spec
from runner.analyze.baselines import ORDER_CODE, baseline_tables
from runner.analyze.design import Design
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.analyze.units import unit_array
from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.server import SimServerThread
from runner.errors import SpecError
from runner.report.html import render_report
from runner.survey.reference import load_reference
from runner.sweep.plan import count_cells, factor_counts, iter_cells
from runner.sweep.session import run_sweep


def test_option_order_factor_reverses_and_keeps_old_keys():
    base = make_spec("http://x/v1")
    given = make_spec("http://x/v1", design={"option_order": "given"})
    assert [c.key for c in iter_cells(base)] == [c.key for c in iter_cells(given)]
    old_shuffle = make_spec("http://x/v1", design={"shuffle_options": True})
    new_shuffle = make_spec("http://x/v1", design={"option_order": "shuffled"})
    assert [c.key for c in iter_cells(old_shuffle)] == [c.key for c in iter_cells(new_shuffle)]
    three = make_spec("http://x/v1", design={"option_order": ["given", "reversed", "shuffled"]})
    cells = list(iter_cells(three))
    assert len(cells) == count_cells(three) == 3 * len(list(iter_cells(base)))
    assert factor_counts(three)["option_orders"] == 3
    orders = {c.prompt.option_order for c in cells if c.shuffle_seed is None}
    assert orders == {(1, 2, 3, 4, 5), (5, 4, 3, 2, 1)}
    with pytest.raises(SpecError, match=r"design\.shuffle_options = True"):
        make_spec("http://x/v1", design={"shuffle_options": True, "option_order": "reversed"})
    with pytest.raises(SpecError, match=r"design\.option_order = 'sideways': must be one of given, reversed, shuffled"):
        make_spec("http://x/v1", design={"option_order": "sideways"})


@pytest.fixture(scope="module")
def bias_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bias") / "run"
    with SimServerThread(SimConfig(seed=5)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": ["United States", "China", "Japan", "Germany", "Brazil"],
                "questions": list(range(1, 25)),
                "seeds": [1, 2, 3, 4],
                "temperature": [1.0],
                "option_order": ["given", "reversed"],
                "measurement": ["sample", "distribution"],
            },
        )
        result = run_sweep(spec, out, stream=io.StringIO())
    assert result.failed == 0
    analysis = analyze_run(out, AnalysisOptions(n_resamples=100, baseline_replicates=100))
    return out, analysis


@pytest.mark.slow
def test_reversed_order_is_a_condition_and_the_simulator_follows_the_options(bias_run):
    _, analysis = bias_run
    cat = pl.read_parquet(analysis / "cat.parquet")
    assert set(cat["reversed"]) == {True, False}
    dist = cat.filter(pl.col("measurement") == "distribution")
    assert dist["cat_score"].to_list() == [1.0, 1.0]  # the truth, in either order


@pytest.mark.slow
def test_position_bias_mirrors_under_reversal(bias_run):
    _, analysis = bias_run
    bias = pl.read_parquet(analysis / "position_bias.parquet").filter(pl.col("measurement") == "distribution")
    given = bias.filter(~pl.col("reversed")).row(0, named=True)
    rev = bias.filter(pl.col("reversed")).row(0, named=True)
    # the simulated respondent answers by content: reversing the display mirrors its position shares
    for i in range(1, 6):
        assert given[f"p{i}"] == pytest.approx(rev[f"p{6 - i}"], abs=1e-12)
    assert given["recency"] == pytest.approx(-rev["recency"], abs=1e-12)
    assert sum(given[f"p{i}"] for i in range(1, 6)) == pytest.approx(1.0)


@pytest.mark.slow
def test_baselines_reach_little_and_the_simulator_is_beyond_chance(bias_run):
    out, analysis = bias_run
    base = pl.read_parquet(analysis / "baselines.parquet")
    sample_cat = base.filter((pl.col("measurement") == "sample") & (pl.col("dimension") == "cat"))
    assert sample_cat.height == 4  # 2 orders × 2 baselines
    for row in sample_cat.iter_rows(named=True):
        assert abs(row["baseline_mean"]) < 0.15  # content-free respondents rank countries at chance
        assert row["beyond_chance"] > 0.2 and row["p_baseline"] < 0.05
        assert row["undefined_share"] == 0.0
    # distribution cells of a content-free respondent under one fixed order: constant indices, nothing ranked
    dist_uniform = base.filter(
        (pl.col("measurement") == "distribution") & (pl.col("baseline") == "uniform") & (pl.col("dimension") == "cat")
    )
    assert dist_uniform["undefined_share"].to_list() == [1.0, 1.0]
    assert all(math.isnan(x) for x in dist_uniform["beyond_chance"])
    html = (render_report(out)).read_text()
    assert "Measurement and bias controls" in html and "Position bias per condition" in html


def test_position_baseline_copies_a_pure_position_preference():
    # a "model" that always picks the first displayed position, under given and reversed orders
    rows = []
    for country in ("U.S.A.", "China", "Japan", "Germany"):
        for seed in (1, 2, 3):
            for q in range(1, 25):
                for code, order in ((12345, (1, 2, 3, 4, 5)), (54321, (5, 4, 3, 2, 1))):
                    rows.append(
                        {
                            "cond": "x",
                            "country": country,
                            "seed": seed,
                            "question": q,
                            "option_id": order[0],
                            "status": "ok",
                            ORDER_CODE: code,
                        }
                    )
    answers = pl.DataFrame(rows).lazy()
    design = Design(("cond",), ("seed",))
    units = unit_array(answers, design)
    out = baseline_tables(answers, units, design, load_reference("hofstede-2015"), {}, replicates=20, seed=1)
    bias = out["position_bias"].row(0, named=True)
    assert bias["p1"] == 1.0 and bias["recency"] == -1.0 and bias["tv_from_uniform"] == pytest.approx(0.8)
    position = out["baselines"].filter(pl.col("baseline") == "position")
    # it always answers position 1: half its answers are option 1, half option 5, whatever the question -> all
    # countries alike, every draw the same: indices constant, tau undefined
    assert np.isnan(position["baseline_mean"].to_numpy()).all()


def test_option_labels_factor_keys_and_refusals():
    base = make_spec("http://x/v1")
    digits = make_spec("http://x/v1", design={"option_labels": "digits"})
    assert [c.key for c in iter_cells(base)] == [c.key for c in iter_cells(digits)]
    three = make_spec("http://x/v1", design={"option_labels": ["digits", "letters", "words"]})
    cells = list(iter_cells(three))
    assert len({c.key for c in cells}) == len(cells) == count_cells(three) == 3 * len(list(iter_cells(base)))
    assert {c.prompt.labels for c in cells} == {"digits", "letters", "words"}
    with pytest.raises(SpecError, match=r"design\.option_labels = 'letters': must be \"digits\" in survey mode"):
        make_spec("http://x/v1", design={"mode": "survey", "option_labels": "letters"})
    with pytest.raises(SpecError, match="reply_format 'json'"):
        make_spec("http://x/v1", design={"reply_format": "json", "option_labels": "words"})
    with pytest.raises(SpecError, match="first word does not name one option"):
        make_spec("http://x/v1", design={"option_labels": "words", "measurement": "distribution"})


@pytest.mark.slow
def test_letters_and_words_run_through_the_same_pipeline(tmp_path):
    with SimServerThread(SimConfig(seed=2)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": ["United States", "China", "Japan"],
                "questions": list(range(1, 25)),
                "seeds": [1],
                "temperature": [1.0],
                "option_labels": ["letters", "words"],
                "option_order": ["given", "shuffled"],
            },
        )
        run_sweep(spec, tmp_path / "run", stream=io.StringIO())
        sent = [e.answers[0] for e in sim.log.entries()]
    from runner.analyze.load import load_answers
    from runner.rundir import read_dataset

    answers = load_answers(tmp_path / "run", keep_keys=True).collect()
    assert (answers["status"] == "ok").all() and answers.height == 3 * 24 * 2 * 2
    texts = read_dataset(tmp_path / "run", "responses", ["option_labels", "response_text"]).to_pylist()
    assert {t["response_text"][0] for t in texts if t["option_labels"] == "letters"} <= set("ABCDE")
    assert all(len(t["response_text"]) > 2 for t in texts if t["option_labels"] == "words")
    # every parsed option is the one the simulator chose (letters mapped back through the shown order)
    assert sorted(answers["option_id"].to_list()) == sorted(sent)


def test_letter_distributions_recover_the_truth(tmp_path):
    from runner.analyze.load import load_answers
    from runner.endpoints.sim.data import load_scores
    from runner.endpoints.sim.respondent import AnswerModel

    with SimServerThread(SimConfig(seed=2)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": ["China"],
                "questions": list(range(1, 25)),
                "seeds": [1, 2],
                "temperature": [1.0],
                "option_labels": "letters",
                "option_order": "shuffled",
                "measurement": "distribution",
            },
        )
        run_sweep(spec, tmp_path / "run", stream=io.StringIO())
    model = AnswerModel(load_scores(SimConfig().reference))
    answers = load_answers(tmp_path / "run").collect()
    tv = [
        0.5 * sum(abs(a - b) for a, b in zip(r["option_probs"], model.distribution("China", r["question"], 1, 1)))
        for r in answers.iter_rows(named=True)
    ]
    assert max(tv) < 1e-9
