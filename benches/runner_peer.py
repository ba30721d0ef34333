"""hofcat's runner next to a bare aiohttp loop, against a loopback server that is never the bottleneck.

    python -m benches.runner_peer [--cells 10000 100000] [--concurrency 64 256] [--rounds 5]

The server (``serve``, its own process, pinned to one CPU) is a raw ``asyncio.Protocol`` that answers every
POST with the same canned OpenAI chat completion ("3"): no JSON parsing, no routing, a few µs per request, so
the clients, not the server, set the pace; its busy share (CPU seconds per wall second) is reported for every
arm. Each arm runs in a child process of its own (pinned to the other CPU), so its peak RSS (``VmHWM``, sampled
every 50 ms) and CPU time (``wait4``) are its own:

- ``bare``: one ``aiohttp.ClientSession``, ``concurrency`` workers, request bodies serialized before the clock
  starts, ``json.loads`` of each reply, the text appended to a list; nothing stored.
- ``sweep``: ``run_sweep`` on the same spec (lazy plan with keys, request bodies, limits, retries, Parquet parts,
  the parse stage), in process, after a 500-cell warm-up sweep and ``gc.freeze()`` as ``hofcat run`` does.
- ``cli``: ``hofcat run SPEC --out DIR`` as a user runs it (process start and imports included).

Correctness before time: ``bare`` got every reply; ``sweep`` and ``cli`` stored every planned cell exactly once,
each with the server's text. The arms alternate ``rounds`` times (drifting load hits all alike); medians are
reported: requests/s (wall), client CPU µs per request (the child's own CPU over its timed part; ``cli``: the
whole process), each hofcat arm ÷ bare, peak RSS, the server's busy share, and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "sim-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "3"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21},
    }
).encode()
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(REPLY), REPLY)
WARM_CELLS = 500


class Canned(asyncio.Protocol):
    """Answers each complete HTTP/1.1 request on the connection with ``RESPONSE`` (bodies by Content-Length)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while (end := buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(buffer[:end]).lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 : head.find(b"\r\n", at) if b"\r\n" in head[at:] else None]) if at >= 0 else 0
            if len(buffer) < end + 4 + length:
                return
            del buffer[: end + 4 + length]
            self.transport.write(RESPONSE)


def serve(port: int) -> None:
    """Run the canned server on 127.0.0.1:``port`` until killed; prints the port once listening."""

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Canned, "127.0.0.1", port, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


def spec_text(base_url: str, cells: int, concurrency: int) -> str:
    """An item-mode spec of about ``cells`` cells (17 personas × 24 questions × seeds); no limits."""
    from benches.runner_bench import spec_text as bench_spec

    return bench_spec(base_url, cells, concurrency)


async def bare_loop(url: str, bodies: list[bytes], concurrency: int) -> list[str]:
    """The peer: POST every body with ``concurrency`` workers on one session; the reply texts, in order."""
    import aiohttp

    out: list[str] = []
    bodies_left = iter(bodies)
    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            for body in bodies_left:
                async with session.post(url, data=body, headers=headers) as response:
                    out.append(json.loads(await response.read())["choices"][0]["message"]["content"])

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def bare_arm(base_url: str, bodies_file: str, concurrency: int) -> dict[str, Any]:
    """The bare loop's timed arm in this (child) process, which imports only aiohttp: its bodies come from
    ``bodies_file`` (one JSON body a line, written by the parent from the plan)."""
    bodies = Path(bodies_file).read_bytes().splitlines()
    url = f"{base_url}/chat/completions"
    asyncio.run(bare_loop(url, bodies[:WARM_CELLS], concurrency))
    gc.collect()
    gc.freeze()
    t0, c0 = time.perf_counter(), time.process_time()
    texts = asyncio.run(bare_loop(url, bodies, concurrency))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "requests": len(bodies),
        "correct": len(texts) == len(bodies) and set(texts) == {"3"},
    }


