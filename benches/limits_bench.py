"""What the rate limiter's pacing costs, and what reset headers on every reply cost retries (the simulator, in-process).

    python -m benches.limits_bench pacing [--rpw 300] [--window 3] [--windows 3]
    python -m benches.limits_bench resets [--cells 2000]

pacing: the same ``rpw * windows`` cells run back to back against a simulator enforcing ``rpw`` requests per
``window`` seconds, once paced (the default: one admission every window / rpw seconds) and once with
``burst = rpw`` (a window's budget at once). Both sustain rpw per (window + latency); a burst finishes a
run about one window sooner because its first window's budget leaves at t = 0 and its last at the start of
the last window, while paced admissions fill every window evenly. Reported: wall seconds, cells/s, their
ratio, the busiest 1-s window the server saw, and the load average (``load_1m``).

resets: the same cells against a simulator answering 3 % of attempts with a 5xx, once with OpenAI-style
``x-ratelimit-*`` headers on every reply (the simulator sends them when it has a limit; here 10^7 per
minute, never reached) and once without; the ratio of wall times (1.0 = reset headers cost nothing).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import time
from pathlib import Path

from runner.endpoints.sim import SimConfig, SimServerThread, max_in_window
from runner.survey.prompts import load_templates
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec


def _spec(base_url: str, cells: int, endpoint: str) -> object:
    """An item-mode spec of ``cells`` cells (24 questions × personas × seeds) against one endpoint."""
    countries = sorted(load_templates("en")["countries"])
    per_seed = 24 * len(countries)
    seeds = max(1, -(-cells // per_seed))
    personas = countries[: max(1, -(-cells // (24 * seeds)))]
    text = f"""
[run]
name = "limits-bench"
batch_rows = 1000
flush_interval_s = 1.0
[[endpoints]]
name = "sim"
provider = "openai"
base_url = "{base_url}"
model = "sim-1"
max_concurrency = 32
timeout_s = 30
max_retries = 10
{endpoint}
[design]
personas = {json.dumps(personas)}
seeds = {list(range(1, seeds + 1))}
"""
    return parse_spec(text, source="limits-bench")


def _timed_run(config: SimConfig, cells: int, endpoint: str) -> tuple[float, int, list[float]]:
    """(wall seconds, cells stored, server arrival times) of one run against a fresh simulator."""
    with SimServerThread(config) as sim, tempfile.TemporaryDirectory() as tmp:
        spec = _spec(sim.base_url, cells, endpoint)
        t0 = time.perf_counter()
        result = run_sweep(spec, Path(tmp) / "run", stream=io.StringIO(), live=False)
        wall = time.perf_counter() - t0
        arrivals = [e.arrival_s for e in sim.log.entries()]
    return wall, result.stored, arrivals


def pacing(rpw: int, window_s: float, windows: int) -> dict[str, float]:
    """Paced vs burst = rpw over ``rpw * windows`` cells; wall times, rates and their ratio."""
    cells = rpw * windows
    limits = f"requests_per_minute = {rpw}\nrate_window_s = {window_s}"
    # The simulator's windows are 60 s; its own limit is left off and the client's arrivals checked instead.
    out: dict[str, float] = {"cells": cells, "rpw": rpw, "window_s": window_s}
    for arm, extra in (("paced", ""), ("burst", f"\nburst = {rpw}")):
        wall, stored, arrivals = _timed_run(SimConfig(seed=3), cells, limits + extra)
        assert stored >= cells, (arm, stored)
        out[f"{arm}_s"] = round(wall, 2)
        out[f"{arm}_cells_per_s"] = round(stored / wall, 1)
        out[f"{arm}_max_in_window"] = max_in_window(arrivals, window_s)
        out[f"{arm}_max_in_1s"] = max_in_window(arrivals, 1.0)
    out["paced_over_burst_throughput"] = round(out["paced_cells_per_s"] / out["burst_cells_per_s"], 3)
    out["load_1m"] = os.getloadavg()[0]
    return out


def resets(cells: int) -> dict[str, float]:
    """3 % 5xx with and without x-ratelimit-* reset headers on every reply; wall times and their ratio."""
    out: dict[str, float] = {"cells": cells}
    for arm, config in (
        ("with_reset_headers", SimConfig(seed=5, error_rate=0.03, requests_per_minute=10**7)),
        ("without", SimConfig(seed=5, error_rate=0.03)),
    ):
        wall, stored, _ = _timed_run(config, cells, "")
        out[f"{arm}_s"] = round(wall, 2)
        out[f"{arm}_stored"] = stored
    out["ratio"] = round(out["with_reset_headers_s"] / out["without_s"], 3)
    out["load_1m"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    """Run one bench and print its figures as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m benches.limits_bench")
    sub = parser.add_subparsers(dest="bench", required=True)
    p = sub.add_parser("pacing")
    p.add_argument("--rpw", type=int, default=300)
    p.add_argument("--window", type=float, default=3.0)
    p.add_argument("--windows", type=int, default=3)
    r = sub.add_parser("resets")
    r.add_argument("--cells", type=int, default=2000)
    args = parser.parse_args(argv)
    figures = pacing(args.rpw, args.window, args.windows) if args.bench == "pacing" else resets(args.cells)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
