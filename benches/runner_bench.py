"""The sweep runner against the simulator at zero latency: throughput next to a plain aiohttp loop, and memory.

    python -m benches.runner_bench throughput [--cells 20000] [--concurrency 64]
    python -m benches.runner_bench memory [--cells 20000 200000]
    python -m benches.runner_bench resume [--cells 1000000]
    python -m benches.runner_bench scaffold [--cells 10000]
    python -m benches.runner_bench requests [--cells 2040] [--through plain|transport]

throughput: ``hofcat serve-sim`` runs in its own process; the same cells are sent to it, back to back, by
(1) a minimal plain-aiohttp loop (request bodies prepared before the clock starts; N workers post, read and
decode; nothing stored) and (2) ``run_sweep`` (plan, limits off, retries, Parquet store, parsed answers).
Correctness first: the plain loop got N replies; hofcat stored N distinct cells whose texts equal what the
plain loop got for the same request (the server answers a request deterministically). Both are warmed up
first (connections, server caches, hofcat's first imports), then timed alternately ``rounds`` times; the
medians are reported, as wall-clock cells/s and as cells per CPU second of the client process (the stable
figure on a shared machine), with how busy the server was in each arm (its CPU seconds per wall second: near 1,
that arm waited on the server, not on its client). Server and client are pinned to different CPUs; the
collector is frozen after the warm-up for both arms, as ``hofcat run`` freezes it after start-up.

scaffold: one ``run_sweep`` over an in-memory transport that answers at once: hofcat's per-cell work without
HTTP (client CPU µs per cell; run under cachegrind for an instruction count the machine's load cannot move).

requests: one pass of requests to the simulator by the plain loop, or the same loop through hofcat's transport
and reply decoding (client CPU µs per request; under cachegrind, instructions).

memory: ``hofcat run`` as a child process that reports its own peak RSS (``ru_maxrss``) at exit.

resume: a run directory whose ``cells`` cells are all stored (rows made from the plan, written by the run
directory's writer); the seconds ``run_sweep`` and a ``hofcat run`` child take to find nothing left to do
(no server listens: a resume that sent anything would fail), with the parts of it (reading and verifying the
stored keys, walking the plan). Every line carries the machine's load average (``load_1m``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from runner.endpoints.sim import SimProcess
from runner.survey.prompts import load_templates


def spec_text(base_url: str, cells: int, concurrency: int) -> str:
    """An item-mode spec of about ``cells`` cells: 17 personas × 24 questions × enough seeds; no limits."""
    countries = sorted(load_templates("en")["countries"])
    seeds = max(1, round(cells / (len(countries) * 24)))
    return f"""
[run]
name = "bench"
batch_rows = 5000
[[endpoints]]
name = "sim"
provider = "openai"
base_url = "{base_url}"
model = "sim-1"
max_concurrency = {concurrency}
timeout_s = 60
[design]
personas = {json.dumps(countries)}
seeds = {list(range(1, seeds + 1))}
temperature = [0.7]
max_tokens = 16
"""


async def plain_loop(url: str, bodies: list[bytes], concurrency: int) -> list[str]:
    """POST every body with ``concurrency`` workers; the reply texts in body order."""
    out: list[str] = [""] * len(bodies)
    next_index = iter(range(len(bodies)))
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            for i in next_index:
                async with session.post(url, data=bodies[i], headers=headers) as response:
                    out[i] = json.loads(await response.read())["choices"][0]["message"]["content"]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def transport_loop(url: str, bodies: list[bytes], concurrency: int) -> list[str]:
    """``plain_loop`` through hofcat's ``AiohttpTransport.send`` and ``decode``: the reply texts in body order."""
    from runner.sweep.providers import HttpCall, get_provider
    from runner.sweep.transport import AiohttpTransport, decode

    out: list[str] = [""] * len(bodies)
    next_index = iter(range(len(bodies)))
    headers, provider = {"Content-Type": "application/json"}, get_provider("openai")
    transport = AiohttpTransport(concurrency, 60)

    async def worker() -> None:
        for i in next_index:
            out[i] = decode(provider, await transport.send(HttpCall(url, headers, {}, bodies[i]))).text

    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await transport.close()
    return out


