"""stats_core on a real local Ray cluster: PERMANOVA, PERMDISP and the bootstrap split across workers give the
single-process result bit for bit, whatever the number of ranges; without Ray the API says how to install it.

The cluster is ``ray start --head`` (no CPUs: it only schedules) plus two ``ray start --address`` worker nodes
of one CPU each, all on 127.0.0.1, started once for the module and stopped at the end.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

import stats_core
from _ray_cluster import LoopbackWatch, add_worker, local_cluster, loopback_checked
from stats_core import _resample, distributed


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


def _design(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Condensed distances of 80 points in 4 groups (a weak effect: p-values well inside (0, 1)), and 2 strata."""
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(80, 3))
    points[:20] += 0.15
    return stats_core.pdist(points), np.repeat(["a", "b", "c", "d"], 20), np.tile(["s1", "s2"], 40)


# 1001 permutations: not a multiple of the kernel's 32 lanes, so ranges end mid-group of lanes.
PERMUTATIONS = 1001


@pytest.mark.slow
@pytest.mark.parametrize("blocks_per_worker", [1, 2, 4])
def test_permanova_on_ray_is_bit_identical(cluster, blocks_per_worker: int) -> None:
    distances, labels, strata = _design()
    local = stats_core.permanova(distances, labels, PERMUTATIONS, seed=3)
    local_strata = stats_core.permanova(distances, labels, PERMUTATIONS, seed=3, strata=strata)
    with distributed.on_ray(cluster["address"], blocks_per_worker=blocks_per_worker) as ray_run:
        remote = stats_core.permanova(distances, labels, PERMUTATIONS, seed=3)
        remote_strata = stats_core.permanova(distances, labels, PERMUTATIONS, seed=3, strata=strata)
    assert 0.02 < local.pvalue < 0.9 and local.pvalue != local_strata.pvalue
    assert remote.pvalue == local.pvalue and remote.statistic == local.statistic
    assert remote_strata.pvalue == local_strata.pvalue and remote_strata.strata == ("s1", "s2")
    # two worker CPUs × blocks_per_worker ranges per call, every one run on a worker node (the head has no CPU)
    assert len(ray_run.nodes) == 2 * 2 * blocks_per_worker
    assert set(ray_run.nodes) <= cluster["workers"]
    # outside the block the calls run here again
    assert _resample.DISTRIBUTOR.get() is None


@pytest.mark.slow
def test_permdisp_on_ray_is_bit_identical(cluster) -> None:
    distances, labels, strata = _design(1)
    for kwargs in ({}, {"strata": strata}):
        local = stats_core.permdisp(distances, labels, PERMUTATIONS, seed=11, **kwargs)
        for per_worker in (1, 4):
            with distributed.on_ray(cluster["address"], blocks_per_worker=per_worker) as ray_run:
                remote = stats_core.permdisp(distances, labels, PERMUTATIONS, seed=11, **kwargs)
            assert remote.pvalue == local.pvalue and remote.statistic == local.statistic
            assert np.array_equal(remote.distances_to_centroid, local.distances_to_centroid)
            assert len(ray_run.nodes) == 2 * per_worker


@pytest.mark.slow
def test_an_enumerated_design_on_ray_gives_the_single_process_exact_p(cluster) -> None:
    # 6 + 6 objects: 924 distinct relabellings (400 within two strata), all fit in the 999 asked for, so every
    # one is visited once; the ranges of that enumeration run on the workers and their counts sum to the same p
    rng = np.random.default_rng(4)
    labels = np.repeat([0, 1], 6)
    distances = stats_core.pdist(rng.normal(size=(12, 3)) + 0.6 * labels[:, None])
    for test, kwargs in itertools.product(
        (stats_core.permanova, stats_core.permdisp), ({}, {"strata": np.arange(12) % 2})
    ):
        local = test(distances, labels, 999, **kwargs)
        with distributed.on_ray(cluster["address"], blocks_per_worker=2) as ray_run:
            remote = test(distances, labels, 999, **kwargs)
        assert local.exact and local.permutations == (923 if not kwargs else 399)
        assert remote.exact and remote.pvalue == local.pvalue and remote.permutations == local.permutations
        assert 0.001 < local.pvalue < 0.9 and len(ray_run.nodes) > 1


@pytest.mark.slow
@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_bootstrap_on_ray_is_bit_identical(cluster, method: str) -> None:
    rng = np.random.default_rng(5)
    samples, reference = rng.normal(size=(2, 6, 3, 10)), rng.normal(size=(2, 6, 3))
    local = stats_core.bootstrap_kendall_tau(samples, reference, 999, method=method, seed=5)
    with distributed.on_ray(cluster["address"], blocks_per_worker=2) as ray_run:
        remote = stats_core.bootstrap_kendall_tau(samples, reference, 999, method=method, seed=5)
    assert len(ray_run.nodes) == 4
    assert np.array_equal(remote.bootstrap_distribution, local.bootstrap_distribution, equal_nan=True)
    for name in ("low", "high"):
        assert np.array_equal(getattr(remote.confidence_interval, name), getattr(local.confidence_interval, name))
    assert np.array_equal(remote.standard_error, local.standard_error)
    # the distribution is not degenerate: the comparison above could fail
    assert np.unique(local.bootstrap_distribution).size > 10


