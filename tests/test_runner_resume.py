"""Crash safety and resume: SIGKILL mid-run, SIGINT mid-run, then the same command again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from _runner_support import check_run_dir, spec_text
from runner.endpoints.sim import Latency, SimConfig, SimServerThread
from runner.rundir import read_dataset, read_manifest
from runner.sweep.spec import parse_spec

DESIGN = {
    "personas": ["United States", "China", "Japan"],
    "questions": list(range(1, 25)),
    "seeds": [1, 2, 3],
    "temperature": [0.7],
}  # 216 cells


def _start_run(spec_path: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "run", str(spec_path), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _connections_to(process: subprocess.Popen, port: int) -> list:
    """The process's established TCP connections to ``port`` on 127.0.0.1."""
    try:
        connections = psutil.Process(process.pid).net_connections(kind="tcp")
    except psutil.NoSuchProcess:
        return []
    return [c for c in connections if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED]


def _wait_until(event: Callable[[], bool], process: subprocess.Popen, log: Path, timeout_s: float = 120.0) -> None:
    """Wait for ``event()`` while the process runs (a generous deadline: only a hang reaches it)."""
    deadline = time.monotonic() + timeout_s
    while not event():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.02)


def _wait_for_parts(out: Path, parts: int, process: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(list((out / "responses").glob("part-*.parquet"))) >= parts:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    raise AssertionError("the run committed no parts in time")


def _spec(tmp_path: Path, base_url: str) -> tuple[Path, object]:
    text = spec_text(
        base_url, run={"batch_rows": 20, "flush_interval_s": 0.2}, endpoint={"max_concurrency": 4}, design=DESIGN
    )
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path, parse_spec(text)


def _run_until_parts_then_signal(
    tmp_path: Path, sim: SimServerThread, out: Path, parts: int, sig: signal.Signals
) -> tuple[Path, object, subprocess.Popen]:
    """Start ``hofcat run`` against ``sim``, wait until it committed ``parts`` parts, then send it ``sig``."""
    spec_path, spec = _spec(tmp_path, sim.base_url)
    process = _start_run(spec_path, out)
    _wait_for_parts(out, parts, process)
    process.send_signal(sig)
    return spec_path, spec, process


@pytest.mark.slow  # a sweep subprocess, killed and resumed
def test_sigkill_mid_run_then_resume_stores_every_cell_once(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimServerThread(SimConfig(seed=2, latency=Latency("fixed", 5.0))) as sim:
        spec_path, spec, process = _run_until_parts_then_signal(tmp_path, sim, out, 3, signal.SIGKILL)
        process.communicate(timeout=30)
        assert process.returncode == -signal.SIGKILL
        before = check_run_dir_partial(out)
        assert 0 < len(before) < 216
        resumed = _start_run(spec_path, out)
        _, stderr = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, stderr
    rows = check_run_dir(out, spec)
    assert len(rows) == 216 and before <= set(rows)
    sessions = read_manifest(out)["sessions"]
    assert len(sessions) == 2 and "ended_at" not in sessions[0] and sessions[1]["outcome"] == "complete"
    assert sessions[1]["already_stored"] == len(before)
    answers = read_dataset(out, "answers", ["cell_key"]).column(0).to_pylist()
    assert sorted(answers) == sorted(rows)  # answers of parts committed before the kill were kept or rebuilt


def check_run_dir_partial(out: Path) -> set[str]:
    """After a crash: every committed file reads, keys are unique; returns the stored keys."""
    import pyarrow.parquet as pq

    for path in out.rglob("*.parquet"):
        if ".tmp" not in path.parts:
            pq.read_table(path)
    keys = read_dataset(out, "responses", ["cell_key"]).column(0).to_pylist()
    assert len(keys) == len(set(keys))
    return set(keys)


@pytest.mark.slow  # a sweep subprocess, interrupted
def test_sigint_stops_intake_flushes_and_exits_resumable(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, latency=Latency("fixed", 20.0))) as sim:
        spec_path, spec, process = _run_until_parts_then_signal(tmp_path, sim, out, 1, signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 130, stderr
        assert "run the same command again to resume" in stderr
        stored = check_run_dir_partial(out)
        session = read_manifest(out)["sessions"][0]
        assert session["outcome"] == "interrupted" and session["stored"] == len(stored) < 216
        # Requests in flight at the signal were finished and stored, not lost: the server answered no
        # request whose cell is missing from the store.
        answered = sum(1 for e in sim.log.entries() if e.status == 200)
        assert answered == len(stored)
        resumed = _start_run(spec_path, out)
        _, stderr = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, stderr
    assert len(check_run_dir(out, spec)) == 216


def test_a_second_run_on_a_locked_or_foreign_directory_is_refused(tmp_path: Path) -> None:
    from runner.errors import RunDirError
    from runner.rundir import RunWriter
    from runner.sweep.session import build_manifest

    spec = parse_spec(spec_text("http://127.0.0.1:9/v1"))
    manifest = build_manifest(spec)
    writer = RunWriter.open_run(tmp_path / "run", manifest, batch_rows=10)
    try:
        try:
            RunWriter.open_run(tmp_path / "run", manifest, batch_rows=10)
        except RunDirError as exc:
            assert "another hofcat process" in str(exc)
        else:
            raise AssertionError("a second writer was allowed")
    finally:
        writer.close({})
    other = parse_spec(spec_text("http://127.0.0.1:9/v1", design={"seeds": [9]}))
    try:
        RunWriter.open_run(tmp_path / "run", build_manifest(other), batch_rows=10)
    except RunDirError as exc:
        assert spec.spec_hash in str(exc) and other.spec_hash in str(exc)
    else:
        raise AssertionError("a run directory accepted a different spec")
    assert os.path.exists(tmp_path / "run" / "manifest.json")


@pytest.mark.slow  # a sweep subprocess, interrupted twice
def test_second_sigint_abandons_requests_in_flight(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # Every request hangs far longer than the test: only abandoning them lets the run end.
    with SimServerThread(SimConfig(seed=3, hang_rate=1.0, hang_s=600.0)) as sim:
        spec_path = tmp_path / "spec.toml"
        spec_path.write_text(spec_text(sim.base_url, endpoint={"timeout_s": 500.0, "max_concurrency": 3}))
        log = tmp_path / "run.log"
        with log.open("w") as handle:  # read while the run writes it
            process = subprocess.Popen(
                [sys.executable, "-m", "runner.cli", "run", str(spec_path), "--out", str(out)],
                stdout=handle,
                stderr=handle,
                text=True,
            )
        port = int(sim.base_url.rsplit(":", 1)[1].split("/", 1)[0])
        _wait_until(lambda: len(_connections_to(process, port)) >= 3, process, log)  # three requests hang
        process.send_signal(signal.SIGINT)
        _wait_until(lambda: "stopping: no new requests" in log.read_text(), process, log)
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)  # waiting the hangs out would take 500 s; abandoning them, a moment
        stderr = log.read_text()
        assert time.monotonic() - started < 60  # well under hang_s: the requests were abandoned, not waited out
    assert process.returncode == 130, stderr
    assert "second interrupt: abandoning requests in flight" in stderr
    assert read_dataset(out, "responses").num_rows == 0 and read_dataset(out, "failures").num_rows == 0
    assert read_manifest(out)["sessions"][0]["outcome"] == "interrupted"
