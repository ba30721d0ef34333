"""Throughput of the simulated endpoint at zero latency, next to a bare aiohttp server on the same stack.

    python -m benches.sim_bench [--requests 20000] [--concurrency 64]

Each server runs in its own process (``hofcat serve-sim`` and a minimal aiohttp app that returns a fixed
completion); one plain aiohttp client loop sends the same item prompts to each, back to back. Correctness is
checked before timing: every simulated reply is a valid completion whose answer parses (runner.parse) to the
option the server logged. Two rates per server: requests per wall second (what a client sees; on a shared
machine it includes the client's own cost and other load) and requests per CPU second of the server process
(user + system, from psutil: the server's own capacity, robust to load), plus the client's own CPU rate (on
two cores the client, not the server, bounds the wall rate). The ratio sim / bare says what the simulation
costs on top of HTTP handling.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import aiohttp
import psutil

from runner.endpoints.sim import SimProcess
from runner.survey.cell import Framing, PromptCell
from runner.survey.prompts import build_messages, load_templates

FIXED_REPLY = {
    "id": "chatcmpl-bare",
    "object": "chat.completion",
    "created": 0,
    "model": "bare",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "3"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101},
}


def bare_server() -> None:
    """Serve FIXED_REPLY at /v1/chat/completions on a free port; print the base URL; run until killed."""
    from aiohttp import web

    body = json.dumps(FIXED_REPLY).encode()

    async def chat(request: web.Request) -> web.Response:
        json.loads(await request.read())  # a fair peer reads and decodes the request too
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"http://127.0.0.1:{port}/v1", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def request_bodies(n: int) -> list[bytes]:
    """``n`` item requests cycling over 17 personas × 24 questions, each with its own seed."""
    countries = sorted(load_templates("en")["countries"])
    cells = [PromptCell("en", "item", (q,), Framing("persona", c)) for c in countries for q in range(1, 25)]
    return [
        json.dumps(
            {"model": "sim-1", "messages": build_messages(cells[i % len(cells)]), "seed": i, "temperature": 1.0}
        ).encode()
        for i in range(n)
    ]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid``."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def timed(base_url: str, pid: int, bodies: list[bytes], concurrency: int) -> tuple[float, float, float]:
    """(wall seconds, server CPU seconds, client CPU seconds) to answer every body."""
    before, client_before = cpu_s(pid), time.process_time()
    wall, _ = asyncio.run(blast(base_url, bodies, concurrency))
    return wall, cpu_s(pid) - before, time.process_time() - client_before


async def blast(base_url: str, bodies: list[bytes], concurrency: int) -> tuple[float, list[dict[str, Any]]]:
    """Send every body with ``concurrency`` workers → (seconds, replies in order)."""
    replies: list[Any] = [None] * len(bodies)
    queue = iter(range(len(bodies)))
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            for i in queue:
                async with session.post(f"{base_url}/chat/completions", data=bodies[i], headers=headers) as r:
                    replies[i] = json.loads(await r.read()) if r.status == 200 else {"status": r.status}

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started, replies


async def check_correct(base_url: str, bodies: list[bytes], concurrency: int) -> int:
    """Every reply is a completion whose parsed answer equals the option the server logged; returns the count."""
    from runner.endpoints.sim.data import load_reader
    from runner.parse import parse_reply

    _, replies = await blast(base_url, bodies, concurrency)
    async with aiohttp.ClientSession() as session, session.get(base_url.removesuffix("/v1") + "/sim/log") as r:
        log = (await r.json())["entries"]
    logged = {e["reply"] for e in log}
    reader = load_reader()
    for body, reply in zip(bodies, replies, strict=True):
        text = reply["choices"][0]["message"]["content"]
        messages = tuple((m["role"], m["content"]) for m in json.loads(body)["messages"])
        cell = reader.read(messages)
        assert cell is not None and text in logged
        assert parse_reply(text, cell).answers[0].status == "ok", text
    return len(replies)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one JSON object with both throughputs and their ratio."""
    parser = argparse.ArgumentParser(prog="python -m benches.sim_bench")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_server:
        bare_server()
        return 0
    bodies = request_bodies(args.requests)
    bare = subprocess.Popen(
        [sys.executable, "-m", "benches.sim_bench", "--bare-server"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert bare.stdout is not None
        bare_url = bare.stdout.readline().strip()
        with SimProcess(["--seed", "1"]) as sim:
            assert sim.process is not None
            checked = asyncio.run(check_correct(sim.base_url, bodies[:500], args.concurrency))
            sim_s, sim_cpu, client_cpu = timed(sim.base_url, sim.process.pid, bodies, args.concurrency)
        bare_s, bare_cpu, _ = timed(bare_url, bare.pid, bodies, args.concurrency)
    finally:
        bare.terminate()
        bare.wait(timeout=30)
    result = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "correct_checked": checked,
        "sim_requests_per_wall_s": round(args.requests / sim_s, 1),
        "bare_requests_per_wall_s": round(args.requests / bare_s, 1),
        "sim_requests_per_server_cpu_s": round(args.requests / sim_cpu, 1),
        "bare_requests_per_server_cpu_s": round(args.requests / bare_cpu, 1),
        "client_requests_per_cpu_s": round(args.requests / client_cpu, 1),
        "ratio_sim_over_bare_wall": round(bare_s / sim_s, 3),
        "ratio_sim_over_bare_cpu": round(bare_cpu / sim_cpu, 3),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
