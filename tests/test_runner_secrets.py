"""API keys never reach the run directory or the logs, even when a server echoes them back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aiohttp import web

from _runner_support import spec_text
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset
from test_runner_providers import ShapeServer

KEY = "sk-planted-4f2b9c1e7d3a"


class EchoingServer(ShapeServer):
    """Rejects every request with a 401 whose body quotes the Authorization header it received."""

    async def _handle(self, request: web.Request) -> web.Response:
        return web.json_response({"error": f"invalid key: {request.headers.get('Authorization')}"}, status=401)


def _run(spec: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOFCAT_PLANTED_KEY": KEY}
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(spec), "--out", str(out), "--log-every", "0.2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _assert_no_key(out: Path, *logs: str) -> None:
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    for log in logs:
        assert KEY not in log


def test_planted_key_is_in_no_file_and_no_log(tmp_path: Path) -> None:
    with SimServerThread(SimConfig(seed=9, error_rate=0.08, malformed_rate=0.04, refusal_rate=0.1)) as sim:
        spec = tmp_path / "spec.toml"
        spec.write_text(spec_text(sim.base_url, endpoint={"api_key_env": "HOFCAT_PLANTED_KEY"}))
        done = _run(spec, tmp_path / "run")
    # 0, or 3 when some cell exhausted its retries against the faulty simulator
    failed = read_dataset(tmp_path / "run", "failures").num_rows
    assert done.returncode == (3 if failed else 0), done.stderr
    assert "hofcat:" in done.stderr  # progress lines were logged (and checked below)
    _assert_no_key(tmp_path / "run", done.stdout, done.stderr)
    assert "HOFCAT_PLANTED_KEY" in (tmp_path / "run" / "manifest.json").read_text()  # the name, not the key


def test_a_key_echoed_in_an_error_body_is_redacted(tmp_path: Path) -> None:
    with EchoingServer("openai") as server:
        spec = tmp_path / "spec.toml"
        spec.write_text(
            spec_text(
                server.base_url,
                endpoint={"api_key_env": "HOFCAT_PLANTED_KEY"},
                design={"personas": ["China"], "questions": [1, 2], "seeds": [1], "temperature": [0.0]},
            )
        )
        done = _run(spec, tmp_path / "run")
    assert done.returncode == 3 and "2 cells failed for good" in done.stderr, done.stderr
    failures = read_dataset(tmp_path / "run", "failures").to_pylist()
    assert len(failures) == 2
    # resuming without --retry-failed leaves them failed: still not a clean exit
    again = _run(spec, tmp_path / "run")
    assert again.returncode == 3 and "2 cells failed for good" in again.stderr, again.stderr and all(
        f["error_class"] == "FatalRequestError" for f in failures
    )
    assert all(f["attempts"] == 1 and f["http_status"] == 401 for f in failures)  # a 401 is not retried
    assert all("Bearer <redacted>" in f["error_message"] for f in failures)
    _assert_no_key(tmp_path / "run", done.stdout, done.stderr)


def test_missing_key_variable_is_a_spec_error_naming_the_variable(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text("http://127.0.0.1:9/v1", endpoint={"api_key_env": "HOFCAT_UNSET_VARIABLE_X"}))
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(spec), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "api_key_env = 'HOFCAT_UNSET_VARIABLE_X'" in done.stderr and not (tmp_path / "run").exists()
