"""The main job end to end on the simulated endpoint, whose truth is known: positive tau, a complete report.

The demo itself runs once for the whole suite: the session fixture ``sim_demo_run`` (tests/conftest.py) runs
``hofcat demo --endpoint sim --seeds 5`` and keeps both what it printed and what ``run_demo`` returned."""

from __future__ import annotations

import math

import polars as pl
import pytest

from runner.endpoints.demo import DemoOptions, run_demo


@pytest.fixture
def sim_demo(sim_demo_run):
    """What ``run_demo`` returned in the suite's one demo run."""
    return sim_demo_run.result


@pytest.mark.slow
def test_sim_demo_recovers_the_reference_ranking(sim_demo):
    taus = dict(zip(sim_demo.kendall["dimension"], sim_demo.kendall["tau"]))
    assert sorted(taus) == ["idv", "ivr", "lto", "mas", "pdi", "uai"]
    defined = [t for t in taus.values() if not math.isnan(t)]
    # Respondents are drawn from the reference scores: tau is clearly positive on average and on most dimensions.
    assert sum(defined) / len(defined) > 0.4
    assert sum(t > 0 for t in defined) >= 4
    for row in sim_demo.kendall.iter_rows(named=True):
        assert -1 <= row["ci_low"] <= row["ci_high"] <= 1


@pytest.mark.slow
def test_sim_demo_parses_every_answer_and_stores_every_cell(sim_demo):
    assert sim_demo.parse_rate == 1.0
    responses = pl.read_parquet(sim_demo.run_dir / "responses" / "*.parquet")
    assert responses.height == 4 * 24 * 5
    assert responses["cell_key"].n_unique() == responses.height


@pytest.mark.slow
def test_sim_demo_constrains_replies_and_probes_the_endpoint(sim_demo):
    import json

    responses = pl.read_parquet(sim_demo.run_dir / "responses" / "*.parquet")
    assert set(responses["constraint"]) == {"grammar"} and set(responses["max_tokens"]) == {2}
    assert responses["response_text"].is_in(["1", "2", "3", "4", "5"]).all()
    manifest = json.loads((sim_demo.run_dir / "manifest.json").read_text())
    probe = manifest["determinism_probe"]["sim"]
    assert probe["repeats"] == 4 and probe["max_tokens"] == 8
    assert all(c["requests"] == 4 and c["errors"] == 0 for c in probe["conditions"])
    assert "Determinism probe: sim" in sim_demo.report.read_text()


@pytest.mark.slow
def test_sim_demo_report_is_written_with_its_figures(sim_demo):
    html = sim_demo.report.read_text()
    assert sim_demo.report.name == "index.html"
    # one point per persona (its seeds averaged) leaves too few respondents for a t-SNE: the others are drawn
    for name in ("kendall", "scores"):  # one model, one language: no status bars (the Data quality line says it)
        assert f'id="fig-{name}"' in html and (sim_demo.report.parent / "figures" / f"{name}.svg").is_file()
    assert html.count("<img") == html.count("<figure")
    assert "Kendall" in html


@pytest.mark.slow
def test_demo_command_prints_parse_rate_taus_and_report(sim_demo_run):
    assert sim_demo_run.exit_code == 0
    out = sim_demo_run.stdout
    assert "parse rate: 100.0%" in out
    for dim in ("PDI", "IDV", "MAS", "UAI", "LTO", "IVR"):
        assert f"  {dim}  " in out
    assert out.strip().endswith(str(sim_demo_run.out / "run" / "report" / "index.html"))
    assert sim_demo_run.result.report == sim_demo_run.out / "run" / "report" / "index.html"


def test_demo_rejects_a_single_seed(tmp_path):
    with pytest.raises(ValueError, match="seeds: 1 must be at least 2"):
        run_demo(tmp_path, DemoOptions(endpoint="sim", seeds=1))
