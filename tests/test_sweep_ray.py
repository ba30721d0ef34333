"""Sweeps on a real local Ray cluster (``hofcat run --ray``): a head and two one-CPU worker nodes on 127.0.0.1
(``tests/_ray_cluster.py``) and three simulator replicas of one endpoint (``base_urls``).

A sweep on Ray stores exactly the cells and answers of the same sweep in one process; a Ray worker process
killed mid-shard and a replica stopped mid-sweep lose and duplicate nothing; the endpoint's rate limit holds
on the servers' own clocks across the workers, and across a restart without Ray; without Ray, ``--ray`` says
how to install it.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from _ray_cluster import local_cluster, loopback_checked
from _runner_support import check_run_dir, spec_text
from runner.endpoints.sim import Latency, SimConfig, SimServerThread, max_in_window
from runner.rundir import read_dataset, read_manifest
from runner.sweep.plan import iter_cells, select
from runner.sweep.session import run_sweep
from runner.sweep.spec import Spec, parse_spec

pytestmark = pytest.mark.slow  # a Ray cluster per module, seconds of real sweeps

DESIGN = {"personas": ["United States", "China", "Japan"], "questions": list(range(1, 25)), "temperature": [0.7]}


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict]:
    """A head and two one-CPU worker nodes on 127.0.0.1, this process connected as the driver."""
    with local_cluster(workers=2) as running:
        yield running


@pytest.fixture(autouse=True)
def _loopback_only(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every socket of a test on the cluster stays on 127.0.0.1/::1 (tests/_ray_cluster.py, LoopbackWatch)."""
    with loopback_checked(request):
        yield


def _sims(latency_ms: float = 20.0) -> list[SimServerThread]:
    """Three started replicas of one model: the same seed, so every replica answers a request alike."""
    sims = [SimServerThread(SimConfig(seed=3, latency=Latency("fixed", latency_ms))) for _ in range(3)]
    for sim in sims:
        sim.start()
    return sims


def _spec_text(urls: list[str], seeds: int, **endpoint: object) -> str:
    endpoint = {"base_urls": urls, "max_concurrency": 8, **endpoint}
    text = spec_text(urls[0], endpoint=endpoint, design={**DESIGN, "seeds": list(range(1, seeds + 1))})
    return text.replace(f'base_url = "{urls[0]}"\n', "")


def _spec(urls: list[str], seeds: int, **endpoint: object) -> Spec:
    return parse_spec(_spec_text(urls, seeds, **endpoint), source="test-spec")


def _outcomes_by_key(run_dir: Path) -> Counter[str]:
    """How many rows each cell key has in responses and failures together (exactly once: 1)."""
    keys = read_dataset(run_dir, "responses", ["cell_key"]).column(0).to_pylist()
    keys += read_dataset(run_dir, "failures", ["cell_key"]).column(0).to_pylist()
    return Counter(keys)


def _answers(run_dir: Path) -> set[tuple]:
    """Every parsed answer: (cell key, question, option, status)."""
    table = read_dataset(run_dir, "answers", ["cell_key", "question", "option_id", "status"])
    return set(zip(*(table.column(i).to_pylist() for i in range(4)), strict=True))


def _writers(run_dir: Path) -> set[str]:
    """The writer tokens of the responses parts (``part-N-TOKEN.parquet``)."""
    return {p.stem.rsplit("-", 1)[-1] for p in (run_dir / "responses").glob("part-*.parquet")}


