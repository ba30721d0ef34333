"""The local llama.cpp server (SmolLM2-135M): hofcat's client vs a plain aiohttp loop, and the demo sweep's cost.

    python -m benches.llm_bench throughput [--seeds 1] [--concurrency 8] [--rounds 2]
    python -m benches.llm_bench formats [--seeds 3]
    python -m benches.llm_bench startup [--repeats 3]

throughput: one ``LocalLLM`` (4 slots); the demo's item cells (4 personas x 24 questions x seeds, fewshot
format, max_tokens 8) are sent to it, alternately, by (1) a plain aiohttp loop with ``concurrency`` workers
(bodies prepared before the clock starts, nothing stored) and (2) ``run_sweep`` (plan, limits, retries,
Parquet store, parsing) at the same ``max_concurrency``. Rounds alternate A/B to spread the machine's load
drift over both. Correctness first: hofcat stored every cell once, and the share of cells whose stored text
equals the plain loop's is reported (same request and seed: llama.cpp answers identically).

formats: the demo's cells through the plain loop in each reply format, with and without constrained
decoding: wall time, requests/s and the parse rate (``runner.parse``). This is what one ``hofcat demo``
sweep costs on this machine.

startup: seconds from ``LocalLLM.start()`` to a healthy server, and to the first reply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

from runner.endpoints.llm import LocalLLM
from runner.survey.constrained import constrained_request_fields

DEMO_PERSONAS = ("China", "Germany", "Japan", "U.S.A.")


def spec_text(base_url: str, seeds: int, concurrency: int, reply_format: str, max_tokens: int) -> str:
    """The demo-shaped item-mode spec: 4 personas x 24 questions x ``seeds`` seeds against ``base_url``."""
    return f"""
[run]
name = "llm-bench"
[[endpoints]]
name = "local"
provider = "openai"
base_url = "{base_url}"
model = "smollm2"
max_concurrency = {concurrency}
timeout_s = 600
[design]
personas = {json.dumps(list(DEMO_PERSONAS))}
reply_format = ["{reply_format}"]
seeds = {list(range(1, seeds + 1))}
temperature = [0.7]
max_tokens = {max_tokens}
"""


def planned_cells(spec_source: str) -> tuple[Any, list[Any]]:
    """The parsed spec and its plan."""
    from runner.sweep.plan import iter_cells
    from runner.sweep.spec import parse_spec

    spec = parse_spec(spec_source)
    return spec, list(iter_cells(spec))


def request_body(cell: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """The chat body hofcat's OpenAI provider sends for ``cell``, plus ``extra`` fields."""
    from runner.sweep.request import rendered

    return {
        "model": cell.endpoint.model,
        "messages": rendered(cell.prompt)[0],
        "temperature": cell.sampling.temperature,
        "top_p": cell.sampling.top_p,
        "max_tokens": cell.sampling.max_tokens,
        "seed": cell.sampling.seed,
        **extra,
    }


async def plain_loop(url: str, bodies: list[bytes], concurrency: int) -> list[str]:
    """POST every body with ``concurrency`` workers; the reply texts in body order."""
    out: list[str] = [""] * len(bodies)
    next_index = iter(range(len(bodies)))
    headers = {"Content-Type": "application/json"}
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency), timeout=timeout) as session:

        async def worker() -> None:
            for i in next_index:
                async with session.post(url, data=bodies[i], headers=headers) as response:
                    assert response.status == 200, await response.text()
                    out[i] = json.loads(await response.read())["choices"][0]["message"]["content"]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def throughput(seeds: int, concurrency: int, rounds: int) -> dict[str, Any]:
    """Requests/s of the plain loop and of ``run_sweep`` on the same cells and server, alternating."""
    from runner.rundir import read_dataset
    from runner.sweep.session import run_sweep

    with LocalLLM(slots=4, ctx_per_slot=1024) as llm:
        spec, plan = planned_cells(spec_text(llm.base_url, seeds, concurrency, "fewshot", 8))
        bodies = [json.dumps(request_body(c, {})).encode() for c in plan]
        url = f"{llm.base_url}/chat/completions"
        asyncio.run(plain_loop(url, bodies[:concurrency], concurrency))  # warm the slots' prompt caches
        plain_s: list[float] = []
        hofcat_s: list[float] = []
        agree: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            texts = asyncio.run(plain_loop(url, bodies, concurrency))
            plain_s.append(time.perf_counter() - t0)
            assert all(texts) and len(texts) == len(plan)
            out = Path(tempfile.mkdtemp(prefix="hofcat-llm-bench-"))
            try:
                t0 = time.perf_counter()
                result = run_sweep(spec, out / "run", live=False, log_every_s=3600)
                hofcat_s.append(time.perf_counter() - t0)
                stored = read_dataset(out / "run", "responses", ["cell_key", "response_text"]).to_pydict()
            finally:
                shutil.rmtree(out)
            assert result.stored == len(plan) == len(set(stored["cell_key"])), "hofcat did not store every cell once"
            by_key = dict(zip(stored["cell_key"], stored["response_text"], strict=True))
            agree.append(sum(by_key[c.key] == t for c, t in zip(plan, texts, strict=True)) / len(plan))
    n = len(plan)
    best_plain, best_hofcat = min(plain_s), min(hofcat_s)
    return {
        "requests": n,
        "concurrency": concurrency,
        "slots": 4,
        "max_tokens": 8,
        "rounds": rounds,
        "plain_req_per_s": n / best_plain,
        "hofcat_req_per_s": n / best_hofcat,
        "ratio_hofcat_over_plain": best_plain / best_hofcat,
        "plain_s": [round(s, 2) for s in plain_s],
        "hofcat_s": [round(s, 2) for s in hofcat_s],
        "same_text_share": agree,
        "load_avg_1min": os.getloadavg()[0],
    }


