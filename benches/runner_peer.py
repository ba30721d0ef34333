"""hofcat's runner next to a bare aiohttp loop, against a loopback server that is never the bottleneck.

    python -m benches.runner_peer [--cells 10000 100000] [--concurrency 64 256] [--rounds 5]
        [--peers-python /tmp/peers-venv/bin/python --peer-cells 2000 --peer-python inspect_ai=PYTHON]
        [--parts PART ...]

The server (``serve``, its own process, pinned to one CPU) is a raw ``asyncio.Protocol`` that answers every
POST with the same canned OpenAI chat completion ("3"): no JSON parsing, no routing, a few µs per request, so
the clients, not the server, set the pace; its busy share (CPU seconds per wall second) is reported for every
arm. Each arm runs in a child process of its own (pinned to the other CPU), so its peak RSS (``VmHWM``, sampled
every 50 ms) and CPU time (``wait4``) are its own:

- ``bare``: one ``aiohttp.ClientSession``, ``concurrency`` workers, request bodies serialized before the clock
  starts, ``json.loads`` of each reply, the text appended to a list; nothing stored.
- ``sweep``: ``run_sweep`` on the same spec (lazy plan with keys, request bodies, limits, retries, Parquet parts,
  the parse stage), in process, after a 500-cell warm-up sweep and ``gc.freeze()`` as ``hofcat run`` does.
- ``cli``: ``hofcat run SPEC --out DIR`` as a user runs it (process start and imports included), set against
  ``bare-process``: the bare loop as a program a user runs, timed the same way (its process start, its import of
  aiohttp, reading its bodies, no warm-up). Its ratio to the timed ``bare`` arm is reported too (``cli`` ÷
  ``bare``), which charges ``hofcat run`` its start-up against a loop whose start-up is not counted.

With ``--peers-python`` (a scratch venv with the peers installed: ``pip install openai litellm
bespokelabs-curator inspect-ai``), each round also runs the tools a user would pick instead, each on the first
``--peer-cells`` bodies of the same plan, in that interpreter, at the same concurrency: ``openai`` (an
``AsyncOpenAI`` loop: ``chat.completions.create``), ``litellm`` (``acompletion``), ``curator`` (``LLM`` on the
OpenAI backend) and ``inspect_ai`` (``eval`` of a task of one-turn samples, ``generate()``, no scorer). A peer
that does not import or run is reported with its error, never dropped silently.

With ``--parts PART ...``, each round also times the sweep taken apart as ``benches.runner_instructions`` takes
it (``sweep-floor``: no decode, no body, nothing stored; ``sweep-no-flush``: nothing committed; ``sweep-at-end``:
one commit when the sweep ends; ...), each in a child of its own like ``sweep``: the clock's view of where the
gap is, beside the instruction counts'.

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


def bare_arm(base_url: str, bodies_file: str, concurrency: int, warm: bool = True) -> dict[str, Any]:
    """The bare loop's timed arm in this (child) process, which imports only aiohttp: its bodies come from
    ``bodies_file`` (one JSON body a line, written by the parent from the plan). ``warm``: after a warm-up
    (``bare-process``, the loop as a program, has none: its parent times the whole child)."""
    bodies = Path(bodies_file).read_bytes().splitlines()
    url = f"{base_url}/chat/completions"
    if warm:
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


def _peer_requests(bodies_file: str, cells: int) -> list[dict[str, Any]]:
    """The first ``cells`` request bodies of ``bodies_file``, as dicts (a peer builds its own JSON)."""
    return [json.loads(line) for line in Path(bodies_file).read_bytes().splitlines()[:cells]]


async def _workers(requests: list[dict[str, Any]], concurrency: int, ask: Any) -> list[str]:
    """``concurrency`` workers awaiting ``ask(request)`` (the reply's text) for every request; the texts."""
    out: list[str] = []
    left = iter(requests)

    async def worker() -> None:
        for request in left:
            text = await ask(request)  # one at a time per worker: the peer's own concurrency is the workers'
            out.append(text)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def _openai_texts(base_url: str, requests: list[dict[str, Any]], concurrency: int) -> list[str]:
    import httpx
    from openai import AsyncOpenAI

    async def main() -> list[str]:
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        client = AsyncOpenAI(
            base_url=base_url, api_key="bench", max_retries=0, http_client=httpx.AsyncClient(limits=limits)
        )

        async def ask(request: dict[str, Any]) -> str:
            reply = await client.chat.completions.create(**request)
            return reply.choices[0].message.content

        async with client:
            return await _workers(requests, concurrency, ask)

    return asyncio.run(main())


def _litellm_texts(base_url: str, requests: list[dict[str, Any]], concurrency: int) -> list[str]:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no download of the price list (no network here)
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True

    async def ask(request: dict[str, Any]) -> str:
        request = {**request, "model": "openai/" + request["model"]}
        reply = await litellm.acompletion(api_base=base_url, api_key="bench", num_retries=0, **request)
        return reply.choices[0].message.content

    return asyncio.run(_workers(requests, concurrency, ask))


def _curator_texts(base_url: str, requests: list[dict[str, Any]], concurrency: int) -> list[str]:
    os.environ.setdefault("CURATOR_CACHE_DIR", tempfile.mkdtemp(prefix="hofcat-peer-curator-"))
    os.environ["CURATOR_DISABLE_CACHE"] = "true"
    os.environ["CURATOR_VIEWER"] = "0"
    os.environ["TELEMETRY_ENABLED"] = "false"  # curator's PostHog events (no network here: each would time out)
    import litellm  # curator's dependency, which ships tiktoken's encodings: curator counts tokens offline with them

    tokenizers = Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(tokenizers))
    from bespokelabs import curator

    class Ask(curator.LLM):
        def prompt(self, row: dict[str, Any]) -> list[dict[str, str]]:
            return row["messages"]

        def parse(self, row: dict[str, Any], response: str) -> dict[str, Any]:
            return {"text": response}

    llm = Ask(
        model_name=requests[0]["model"],
        backend="openai",
        generation_params={"temperature": requests[0]["temperature"], "max_tokens": requests[0]["max_tokens"]},
        backend_params={
            "base_url": base_url,
            "api_key": "bench",
            "max_retries": 0,
            "max_requests_per_minute": 10**9,
            "max_tokens_per_minute": 10**12,
            "max_concurrent_requests": concurrency,
        },
    )
    result = llm([{"messages": r["messages"]} for r in requests])
    dataset = getattr(result, "dataset", result)
    return list(dataset["text"])