def test_a_sweep_on_ray_stores_the_cells_and_answers_of_one_process(cluster, tmp_path: Path) -> None:
    sims = _sims()
    try:
        urls = [s.base_url for s in sims]
        spec = _spec(urls, seeds=2)
        (tmp_path / "spec.toml").write_text(_spec_text(urls, seeds=2))
        run_sweep(spec, tmp_path / "local", stream=io.StringIO(), live=False)
        command = [sys.executable, "-m", "runner.cli", "run", str(tmp_path / "spec.toml"), "--out"]
        ray_flags = ["--ray", cluster["address"], "--ray-workers", "2", "--log-every", "0.5"]
        done = subprocess.run(
            [*command, str(tmp_path / "ray"), *ray_flags], capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        # the same command without --ray resumes the whole sweep: nothing left to send
        again = subprocess.run(
            [*command, str(tmp_path / "ray")], capture_output=True, text=True, timeout=120, check=False
        )
        assert again.returncode == 0, again.stderr[-3000:]
    finally:
        for sim in sims:
            sim.close()
    local = check_run_dir(tmp_path / "local", spec)
    remote = check_run_dir(tmp_path / "ray", spec)
    assert len(local) == 144 and set(remote) == set(local)
    assert {k: r["response_text"] for k, r in remote.items()} == {k: r["response_text"] for k, r in local.items()}
    assert _answers(tmp_path / "ray") == _answers(tmp_path / "local") and len(_answers(tmp_path / "local")) == 144
    sessions = read_manifest(tmp_path / "ray")["sessions"]
    first, second = sessions
    assert first["outcome"] == "complete" and first["stored"] == 144 and first["ray"]["workers"] == 2
    assert [len(s["pids"]) for s in first["ray"]["shards"]] == [1, 1]  # two workers, neither retried
    assert second["already_stored"] == 144 and second["stored"] == 0 and "ray" not in second
    assert len(_writers(tmp_path / "ray")) == 2  # each worker committed parts under its own token
    assert "worker 0 (pid" in done.stderr and "worker 1 (pid" in done.stderr  # one line, per worker


class _Lines(io.StringIO):
    """A progress stream another thread can read while the sweep writes it."""

    def text(self) -> str:
        return self.getvalue()


def test_a_killed_worker_and_a_dead_replica_lose_and_duplicate_nothing(cluster, tmp_path: Path) -> None:
    from runner.sweep.cluster import run_sweep_on_ray

    sims = _sims(latency_ms=100.0)
    spec = _spec([s.base_url for s in sims], seeds=4, max_concurrency=4)  # 288 cells, 2 in flight per worker
    stream = _Lines()
    result: dict = {}

    def sweep() -> None:
        result["run"] = run_sweep_on_ray(
            spec, tmp_path / "run", address=cluster["address"], workers=2, stream=stream, live=False, log_every_s=0.2
        )

    thread = threading.Thread(target=sweep)
    thread.start()
    try:
        # the worker of shard 0 has committed a part (flushes every 0.5 s) and has cells left: kill its process
        pattern = re.compile(r"worker 0 \(pid (\d+)\): (\d+)/(\d+) cells")
        deadline = time.monotonic() + 180
        while not ((m := pattern.findall(stream.text())) and 30 <= int(m[-1][1]) < int(m[-1][2]) - 40):
            assert thread.is_alive() and time.monotonic() < deadline, stream.text()[-2000:]
            time.sleep(0.05)
        os.kill(int(m[-1][0]), signal.SIGKILL)
        time.sleep(1.0)
        sims[0].close()  # and one replica dies for the rest of the sweep
        thread.join(timeout=240)
        assert not thread.is_alive(), "the sweep did not finish"
    finally:
        for sim in sims:
            sim.close()
    outcomes = _outcomes_by_key(tmp_path / "run")
    assert set(outcomes) == {c.key for c in iter_cells(spec)} and set(outcomes.values()) == {1}
    assert len(check_run_dir(tmp_path / "run", spec)) == 288
    session = read_manifest(tmp_path / "run")["sessions"][-1]
    assert session["outcome"] == "complete" and session["stored"] == 288 and session["failed"] == 0
    assert result["run"].stored == 288
    shards = {s["shard"]: s for s in session["ray"]["shards"]}
    assert len(shards[0]["pids"]) == 2 and len(set(shards[0]["pids"])) == 2  # Ray ran shard 0 again, elsewhere
    # the killed attempt's parts stayed, and its retry resumed after them: three writers stored the cells
    assert len(_writers(tmp_path / "run")) == 3


def test_the_endpoint_limit_holds_across_workers_and_a_restart_without_ray(cluster, tmp_path: Path) -> None:
    """20 requests per 3 s window for the endpoint (a scaled 60 s window), whatever the workers and replicas, and
    a burst of 20 (no pacing): two workers each limiting on their own would send 40 at once, and so would a resume
    that did not know what the Ray workers sent in the last window."""
    from runner.sweep.cluster import run_sweep_on_ray

    sims = _sims(latency_ms=30.0)
    try:
        limits = {"requests_per_minute": 20, "rate_window_s": 3.0, "burst": 20}
        spec = _spec([s.base_url for s in sims], seeds=1, **limits)  # 72 cells
        first = select(spec, limit=40)
        out = tmp_path / "run"
        ray_run = run_sweep_on_ray(
            spec, out, address=cluster["address"], stream=io.StringIO(), live=False, selection=first
        )
        assert ray_run.stored == 40
        # at once, in one process: the journal the limiter actor kept carries the last window over
        rest = run_sweep(spec, out, stream=io.StringIO(), live=False)
        assert rest.stored == 32
        arrivals = sorted(e.arrival_unix for sim in sims for e in sim.log.entries())
    finally:
        for sim in sims:
            sim.close()
    assert len(check_run_dir(out, spec)) == 72 == len(arrivals)
    assert max_in_window(arrivals, 3.0) == 20  # the limit is reached, never exceeded
    assert read_manifest(out)["sessions"][0]["ray"]["workers"] == 2  # by default one per CPU of the cluster


def test_without_ray_run_says_how_to_install_it(tmp_path: Path) -> None:
    # ``sys.modules['ray'] = None`` makes ``import ray`` raise ImportError, as on a machine without the extra.
    (tmp_path / "spec.toml").write_text(_spec_text(["http://127.0.0.1:9/v1"], seeds=1))
    argv = ["run", str(tmp_path / "spec.toml"), "--out", str(tmp_path / "run"), "--ray", "auto"]
    script = f"import sys; sys.modules['ray'] = None\nfrom runner.cli import main\nsys.exit(main({argv!r}))\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "hofcat run: error: --ray: Ray is not installed; install it with pip install 'hofcat[ray]'"
    )
    assert not (tmp_path / "run").exists()


