"""The distribution measurement's price and payoff: requests per interval width, and logprobs on llama.cpp.

    python -m benches.distribution_bench width [--signal 0.5] [--target 0.2] [--max-seeds 32]
    python -m benches.distribution_bench llama [--cells 48] [--concurrency 4]
    python -m benches.distribution_bench llama-width [--distribution-seeds 8] [--sample-seeds 24]
        [--batch-seeds 4] [--budget-min 25] [--slots 4] [--target W ...] [--endpoint llama|sim]

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

llama-width: the same question as ``width`` on the real model, within a CPU budget. One ``LocalLLM`` (SmolLM2,
``--slots``) serves the demo's own sweep spec (``runner.endpoints.demo``: 4 personas × 24 items, number format,
digit grammar, temperature 0.7, reference hofstede-2015; its determinism probe off) through ``run_sweep``, into
a temp folder: ``distribution`` up to seed ``--distribution-seeds``, then ``sample`` up to ``--sample-seeds``,
each in batches of ``--batch-seeds`` seeds (each batch its own run directory, disjoint seeds), until the next
batch would pass ``--budget-min`` minutes of model time in all. ``--keep DIR`` keeps the run directories and
reuses the batches already there (more seeds later, without resending any). The width at k seeds is computed from
the first k seeds' answers (nested subsets: no extra requests; a seed's cells are the same requests in any run,
since llama.cpp honours ``seed``) by ``analyze_answers`` — the function ``hofcat analyze`` runs, so
``ci_high − ci_low`` of its ``cat`` table is the interval the report shows (checked: equal to ``analyze_run`` on
the first distribution batch's run directory). Reported per measurement: requests, CAT score and width at
each k; then, for each target width (the distribution's width at each k, the sample's narrowest, and any
``--target``), the fewest requests at which each measurement's width is ≤ target — first, and for good (every
later point measured within it too: widths move in steps of 1/18 and can dip) — and their ratio, or, where
sample never got there, "> X× (sample had not, at N requests)": a bound, not an extrapolation.
``--endpoint sim`` runs the same pipeline on the simulator (seconds; what tests/test_distribution_bench.py uses).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

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


@dataclass(frozen=True)
class WidthPoint:
    """The CAT score and its interval width from the first ``seeds`` seeds: ``requests`` cells sent for them."""

    seeds: int
    requests: int
    cat: float
    low: float  # ci_low / ci_high of the analysis' cat table (NaN where the CAT score is undefined)
    high: float

    @property
    def width(self) -> float:
        """``high - low``: CAT units (the score runs from -1 to +1)."""
        return self.high - self.low


def demo_spec(base_url: str, model: str, concurrency: int, seeds: Sequence[int], measurement: str) -> str:
    """The demo's sweep spec (``runner.endpoints.demo``, its defaults) for ``seeds`` and ``measurement``, no probe.

    The probe's repeated requests would spend model time without adding cells; everything else is the demo's.
    """
    from runner.endpoints.demo import DemoOptions, demo_spec_text

    spec = demo_spec_text(
        DemoOptions(measurement=measurement), base_url, model, concurrency, endpoint="bench", seeds=seeds
    )
    probe = "determinism_probe = true"
    assert probe in spec, "the demo's spec changed: update demo_spec"
    return spec.replace(probe, "determinism_probe = false")


def sweep_seed_batches(
    spec_of: Callable[[Sequence[int], str], str],
    measurement: str,
    seed_cap: int,
    batch: int,
    root: Path,
    budget_s: float,
    spent_s: float = 0.0,
) -> tuple[list[Path], float]:
    """Sweep seeds 1..``seed_cap`` in batches of ``batch`` (one run directory each) while the budget allows.

    ``spec_of(seeds, measurement)`` gives the spec text. A batch starts only if ``spent_s`` plus the time the
    last batch took (the first one always runs) fits ``budget_s``; returns the run directories and ``spent_s``
    updated (seconds of sweeping). A batch folder already in ``root`` (an earlier ``--keep`` session) is reused
    whole, after checking it holds every cell of its seeds: it sends nothing and costs no budget.
    """
    import polars as pl

    from runner.endpoints.demo import PERSONAS as PERSONAS_DEMO
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    dirs: list[Path] = []
    last = 0.0
    for start in range(1, seed_cap + 1, batch):
        seeds = list(range(start, min(start + batch, seed_cap + 1)))
        if dirs and spent_s + last * len(seeds) / batch > budget_s:
            print(f"{measurement}: budget of {budget_s / 60:.0f} min reached before seeds {seeds[0]}-{seeds[-1]}")
            break
        out = root / f"{measurement}-{start}"
        expected = 24 * len(PERSONAS_DEMO) * len(seeds)
        if out.exists():  # an earlier --keep session's batch: reused whole (its spec named another port)
            found = answers_of([out]).select(pl.col("cell_key").n_unique(), pl.col("seed").unique().sort().implode())
            cells, got = found.collect().row(0)
            assert cells == expected and got == seeds, f"{out}: {cells} cells of seeds {got}, expected {seeds}"
            print(f"{measurement:>12} seeds {seeds[0]:>2}-{seeds[-1]:<2} reused from {out} ({cells} cells)")
            dirs.append(out)
            continue
        t0 = time.perf_counter()
        result = run_sweep(parse_spec(spec_of(seeds, measurement)), out, stream=io.StringIO())
        last = time.perf_counter() - t0
        spent_s += last
        assert result.failed == 0 and result.stored == expected, (result, expected)
        with open("/proc/loadavg") as fh:
            load = fh.read().split()[0]
        print(
            f"{measurement:>12} seeds {seeds[0]:>2}-{seeds[-1]:<2} {result.stored} requests in {last:6.1f} s "
            f"({result.stored / last:.2f} req/s, load {load})",
            flush=True,
        )
        dirs.append(out)
    return dirs, spent_s


def answers_of(run_dirs: Sequence[Path]) -> pl.LazyFrame:
    """The parsed answers of run directories with disjoint seeds, as one LazyFrame (``cell_key`` kept)."""
    import polars as pl

    from runner.analyze.load import load_answers

    return pl.concat([load_answers(d, keep_keys=True) for d in run_dirs], how="vertical_relaxed")


def nested_widths(answers: pl.LazyFrame, ks: Sequence[int], analysis_seed: int = 1) -> list[WidthPoint]:
    """CAT score and interval width from the answers of seeds 1..k, for each k in ``ks`` (seeds are 1..N).

    Analysed by ``analyze_answers`` (what ``hofcat analyze`` writes), default options and ``analysis_seed``;
    ``requests`` counts the distinct cells of those seeds. Checks correctness first: every ok distribution answer
    has ``option_probs`` summing to 1 within 1e-9.
    """
    import polars as pl

    from runner.analyze.run import AnalysisOptions, analyze_answers

    options = AnalysisOptions(reference="hofstede-2015", seed=analysis_seed)
    probs = answers.filter(pl.col("measurement") == "distribution", pl.col("status") == "ok")
    sums = probs.select(pl.col("option_probs").list.sum()).collect()["option_probs"]
    assert sums.is_not_null().all() and ((sums - 1.0).abs() < 1e-9).all(), "option_probs do not sum to 1"
    points = []
    for k in ks:
        subset = answers.filter(pl.col("seed") <= k)
        requests = int(subset.select(pl.col("cell_key").n_unique()).collect().item())
        tables, _ = analyze_answers(subset.drop("cell_key"), options)
        row = tables["cat"].row(0, named=True)
        points.append(WidthPoint(k, requests, row["cat_score"], row["ci_low"], row["ci_high"]))
    return points


def requests_to(points: Sequence[WidthPoint], target: float, *, stays: bool = False) -> int | None:
    """The fewest requests at which the width is ≤ ``target`` (None: not within the points measured).

    ``stays``: the fewest from which every later point measured is ≤ ``target`` too (a dip is not enough).
    """
    reached = [p.width <= target for p in points]  # an undefined (NaN) width reaches nothing
    for i, p in enumerate(points):
        if reached[i] and (not stays or all(reached[i:])):
            return p.requests
    return None


def comparison(distribution: Sequence[WidthPoint], sample: Sequence[WidthPoint], target: float) -> str:
    """One line: requests each measurement needed for a CAT width ≤ ``target`` (first, and for good), with the
    ratio — or, where sample never got there, the bound the measured points give."""
    n = sample[-1].requests
    parts = []
    for stays, what in ((False, "first"), (True, "for good")):
        d, s = requests_to(distribution, target, stays=stays), requests_to(sample, target, stays=stays)
        if d is None:
            verdict = "distribution did not reach it"
        elif s is None:
            verdict = f"> {n / d:.1f}x fewer (sample had not, at {n} requests)"
        else:
            verdict = f"{s / d:.1f}x fewer"
        parts.append(f"{what}: distribution {d}, sample {s} -> {verdict}")
    return f"width <= {target:.3f}: " + "; ".join(parts)


@contextlib.contextmanager
def _width_endpoint(name: str, slots: int) -> Iterator[tuple[str, str, int]]:
    """(base_url, model, client concurrency) of SmolLM2 behind llama.cpp (``llama``) or the simulator (``sim``)."""
    if name == "sim":
        from runner.endpoints.sim.config import SimConfig
        from runner.endpoints.sim.server import SimServerThread

        with SimServerThread(SimConfig(seed=1)) as sim:
            yield sim.base_url, SimConfig.model, 16
        return
    from runner.endpoints.llm import LocalLLM

    with LocalLLM(model="smollm2", slots=slots) as llm:
        yield llm.base_url, llm.model_name, 2 * slots  # as the demo: two requests per slot


def llama_width(args: argparse.Namespace) -> None:
    """Requests for a CAT interval width ≤ target on the real model, distribution vs sample (nested seeds)."""
    import polars as pl

    with open("/proc/loadavg") as fh:
        print(f"load at start: {fh.read().strip()}", flush=True)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="hofcat-llama-width-"))
    budget_s = 60.0 * args.budget_min
    try:
        with _width_endpoint(args.endpoint, args.slots) as (base_url, model, concurrency):

            def spec_of(seeds: Sequence[int], measurement: str) -> str:
                return demo_spec(base_url, model, concurrency, seeds, measurement)

            dist_dirs, spent = sweep_seed_batches(
                spec_of, "distribution", args.distribution_seeds, args.batch_seeds, root, budget_s
            )
            sample_dirs, spent = sweep_seed_batches(
                spec_of, "sample", args.sample_seeds, args.batch_seeds, root, budget_s, spent
            )
        print(f"model time (this session): {spent / 60:.1f} min", flush=True)
        n_sample = int(answers_of(sample_dirs).select(pl.col("seed").max()).collect().item())
        n_dist = int(answers_of(dist_dirs).select(pl.col("seed").max()).collect().item())
        dist = nested_widths(answers_of(dist_dirs), range(2, n_dist + 1))
        sample = nested_widths(answers_of(sample_dirs), range(2, n_sample + 1))
        first = int(answers_of(dist_dirs[:1]).select(pl.col("seed").max()).collect().item())
        _check_against_report(dist_dirs[0], next(p for p in dist if p.seeds == first))
        for name, points in (("distribution", dist), ("sample", sample)):
            for p in points:
                print(
                    f"{name:>12} seeds={p.seeds:>2} requests={p.requests:>5} CAT={p.cat:+.3f} "
                    f"[{p.low:+.3f}, {p.high:+.3f}] width={p.width:.3f}"
                )
        widths = [*(p.width for p in dist), min(p.width for p in sample), *args.target]
        unique: dict[float, float] = {}  # widths 1e-17 apart are one target: keep the largest (each reaches it)
        for w in filter(math.isfinite, widths):
            unique[round(w, 9)] = max(w, unique.get(round(w, 9), w))
        targets = sorted(unique.values(), reverse=True)
        for target in targets:
            print(comparison(dist, sample, target))
        with open("/proc/loadavg") as fh:
            print(f"load at end: {fh.read().strip()}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def _check_against_report(run_dir: Path, point: WidthPoint) -> None:
    """The nested width at all seeds of a single run equals what ``analyze_run`` writes for the report."""
    import polars as pl

    from runner.analyze.run import AnalysisOptions, analyze_run

    cat = pl.read_parquet(analyze_run(run_dir, AnalysisOptions(seed=1)) / "cat.parquet").row(0, named=True)
    assert abs(cat["ci_high"] - cat["ci_low"] - point.width) < 1e-12, (cat, point)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``width``, ``llama`` or ``llama-width``."""
    parser = argparse.ArgumentParser(prog="python -m benches.distribution_bench")
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("width")
    w.add_argument("--signal", type=float, default=0.5)
    w.add_argument("--target", type=float, default=0.2)
    w.add_argument("--max-seeds", type=int, default=32)
    ll = sub.add_parser("llama")
    ll.add_argument("--cells", type=int, default=48)
    ll.add_argument("--concurrency", type=int, default=4)
    lw = sub.add_parser("llama-width")
    lw.add_argument("--distribution-seeds", type=int, default=8)
    lw.add_argument("--sample-seeds", type=int, default=24)
    lw.add_argument("--batch-seeds", type=int, default=4)
    lw.add_argument("--budget-min", type=float, default=25.0)
    lw.add_argument("--slots", type=int, default=4)
    lw.add_argument("--target", type=float, action="append", default=[])
    lw.add_argument("--endpoint", choices=("llama", "sim"), default="llama")
    lw.add_argument("--keep", metavar="DIR", help="sweep into DIR and keep it (batches already there are reused)")
    args = parser.parse_args(argv)
    {"width": width, "llama": llama, "llama-width": llama_width}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