def test_ranges_cover_every_permutation_once() -> None:
    for total, parts, align in [(1001, 8, 32), (1001, 2, 32), (999, 4, 1), (10, 8, 32), (5, 8, 1), (1, 3, 1)]:
        cut = distributed.ranges(total, parts, align)
        assert cut[0][0] == 0 and cut[-1][1] == total and len(cut) <= parts
        assert all(a < b for a, b in cut) and all(b == c for (_, b), (c, _) in itertools.pairwise(cut))
        assert all(b % align == 0 for _, b in cut[:-1])


@pytest.mark.slow
def test_without_ray_stats_core_works_and_on_ray_says_how_to_install() -> None:
    # ``sys.modules['ray'] = None`` makes ``import ray`` raise ImportError, as on a machine without the extra.
    script = (
        "import sys; sys.modules['ray'] = None\n"
        "import numpy as np, stats_core\n"
        "import runner.api, runner.cli  # every hofcat stage imports without Ray\n"
        "from stats_core import distributed\n"
        "d = stats_core.pdist(np.arange(20.0).reshape(10, 2))\n"
        "print(stats_core.permanova(d, [0, 1] * 5, 99, seed=1).pvalue)\n"
        "try:\n"
        "    with distributed.on_ray():\n"
        "        pass\n"
        "except stats_core.BackendUnavailableError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    pvalue, message = done.stdout.strip().splitlines()
    assert 0 < float(pvalue) <= 1
    assert message == "BackendUnavailableError Ray is not installed; install it with pip install 'hofcat[ray]'"


@pytest.mark.slow
def test_a_node_dying_mid_permanova_changes_nothing(cluster) -> None:
    # Runs last: it adds a third worker node and kills it (every process of it, SIGKILL) while it runs a range.
    psutil = pytest.importorskip("psutil")
    ray = pytest.importorskip("ray")
    doomed = add_worker(cluster, "doomed")
    deadline = time.monotonic() + 60
    while ray.cluster_resources().get("CPU", 0) < 3:
        assert time.monotonic() < deadline, "the third worker node did not join"
        time.sleep(0.2)
    (doomed_id,) = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU")} - cluster["workers"]
    # a worker process on the new node, started and warm before the call: otherwise (a fresh clone, a loaded
    # machine) its start-up can outlast the whole call and the node never takes a range to die in
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=1)
    def warm() -> str:
        import stats_core as core

        return core.backend()

    pinned = NodeAffinitySchedulingStrategy(doomed_id, soft=False)
    assert ray.get(warm.options(scheduling_strategy=pinned).remote(), timeout=180)
    rng = np.random.default_rng(9)
    points = rng.normal(size=(400, 40))  # high rank: the quantized screen, ~4 s per range on one thread
    points[:100] += 0.03
    distances, labels = stats_core.pdist(points), np.repeat(np.arange(4), 100)
    # long ranges: a new node's worker process takes seconds to start on a loaded machine, and the other two
    # nodes must not finish all six ranges before the third one has taken one
    permutations = 480_000
    local = stats_core.permanova(distances, labels, permutations, seed=21)
    result: dict = {}

    def call() -> None:
        with distributed.on_ray(cluster["address"], workers=3, blocks_per_worker=2) as ray_run:
            result["remote"] = stats_core.permanova(distances, labels, permutations, seed=21)
        result["nodes"] = ray_run.nodes

    # every CPU busy means the third node is running one of the six ranges: kill the whole node then. On a
    # loaded machine the call can end before the cluster reports every CPU busy (nothing was killed, nothing
    # tested yet): such a call is run again, at most three times in all
    for _ in range(3):
        result.clear()
        thread = threading.Thread(target=call)
        thread.start()
        deadline = time.monotonic() + 120
        while ray.available_resources().get("CPU", 0) > 0 and thread.is_alive():
            assert time.monotonic() < deadline, "the ranges never occupied every CPU"
            time.sleep(0.05)
        if thread.is_alive():
            break
        thread.join()
    else:
        pytest.fail("three calls each finished before the third node took a range")
    node = psutil.Process(doomed.pid)
    for proc in [*node.children(recursive=True), node]:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    doomed.wait(timeout=30)
    thread.join(timeout=240)
    assert not thread.is_alive(), "the call did not finish after the node died"
    assert result["remote"].pvalue == local.pvalue and 1 / (permutations + 1) < local.pvalue < 1.0
    # all six ranges finished, none on the dead node: the range it was running was rerun on another node
    assert len(result["nodes"]) == 6 and doomed_id not in result["nodes"]


def test_the_loopback_watch_fails_on_a_descendant_socket_beyond_loopback() -> None:
    """The check the cluster's tests run (tests/_ray_cluster.py) sees a child process's non-loopback socket.

    A UDP socket connected to a documentation address (TEST-NET-3) sends nothing, but has a network-facing
    local address, as a Ray process that took the machine's address would."""
    watch = LoopbackWatch()
    code = (
        "import socket, sys, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "try:\n    s.connect(('203.0.113.1', 9))\nexcept OSError:\n    print('no route', flush=True); sys.exit()\n"
        "print('connected', flush=True)\ntime.sleep(120)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "connected":
            pytest.skip("this machine has no route beyond loopback")
        with pytest.raises(AssertionError, match=r"203\.0\.113\.1:9"):
            watch.check()
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    watch.check()  # the child is gone: nothing beyond loopback is left
