"""Client CPU per request of HTTP clients against the simulator: what a cheaper HTTP path than aiohttp could buy.

    python -m benches.http_clients [--cells 10200] [--rounds 3] [--clients aiohttp,pyreqwest,rnet,aiosonic,raw]

The same request bodies as ``runner_bench throughput`` (prepared before the clock), the same concurrency (64
workers, one keep-alive connection each), the simulator pinned to one CPU and this client to the other; each
client posts every body, reads and JSON-decodes each reply; clients alternate ``rounds`` times and the median
client CPU µs per request (user + system, the process's) and wall requests/s are printed per client.

Clients: ``aiohttp`` (the bare loop of runner_bench, hofcat's peer), and, when installed (none is a hofcat
dependency): ``pyreqwest`` and ``rnet`` (Rust HTTP clients with asyncio bindings), ``aiosonic`` (pure Python),
and ``raw``: a bare ``asyncio.Protocol`` with ``httptools``' parser, one request at a time per connection —
the floor of any Python-driven HTTP/1.1 client here (no pool, no timeouts, no redirects, no decompression,
no error handling: not a client, a lower bound).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from benches.runner_bench import _plain_body, _separate_cores, plain_loop, spec_text
from runner.endpoints.sim import SimProcess

Loop = Callable[[str, list[bytes], int], Awaitable[list[str]]]
HEADERS = {"Content-Type": "application/json"}


async def pyreqwest_loop(url: str, bodies: list[bytes], concurrency: int) -> list[str]:
    """``plain_loop`` through pyreqwest."""
    from pyreqwest.client import ClientBuilder

    out, todo = [""] * len(bodies), iter(range(len(bodies)))
    async with ClientBuilder().max_connections(concurrency).build() as client:

        async def worker() -> None:
            for i in todo:
                request = client.post(url).header("Content-Type", "application/json").body_bytes(bodies[i])
                response = await request.build().send()
                out[i] = json.loads(bytes(await response.bytes()))["choices"][0]["message"]["content"]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def rnet_loop(url: str, bodies: list[bytes], concurrency: int) -> list[str]:
    """``plain_loop`` through rnet."""
    import rnet

    out, todo, client = [""] * len(bodies), iter(range(len(bodies))), rnet.Client()

    async def worker() -> None:
        for i in todo:
            response = await client.post(url, body=bodies[i], headers=HEADERS)
            out[i] = json.loads(await response.bytes())["choices"][0]["message"]["content"]

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def aiosonic_loop(url: str, bodies: list[bytes], concurrency: int) -> list[str]:
    """``plain_loop`` through aiosonic."""
    import aiosonic

    out, todo = [""] * len(bodies), iter(range(len(bodies)))
    connector = aiosonic.TCPConnector(pool_configs={":default": aiosonic.connectors.PoolConfig(size=concurrency)})
    client = aiosonic.HTTPClient(connector)

    async def worker() -> None:
        for i in todo:
            response = await client.post(url, data=bodies[i], headers=HEADERS)
            out[i] = json.loads(await response.content())["choices"][0]["message"]["content"]

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def raw_loop(url: str, bodies: list[bytes], concurrency: int) -> list[str]:
    """The floor: one ``asyncio.Protocol`` per worker, httptools parsing, Content-Length framing only."""
    import httptools

    loop, parts = asyncio.get_running_loop(), urlsplit(url)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\n\r\n"
    ).encode()
    out, todo = [""] * len(bodies), iter(range(len(bodies)))

    class Connection(asyncio.Protocol):
        def __init__(self) -> None:
            self.parser, self.chunks, self.done = httptools.HttpResponseParser(self), [], loop.create_future()

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)

        def on_body(self, body: bytes) -> None:
            self.chunks.append(body)

        def on_message_complete(self) -> None:
            self.done.set_result(b"".join(self.chunks))

    async def worker() -> None:
        transport, protocol = await loop.create_connection(Connection, parts.hostname, parts.port)
        try:
            for i in todo:
                protocol.chunks, protocol.done = [], loop.create_future()
                transport.write(head % len(bodies[i]) + bodies[i])
                out[i] = json.loads(await protocol.done)["choices"][0]["message"]["content"]
        finally:
            transport.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


CLIENTS: dict[str, tuple[str, Loop]] = {
    "aiohttp": ("aiohttp", plain_loop),
    "pyreqwest": ("pyreqwest", pyreqwest_loop),
    "rnet": ("rnet", rnet_loop),
    "aiosonic": ("aiosonic", aiosonic_loop),
    "raw": ("httptools", raw_loop),
}


def measure(cells: int, rounds: int, names: list[str], concurrency: int = 64) -> dict[str, object]:
    """Median client CPU µs per request and wall requests/s of each installed client in ``names``."""
    from runner.sweep.plan import iter_cells
    from runner.sweep.request import rendered
    from runner.sweep.spec import parse_spec

    chosen = {n: CLIENTS[n][1] for n in names if importlib.util.find_spec(CLIENTS[n][0]) is not None}
    with SimProcess(["--seed", "1"]) as sim:
        _separate_cores(sim)
        plan = list(iter_cells(parse_spec(spec_text(sim.base_url, cells, concurrency))))
        bodies = [_plain_body(c, rendered(c.prompt)[0]) for c in plan]
        url = f"{sim.base_url}/chat/completions"
        expected = asyncio.run(plain_loop(url, bodies, concurrency))  # warm-up; the texts every client must get
        gc.collect()
        gc.freeze()
        runs: dict[str, list[tuple[float, float]]] = {n: [] for n in chosen}
        for _ in range(rounds):
            for name, client in chosen.items():
                t0, c0 = time.perf_counter(), time.process_time()
                texts = asyncio.run(client(url, bodies, concurrency))
                runs[name].append((time.process_time() - c0, time.perf_counter() - t0))
                assert texts == expected, f"{name} got other replies than the plain loop"
    result: dict[str, object] = {"requests": len(bodies), "rounds": rounds, "load_1m": os.getloadavg()[0]}
    for name, samples in runs.items():
        cpu = sorted(s[0] for s in samples)[len(samples) // 2]
        wall = sorted(s[1] for s in samples)[len(samples) // 2]
        result[name] = {
            "cpu_us_per_request": round(cpu / len(bodies) * 1e6, 1),
            "requests_per_s": round(len(bodies) / wall),
        }
    result["not_installed"] = [n for n in names if n not in chosen]
    return result


def main(argv: list[str] | None = None) -> int:
    """Print one JSON line: each client's median CPU per request and wall rate."""
    parser = argparse.ArgumentParser(prog="python -m benches.http_clients")
    parser.add_argument("--cells", type=int, default=10200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    args = parser.parse_args(argv)
    names = [n for n in args.clients.split(",") if n]
    unknown = sorted(set(names) - set(CLIENTS))
    if unknown:
        parser.error(f"unknown clients: {', '.join(unknown)} (known: {', '.join(CLIENTS)})")
    print(json.dumps(measure(args.cells, args.rounds, names)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
