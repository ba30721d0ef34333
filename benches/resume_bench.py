"""Resuming a large run with cells left: seconds from ``hofcat run`` start to its first request, by plan keys
and by walking the plan (as at 583a3c6), alternately on one run directory.

    python -m benches.resume_bench [--cells 1000000] [--left 50000] [--rounds 3] [--spread]

The run directory: the bench spec of ``benches.runner_bench`` (17 personas × 24 questions × seeds, one
endpoint), every cell stored except ``left`` of them: the plan's last cells (an interrupted run), or with
``--spread`` every k-th cell; written through the run directory's writer, plus the plan-keys file the first
session writes (its one-time cost is printed: keys-only walk + write). Correctness first: the cells left by
plan keys equal those of the walk, in order, and are exactly the cells not stored. Then ``hofcat run``
children, alternately with plan keys and with them off (``PLAN_KEYS_MAX_CELLS = 0``), each printing the wall
and CPU seconds from its start to its first request and exiting there (nothing is stored: every round
resumes the same directory). A ``hofcat serve-sim`` process listens. Printed: medians, ratios, the load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benches.runner_bench import spec_text
from runner.endpoints.sim import SimProcess


def build_store(spec, out: Path, left: int, spread: bool) -> set[str]:
    """Store every cell of ``spec``'s plan in ``out`` as a finished session would, except ``left`` of them: the
    plan's last ``left`` cells, or with ``spread`` every k-th cell; the keys of the cells not stored."""
    from runner.rundir import RunWriter
    from runner.rundir.schema import AnswerRow, table
    from runner.sweep.outcome import Outcome, response_row
    from runner.sweep.plan import count_cells, iter_cells
    from runner.sweep.providers import Reply
    from runner.sweep.request import rendered
    from runner.sweep.session import build_manifest

    n = count_cells(spec)
    every = max(1, n // max(left, 1))

    def skip(i: int) -> bool:
        return i % every == 0 and i // every < left if spread else i >= n - left

    done = Outcome(Reply("3", "stop", 10, 1), None, 1, 0.01, 200, 0, 0)
    skipped = set()
    with RunWriter.open_run(out, build_manifest(spec), batch_rows=50_000) as writer:
        for i, cell in enumerate(iter_cells(spec)):
            if skip(i):
                skipped.add(cell.key)
                continue
            writer.add(response_row(cell, rendered(cell.prompt)[2], done))
            if writer.full:
                writer.commit("answers", writer.flush()[0], table([], AnswerRow))  # parsed: nothing to parse
        last = writer.flush()
        if last is not None:
            writer.commit("answers", last[0], table([], AnswerRow))
    return skipped


# A ``hofcat run`` child that prints the seconds (wall and CPU) from its start to its first request, then
# exits on the spot: nothing is stored, so every round resumes the same directory. With --walk the plan-keys
# path is off, as at 583a3c6.
_CHILD = """
import os, sys, time
T0 = time.perf_counter()
from runner.sweep import remaining, transport
if sys.argv[1] == "--walk":
    remaining.PLAN_KEYS_MAX_CELLS = 0
async def send(self, call):
    print("FIRST_REQUEST_S", time.perf_counter() - T0, time.process_time(), file=sys.stderr, flush=True)
    os._exit(0)
transport.AiohttpTransport.send = send
from runner.cli import main
sys.exit(main(sys.argv[2:]))
"""


def resume_child(spec_path: Path, out: Path, *, walk: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds) from a ``hofcat run`` child's start to its first request."""
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, "--walk" if walk else "--keys", "run", str(spec_path), "--out", str(out)]
        + ["--log-every", "3600"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == 0 and "FIRST_REQUEST_S" in child.stderr, child.stderr[-2000:]
    wall, cpu = child.stderr.split("FIRST_REQUEST_S")[1].split()[:2]
    return float(wall), float(cpu)


def left_keys(spec, out: Path, *, walk: bool) -> list[str]:
    """The keys of the cells ``remaining_work`` leaves to send, in order (plan keys, or the walk)."""
    from runner.rundir import RunWriter
    from runner.sweep import remaining
    from runner.sweep.plan import select
    from runner.sweep.progress import RunStats
    from runner.sweep.session import build_manifest

    saved = remaining.PLAN_KEYS_MAX_CELLS
    remaining.PLAN_KEYS_MAX_CELLS = 0 if walk else saved
    try:
        with RunWriter.open_run(out, build_manifest(spec), batch_rows=1) as writer:
            work = remaining.remaining_work(spec, writer, RunStats(total=0), False, select(spec))
            return [c.key for _, cells in work for c in cells]
    finally:
        remaining.PLAN_KEYS_MAX_CELLS = saved


def bench(cells: int, left: int, rounds: int, spread: bool) -> dict[str, float]:
    """The resume medians by plan keys and by walking (see the module docstring)."""
    from runner.rundir import RunWriter
    from runner.sweep.plan import count_cells
    from runner.sweep.remaining import plan_keys
    from runner.sweep.session import build_manifest
    from runner.sweep.spec import parse_spec

    with SimProcess(["--seed", "1"]) as sim, tempfile.TemporaryDirectory(prefix="hofcat-bench-") as tmp:
        text = spec_text(sim.base_url, cells, 64)
        spec_path, base = Path(tmp) / "spec.toml", Path(tmp) / "base"
        spec_path.write_text(text)
        spec = parse_spec(text, source=str(spec_path))
        skipped = build_store(spec, base, left, spread)
        with RunWriter.open_run(base, build_manifest(spec), batch_rows=1) as writer:  # what a first session writes
            t0 = time.perf_counter()
            plan_keys(spec, writer)
            write_s = time.perf_counter() - t0
        by_keys, by_walk = left_keys(spec, base, walk=False), left_keys(spec, base, walk=True)
        assert by_keys == by_walk and set(by_keys) == skipped, "plan keys and the walk disagree"
        times: dict[str, list[tuple[float, float]]] = {"keys": [], "walk": []}
        for _ in range(rounds):
            for how in ("keys", "walk"):  # alternate, so drifting machine load hits both alike
                times[how].append(resume_child(spec_path, base, walk=how == "walk"))
    med = {how: [sorted(x)[len(x) // 2] for x in zip(*t, strict=True)] for how, t in times.items()}
    return {
        "cells": count_cells(spec),
        "left": len(skipped),
        "left_where": "spread" if spread else "tail",
        "rounds": rounds,
        "first_request_s_plan_keys": med["keys"][0],
        "first_request_s_walk": med["walk"][0],
        "ratio_walk_over_keys": med["walk"][0] / med["keys"][0],
        "first_request_cpu_s_plan_keys": med["keys"][1],
        "first_request_cpu_s_walk": med["walk"][1],
        "cpu_ratio": med["walk"][1] / med["keys"][1],
        "plan_keys_write_s_once": write_s,
        "load_1m": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m benches.resume_bench")
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--left", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spread", action="store_true", help="leave every k-th cell, not the plan's tail")
    args = parser.parse_args(argv)
    print(json.dumps(bench(args.cells, args.left, args.rounds, args.spread)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