def requests(cells: int, concurrency: int, through: str) -> dict[str, float]:
    """One pass of ``cells`` requests to the simulator (own process) by the plain loop or ``transport_loop``
    (``through``): client CPU µs per request (under cachegrind: instructions, by difference of two sizes)."""
    from runner.sweep.plan import iter_cells
    from runner.sweep.request import rendered
    from runner.sweep.spec import parse_spec

    with SimProcess(["--seed", "1"]) as sim:
        plan = list(iter_cells(parse_spec(spec_text(sim.base_url, cells, concurrency))))
        bodies = [_plain_body(c, rendered(c.prompt)[0]) for c in plan]
        gc.collect()
        gc.freeze()
        loop = plain_loop if through == "plain" else transport_loop
        c0 = time.process_time()
        texts = asyncio.run(loop(f"{sim.base_url}/chat/completions", bodies, concurrency))
        cpu = time.process_time() - c0
    assert all(texts) and len(texts) == len(plan)
    return {"requests": len(plan), "through": through, "cpu_us_per_request": cpu / len(plan) * 1e6}


def _plain_body(cell: Any, messages: list[dict[str, str]]) -> bytes:
    """The plain loop's request body for ``cell`` (the fields hofcat's OpenAI mapping sends)."""
    s = cell.sampling
    body = {"model": "sim-1", "messages": messages, "temperature": s.temperature, "top_p": s.top_p}
    return json.dumps({**body, "max_tokens": s.max_tokens, "seed": s.seed}).encode()