def _inspect_texts(base_url: str, requests: list[dict[str, Any]], concurrency: int) -> list[str]:
    os.environ["OPENAI_API_KEY"] = "bench"
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser
    from inspect_ai.solver import generate

    def sample(i: int, request: dict[str, Any]) -> Sample:
        kinds = {"system": ChatMessageSystem, "user": ChatMessageUser}
        return Sample(input=[kinds[m["role"]](content=m["content"]) for m in request["messages"]], id=i)

    task = Task(dataset=[sample(i, r) for i, r in enumerate(requests)], solver=generate())
    logs = eval(
        task,
        model=f"openai/{requests[0]['model']}",
        model_base_url=base_url,
        model_args={"responses_api": False},  # chat completions, as the server and every other arm speak
        max_connections=concurrency,
        max_retries=0,
        temperature=requests[0]["temperature"],
        max_tokens=requests[0]["max_tokens"],
        log_dir=tempfile.mkdtemp(prefix="hofcat-peer-inspect-"),
        display="none",
        max_samples=concurrency,
    )
    return [s.output.completion for s in logs[0].samples]


PEERS = {"openai": _openai_texts, "litellm": _litellm_texts, "curator": _curator_texts, "inspect_ai": _inspect_texts}


def peer_arm(peer: str, base_url: str, bodies_file: str, cells: int, concurrency: int) -> dict[str, Any]:
    """One peer's timed arm in this (child) process, after a warm-up of ``WARM_CELLS // 5`` requests: wall and CPU
    seconds (imports and warm-up excluded), and whether every reply came back with the server's text."""
    run = PEERS[peer]
    run(base_url, _peer_requests(bodies_file, WARM_CELLS // 5), concurrency)
    requests = _peer_requests(bodies_file, cells)
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    texts = run(base_url, requests, concurrency)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "requests": len(requests), "correct": texts == ["3"] * len(requests)}


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


def sweep_arm(base_url: str, cells: int, concurrency: int, part: str = "sweep") -> dict[str, Any]:
    """``run_sweep``'s timed arm in this (child) process: wall and CPU seconds, and whether it stored every cell
    (a ``part`` of ``benches.runner_instructions`` that stores nothing: whether it counted every cell)."""
    from benches.runner_instructions import UNSTORED, take_apart
    from runner.rundir import read_dataset
    from runner.sweep.plan import iter_cells
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    # a part patches hofcat's modules for this whole child: the warm-up runs the same code as the timed sweep
    spec, options = take_apart(part, parse_spec(spec_text(base_url, cells, concurrency)))
    with tempfile.TemporaryDirectory(prefix="hofcat-peer-") as tmp:
        run_sweep(parse_spec(spec_text(base_url, WARM_CELLS, concurrency)), Path(tmp) / "warm", live=False, **options)
        gc.collect()
        gc.freeze()
        t0, c0 = time.perf_counter(), time.process_time()
        result = run_sweep(spec, Path(tmp) / "run", live=False, log_every_s=3600, **options)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        n = sum(1 for _ in iter_cells(spec))
        stored = part in UNSTORED or _stored_once(
            read_dataset(Path(tmp) / "run", "responses", ["cell_key", "response_text"]), n
        )
    return {"wall_s": wall, "cpu_s": cpu, "requests": n, "correct": stored and result.stored == n}


def _stored_once(stored: Any, planned: int) -> bool:
    """Every planned cell stored exactly once, each with the server's text."""
    keys = stored.column("cell_key").to_pylist()
    return len(keys) == len(set(keys)) == planned and set(stored.column("response_text").to_pylist()) == {"3"}


# A user's installed hofcat has its bytecode cached (pip compiles it at install); a shell that sets
# PYTHONDONTWRITEBYTECODE would make every `hofcat run` child compile ~90 of hofcat's modules from source again
# (~0.2 s of CPU per process, measured), a cost no user pays and the peers' installed packages do not pay either.
_CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _child(command: list[str], cpu: int | None) -> tuple[str, float, float, int]:
    """Run ``command`` to its end: (stdout, wall s, CPU s, peak RSS bytes) of that child alone (``wait4``)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True, env=_CHILD_ENV)
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


def measure(
    cells: int,
    concurrency: int,
    rounds: int,
    peers_python: str | None = None,
    peer_cells: int = 2000,
    peer_pythons: dict[str, str] | None = None,
    parts: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``rounds`` alternating rounds of the four arms (and the peers, run by ``peers_python`` on ``peer_cells``
    requests; a peer named in ``peer_pythons`` by its own; and ``parts``, the sweep taken apart as
    ``benches.runner_instructions`` takes it) at ``cells`` and ``concurrency``; medians and ratios."""
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
            "bare-process": ["bare-process", base_url, str(bodies), str(concurrency)],
            **{part: [part, base_url, str(cells), str(concurrency)] for part in parts},
        }
        runs: dict[str, list[dict[str, float]]] = {"bare": [], "sweep": [], "cli": [], "bare-process": []}
        runs.update({part: [] for part in parts})
        peers = {name: [] for name in PEERS} if peers_python else {}
        failed: dict[str, str] = {}
        for _ in range(rounds):
            for name in runs:
                s0 = _server_cpu_s(server.pid)
                if name == "cli":
                    runs[name].append(_cli(base_url, cells, concurrency, client_cpu, s0, server.pid))
                    continue
                out, wall, cpu_s, rss = _child(
                    [sys.executable, "-m", "benches.runner_peer", "arm", *arms[name]], client_cpu
                )
                r = json.loads(out.strip().splitlines()[-1])
                assert r["correct"], f"{name}: wrong result"
                if name == "bare-process":  # timed as ``cli`` is: the whole child
                    r.update(wall_s=wall, cpu_s=cpu_s)
                server_s = _server_cpu_s(server.pid) - s0
                runs[name].append({**r, "rss": rss, "server_busy": server_s / r["wall_s"]})
            for name in (p for p in peers if p not in failed):
                python = (peer_pythons or {}).get(name, peers_python)
                peer = [python, "-m", "benches.runner_peer", "peer", name, base_url, str(bodies)]
                s0 = _server_cpu_s(server.pid)
                try:
                    out, _, _, rss = _child([*peer, str(min(peer_cells, cells)), str(concurrency)], client_cpu)
                except RuntimeError as exc:  # not installable or not runnable here: said, not dropped
                    failed[name] = " ".join(str(exc).split())[-300:]
                    continue
                r = json.loads(out.strip().splitlines()[-1])
                assert r["correct"], f"{name}: wrong result"
                server_s = _server_cpu_s(server.pid) - s0
                peers[name].append({**r, "rss": rss, "server_busy": server_s / r["wall_s"]})
        bodies.unlink()
    finally:
        server.kill()
        server.wait()
    summary = _summary(cells, concurrency, rounds, runs)
    summary["peers"] = {name: _peer_summary(runs["bare"], rs) for name, rs in peers.items() if rs}
    summary["peers_failed"] = failed
    return summary


