"""run.determinism_probe: the probe runs before the sweep, lands in the manifest, survives resume, is reported."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from _runner_support import make_spec
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.errors import SpecError
from runner.report.html import render_report
from runner.rundir import read_manifest
from runner.sweep.session import PROBE_MAX_TOKENS, PROBE_REPEATS, run_sweep
from test_runner_providers import ShapeServer

DESIGN = {
    "personas": ["United States", "China", "Japan"],
    "questions": list(range(1, 25)),
    "seeds": [1, 2],
    "temperature": [1.0],
}


def _probe_requests(sim) -> int:
    return sum(1 for e in sim.log if e.outcome == "unknown_prompt")  # the probe's prompt is no survey item


def test_the_probe_runs_once_per_run_and_reaches_the_report(tmp_path: Path) -> None:
    run = tmp_path / "run"
    stream = io.StringIO()
    with SimServerThread(SimConfig(seed=2)) as sim:
        spec = make_spec(sim.base_url, run={"determinism_probe": True}, design=DESIGN)
        run_sweep(spec, run, live=False, stream=stream)
        # 4 conditions × repeats, plus repeats distractors, each once
        assert _probe_requests(sim) == 5 * PROBE_REPEATS
        first = read_manifest(run)["determinism_probe"]
        run_sweep(spec, run, live=False, stream=io.StringIO())  # resume: the earlier result is kept
        assert _probe_requests(sim) == 5 * PROBE_REPEATS
    manifest = read_manifest(run)
    assert manifest["determinism_probe"] == first and list(first) == ["sim"]
    probe = first["sim"]
    assert (probe["repeats"], probe["max_tokens"], probe["model"]) == (PROBE_REPEATS, PROBE_MAX_TOKENS, "sim-1")
    assert [c["name"] for c in probe["conditions"]] == ["t0", "t0_seed", "hot_seed", "hot_seeds"]
    assert all(c["requests"] == PROBE_REPEATS and c["errors"] == 0 for c in probe["conditions"])
    # The simulator answers any non-survey prompt with one fixed text: the control cannot vary.
    assert probe["seed"] == "inconclusive" and probe["seed_honoured"] is False
    assert "determinism probe: seed inconclusive" in stream.getvalue()
    assert len(manifest["sessions"]) == 2
    analyze_run(run, AnalysisOptions(n_resamples=50, permutations=9))
    page = render_report(run).read_text()
    assert "<h2>Determinism</h2>" in page and "Determinism probe: sim (sim-1)" in page
    assert "Seed <b>inconclusive</b>" in page and "hot_seeds" in page


def test_no_probe_unless_asked_and_none_for_apis_that_cannot_take_it(tmp_path: Path, monkeypatch) -> None:
    with SimServerThread(SimConfig(seed=2)) as sim:
        spec = make_spec(sim.base_url, design={"personas": ["China"], "questions": [1, 2], "seeds": [1]})
        run_sweep(spec, tmp_path / "plain", live=False, stream=io.StringIO())
        assert _probe_requests(sim) == 0
    assert "determinism_probe" not in read_manifest(tmp_path / "plain")
    monkeypatch.setenv("HOFCAT_TEST_KEY", "k-probe-test")
    with ShapeServer("anthropic") as server:
        spec = make_spec(
            server.base_url,
            run={"determinism_probe": True},
            endpoint={"provider": "anthropic", "api_key_env": "HOFCAT_TEST_KEY"},
            design={"personas": ["China"], "questions": [1], "seeds": [1], "temperature": [0.0]},
        )
        run_sweep(spec, tmp_path / "anthropic", live=False, stream=io.StringIO())
    assert len(server.requests) == 1  # the one cell: no probe requests
    assert "determinism_probe" not in read_manifest(tmp_path / "anthropic")


def test_determinism_probe_must_be_a_boolean() -> None:
    with pytest.raises(SpecError, match=r"run.determinism_probe = 'yes': must be true or false"):
        make_spec("http://127.0.0.1:9/v1", run={"determinism_probe": "yes"})
