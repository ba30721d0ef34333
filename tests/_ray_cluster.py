"""A real local Ray cluster for the tests: ``ray start --head`` plus worker nodes, all on 127.0.0.1.

The head has no CPUs (it only schedules), each worker node one (unless asked), so where a task runs is a
worker node and how many run at once is known. Started once per test module (``local_cluster``) and stopped at
the end; this process connects as the driver.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(args: list[str], log: Path) -> subprocess.Popen:
    """``ray start --block ARGS`` in the background, returned once it printed that the node runs (≤ 120 s)."""
    # One rayon thread per task, as docs/distributed.md tells users: Ray runs one task per CPU.
    env = {**os.environ, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "RAYON_NUM_THREADS": "1"}
    # Each node gets its own agent ports: two nodes on one host would otherwise race for the same ones.
    ports = ["--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port"]
    ports += ["--metrics-export-port", "--node-manager-port", "--object-manager-port"]
    for flag in ports:
        args = [*args, flag, str(free_port())]
    with log.open("w") as handle:  # the node keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [RAY, "start", "--block", "--disable-usage-stats", *args], stdout=handle, stderr=handle, env=env
        )
    deadline = time.monotonic() + 120
    while "Ray runtime started" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"ray start {' '.join(args)} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.25)
    return proc


def add_worker(cluster: dict, name: str, cpus: int = 1) -> subprocess.Popen:
    """Start one more worker node of ``cpus`` CPUs in ``cluster`` (stopped with the cluster)."""
    worker = [f"--address={cluster['address']}", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}"]
    proc = start_node(worker, cluster["temp"] / f"{name}.log")
    cluster["nodes"].append(proc)
    return proc


@contextlib.contextmanager
def local_cluster(workers: int = 2) -> Iterator[dict]:
    """A head and ``workers`` one-CPU worker nodes on 127.0.0.1, this process connected as the driver.

    Yields ``{"address", "workers" (their node ids), "temp", "nodes" (the ray start processes)}``."""
    ray = pytest.importorskip("ray")
    # A short temporary directory: Ray's Unix socket paths live under it and must stay under 108 bytes.
    temp = Path(tempfile.mkdtemp(prefix="hray"))
    port = free_port()
    cluster: dict = {"address": f"127.0.0.1:{port}", "temp": temp, "nodes": []}
    try:
        head = ["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=0"]
        cluster["nodes"].append(
            start_node([*head, "--include-dashboard=false", f"--temp-dir={temp}"], temp / "head.log")
        )
        for i in range(workers):
            add_worker(cluster, f"worker{i}")
        os.environ["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] = "0"
        ray.init(address=cluster["address"], include_dashboard=False, configure_logging=False, log_to_driver=False)
        cluster["workers"] = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0}
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for proc in reversed(cluster["nodes"]):
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(temp, ignore_errors=True)