def _peer_summary(bare: list[dict[str, float]], rs: list[dict[str, float]]) -> dict[str, float]:
    """A peer's medians, and the bare loop's CPU per request ÷ the peer's, within each round (per request: a peer
    runs fewer requests than the bare loop)."""
    per = [b["cpu_s"] / b["requests"] / (r["cpu_s"] / r["requests"]) for b, r in zip(bare, rs, strict=False)]
    rate = [r["requests"] / r["wall_s"] / (b["requests"] / b["wall_s"]) for b, r in zip(bare, rs, strict=False)]
    return {
        "requests": rs[0]["requests"],
        "requests_per_s": _median([r["requests"] / r["wall_s"] for r in rs]),
        "cpu_us_per_request": _median([r["cpu_s"] / r["requests"] * 1e6 for r in rs]),
        "peak_rss_mb": _median([r["rss"] for r in rs]) / 2**20,
        "server_busy": _median([r["server_busy"] for r in rs]),
        "rate_ratio": _median(rate),
        "cpu_ratio": _median(per),
    }


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
    parts = [name for name in runs if name not in ("bare", "sweep", "cli", "bare-process")]
    compared = [("sweep", "bare", ""), ("cli", "bare", ""), ("cli", "bare-process", "_vs_process")]
    for name, peer, key in compared + [(part, "bare", "") for part in parts]:
        pairs = list(zip(runs[peer], runs[name], strict=True))  # ratios within a round, then their median
        out[name][f"rate_ratio{key}"] = _median([b["wall_s"] / h["wall_s"] for b, h in pairs])
        out[name][f"cpu_ratio{key}"] = _median([b["cpu_s"] / h["cpu_s"] for b, h in pairs])
    out["load_1m"] = os.getloadavg()[0]
    return out


