"""Fail fast, say why (issue 26, items 2 and 3), through the ``hofcat`` command against real loopback servers.

An endpoint nobody answers (connection refused, or reset before any byte) is stopped after ``stop_after_fatal``
consecutive such attempts, as a streak of 401/403/404 is: exit 4, a hint naming its base URL, its cells left
unsent (no failure stored) for a rerun, which sends them once the server is up; the progress line shows each
endpoint's last failure reason. A reply whose model is not the one asked for (nor a snapshot of it) stops the
endpoint with one line, unless the spec's ``served_models`` accepts it; the manifest names the served models.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from _loopback_server import LoopbackServer, chat_ok
from _runner_support import spec_text
from runner.endpoints.sim import SimServerThread
from runner.rundir import read_dataset, read_manifest

ROOT = Path(__file__).resolve().parent.parent
DESIGN = {"personas": ["United States", "China", "Germany", "Japan"], "questions": list(range(1, 13)), "seeds": [1]}
CELLS = 4 * 12 * 2  # × temperature 0.0, 1.0


def hofcat(*args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "hofcat", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done, time.monotonic() - started


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_spec(path: Path, base_url: str, **endpoint: object) -> Path:
    # the default retry policy (max_retries 6, exponential waits): a dead endpoint used to cost every cell 7 tries
    path.write_text(spec_text(base_url, design=DESIGN, endpoint={"timeout_s": 10.0, "max_retries": 6, **endpoint}))
    return path


@pytest.mark.slow
def test_a_refused_endpoint_stops_in_seconds_names_its_url_and_its_cells_run_later(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    spec = write_spec(tmp_path / "s.toml", url)
    done, took = hofcat("run", str(spec), "--out", str(tmp_path / "run"), "--log-every", "0.2")
    assert done.returncode == 4, done.stderr
    assert took < 60, took  # 96 cells × 7 attempts with backoff took minutes before
    stop = [line for line in done.stderr.splitlines() if "stopped after" in line]
    assert stop and "consecutive connection failures" in stop[-1] and url in stop[-1], done.stderr
    assert "is a server listening there" in stop[-1]
    assert "last failure: ConnectionFailed" in done.stderr  # the progress line says why, per endpoint
    run = tmp_path / "run"
    assert len(read_dataset(run, "failures")) == 0 and len(read_dataset(run, "responses")) == 0
    with SimServerThread(port=port) as sim:  # the server is up: the same command sends every cell
        done, _ = hofcat("run", str(spec), "--out", str(run), "--log-every", "1000")
        assert done.returncode == 0, done.stderr
        assert len(sim.log.entries()) == CELLS
    assert len(read_dataset(run, "responses")) == CELLS


class ResettingServer:
    """A TCP server on 127.0.0.1 that accepts each connection and resets it before sending a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            conn.close()  # linger 0: RST

    def __enter__(self) -> ResettingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


@pytest.mark.slow
def test_a_server_that_resets_before_replying_stops_the_endpoint_after_the_streak(tmp_path: Path) -> None:
    with ResettingServer() as server:
        spec = write_spec(tmp_path / "s.toml", f"http://127.0.0.1:{server.port}/v1", max_concurrency=2)
        done, _ = hofcat("run", str(spec), "--out", str(tmp_path / "run"))
        connections = server.connections
    assert done.returncode == 4, done.stderr
    assert "stopped after 5 consecutive connection failures" in done.stderr
    # the streak of 5, plus the attempts already admitted when it ended: 10 seen on a loaded machine, 14 at CI's load;
    # before the stop every cell was tried 7 times (hundreds of connections), so 30 only a regression reaches
    assert connections <= 30, connections
    assert len(read_dataset(tmp_path / "run", "failures")) == 0


@pytest.mark.slow
def test_a_streak_broken_by_replies_does_not_stop_the_endpoint(tmp_path: Path) -> None:
    """Failures of their own cells (a 500 now and then) never stop an endpoint: only an unbroken streak does."""

    def answer(body, seq):
        return (500, {"error": "busy"}, {}) if seq % 3 == 0 else chat_ok("3")

    with LoopbackServer(answer) as server:
        spec = write_spec(tmp_path / "s.toml", server.base_url, max_retries=3, max_concurrency=1)
        done, _ = hofcat("run", str(spec), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert len(read_dataset(tmp_path / "run", "responses")) == CELLS


def reporting(model: str):
    def answer(body, seq):
        status, payload, headers = chat_ok("3")
        return status, {**payload, "model": model}, headers

    return answer


def test_a_reply_from_another_model_stops_the_endpoint_in_one_line(tmp_path: Path) -> None:
    with LoopbackServer(reporting("SmolLM2-135M-Instruct")) as server:
        spec = write_spec(tmp_path / "s.toml", server.base_url, model="gpt-4o-mini")
        done, _ = hofcat("run", str(spec), "--out", str(tmp_path / "run"))
        sent = len(server.arrivals)
    assert done.returncode == 4, done.stderr
    line = next(line for line in done.stderr.splitlines() if "stopped" in line and "asked for model" in line)
    assert "asked for model 'gpt-4o-mini', the server answered as 'SmolLM2-135M-Instruct'" in line
    assert "served_models" in line  # how to accept it
    assert sent <= 8  # the first reply stops it (plus those already in flight)
    run = tmp_path / "run"
    assert len(read_dataset(run, "responses")) == 0 and len(read_dataset(run, "failures")) == 0


@pytest.mark.slow
def test_served_models_accepts_a_named_model_and_the_manifest_names_it(tmp_path: Path) -> None:
    with LoopbackServer(reporting("SmolLM2-135M-Instruct")) as server:
        spec = write_spec(
            tmp_path / "s.toml", server.base_url, model="gpt-4o-mini", served_models=["SmolLM2-135M-Instruct"]
        )
        done, _ = hofcat("run", str(spec), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    session = read_manifest(tmp_path / "run")["sessions"][-1]
    assert session["served_models"] == {"sim": {"SmolLM2-135M-Instruct": CELLS}}


@pytest.mark.slow
def test_a_dated_snapshot_is_the_model_asked_for(tmp_path: Path) -> None:
    with LoopbackServer(reporting("gpt-4o-2024-08-06")) as server:
        spec = write_spec(tmp_path / "s.toml", server.base_url, model="gpt-4o")
        done, _ = hofcat("run", str(spec), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert read_manifest(tmp_path / "run")["sessions"][-1]["served_models"] == {"sim": {"gpt-4o-2024-08-06": CELLS}}
