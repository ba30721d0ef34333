"""Peak RSS of one ``run_sweep`` session against the canned loopback server, at several run sizes (issue 28).

Each size runs in a child process of its own (``VmHWM``: its peak resident set since exec, imports included), so
the sizes do not share a peak. Memory should follow the batch, not the run: the peaks at 10^4 and 2·10^5 cells
should be the same give or take allocator noise.

    python -m benches.sweep_rss --cells 10000 50000 200000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benches.runner_peer import _CHILD_ENV, spec_text


def child(base_url: str, cells: int, concurrency: int) -> dict[str, float]:
    """In this (child) process: one first session of ~``cells`` cells; cells stored and peak RSS (MB)."""
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    with tempfile.TemporaryDirectory(prefix="hofcat-rss-") as tmp:
        result = run_sweep(parse_spec(spec_text(base_url, cells, concurrency)), Path(tmp) / "run", live=False)
        status = Path("/proc/self/status").read_text().splitlines()
    hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return {"cells": result.stored, "peak_rss_mb": hwm / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # BASE_URL: run one size in this process
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.cells[0], args.concurrency)))
        return
    command = [sys.executable, "-m", "benches.runner_peer", "serve", "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=_CHILD_ENV) as server:
        try:
            assert server.stdout is not None
            base_url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
            for cells in args.cells:
                run = [sys.executable, "-m", "benches.sweep_rss", "--child", base_url, "--cells", str(cells)]
                run += ["--concurrency", str(args.concurrency)]
                done = subprocess.run(run, capture_output=True, text=True, env=_CHILD_ENV, check=True, timeout=1800)
                print(done.stdout.strip().splitlines()[-1], flush=True)
        finally:
            server.kill()


if __name__ == "__main__":
    main()
