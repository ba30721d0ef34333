"""run.determinism_probe: the probe runs before the sweep, lands in the manifest, survives resume, is reported."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from _loopback_server import LoopbackServer, chat_ok
from _runner_support import make_spec
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.errors import SpecError
from runner.report.html import render_report
from runner.rundir import read_manifest
from runner.sweep.probe import SESSION_MAX_TOKENS as PROBE_MAX_TOKENS
from runner.sweep.probe import SESSION_REPEATS as PROBE_REPEATS
from runner.sweep.probe import probe_endpoint
from runner.sweep.session import run_sweep
from runner.sweep.spec import spec_from_dict
from runner.sweep.transport import aiohttp_transport
from test_runner_providers import ShapeServer

DESIGN = {
    "personas": ["United States", "China", "Japan"],
    "questions": list(range(1, 25)),
    "seeds": [1, 2],
    "temperature": [1.0],
}


def _probe_requests(sim) -> int:
    return sum(1 for e in sim.log if e.outcome == "unknown_prompt")  # the probe's prompt is no survey item


@pytest.mark.slow
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


def test_the_probe_sends_its_requests_as_the_sweep_does(tmp_path: Path, monkeypatch) -> None:
    """max_tokens_field (max_completion_tokens for reasoning models), extra_headers and extra_body reach the
    probe's requests exactly as they reach the sweep's (one provider mapping serves both)."""
    monkeypatch.setenv("HOFCAT_TEST_KEY", "sk-probe-test-0123456789")
    with LoopbackServer(lambda body, seq: chat_ok("3")) as server:
        spec = make_spec(
            server.base_url,
            endpoint={"model": "o3-mini", "api_key_env": "HOFCAT_TEST_KEY"},  # auto: max_completion_tokens
            design={"personas": ["China"], "questions": [1], "seeds": [1], "temperature": [0.0]},
        )
        raw = spec.raw
        raw["endpoints"][0].update(extra_headers={"X-Route": "eu-1"}, extra_body={"provider": {"order": ["a"]}})
        spec = spec_from_dict(raw, source="probe-spec")
        endpoint = spec.endpoints[0]

        async def probe() -> None:
            transport = aiohttp_transport(endpoint)
            try:
                await probe_endpoint(endpoint, transport, repeats=PROBE_REPEATS, max_tokens=PROBE_MAX_TOKENS)
            finally:
                await transport.close()

        asyncio.run(probe())
        probed = list(server.requests)
        run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
        swept = server.requests[len(probed) :]
    assert len(probed) == 5 * PROBE_REPEATS and len(swept) == 1  # the plan is one cell
    for raw, headers in probed + swept:
        body = json.loads(raw)
        assert "max_tokens" not in body and body["provider"] == {"order": ["a"]}
        assert headers["X-Route"] == "eu-1" and headers["Authorization"] == "Bearer sk-probe-test-0123456789"
    assert {json.loads(raw)["max_completion_tokens"] for raw, _ in probed} == {PROBE_MAX_TOKENS}
    sweep_body = json.loads(swept[0][0])
    probe_body = json.loads(probed[0][0])
    assert set(probe_body) - {"seed"} == set(sweep_body) - {"seed"}  # the same fields, built by one function