def main() -> None:
    from benches.runner_instructions import PARTS  # stdlib imports only: the bare children stay bare

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=0)
    a = sub.add_parser("arm")
    a.add_argument("name", choices=("bare", "bare-process", "sweep", *PARTS))
    a.add_argument("base_url")
    a.add_argument("what", help="bare: the bodies file; sweep and its parts: the number of cells")
    a.add_argument("concurrency", type=int)
    p = sub.add_parser("peer")
    p.add_argument("name", choices=sorted(PEERS))
    p.add_argument("base_url")
    p.add_argument("bodies")
    p.add_argument("cells", type=int)
    p.add_argument("concurrency", type=int)
    parser.add_argument("--cells", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--peers-python", help="an interpreter with the peers installed (a scratch venv)")
    parser.add_argument("--peer-cells", type=int, default=2000, help="requests per peer arm (default 2000)")
    parser.add_argument(
        "--peer-python",
        action="append",
        default=[],
        metavar="PEER=PYTHON",
        help="one peer's own interpreter (inspect_ai needs openai>=3.4, litellm pins openai 2)",
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        default=[],
        choices=PARTS,
        metavar="PART",
        help="also the sweep taken apart, timed (benches.runner_instructions: sweep-floor, sweep-no-flush, ...)",
    )
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.port)
    elif args.command == "peer":
        print(json.dumps(peer_arm(args.name, args.base_url, args.bodies, args.cells, args.concurrency)))
    elif args.command == "arm":
        if args.name in ("bare", "bare-process"):
            print(json.dumps(bare_arm(args.base_url, args.what, args.concurrency, warm=args.name == "bare")))
        else:
            print(json.dumps(sweep_arm(args.base_url, int(args.what), args.concurrency, args.name)))
    else:
        for cells in args.cells:
            for concurrency in args.concurrency:
                own = dict(item.split("=", 1) for item in args.peer_python)
                result = measure(
                    cells, concurrency, args.rounds, args.peers_python, args.peer_cells, own, tuple(args.parts)
                )
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
