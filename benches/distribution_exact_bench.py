"""Is a stored answer distribution the one the constrained reply is drawn from? The real model against sampling.

    python -m benches.distribution_exact_bench [--temperature 0.7] [--cells 6] [--samples 200] [--slots 2]
        [--default-samplers]

One ``LocalLLM`` (SmolLM2-135M behind llama.cpp's server) answers a distribution sweep through ``run_sweep``: the
demo's design (item mode, number format, digit grammar, ``--temperature``, seed 1) over five personas (the demo's
four and Germany) × 24 questions. Each cell's raw first-token alternatives are then asked once more without the
post-sampling fields (top 20 at temperature 1, as parser 1.5.0 read them): their digits' mass ranks the cells, and
their renormalised digits, unlisted ones at 0, are what hofcat stored before (``old``). The ``--cells`` cells with
the lowest raw option mass (half) and the most spread stored distributions (entropy, the other half) are each
sampled ``--samples`` times with the stored messages and the request hofcat sends (grammar, temperature, top_p,
``top_k: 0, min_p: 0``), seeds 1000…; ``--default-samplers`` samples them again with the server's default samplers
(top_k 40, min_p 0.05), which hofcat turns off.

Reported per cell: raw option mass, stored and sampled distributions, total-variation distance TV(stored,
sampled) and TV(old, sampled), and the sampling-noise quantile q95: the 95th percentile of TV(P, P̂_n) where P̂_n
is the share of n draws from the stored P (20,000 multinomial draws, numpy seed 0) — the TV a perfect stored
distribution shows against n samples. A stored distribution is consistent with sampling when its TV ≤ q95.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PERSONAS = ("United States", "China", "Saudi Arabia", "Slovakia", "Germany")
DIGITS = ("1", "2", "3", "4", "5")

SPEC = """
[run]
name = "distribution-exact-bench"
seed = 1
[[endpoints]]
name = "llm"
provider = "openai"
base_url = "{base_url}"
model = "{model}"
max_concurrency = {concurrency}
timeout_s = 300
max_retries = 4
[design]
mode = "item"
personas = {personas}
reply_format = "number"
seeds = [1]
temperature = [{temperature}]
top_p = [1.0]
max_tokens = 2
constraint = "grammar"
measurement = "distribution"
"""


async def _post_all(base_url: str, bodies: list[dict], concurrency: int) -> list[dict]:
    """The JSON replies to ``bodies`` (in order), ``concurrency`` at a time."""
    import aiohttp

    out: list[dict | None] = [None] * len(bodies)
    todo = list(reversed(range(len(bodies))))
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session:

        async def worker() -> None:
            while todo:
                i = todo.pop()
                async with session.post(base_url + "/chat/completions", json=bodies[i]) as response:
                    assert response.status == 200, await response.text()
                    out[i] = await response.json()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return [o for o in out if o is not None]


def tv(p: np.ndarray, q: np.ndarray) -> float:
    """Total-variation distance between two distributions over the same options."""
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def noise_q95(p: np.ndarray, n: int, reps: int = 20_000, seed: int = 0) -> float:
    """95th percentile of TV(p, shares of n draws from p): the TV sampling noise alone gives."""
    rng = np.random.default_rng(seed)
    shares = rng.multinomial(n, p / p.sum(), size=reps) / n
    return float(np.quantile(0.5 * np.abs(shares - p).sum(axis=1), 0.95))


def old_reading(top: list[dict]) -> tuple[np.ndarray, float]:
    """Parser 1.5.0's reading of a raw top-k (renormalised digits, unlisted at 0) and the digits' raw mass."""
    mass = np.array([sum(math.exp(t["logprob"]) for t in top if t["token"] == d) for d in DIGITS])
    return mass / mass.sum() if mass.sum() > 0 else mass, float(mass.sum())


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print its table (markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--cells", type=int, default=6)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--default-samplers", action="store_true")
    args = parser.parse_args(argv)

    import polars as pl

    from runner.endpoints.llm import LocalLLM
    from runner.rundir import read_dataset
    from runner.survey.constrained import constrained_request_fields
    from runner.sweep.providers.logprobs import LLAMACPP_SAMPLED_FIELDS
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    started = time.perf_counter()
    concurrency = 2 * args.slots
    with tempfile.TemporaryDirectory() as tmp, LocalLLM(model="smollm2", slots=args.slots, ctx_per_slot=1024) as llm:
        spec_text = SPEC.format(
            base_url=llm.base_url,
            model=llm.model_name,
            concurrency=concurrency,
            personas=json.dumps(list(PERSONAS)),
            temperature=args.temperature,
        )
        result = run_sweep(parse_spec(spec_text, source="bench"), Path(tmp) / "run", stream=io.StringIO())
        assert result.failed == 0, result
        run = Path(tmp) / "run"
        responses = pl.from_arrow(read_dataset(run, "responses", ["cell_key", "prompt_hash", "country", "question"]))
        answers = pl.from_arrow(read_dataset(run, "answers", ["cell_key", "status", "option_probs", "option_bound"]))
        prompts = {p["prompt_hash"]: json.loads(p["messages_json"]) for p in read_dataset(run, "prompts").to_pylist()}
        cells = responses.join(answers, on="cell_key").sort("country", "question").to_dicts()
        statuses = {s: sum(c["status"] == s for c in cells) for s in {c["status"] for c in cells}}
        sweep_s = time.perf_counter() - started
        base = {"model": llm.model_name, "top_p": 1.0, "max_tokens": 1, **constrained_request_fields("grammar")}
        raw_bodies = [
            {**base, "messages": prompts[c["prompt_hash"]], "temperature": 1.0, "seed": 1}
            | {"logprobs": True, "top_logprobs": 20}
            for c in cells
        ]
        raws = asyncio.run(_post_all(llm.base_url, raw_bodies, concurrency))
        for cell, raw in zip(cells, raws, strict=True):
            cell["old"], cell["mass"] = old_reading(raw["choices"][0]["logprobs"]["content"][0]["top_logprobs"])
            probs = np.array(cell["option_probs"], dtype=float)
            cell["entropy"] = float(-(probs[probs > 0] * np.log(probs[probs > 0])).sum())
        low = sorted(cells, key=lambda c: c["mass"])[: args.cells // 2]
        spread = [c for c in sorted(cells, key=lambda c: -c["entropy"]) if c not in low][: args.cells - len(low)]
        chosen = low + spread
        variants = {"hofcat": LLAMACPP_SAMPLED_FIELDS} | ({"defaults": {}} if args.default_samplers else {})
        variants = {
            name: {k: v for k, v in fields.items() if k != "post_sampling_probs"} for name, fields in variants.items()
        }
        samples: dict[str, list[np.ndarray]] = {}
        for name, fields in variants.items():
            bodies = [
                {**base, **fields, "messages": prompts[c["prompt_hash"]], "temperature": args.temperature, "seed": s}
                for c in chosen
                for s in range(1000, 1000 + args.samples)
            ]
            replies = asyncio.run(_post_all(llm.base_url, bodies, concurrency))
            texts = [r["choices"][0]["message"]["content"] for r in replies]
            assert all(t in DIGITS for t in texts), set(texts) - set(DIGITS)
            counts = [
                np.array([texts[i * args.samples : (i + 1) * args.samples].count(d) for d in DIGITS], dtype=float)
                for i in range(len(chosen))
            ]
            samples[name] = [c / args.samples for c in counts]
    total_s = time.perf_counter() - started
    fmt = lambda v: "[" + ", ".join(f"{x:.3f}" for x in v) + "]"  # noqa: E731
    print(
        f"SmolLM2 via llama.cpp, {len(cells)} cells at T = {args.temperature} (statuses {statuses}), sweep {sweep_s:.0f} s,"
    )
    print(f"{args.samples} constrained samples per chosen cell; {total_s:.0f} s in all\n")
    extra = " TV(stored, defaults) |" if args.default_samplers else ""
    print(
        f"| cell | raw option mass | old (1.5.0) | stored (1.6.0) | sampled | TV(old, s) | TV(stored, s) | q95 |{extra}"
    )
    print("|---|---:|---|---|---|---:|---:|---:|" + ("---:|" if args.default_samplers else ""))
    verdicts = []
    for i, c in enumerate(chosen):
        stored = np.array(c["option_probs"], dtype=float)
        sampled = samples["hofcat"][i]
        q95 = noise_q95(stored, args.samples)
        verdicts.append(tv(stored, sampled) <= q95)
        row = (
            f"| {c['country']} Q{c['question']} | {c['mass']:.3f} | {fmt(c['old'])} | {fmt(stored)} | {fmt(sampled)} "
            f"| {tv(c['old'], sampled):.3f} | {tv(stored, sampled):.3f} | {q95:.3f} |"
        )
        if args.default_samplers:
            row += f" {tv(stored, samples['defaults'][i]):.3f} |"
        print(row)
    print(f"\nTV(stored, sampled) ≤ q95 in {sum(verdicts)} of {len(verdicts)} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
