"""Pilot controls and spec checks as a user meets them through the ``hofcat`` command (issue 12).

``run --limit N`` (the first N cells, dealt round-robin by endpoint; a rerun without it sends the rest),
``run --endpoint NAME``, ``plan --show-prompts K`` (the bytes a run sends), the day-long ETA warning, the
range checks' exit status, and a run mixing item and survey mode. Real simulator and loopback servers.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from _loopback_server import LoopbackServer, chat_ok
from _runner_support import check_run_dir, make_spec, spec_text
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset
from runner.sweep.plan import iter_cells
from runner.sweep.spec import load_spec

REPO = Path(__file__).resolve().parent.parent


def hofcat(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the ``hofcat`` command in a child process; its exit status, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (exit 2, no traceback)."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def two_endpoint_spec(path: Path, url_a: str, url_b: str, extra_b: str = "") -> Path:
    """Endpoint "a" (48 cells) and "b" (with ``extra_b`` lines, e.g. an ``[endpoints.design]``), both loopback."""
    path.write_text(
        spec_text(url_a, endpoint={"name": "a"})
        + f'[[endpoints]]\nname = "b"\nprovider = "openai"\nbase_url = "{url_b}"\nmodel = "sim-1"\n'
        + "max_retries = 10\ntimeout_s = 2.0\n"
        + extra_b
    )
    return path


@pytest.mark.slow
def test_seeds_past_int64_are_refused_before_anything_is_sent(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(spec_text("http://127.0.0.1:9/v1", design={"seeds": [99999999999999999999]}))
    for args in (["plan", str(spec)], ["run", str(spec), "--out", str(tmp_path / "run")]):
        err = one_line_error(hofcat(*args))
        assert f"{spec}: design.seeds = 99999999999999999999: must be integers 0-9223372036854775807 (int64)" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_largest_seed_the_store_holds_is_sent_and_stored(tmp_path: Path) -> None:
    with SimServerThread(SimConfig(seed=1)) as sim:
        spec = tmp_path / "s.toml"
        spec.write_text(spec_text(sim.base_url, design={"seeds": [2**63 - 1], "questions": [1], "temperature": 0.0}))
        done = hofcat("run", str(spec), "--out", str(tmp_path / "run"))
        assert done.returncode == 0, done.stderr
        assert [e.seed for e in sim.log] == [2**63 - 1] * 2
    assert read_dataset(tmp_path / "run", "responses").column("seed").to_pylist() == [2**63 - 1] * 2


@pytest.mark.slow
def test_limit_sends_the_first_cells_round_robin_and_a_rerun_sends_the_rest(tmp_path: Path) -> None:
    with SimServerThread(SimConfig(seed=1)) as sim_a, SimServerThread(SimConfig(seed=2)) as sim_b:
        spec_path = two_endpoint_spec(tmp_path / "s.toml", sim_a.base_url, sim_b.base_url)
        spec = load_spec(spec_path)
        a, b = spec.endpoints
        out = tmp_path / "run"
        done = hofcat("run", str(spec_path), "--out", str(out), "--limit", "7")
        assert done.returncode == 0, done.stderr
        assert "pilot: 7 of the plan's 96 cells selected" in done.stderr and "warning" not in done.stderr
        assert (len(sim_a.log), len(sim_b.log)) == (4, 3)  # dealt a, b, a, b, a, b, a
        stored = set(read_dataset(out, "responses").column("cell_key").to_pylist())
        first = [c.key for c in iter_cells(spec, a)][:4] + [c.key for c in iter_cells(spec, b)][:3]
        assert stored == set(first)
        again = hofcat("run", str(spec_path), "--out", str(out), "--limit", "7")  # the same pilot: nothing new
        assert again.returncode == 0 and "0 stored, 0 failed, 7 stored before" in again.stderr
        rest = hofcat("run", str(spec_path), "--out", str(out))
        assert rest.returncode == 0, rest.stderr
        assert "89 stored, 0 failed, 7 stored before" in rest.stderr and "pilot" not in rest.stderr
        assert (len(sim_a.log), len(sim_b.log)) == (48, 48)  # no cell sent twice
    check_run_dir(out, spec)


@pytest.mark.slow
def test_endpoint_sends_only_that_endpoints_cells_and_an_unknown_name_is_refused(tmp_path: Path) -> None:
    with SimServerThread(SimConfig(seed=1)) as sim_a, SimServerThread(SimConfig(seed=2)) as sim_b:
        # b follows a small design of its own; its key variable is unset, which only matters if b is sent
        spec_path = two_endpoint_spec(
            tmp_path / "s.toml", sim_a.base_url, sim_b.base_url, "[endpoints.design]\nseeds = [1]\ntemperature = 0.0\n"
        )
        spec_path.write_text(
            spec_path.read_text().replace('name = "a"\n', 'name = "a"\napi_key_env = "HOFCAT_UNSET_KEY"\n')
        )
        out = tmp_path / "run"
        done = hofcat("run", str(spec_path), "--out", str(out), "--endpoint", "b")
        assert done.returncode == 0, done.stderr
        assert (len(sim_a.log), len(sim_b.log)) == (0, 2 * 6)
        assert set(read_dataset(out, "responses").column("endpoint").to_pylist()) == {"b"}
        err = one_line_error(hofcat("run", str(spec_path), "--out", str(out), "--endpoint", "c"))
        assert "--endpoint 'c': no such endpoint (endpoints: a, b)" in err
    status = hofcat("status", str(out), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["remaining"] == 48  # a's cells remain


@pytest.mark.slow
def test_show_prompts_prints_the_bytes_a_run_sends_without_the_key(tmp_path: Path) -> None:
    key = "sk-test-" + "k3y" * 10
    env = {"HOFCAT_PILOT_KEY": key}
    with LoopbackServer(lambda body, seq: chat_ok()) as server:
        spec = tmp_path / "s.toml"
        url = f"http://127.0.0.1:{server.port}/v1"
        spec.write_text(spec_text(url, endpoint={"api_key_env": "HOFCAT_PILOT_KEY"}, design={"shuffle_options": True}))
        shown = hofcat("plan", str(spec), "--show-prompts", "5", "--json", env=env)
        assert shown.returncode == 0, shown.stderr
        prompts = json.loads(shown.stdout)["prompts"]
        text = hofcat("plan", str(spec), "--show-prompts", "5", env=env)
        assert text.returncode == 0 and "── request 5 of 5" in text.stdout
        assert "$HOFCAT_PILOT_KEY, not shown" in text.stdout
        run = hofcat("run", str(spec), "--out", str(tmp_path / "run"), "--limit", "5", env=env)
        assert run.returncode == 0, run.stderr
    assert len(prompts) == len(server.requests) == 5
    assert sorted(p["body"].encode() for p in prompts) == sorted(body for body, _ in server.requests)
    assert all(f"{url}/chat/completions" == p["url"] for p in prompts)
    assert all(h["Authorization"] == f"Bearer {key}" for _, h in server.requests)  # the run sends the key ...
    for out in (shown.stdout, text.stdout):  # ... the plan never shows it, nor a piece of it
        assert key[8:16] not in out and "Authorization" not in out
    for p in prompts:
        assert p["body"] in text.stdout  # the text form prints the same exact body


@pytest.mark.slow
def test_run_warns_before_a_sweep_that_needs_more_than_a_day(tmp_path: Path) -> None:
    from runner.commands.run import warn_if_long
    from runner.sweep.plan import select

    # 24 cells per seed at 1 request per minute: 32 seeds take 12.8 hours, 64 seeds 25.6 hours
    slow = make_spec("http://127.0.0.1:9/v1", endpoint={"requests_per_minute": 1}, design={"seeds": list(range(32))})
    stream = io.StringIO()
    assert warn_if_long(slow, select(slow), stream) == pytest.approx(768 * 60)
    assert stream.getvalue() == ""  # 12.8 h: no warning
    slower = make_spec("http://127.0.0.1:9/v1", endpoint={"requests_per_minute": 1}, design={"seeds": list(range(64))})
    assert warn_if_long(slower, select(slower), stream) == pytest.approx(1536 * 60)
    assert (
        "needs at least 25.6 h (endpoint 'sim': 1536 cells at 1 requests/min (requests_per_minute 1))"
        in stream.getvalue()
    )
    assert warn_if_long(slower, select(slower, limit=10), io.StringIO()) == pytest.approx(600)
    with SimServerThread(SimConfig(seed=1)) as sim:
        spec = tmp_path / "s.toml"
        spec.write_text(spec_text(sim.base_url, endpoint={"requests_per_minute": 1}, design={"seeds": list(range(64))}))
        with subprocess.Popen(
            [sys.executable, "-m", "runner.cli", "run", str(spec), "--out", str(tmp_path / "run")],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
        ) as child:
            try:
                line = child.stderr.readline()
                assert line.startswith("hofcat run: warning: this sweep needs at least 25.6 h"), line
                child.send_signal(signal.SIGINT)
                assert child.wait(60) == 130
            finally:
                if child.poll() is None:
                    child.kill()


def test_item_and_survey_in_one_run_and_the_analysis_groups_by_mode(tmp_path: Path) -> None:
    from runner.analyze.design import infer_design, varying
    from runner.analyze.load import load_answers
    from runner.sweep.session import run_sweep

    with SimServerThread(SimConfig(seed=3)) as sim:
        spec = make_spec(sim.base_url, design={"mode": ["item", "survey"], "questions": [1, 2, 3], "seeds": [1, 2]})
        result = run_sweep(spec, tmp_path / "run", stream=io.StringIO())
        assert (result.stored, result.failed) == (2 * 3 * 2 * 2 + 2 * 1 * 2 * 2, 0)
        assert sorted({e.mode for e in sim.log}) == ["item", "survey"]
    rows = check_run_dir(tmp_path / "run", spec)
    assert sorted(r["mode"] for r in rows.values()).count("survey") == 8
    answers = load_answers(tmp_path / "run")
    design = infer_design(answers.collect_schema().names())
    assert "mode" in design.factors and "mode" in varying(answers, design.factors)
