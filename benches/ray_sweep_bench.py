"""Sweep throughput on Ray (``hofcat run --ray``) against 1, 2 and 3 latency-bound replicas, as ratios.

    python -m benches.ray_sweep_bench [--cells 240] [--latency-ms 200] [--slots 4] [--rounds 1] [--address A]
    python -m benches.ray_sweep_bench --limit-check [--rpm 60] [--cells 144]

The replicas are those of ``benches.replicas_bench`` (the simulator, ``latency-ms`` per reply, at most
``slots`` requests served at once each). The same spec (``max_concurrency = 3 × slots``, no rate limits, the
Parquet store and the parse stage) runs into a new directory for each of 1, 2 and 3 replicas: in one process
(``run_sweep``), and on Ray with 1 and 2 workers (``run_sweep_on_ray``; the workers share ``max_concurrency``).
Correctness first: every cell stored exactly once. Throughput is planned cells per wall-clock second of the
whole call (on Ray: connecting tasks, the driver's plan walk and the workers' start included), the median of
``rounds`` runs, reported as a ratio to the one-process run against one replica and to the one-process run
against as many replicas. ``--address``: an existing cluster; default a local Ray on this machine
(``ray.init(num_cpus=2)``).

``--limit-check``: the endpoint's limit on its real 60 s window (the tests scale it to 3 s). ``rpm`` requests
per minute, paced (no burst), for an endpoint of three replicas: the first two thirds of ``cells`` on Ray with 2
workers, then at once the rest in one process without Ray; printed: the most requests the servers' own logs
saw in any 60 s window and in any 1 s, against ``rpm`` and ``2 · ceil(rpm / 60)``.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from benches.replicas_bench import capped_replica, spec_for
from runner.endpoints.sim.log import max_in_window
from runner.rundir import read_dataset
from runner.sweep.cluster import ray_module, run_sweep_on_ray
from runner.sweep.plan import count_cells, select
from runner.sweep.session import run_sweep
from stats_core.distributed import ray_init


def one_run(urls: list[str], cells: int, concurrency: int, workers: int) -> float:
    """Cells per second of one sweep over ``urls``: in one process (``workers`` = 0) or on that many Ray workers."""
    spec = spec_for(urls, cells, concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        if workers:
            result = run_sweep_on_ray(spec, out, address=None, workers=workers, stream=io.StringIO(), live=False)
        else:
            result = run_sweep(spec, out, stream=io.StringIO(), live=False)
        elapsed = time.perf_counter() - t0
        keys = read_dataset(out, "responses", ["cell_key"]).column(0).to_pylist()
    counts = Counter(keys)
    assert result.failed == 0 and len(counts) == result.stored == len(keys), "a cell lost or stored twice"
    return len(keys) / elapsed


def limit_check(rpm: int, cells: int) -> dict[str, float]:
    """Max requests the replicas' logs saw in any 60 s and any 1 s over a Ray sweep and a resume without Ray."""
    replicas = [capped_replica(i, 50.0, 8) for i in range(3)]
    try:
        spec = spec_for([r.base_url for r in replicas], cells, 6)
        endpoint = dataclasses.replace(spec.endpoints[0], requests_per_minute=rpm)
        spec = dataclasses.replace(spec, endpoints=(endpoint,))
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            first = select(spec, limit=2 * count_cells(spec) // 3)
            t0 = time.perf_counter()
            on_ray = run_sweep_on_ray(spec, out, address=None, workers=2, stream=io.StringIO(), selection=first)
            rest = run_sweep(spec, out, stream=io.StringIO(), live=False)
            elapsed = time.perf_counter() - t0
            keys = read_dataset(out, "responses", ["cell_key"]).column(0).to_pylist()
        arrivals = sorted(e.arrival_unix for r in replicas for e in r.log.entries())
    finally:
        for r in replicas:
            r.close()
    assert len(keys) == len(set(keys)) == on_ray.stored + rest.stored == len(arrivals), "a cell lost or sent twice"
    return {
        "rpm": rpm,
        "cells": len(keys),
        "on_ray": on_ray.stored,
        "resumed_without_ray": rest.stored,
        "seconds": round(elapsed, 1),
        "max_in_any_60s": max_in_window(arrivals, 60.0),
        "max_in_any_1s": max_in_window(arrivals, 1.0),
        "allowed_1s": 2 * -(-rpm // 60),
        "load_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    """Run the comparison; print one JSON line per (replicas, workers), then nothing else."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=240)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--address", default=None, help="a running Ray cluster (default: a local Ray, 2 CPUs)")
    parser.add_argument("--limit-check", action="store_true", help="the 60 s limit across workers and a resume")
    parser.add_argument("--rpm", type=int, default=60, help="with --limit-check: requests per minute")
    args = parser.parse_args()
    ray = ray_module()
    if args.address:
        ray_init(ray, args.address, include_dashboard=False, configure_logging=False, log_to_driver=False)
    else:
        ray_init(ray, "local", num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    if args.limit_check:
        try:
            print(json.dumps(limit_check(args.rpm, args.cells)))
        finally:
            ray.shutdown()
        return
    replicas = [capped_replica(i, args.latency_ms, args.slots) for i in range(3)]
    load = [os.getloadavg()[0]]
    try:
        urls = [r.base_url for r in replicas]
        concurrency = 3 * args.slots
        one_run(urls[:1], 48, concurrency, 0)  # warm-up: imports, connections
        one_run(urls[:1], 48, concurrency, 2)  # and Ray's worker processes
        rates: dict[tuple[int, int], list[float]] = {(n, w): [] for n in (1, 2, 3) for w in (0, 1, 2)}
        for _ in range(args.rounds):  # alternate, so load changes hit every setting alike
            for n, w in rates:
                rates[(n, w)].append(one_run(urls[:n], args.cells, concurrency, w))
                load.append(os.getloadavg()[0])
    finally:
        for r in replicas:
            r.close()
        ray.shutdown()
    base = statistics.median(rates[(1, 0)])
    for (n, w), values in rates.items():
        median = statistics.median(values)
        same = statistics.median(rates[(n, 0)])
        line = {
            "replicas": n,
            "ray_workers": w,
            "cells_per_s": round(median, 2),
            "ratio_to_one_process_one_replica": round(median / base, 2),
            "ratio_to_one_process_same_replicas": round(median / same, 2),
        }
        print(json.dumps({**line, "load_1m_max": round(max(load), 1)}))


if __name__ == "__main__":
    main()