def write_bodies(base_url: str, cells: int, concurrency: int, path: Path) -> int:
    """The plan's request bodies as the bare loop sends them (hofcat's OpenAI fields), one a line; how many."""
    from benches.runner_bench import _plain_body
    from runner.sweep.plan import iter_cells
    from runner.sweep.request import rendered
    from runner.sweep.spec import parse_spec

    spec = parse_spec(spec_text(base_url, cells, concurrency))
    bodies = [_plain_body(c, rendered(c.prompt).messages) for c in iter_cells(spec)]
    path.write_bytes(b"\n".join(bodies))
    return len(bodies)


def sweep_arm(base_url: str, cells: int, concurrency: int) -> dict[str, Any]:
    """``run_sweep``'s timed arm in this (child) process: wall and CPU seconds, and whether it stored every cell."""
    from runner.rundir import read_dataset
    from runner.sweep.plan import iter_cells
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    spec = parse_spec(spec_text(base_url, cells, concurrency))
    with tempfile.TemporaryDirectory(prefix="hofcat-peer-") as tmp:
        run_sweep(parse_spec(spec_text(base_url, WARM_CELLS, concurrency)), Path(tmp) / "warm", live=False)
        gc.collect()
        gc.freeze()
        t0, c0 = time.perf_counter(), time.process_time()
        result = run_sweep(spec, Path(tmp) / "run", live=False, log_every_s=3600)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        n = sum(1 for _ in iter_cells(spec))
        correct = _stored_once(read_dataset(Path(tmp) / "run", "responses", ["cell_key", "response_text"]), n)
    return {"wall_s": wall, "cpu_s": cpu, "requests": n, "correct": correct and result.stored == n}


def _stored_once(stored: Any, planned: int) -> bool:
    """Every planned cell stored exactly once, each with the server's text."""
    keys = stored.column("cell_key").to_pylist()
    return len(keys) == len(set(keys)) == planned and set(stored.column("response_text").to_pylist()) == {"3"}


def _child(command: list[str], cpu: int | None) -> tuple[str, float, float, int]:
    """Run ``command`` to its end: (stdout, wall s, CPU s, peak RSS bytes) of that child alone (``wait4``)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        if cpu is not None:
            os.sched_setaffinity(proc.pid, {cpu})
        peak = 0  # VmHWM: the peak RSS of the process's own memory since exec (ru_maxrss counts the parent's too)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, _hwm(proc.pid))
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{command[:5]} failed ({proc.returncode}): {err.read()[-2000:]}")
        return out.read(), wall, usage.ru_utime + usage.ru_stime, peak


def _hwm(pid: int) -> int:
    """The process's peak resident set (``VmHWM``, bytes); 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _server_cpu_s(pid: int) -> float:
    """CPU seconds the server process has used (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(cells: int, concurrency: int, rounds: int) -> dict[str, Any]:
    """``rounds`` alternating rounds of the three arms at ``cells`` and ``concurrency``; medians and ratios."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "benches.runner_peer", "serve", "--port", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        server.stdout.readline()
        cpus = sorted(os.sched_getaffinity(0))
        server_cpu, client_cpu = (cpus[0], cpus[1]) if len(cpus) > 1 else (None, None)
        if server_cpu is not None:
            os.sched_setaffinity(server.pid, {server_cpu})
        base_url = f"http://127.0.0.1:{port}/v1"
        bodies = Path(tempfile.mkstemp(prefix="hofcat-peer-bodies-")[1])
        write_bodies(base_url, cells, concurrency, bodies)
        arms = {
            "bare": ["bare", base_url, str(bodies), str(concurrency)],
            "sweep": ["sweep", base_url, str(cells), str(concurrency)],
        }
        runs: dict[str, list[dict[str, float]]] = {"bare": [], "sweep": [], "cli": []}
        for _ in range(rounds):
            for name in runs:
                s0 = _server_cpu_s(server.pid)
                if name == "cli":
                    runs[name].append(_cli(base_url, cells, concurrency, client_cpu, s0, server.pid))
                    continue
                out, _, _, rss = _child([sys.executable, "-m", "benches.runner_peer", "arm", *arms[name]], client_cpu)
                r = json.loads(out.strip().splitlines()[-1])
                assert r["correct"], f"{name}: wrong result"
                server_s = _server_cpu_s(server.pid) - s0
                runs[name].append({**r, "rss": rss, "server_busy": server_s / r["wall_s"]})
        bodies.unlink()
    finally:
        server.kill()
        server.wait()
    return _summary(cells, concurrency, rounds, runs)


