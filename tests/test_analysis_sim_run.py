"""End to end: a real sweep against the simulated endpoint (answers drawn from reference scores), analysed.

The simulator's respondents follow Hofstede's scores, so persona runs must rank countries as the reference
does (clearly positive tau): the built-in sanity check of the whole chain runner → parser → analysis.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from _runner_support import make_spec
from runner.analyze.load import load_answers
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.sweep.session import run_sweep

PERSONAS = ["United States", "China", "Japan", "Germany", "Brazil"]


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("simrun") / "run"
    with SimServerThread(SimConfig(seed=3, refusal_rate=0.05)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": PERSONAS,
                "questions": list(range(1, 25)),
                "seeds": [1, 2, 3],
                "temperature": [0.0, 1.0],
            },
        )
        run_sweep(spec, run, live=False)
    return run


def test_store_layout_is_joined_with_cell_factors(sim_run):
    answers = load_answers(sim_run).collect()
    assert answers.height == len(PERSONAS) * 24 * 3 * 2
    assert set(answers["country"]) == {"U.S.A.", "China", "Japan", "Germany", "Brazil"}
    assert not answers["shuffled"].any()
    assert {"temperature", "seed", "model", "language", "status", "option_id"} <= set(answers.columns)


def test_persona_run_agrees_with_the_reference(sim_run):
    out = analyze_run(sim_run, AnalysisOptions(n_resamples=200, permutations=19))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reference"]["name"] == "hofstede-2015"  # from the run manifest
    assert summary["design"]["factors"] == ["temperature"]  # the only factor the run varied
    assert summary["run_manifest"]["run_name"] == "test"
    cat = pl.read_parquet(out / "cat.parquet").sort("temperature")
    assert (cat["cat_score"] > 0.5).all(), cat
    # temperature 0: three seeds that agree are not certainty (rule of three), so the interval keeps a width
    assert cat["ci_low"][0] < cat["cat_score"][0] <= cat["ci_high"][0]
    rates = pl.read_parquet(out / "status_rates.parquet")
    refusal = rates.filter(pl.col("status") == "refusal")["share"].sum()
    assert 0.01 < refusal < 0.12  # the simulator refuses 5 % of requests
    assert summary["temperature_zero"]["groups"] > 0
    assert summary["temperature_zero"]["share"] == 0.0  # the simulator honours temperature 0
