"""Instructions per request: hofcat's runner next to the bare aiohttp loop, counted by callgrind (load-proof).

    python -m benches.runner_instructions [--cells 816 2856] [--parts [PART ...]]

Wall and CPU time on a shared two-core machine drift by ±20 % between identical runs (``benches.runner_peer``
takes medians of alternating rounds for that reason). An instruction count does not: each arm runs under
``valgrind --tool=callgrind`` (every thread of the process counted) against ``benches.runner_peer``'s canned
loopback server (its own process, native speed, never the bottleneck), at two plan sizes; the difference of
the two totals over the difference of the request counts is the cost of one more request, start-up and
imports cancelled. Arms:

- ``bare``: ``benches.runner_peer.bare_loop`` (one session, ``concurrency`` workers, ``json.loads``, append);
- ``sweep``: ``run_sweep`` of ``benches.runner_peer.spec_text``'s spec (plan, keys, request bodies, limits,
  retries, Parquet parts, the parse stage).

``--parts`` adds the sweep taken apart: ``sweep-no-parse`` (the parse stage skipped), ``sweep-no-flush``
(nothing committed: the flush thread's cost is what it removes) and ``loop-only`` (no flush and a transport
that answers at once: hofcat's own work per cell on the event loop, with no HTTP at all). Two more bound what a
columnar executor could save on the loop: ``sweep-no-decode`` (each reply taken as the canned one, never
decoded or checked: the most that decoding replies per batch could save) and ``sweep-no-body`` (that, and one
request body made once for every cell: what making bodies per batch could save on top). ``sweep-floor`` goes
further: no decode, no body, nothing buffered or committed (a reply is only counted): the runner's own
machinery (the plan's walk, admission, the guarded transport, retry bookkeeping), to set against the bare
loop, whose ``json.loads`` and append it skips; what ``sweep`` adds to it is decoding, bodies and storing.
``sweep-at-end`` stores everything but commits it once, when the sweep ends (no flush thread beside the loop
during the run). ``benches.runner_peer --parts`` times the same parts by the clock.
``--parts PART ...`` counts only those parts. Repeated counts differ by ~1-3 % (how many replies one event-loop
turn finds ready varies); a change smaller than that needs several runs. Each count takes about a minute;
callgrind runs the client ~50× slower than native.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.sweep.spec import Spec

ARMS = ("bare", "sweep")
PARTS = (
    "sweep-no-parse",
    "sweep-no-flush",
    "loop-only",
    "sweep-no-decode",
    "sweep-no-body",
    "sweep-floor",
    "sweep-at-end",
)
CONCURRENCY = 64


def arm(name: str, base_url: str, cells: int) -> None:
    """Run one arm in this process (the callgrind child): ``cells`` requests, nothing printed."""
    from benches.runner_peer import bare_loop, spec_text

    if name == "bare":  # its bodies made by the parent, as ``benches.runner_peer``'s bare arm gets them
        bodies = Path(os.environ["HOFCAT_INSTR_BODIES"]).read_bytes().splitlines()
        asyncio.run(bare_loop(f"{base_url}/chat/completions", bodies, CONCURRENCY))
        return
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    spec, options = take_apart(name, parse_spec(spec_text(base_url, cells, CONCURRENCY)))
    with tempfile.TemporaryDirectory(prefix="hofcat-instr-") as tmp:
        run_sweep(spec, Path(tmp) / "run", live=False, log_every_s=3600, **options)


# The parts that store nothing in the run directory: they count each reply, or drop each batch uncommitted.
UNSTORED = ("sweep-no-flush", "loop-only", "sweep-floor")


def take_apart(name: str, spec: Spec) -> tuple[Spec, dict[str, Any]]:
    """Make this process's sweeps of ``spec``'s endpoint the part ``name`` (module docstring; ``sweep``: as it
    is): the spec to run and the ``run_sweep`` options it needs. Patches hofcat's modules for the whole process:
    call it once, in the arm's own child."""
    from benches.runner_peer import REPLY
    from runner.rundir import Committed
    from runner.sweep import cellsweep
    from runner.sweep.transport import RawReply

    if name == "sweep-no-parse":
        cellsweep.parse_part = lambda *args, **kwargs: None  # type: ignore[assignment]
    if name == "sweep-floor":  # a reply is counted, never buffered: nothing to commit
        from runner.sweep import execute

        def count_only(self: execute.Executor, endpoint: object, cell: object, *rest: object) -> int:
            self.stats.done += 1
            return 0  # nothing buffered

        execute.Executor._replied = count_only  # type: ignore[method-assign,assignment]
    if name in UNSTORED:
        cellsweep.CellSweep.commit_batch = lambda self, batch: Committed(batch.part, None, ())  # type: ignore[method-assign]
    if name in ("sweep-no-decode", "sweep-no-body", "sweep-floor"):
        _without_per_cell_work(name, spec)
    if name == "sweep-at-end":  # every reply buffered, committed once when the sweep ends
        spec = dataclasses.replace(spec, run=dataclasses.replace(spec.run, batch_rows=2**40, flush_interval_s=1e9))
    if name != "loop-only":
        return spec, {}

    class Instant:
        async def send(self, call: object) -> RawReply:
            return RawReply(200, REPLY, {})

        async def close(self) -> None:
            pass

    return spec, {"transport_factory": lambda config: Instant()}


