"""A real local Ray cluster for the tests: ``ray start --head`` plus worker nodes, all on 127.0.0.1.

The head has no CPUs (it only schedules), each worker node one (unless asked), so where a task runs is a
worker node and how many run at once is known. Started once per test module (``local_cluster``) and stopped at
the end; this process connects as the driver.

Ray's own ``ray start`` replaces ``--node-ip-address=127.0.0.1`` with the machine's network address, so the
nodes run under ``stats_core.distributed.loopback_kept`` (as hofcat's driver connects), and ``LoopbackWatch``
fails the cluster's tests when any process of the test (the cluster's, hofcat's, this one) has a socket on
another address, a wildcard listener (0.0.0.0, ::) included.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from stats_core.distributed import ray_init

# ``ray start`` with loopback kept as given (``ray`` itself would move the node to the network interface)
RAY_START = [
    sys.executable,
    "-c",
    (
        "import sys\nfrom ray.scripts.scripts import main\nfrom stats_core.distributed import loopback_kept\n"
        "with loopback_kept():\n    sys.exit(main())"
    ),
    "start",
]
LOOPBACK_IPS = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


class LoopbackWatch(threading.Thread):
    """Samples the sockets of this process and its descendants every ``every_s``; ``check()`` fails the test on
    any address that is not 127.0.0.1 or ::1 (local or remote; listeners on 0.0.0.0 or :: too)."""

    def __init__(self, every_s: float = 0.5) -> None:
        super().__init__(daemon=True, name="loopback-watch")
        self.every_s = every_s
        self.samples = 0
        self.seen: set[str] = set()  # one line per offending socket
        self._stop_event = threading.Event()

    def sample(self) -> None:
        """Record the offending sockets open right now."""
        me = psutil.Process()
        for process in [me, *me.children(recursive=True)]:
            try:
                name, connections = process.name(), process.net_connections(kind="inet")
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue  # it ended meanwhile
            for c in connections:
                if any(addr and addr.ip not in LOOPBACK_IPS for addr in (c.laddr, c.raddr)):
                    remote = f"{c.raddr.ip}:{c.raddr.port}" if c.raddr else "-"
                    self.seen.add(f"{name} (pid {process.pid}): {c.laddr.ip}:{c.laddr.port} -> {remote} {c.status}")
        self.samples += 1

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            self.sample()

    def check(self) -> None:
        """Fail with the offending sockets seen so far (and forget them)."""
        self.sample()
        seen, self.seen = sorted(self.seen), set()
        assert not seen, "sockets beyond 127.0.0.1/::1:\n  " + "\n  ".join(seen[:40])

    def close(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(args: list[str], log: Path) -> subprocess.Popen:
    """``ray start --block ARGS`` in the background, returned once it printed that the node runs (≤ 300 s)."""
    # One rayon thread per task, as docs/distributed.md tells users: Ray runs one task per CPU.
    env = {**os.environ, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0", "RAYON_NUM_THREADS": "1"}
    # Each node gets its own agent ports: two nodes on one host would otherwise race for the same ones.
    ports = ["--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port"]
    ports += ["--metrics-export-port", "--node-manager-port", "--object-manager-port"]
    for flag in ports:
        args = [*args, flag, str(free_port())]
    with log.open("w") as handle:  # the node keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [*RAY_START, "--block", "--disable-usage-stats", *args], stdout=handle, stderr=handle, env=env
        )
    deadline = time.monotonic() + 300  # a node starts in seconds; minutes only on a machine far past its cores
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

    Yields ``{"address", "workers" (their node ids), "temp", "nodes" (the ray start processes), "watch"}``; the
    ``LoopbackWatch`` runs while the cluster does (``loopback_checked`` checks it after each test)."""
    ray = pytest.importorskip("ray")
    # A short temporary directory: Ray's Unix socket paths live under it and must stay under 108 bytes.
    temp = Path(tempfile.mkdtemp(prefix="hray"))
    port = free_port()
    watch = LoopbackWatch()
    watch.start()
    cluster: dict = {"address": f"127.0.0.1:{port}", "temp": temp, "nodes": [], "watch": watch}
    try:
        head = ["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=0"]
        cluster["nodes"].append(
            start_node([*head, "--include-dashboard=false", f"--temp-dir={temp}"], temp / "head.log")
        )
        for i in range(workers):
            add_worker(cluster, f"worker{i}")
        os.environ["RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"] = "0"
        ray_init(ray, cluster["address"], include_dashboard=False, configure_logging=False, log_to_driver=False)
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
        watch.close()
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def loopback_checked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Around a test that uses the module's ``cluster``: fail it when a socket beyond loopback appeared meanwhile.

    The check before the test fails it for what came before (the cluster's start) too: the run fails either way.
    """
    if "cluster" not in request.fixturenames:
        yield
        return
    watch = request.getfixturevalue("cluster")["watch"]
    watch.check()
    yield
    watch.check()