def test_ctrl_c_stops_every_worker_and_a_run_without_ray_resumes(cluster, tmp_path: Path) -> None:
    sims = _sims(latency_ms=200.0)
    try:
        urls = [s.base_url for s in sims]
        spec = _spec(urls, seeds=2, max_concurrency=4)
        (tmp_path / "spec.toml").write_text(_spec_text(urls, seeds=2, max_concurrency=4))
        command = [
            sys.executable,
            "-m",
            "runner.cli",
            "run",
            str(tmp_path / "spec.toml"),
            "--out",
            str(tmp_path / "run"),
        ]
        log = tmp_path / "driver.log"
        with log.open("w") as handle:
            driver = subprocess.Popen(
                [*command, "--ray", cluster["address"], "--ray-workers", "2", "--log-every", "0.2"],
                stderr=handle,
                stdout=handle,
            )
        deadline = time.monotonic() + 180
        while not re.search(r"worker 1 \(pid \d+\): [1-9]\d+/", log.read_text()):
            assert driver.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.05)
        driver.send_signal(signal.SIGINT)
        assert driver.wait(timeout=120) == 130, log.read_text()[-2000:]
        first = read_manifest(tmp_path / "run")["sessions"][-1]
        rest = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert rest.returncode == 0, rest.stderr[-2000:]
    finally:
        for sim in sims:
            sim.close()
    assert first["outcome"] == "interrupted" and 0 < first["stored"] < 144
    assert "stopping: no new requests on any worker" in log.read_text()
    second = read_manifest(tmp_path / "run")["sessions"][-1]
    assert second["already_stored"] == first["stored"] and second["stored"] == 144 - first["stored"]
    assert set(_outcomes_by_key(tmp_path / "run").values()) == {1}
    assert len(check_run_dir(tmp_path / "run", spec)) == 144
