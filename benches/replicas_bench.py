"""Sweep throughput against 1, 2 and 3 latency-bound replicas of one endpoint (``base_urls``), as ratios.

    python -m benches.replicas_bench [--cells 240] [--latency-ms 200] [--slots 4] [--rounds 2]

Each replica is the simulator with a fixed ``latency-ms`` per reply whose chat handler admits at most ``slots``
requests at once (the rest wait in line, as a vLLM or llama.cpp server with that many parallel sequences),
so one replica serves at most ``slots / latency`` requests per second. The same ``run_sweep`` client
(``max_concurrency = 3 × slots``, limits off, the Parquet store and the parse stage) sends the same cells to
1, 2 and 3 replicas, back to back; correctness first (every cell stored once, the ``replica`` column names
each replica used). Throughput is cells per wall-clock second, the median of ``rounds`` runs, reported as a
ratio to the single replica (ideal: 2 and 3).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from runner.endpoints.sim import Latency, SimConfig, SimServerThread
from runner.rundir import read_dataset
from runner.sweep.session import run_sweep
from runner.sweep.spec import Spec, parse_spec


def capped_replica(seed: int, latency_ms: float, slots: int) -> SimServerThread:
    """A started simulator whose chat handler serves at most ``slots`` requests at once, ``latency_ms`` each."""
    server = SimServerThread(SimConfig(seed=seed, latency=Latency("fixed", latency_ms)))
    app = server.server.sim
    handler: Callable[[Any], Awaitable[Any]] = app.chat_completions
    gate: asyncio.Semaphore | None = None

    async def capped(request: Any) -> Any:
        nonlocal gate
        gate = gate or asyncio.Semaphore(slots)  # made on the server's own loop
        async with gate:
            return await handler(request)

    app.chat_completions = capped  # read when the application's routes are built, at start
    server.start()
    return server


def spec_for(urls: list[str], cells: int, concurrency: int) -> Spec:
    """Item mode, 24 questions × 2 personas × enough seeds for ``cells``; no limits; temperature 0.7."""
    seeds = max(1, cells // 48)
    text = f"""
[run]
name = "replicas-bench"
batch_rows = 500
flush_interval_s = 1.0

[[endpoints]]
name = "sim"
provider = "openai"
base_urls = {json.dumps(urls)}
model = "sim-1"
max_concurrency = {concurrency}
timeout_s = 60.0

[design]
personas = ["United States", "China"]
questions = {list(range(1, 25))}
seeds = {list(range(1, seeds + 1))}
temperature = [0.7]
"""
    return parse_spec(text, source="replicas-bench")


def one_run(urls: list[str], cells: int, concurrency: int) -> float:
    """Cells per second of one sweep over ``urls``; checks every cell stored once, spread over the replicas."""
    spec = spec_for(urls, cells, concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        result = run_sweep(spec, out, stream=io.StringIO(), live=False)
        elapsed = time.perf_counter() - t0
        rows = read_dataset(out, "responses", ["cell_key", "replica"]).to_pylist()
    keys = [r["cell_key"] for r in rows]
    assert result.failed == 0 and len(keys) == len(set(keys)) == result.stored, "a cell lost or stored twice"
    used = Counter(r["replica"] for r in rows)
    assert set(used) == set(urls), f"replicas unused: {set(urls) - set(used)}"
    return len(keys) / elapsed


def main() -> None:
    """Run the comparison and print one JSON line per replica count, then the ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=240)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    replicas = [capped_replica(i, args.latency_ms, args.slots) for i in range(3)]
    try:
        urls = [r.base_url for r in replicas]
        concurrency = 3 * args.slots
        one_run(urls[:1], 48, concurrency)  # warm-up: imports, connections
        rates: dict[int, list[float]] = {1: [], 2: [], 3: []}
        for _ in range(args.rounds):  # alternate, so load changes hit every count alike
            for n in rates:
                rates[n].append(one_run(urls[:n], args.cells, concurrency))
    finally:
        for r in replicas:
            r.close()
    base = statistics.median(rates[1])
    for n, values in rates.items():
        median = statistics.median(values)
        line = {"replicas": n, "cells_per_s": round(median, 2), "ratio_to_one": round(median / base, 2)}
        print(json.dumps({**line, "ideal": n, "load_1m": round(os.getloadavg()[0], 1)}))


if __name__ == "__main__":
    main()