FORMATS: tuple[tuple[str, str | None, int], ...] = (
    # (reply format, constraint, max_tokens)
    ("number", None, 8),
    ("fewshot", None, 8),
    ("fewshot", "grammar", 2),
    ("number", "grammar", 2),
    ("json", "json_schema", 48),
)


def formats(seeds: int, concurrency: int) -> list[dict[str, Any]]:
    """Wall time, requests/s and parse rate of the demo's cells in each reply format (plain loop)."""
    from runner.parse import parse_reply

    rows = []
    with LocalLLM(slots=4, ctx_per_slot=1024) as llm:
        url = f"{llm.base_url}/chat/completions"
        for reply_format, constraint, max_tokens in FORMATS:
            _, plan = planned_cells(spec_text(llm.base_url, seeds, concurrency, reply_format, max_tokens))
            extra = constrained_request_fields(constraint) if constraint else {}  # type: ignore[arg-type]
            bodies = [json.dumps(request_body(c, extra)).encode() for c in plan]
            t0 = time.perf_counter()
            texts = asyncio.run(plain_loop(url, bodies, concurrency))
            elapsed = time.perf_counter() - t0
            statuses = Counter(parse_reply(t, c.prompt).answers[0].status for t, c in zip(texts, plan, strict=True))
            rows.append(
                {
                    "reply_format": reply_format,
                    "constraint": constraint or "none",
                    "max_tokens": max_tokens,
                    "requests": len(plan),
                    "seconds": round(elapsed, 1),
                    "req_per_s": round(len(plan) / elapsed, 2),
                    "parse_rate": round(statuses["ok"] / len(plan), 3),
                    "statuses": dict(statuses),
                    "load_avg_1min": os.getloadavg()[0],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def startup(repeats: int) -> dict[str, Any]:
    """Seconds to a healthy server and to the first 1-token reply, ``repeats`` cold starts."""
    healthy, first = [], []
    body = json.dumps({"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}).encode()
    for _ in range(repeats):
        t0 = time.perf_counter()
        with LocalLLM(slots=4) as llm:
            healthy.append(time.perf_counter() - t0)
            texts = asyncio.run(plain_loop(f"{llm.base_url}/chat/completions", [body], 1))
            first.append(time.perf_counter() - t0)
            assert texts[0]
    return {
        "repeats": repeats,
        "healthy_s": [round(s, 2) for s in healthy],
        "first_reply_s": [round(s, 2) for s in first],
        "load_avg_1min": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the chosen bench and print JSON lines."""
    parser = argparse.ArgumentParser(prog="python -m benches.llm_bench")
    parser.add_argument("what", choices=["throughput", "formats", "startup"])
    parser.add_argument("--seeds", type=int, default=None, help="seeds per persona x question (demo: 3)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.what == "throughput":
        print(json.dumps(throughput(args.seeds or 1, args.concurrency, args.rounds)), flush=True)
    elif args.what == "formats":
        formats(args.seeds or 3, args.concurrency)
    else:
        print(json.dumps(startup(args.repeats)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