def throughput(cells: int, concurrency: int, rounds: int = 3) -> dict[str, float]:
    """Cells per second (median of ``rounds``) of the plain loop and of hofcat on the same requests, same server."""
    from runner.rundir import read_dataset
    from runner.sweep.plan import iter_cells
    from runner.sweep.request import rendered
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    with SimProcess(["--seed", "1"]) as sim:
        _separate_cores(sim)
        spec = parse_spec(spec_text(sim.base_url, cells, concurrency))
        plan = list(iter_cells(spec))
        bodies = [_plain_body(c, rendered(c.prompt)[0]) for c in plan]
        url = f"{sim.base_url}/chat/completions"
        texts = asyncio.run(plain_loop(url, bodies, concurrency))  # warm-up (server caches, connections)
        assert all(texts) and len(texts) == len(plan)
        with tempfile.TemporaryDirectory(prefix="hofcat-bench-") as warm:  # warm-up: hofcat's first imports
            run_sweep(
                parse_spec(spec_text(sim.base_url, 500, concurrency)), Path(warm) / "run", live=False, log_every_s=3600
            )
        # As ``hofcat run`` does after start-up: what is imported and warmed lives as long as the process, so
        # keep it out of the cyclic collector's full passes (for both arms alike).
        gc.collect()
        gc.freeze()
        plain, hofcat = [], []
        for _ in range(rounds):  # alternate, so drifting machine load hits both alike
            t0, c0, s0 = time.perf_counter(), time.process_time(), _cpu_s(sim)
            again = asyncio.run(plain_loop(url, bodies, concurrency))
            plain.append((time.perf_counter() - t0, time.process_time() - c0, _cpu_s(sim) - s0))
            assert again == texts, "the server answered the same request differently"
            out = Path(tempfile.mkdtemp(prefix="hofcat-bench-"))
            try:
                t0, c0, s0 = time.perf_counter(), time.process_time(), _cpu_s(sim)
                result = run_sweep(spec, out / "run", live=False, log_every_s=3600)
                hofcat.append((time.perf_counter() - t0, time.process_time() - c0, _cpu_s(sim) - s0))
                stored = read_dataset(out / "run", "responses", ["cell_key", "response_text"]).to_pydict()
            finally:
                shutil.rmtree(out)
            assert result.stored == len(plan) == len(set(stored["cell_key"])), "hofcat did not store every cell once"
            by_key = dict(zip(stored["cell_key"], stored["response_text"], strict=True))
            assert all(by_key[c.key] == t for c, t in zip(plan, texts, strict=True)), "stored text != server's"
    plain_s, plain_cpu, plain_server = (sorted(x)[len(x) // 2] for x in zip(*plain, strict=True))
    hofcat_s, hofcat_cpu, hofcat_server = (sorted(x)[len(x) // 2] for x in zip(*hofcat, strict=True))
    n = len(plan)
    return {
        "cells": n,
        "concurrency": concurrency,
        "rounds": rounds,
        "plain_cells_per_s": n / plain_s,
        "hofcat_cells_per_s": n / hofcat_s,
        "ratio": plain_s / hofcat_s,
        "plain_cells_per_cpu_s": n / plain_cpu,
        "hofcat_cells_per_cpu_s": n / hofcat_cpu,
        "cpu_ratio": plain_cpu / hofcat_cpu,
        # the server's CPU seconds per wall second during each arm: near 1, that arm waited on the server
        # (then the wall ratio says whether hofcat keeps up with the server, and cpu_ratio what the client costs)
        "server_busy_plain": plain_server / plain_s,
        "server_busy_hofcat": hofcat_server / hofcat_s,
        "load_1m": os.getloadavg()[0],
    }


def _cpu_s(sim: SimProcess) -> float:
    """CPU seconds (user + system) the simulator's process has used so far (Linux ``/proc``)."""
    assert sim.process is not None
    fields = Path(f"/proc/{sim.process.pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _InstantTransport:
    """Replies at once (one event-loop pass) with a fixed OpenAI-shaped body: hofcat's own work without HTTP."""

    BODY = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": "sim-1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "3"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 110, "completion_tokens": 1, "total_tokens": 111},
        }
    ).encode()

    async def send(self, call: object) -> object:
        """The fixed reply, after yielding to the loop once."""
        from runner.sweep.transport import RawReply

        await asyncio.sleep(0)
        return RawReply(200, self.BODY, {"Content-Type": "application/json"})

    async def close(self) -> None:
        """Nothing to release."""


def scaffold(cells: int) -> dict[str, float]:
    """Client CPU µs per cell of one ``run_sweep`` over an in-memory transport (after a warm-up run, collector
    frozen): everything hofcat does per cell except HTTP. Under ``valgrind --tool=cachegrind --cache-sim=no``
    the difference of two sizes' instruction counts, divided by the difference of cells, is the per-cell count."""
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    def factory(endpoint: object) -> _InstantTransport:
        return _InstantTransport()

    with tempfile.TemporaryDirectory(prefix="hofcat-bench-") as tmp:
        warm = parse_spec(spec_text("http://127.0.0.1:9/v1", 400, 64))
        run_sweep(warm, Path(tmp) / "warm", live=False, log_every_s=3600, transport_factory=factory)
        gc.collect()
        gc.freeze()
        spec = parse_spec(spec_text("http://127.0.0.1:9/v1", cells, 64))
        c0 = time.process_time()
        result = run_sweep(spec, Path(tmp) / "run", live=False, log_every_s=3600, transport_factory=factory)
        cpu = time.process_time() - c0
    return {"cells": result.stored, "cpu_us_per_cell": cpu / result.stored * 1e6, "load_1m": os.getloadavg()[0]}


def resume(cells: int) -> dict[str, float]:
    """Seconds to resume a run whose ``cells`` cells are all stored, in process and as ``hofcat run``."""
    from benches.resume_bench import build_store
    from runner.rundir import stored_keys
    from runner.sweep.plan import iter_cells
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    with tempfile.TemporaryDirectory(prefix="hofcat-bench-") as tmp:
        text = spec_text("http://127.0.0.1:9/v1", cells, 8)  # nothing listens there
        spec, spec_path, out = parse_spec(text), Path(tmp) / "spec.toml", Path(tmp) / "run"
        spec_path.write_text(text)
        build_store(spec, out, 0, spread=False)  # every cell stored, parsed: the resume parses nothing
        t0 = time.perf_counter()
        keys, _ = stored_keys(out)
        keys_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        planned = sum(1 for _ in iter_cells(spec))
        plan_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = run_sweep(spec, out, live=False, log_every_s=3600)
        in_process_s = time.perf_counter() - t0
        assert result.stored == 0 and result.already_stored == planned == len(keys), "the resume was not empty"
        t0 = time.perf_counter()
        child = subprocess.run(
            [sys.executable, "-m", "runner.cli", "run", str(spec_path), "--out", str(out), "--log-every", "3600"],
            capture_output=True,
            text=True,
            check=False,
        )
        command_s = time.perf_counter() - t0
        assert child.returncode == 0 and f"{planned} stored before" in child.stderr, child.stderr
    return {
        "cells": planned,
        "run_sweep_s": in_process_s,
        "hofcat_run_s": command_s,
        "stored_keys_s": keys_s,
        "plan_walk_s": plan_s,
        "load_1m": os.getloadavg()[0],
    }


def _separate_cores(sim: SimProcess) -> None:
    """Pin the server to the last CPU and this client to the others, so neither steals the other's core."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1 and sim.process is not None:
        os.sched_setaffinity(sim.process.pid, {cpus[-1]})
        os.sched_setaffinity(0, set(cpus[:-1]))


def memory(cells: int, concurrency: int = 64) -> dict[str, float]:
    """Peak RSS (MB) of a ``hofcat run`` child process sweeping ``cells`` cells at zero latency."""
    child = (
        "import resource, sys; from runner.cli import main; code = main(sys.argv[1:]); "
        "print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(code)"
    )
    with SimProcess(["--seed", "1"]) as sim, tempfile.TemporaryDirectory(prefix="hofcat-bench-") as tmp:
        spec = Path(tmp) / "spec.toml"
        spec.write_text(spec_text(sim.base_url, cells, concurrency))
        t0 = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-c", child, "run", str(spec), "--out", f"{tmp}/run", "--log-every", "3600"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        samples = _rss_samples(process)
        _stdout, stderr = process.communicate()
        assert process.returncode == 0, stderr
        elapsed = time.perf_counter() - t0
        from runner.sweep.accounting import run_status

        status = run_status(f"{tmp}/run")
    assert status["done"] == status["planned"] and status["remaining"] == 0 and status["failed"] == 0
    peak_kb = int(stderr.split("PEAK_RSS_KB")[1].split()[0])
    quarters = [samples[min(len(samples) - 1, len(samples) * q // 4)] for q in (1, 2, 3)] if samples else []
    return {
        "cells": status["planned"],
        "peak_rss_mb": peak_kb / 1024,
        "seconds": elapsed,
        "rss_mb_at_quarter_half_three_quarters_of_the_time": [round(q, 1) for q in quarters],
    }


def _rss_samples(process: subprocess.Popen, every_s: float = 0.5) -> list[float]:
    """RSS (MB) of a running child every ``every_s`` until it exits."""
    import psutil

    samples = []
    child = psutil.Process(process.pid)
    while process.poll() is None:
        try:
            samples.append(child.memory_info().rss / 2**20)
        except psutil.NoSuchProcess:
            break
        time.sleep(every_s)
    return samples


def main(argv: list[str] | None = None) -> int:
    """Run the chosen bench and print one JSON line per measurement."""
    parser = argparse.ArgumentParser(prog="python -m benches.runner_bench")
    parser.add_argument("what", choices=["throughput", "memory", "resume", "scaffold", "requests"])
    parser.add_argument("--through", choices=["plain", "transport"], default="transport")
    parser.add_argument("--cells", type=int, nargs="+", default=None)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args(argv)
    if args.what == "throughput":
        for n in args.cells or [20000]:
            print(json.dumps(throughput(n, args.concurrency)), flush=True)
    elif args.what == "requests":
        for n in args.cells or [2040]:
            print(json.dumps(requests(n, args.concurrency, args.through)), flush=True)
    elif args.what == "scaffold":
        for n in args.cells or [10000]:
            print(json.dumps(scaffold(n)), flush=True)
    elif args.what == "resume":
        for n in args.cells or [1_000_000]:
            print(json.dumps(resume(n)), flush=True)
    else:
        for n in args.cells or [20000, 200000]:
            print(json.dumps(memory(n, args.concurrency)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
