"""The distribution measurement's price and payoff: requests per interval width, and logprobs on llama.cpp.

    python -m benches.distribution_bench width [--signal 0.5] [--target 0.2] [--max-seeds 32]
    python -m benches.distribution_bench llama [--cells 48] [--concurrency 4]

width: the simulator (``--signal``, seed 1) is swept by ``run_sweep`` at 8 personas × 24 questions × n seeds,
temperature 1, once with ``measurement = "sample"`` for n = 2, 4, 8, … up to ``--max-seeds`` and once with
``measurement = "distribution"`` for n = 2, 4; each run is analysed (``analyze_run``, 200 resamples) and the
width of the CAT score's interval (``ci_high - ci_low``) recorded with the number of requests. Reported: the
fewest requests at which each measurement's width is ≤ ``--target`` and their ratio. Correctness first: every
cell stored, every distribution answer has ``option_probs`` summing to 1.

llama: one ``LocalLLM`` (2 slots); ``--cells`` of the demo's item prompts (number format, digit grammar,
max_tokens 2) sent by a plain aiohttp loop with ``--concurrency`` workers, alternately without and with
``logprobs: true, top_logprobs: 20``, two rounds each (A B A B); requests/s per variant and their ratio.
Correctness first: every reply is one digit, and every logprobs reply has 20 alternatives.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

PERSONAS = ["United States", "China", "Japan", "Germany", "Mexico", "Nigeria", "India", "Brazil"]


def _spec(base_url: str, seeds: int, measurement: str) -> str:
    return f"""
[run]
name = "distribution-bench"
batch_rows = 2000
[[endpoints]]
name = "sim"
provider = "openai"
base_url = "{base_url}"
model = "sim-1"
max_concurrency = 32
[design]
personas = {PERSONAS!r}
seeds = {list(range(1, seeds + 1))}
temperature = [1.0]
measurement = "{measurement}"
""".replace("'", '"')


def _one(base_url: str, seeds: int, measurement: str, root: Path) -> tuple[int, float, float]:
    """(requests, CAT interval width, CAT score) of one sweep + analysis."""
    import polars as pl

    from runner.analyze.load import load_answers
    from runner.analyze.run import AnalysisOptions, analyze_run
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    out = root / f"{measurement}-{seeds}"
    result = run_sweep(parse_spec(_spec(base_url, seeds, measurement)), out, stream=io.StringIO())
    assert result.failed == 0 and result.stored == len(PERSONAS) * 24 * seeds, result
    if measurement == "distribution":
        answers = load_answers(out).collect()
        assert answers["option_probs"].is_not_null().all()
        assert all(abs(math.fsum(p) - 1.0) < 1e-9 for p in answers["option_probs"].to_list())
    cat = pl.read_parquet(analyze_run(out, AnalysisOptions(n_resamples=200)) / "cat.parquet").row(0, named=True)
    return result.stored, cat["ci_high"] - cat["ci_low"], cat["cat_score"]


def width(args: argparse.Namespace) -> None:
    """Requests needed for a CAT interval of width ≤ target, per measurement."""
    from runner.endpoints.sim.config import SimConfig
    from runner.endpoints.sim.server import SimServerThread

    root = Path(tempfile.mkdtemp(prefix="hofcat-dist-bench-"))
    runs: dict[str, list[tuple[int, float]]] = {"sample": [], "distribution": []}
    try:
        with SimServerThread(SimConfig(seed=1, signal=args.signal)) as sim:
            for measurement, seeds_list in (
                ("distribution", [2, 4]),
                ("sample", [2**i for i in range(1, int(math.log2(args.max_seeds)) + 1)]),
            ):
                for seeds in seeds_list:
                    requests, w, score = _one(sim.base_url, seeds, measurement, root)
                    print(f"{measurement:>12} seeds={seeds:>3} requests={requests:>5} CAT={score:+.3f} width={w:.3f}")
                    runs[measurement].append((requests, w))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for target in sorted({0.8, 0.6, 0.4, args.target}, reverse=True):
        s, d = (next((n for n, w in runs[m] if w <= target), None) for m in ("sample", "distribution"))
        if s and d:
            ratio = f"{s / d:.1f}x fewer"
        elif d:
            ratio = f"> {runs['sample'][-1][0] / d:.1f}x fewer (sample never reached it)"
        else:
            ratio = "n/a"
        print(f"target width {target}: sample {s} requests, distribution {d} requests -> {ratio}")


async def _llama_round(base_url: str, bodies: list[dict], concurrency: int) -> tuple[float, list[dict]]:
    import aiohttp

    queue = list(reversed(bodies))
    out: list[dict] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def worker() -> None:
            while queue:
                body = queue.pop()
                async with session.post(base_url + "/chat/completions", json=body) as response:
                    assert response.status == 200, await response.text()
                    out.append(await response.json())

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - t0, out


def llama(args: argparse.Namespace) -> None:
    """Requests/s of llama.cpp's server with and without ``logprobs`` (A B A B)."""
    from runner.endpoints.llm import LocalLLM
    from runner.survey.cell import Framing, PromptCell
    from runner.survey.constrained import constrained_request_fields
    from runner.survey.prompts import build_messages

    countries = ("China", "Germany", "Japan", "U.S.A.")
    cells = [PromptCell("en", "item", (q,), Framing("persona", c)) for c in countries for q in range(1, 25)]
    cells = cells[: args.cells]
    with LocalLLM(model="smollm2", slots=2, ctx_per_slot=1024) as llm:
        base = {"model": llm.model_name, "max_tokens": 2, "temperature": 0.7, **constrained_request_fields("grammar")}
        plain = [{**base, "messages": build_messages(c), "seed": i} for i, c in enumerate(cells)]
        with_lp = [{**b, "logprobs": True, "top_logprobs": 20} for b in plain]
        asyncio.run(_llama_round(llm.base_url, plain[:4], args.concurrency))  # warm the prompt cache path
        times: dict[str, float] = {"plain": 0.0, "logprobs": 0.0}
        for _ in range(2):
            for name, bodies in (("plain", plain), ("logprobs", with_lp)):
                elapsed, replies = asyncio.run(_llama_round(llm.base_url, bodies, args.concurrency))
                assert all(r["choices"][0]["message"]["content"] in "12345" for r in replies)
                if name == "logprobs":
                    tops = [r["choices"][0]["logprobs"]["content"][0]["top_logprobs"] for r in replies]
                    assert all(len(t) == 20 for t in tops)
                times[name] += elapsed
    rates = {name: 2 * len(cells) / t for name, t in times.items()}
    print(
        f"llama.cpp SmolLM2, {len(cells)} cells x 2 rounds, concurrency {args.concurrency}: "
        f"plain {rates['plain']:.2f} req/s, logprobs(top 20) {rates['logprobs']:.2f} req/s, "
        f"ratio {rates['logprobs'] / rates['plain']:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: ``width`` or ``llama``."""
    parser = argparse.ArgumentParser(prog="python -m benches.distribution_bench")
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("width")
    w.add_argument("--signal", type=float, default=0.5)
    w.add_argument("--target", type=float, default=0.2)
    w.add_argument("--max-seeds", type=int, default=32)
    ll = sub.add_parser("llama")
    ll.add_argument("--cells", type=int, default=48)
    ll.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    (width if args.what == "width" else llama)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
