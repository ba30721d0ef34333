"""A pilot of a huge plan next to ``hofcat plan`` of it (issue 26, item 5), and a dead endpoint's cost (item 2).

    python -m benches.pilot_bench [--seeds 100000] [--code DIR] [--dead]

Pilot: a spec of 4 personas × 24 questions × ``seeds`` × 10 temperatures × 10 top_p (9.6·10^8 cells at 10^5
seeds) against an in-process simulator; ``hofcat plan`` and ``hofcat run --limit 3`` each in a child process,
side by side, printing wall seconds and peak resident memory (``ru_maxrss``) and the ratio run ÷ plan.
``--code DIR`` runs another checkout's code (e.g. one before the issue) in the children.
``--dead``: ``hofcat run`` of 96 cells (default retry policy: 6 retries with backoff) against a port nobody
listens on: wall seconds to its exit and the exit status.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _runner_support import spec_text  # noqa: E402

MEASURED = (
    "import resource, sys\n"
    "from runner.cli import main\n"
    "status = main(sys.argv[1:])\n"
    "print('maxrss_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(status)\n"
)


def child(code: Path, args: list[str], timeout: float) -> tuple[int | None, float, int | None]:
    """``hofcat ARGS`` with ``code`` first on the path: exit status (None: timed out), wall s, peak KiB."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", MEASURED, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd="/"
        )
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started, None
    kib = [int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("maxrss_kib ")]
    return done.returncode, time.monotonic() - started, kib[-1] if kib else None


def pilot(code: Path, seeds: int, timeout: float) -> None:
    from runner.endpoints.sim import SimServerThread

    design = {
        "personas": ["United States", "China", "Germany", "Japan"],
        "questions": list(range(1, 25)),
        "seeds": list(range(seeds)),
        "temperature": [round(0.1 * i, 1) for i in range(10)],
        "top_p": [round(0.1 * i + 0.1, 1) for i in range(10)],
    }
    folder = Path(tempfile.mkdtemp(prefix="pilot-bench-"))
    with SimServerThread() as sim:
        spec = folder / "huge.toml"
        spec.write_text(spec_text(sim.base_url, design=design, run={"determinism_probe": False}))
        plan = child(code, ["plan", str(spec)], timeout)
        run = child(code, ["run", str(spec), "--out", str(folder / "run"), "--limit", "3"], timeout)
    cells = 4 * 24 * seeds * 100
    print(f"| command ({code}) | cells | exit | wall s | peak MiB |")
    print("|---|---:|---:|---:|---:|")
    for name, (status, wall, kib) in (("hofcat plan", plan), ("hofcat run --limit 3", run)):
        mib = "-" if kib is None else f"{kib / 1024:.0f}"
        print(f"| {name} | {cells:.2e} | {status if status is not None else 'timeout'} | {wall:.1f} | {mib} |")
    if plan[2] and run[2]:
        print(f"run ÷ plan: wall {run[1] / plan[1]:.2f}×, peak memory {run[2] / plan[2]:.2f}×")


def dead(code: Path, timeout: float) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    design = {"personas": ["United States", "China", "Germany", "Japan"], "questions": list(range(1, 13)), "seeds": [1]}
    folder = Path(tempfile.mkdtemp(prefix="dead-bench-"))
    spec = folder / "s.toml"
    spec.write_text(spec_text(f"http://127.0.0.1:{port}/v1", design=design, endpoint={"max_retries": 6}))
    status, wall, _ = child(code, ["run", str(spec), "--out", str(folder / "run")], timeout)
    print(f"dead endpoint, 96 cells ({code}): exit {status if status is not None else 'still running'}, {wall:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100_000)
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose runner the children run")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--dead", action="store_true", help="measure a dead endpoint's cost instead")
    args = parser.parse_args()
    (dead if args.dead else lambda code, timeout: pilot(code, args.seeds, timeout))(args.code, args.timeout)
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