def _cli(base_url: str, cells: int, concurrency: int, cpu: int | None, s0: float, server_pid: int) -> dict[str, float]:
    """One ``hofcat run`` of the spec, as a user runs it: wall, CPU and peak RSS of the whole process."""
    from runner.rundir import read_dataset
    from runner.sweep.plan import count_cells
    from runner.sweep.spec import parse_spec

    text = spec_text(base_url, cells, concurrency)
    n = count_cells(parse_spec(text))
    tmp = Path(tempfile.mkdtemp(prefix="hofcat-peer-cli-"))
    try:
        (tmp / "spec.toml").write_text(text, encoding="utf-8")
        command = [sys.executable, "-m", "runner.cli", "run", str(tmp / "spec.toml"), "--out", str(tmp / "run")]
        _, wall, cpu_s, rss = _child([*command, "--log-every", "3600"], cpu)
        server_s = _server_cpu_s(server_pid) - s0
        assert _stored_once(read_dataset(tmp / "run", "responses", ["cell_key", "response_text"]), n), "cli: wrong"
    finally:
        shutil.rmtree(tmp)
    return {"wall_s": wall, "cpu_s": cpu_s, "requests": n, "rss": rss, "server_busy": server_s / wall}


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _summary(cells: int, concurrency: int, rounds: int, runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Medians per arm and each hofcat arm ÷ bare: requests/s, CPU per request, peak RSS, server busy share."""
    out: dict[str, Any] = {"cells": runs["bare"][0]["requests"], "concurrency": concurrency, "rounds": rounds}
    for name, rs in runs.items():
        out[name] = {
            "requests_per_s": _median([r["requests"] / r["wall_s"] for r in rs]),
            "cpu_us_per_request": _median([r["cpu_s"] / r["requests"] * 1e6 for r in rs]),
            "peak_rss_mb": _median([r["rss"] for r in rs]) / 2**20,
            "server_busy": _median([r["server_busy"] for r in rs]),
        }
    for name in ("sweep", "cli"):
        pairs = list(zip(runs["bare"], runs[name], strict=True))  # ratios within a round, then their median
        out[name]["rate_ratio"] = _median([b["wall_s"] / h["wall_s"] for b, h in pairs])
        out[name]["cpu_ratio"] = _median([b["cpu_s"] / h["cpu_s"] for b, h in pairs])
    out["load_1m"] = os.getloadavg()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=0)
    a = sub.add_parser("arm")
    a.add_argument("name", choices=("bare", "sweep"))
    a.add_argument("base_url")
    a.add_argument("what", help="bare: the bodies file; sweep: the number of cells")
    a.add_argument("concurrency", type=int)
    parser.add_argument("--cells", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.port)
    elif args.command == "arm":
        if args.name == "bare":
            print(json.dumps(bare_arm(args.base_url, args.what, args.concurrency)))
        else:
            print(json.dumps(sweep_arm(args.base_url, int(args.what), args.concurrency)))
    else:
        for cells in args.cells:
            for concurrency in args.concurrency:
                print(json.dumps(measure(cells, concurrency, args.rounds)), flush=True)


if __name__ == "__main__":
    main()