def _without_per_cell_work(name: str, spec: Spec) -> None:
    """Take the reply decode (and, for ``sweep-no-body`` and ``sweep-floor``, the request body) off each cell of
    this process's sweep: every reply is the canned one as decoded, every call the plan's first; the canned server
    answers each alike, so the sweep still stores every cell."""
    from runner.sweep import execute
    from runner.sweep.plan import iter_cells
    from runner.sweep.providers import Reply, openai, provider_for
    from runner.sweep.request import request_for

    canned = Reply("3", "stop", 20, 1, served_model="sim-1")  # benches.runner_peer.REPLY, decoded
    execute.reply_of = lambda provider, raw, secret: canned  # type: ignore[assignment]
    if name in ("sweep-no-body", "sweep-floor"):
        first = next(iter(iter_cells(spec)))
        call = provider_for(first.endpoint).call(first.endpoint.base_url, None, request_for(first))
        execute.request_for = lambda cell, prompt=None: None  # type: ignore[assignment]
        openai.OpenAIProvider.call = lambda self, base_url, api_key, request: call  # type: ignore[method-assign]


def planned(cells: int) -> int:
    """How many requests ``spec_text(cells)`` plans (the bare arm sends as many)."""
    from benches.runner_peer import spec_text
    from runner.sweep.plan import iter_cells
    from runner.sweep.spec import parse_spec

    return sum(1 for _ in iter_cells(parse_spec(spec_text("http://127.0.0.1:9", cells, CONCURRENCY))))


def instructions(name: str, base_url: str, cells: int, where: Path) -> int:
    """Instructions the whole ``name`` arm process executed (all threads), by callgrind."""
    from benches.runner_peer import write_bodies

    out = where / f"{name}.{cells}.cg"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "benches.runner_instructions",
        "arm",
        name,
        base_url,
        str(cells),
    ]
    bodies = where / f"bodies.{cells}"
    if name == "bare" and not bodies.exists():
        write_bodies(base_url, cells, CONCURRENCY, bodies)
    env = {**os.environ, "HOFCAT_INSTR_BODIES": str(bodies)}
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"arm {name} at {cells} cells failed ({done.returncode}): {done.stderr[-2000:]}")
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"{out}: no instruction total")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    a = sub.add_parser("arm")
    a.add_argument("name", choices=ARMS + PARTS)
    a.add_argument("base_url")
    a.add_argument("cells", type=int)
    parser.add_argument("--cells", type=int, nargs=2, default=[816, 2856], help="the two plan sizes (default 816 2856)")
    parser.add_argument(
        "--parts",
        nargs="*",
        choices=PARTS,
        metavar="PART",
        help="also the sweep taken apart (see above): all, or these",
    )
    args = parser.parse_args()
    if args.command == "arm":
        arm(args.name, args.base_url, args.cells)
        return
    if shutil.which("valgrind") is None:
        sys.exit("runner_instructions: valgrind is not installed (apt install valgrind)")
    small, large = (planned(n) for n in args.cells)
    server = subprocess.Popen([sys.executable, "-m", "benches.runner_peer", "serve"], stdout=subprocess.PIPE, text=True)
    try:
        os.sched_setaffinity(server.pid, {0})
        base_url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"  # type: ignore[union-attr]
        counts = {}
        with tempfile.TemporaryDirectory(prefix="hofcat-instr-") as tmp:
            parts = () if args.parts is None else tuple(args.parts) or PARTS
            for name in ARMS + parts:
                low, high = (instructions(name, base_url, n, Path(tmp)) for n in args.cells)
                counts[name] = (high - low) / (large - small)
        per = {name: round(count) for name, count in counts.items()}
        print(
            json.dumps(
                {
                    "requests": [small, large],
                    "instructions_per_request": per,
                    "bare_over_sweep": round(counts["bare"] / counts["sweep"], 3),
                    "load_1m": os.getloadavg()[0],
                }
            )
        )
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
