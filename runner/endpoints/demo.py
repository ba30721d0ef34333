"""The main job: a small real sweep on a built-in endpoint, then analysis and report, in one call.

``run_demo`` starts the endpoint (llama.cpp's server with SmolLM2, or the simulator), writes the sweep spec it
uses beside the run directory, runs the sweep, analyses and reports it, and stops the endpoint — also on
Ctrl-C or failure. The spec is an ordinary file: rerun it, edit it, or point it at another endpoint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

ENDPOINTS = ("llm", "sim")
PERSONAS = ("United States", "China", "Saudi Arabia", "Slovakia")

# Item mode, "number only" instructions with llama.cpp's digit grammar: every reply is one option number (measured
# with SmolLM2: 100 % parse rate in half the time of the few-shot format, which parses ~80 % unconstrained), so
# 2 tokens suffice. The simulator honours the grammar field too, so both endpoints run the same design.
# Temperature > 0 so that seeds are independent respondents; the determinism probe records seed handling.
# The measurement is the answer distribution (first-token log-probabilities, docs/measurement.md): one request
# gives what many sampled replies estimate, so the intervals over seeds shrink to what the seeds really change.
_SPEC = """\
[run]
name = "demo-{endpoint}"
seed = {seed}
reference = "hofstede-2015"
determinism_probe = true

[[endpoints]]
name = "{endpoint}"
provider = "openai"
base_url = "{base_url}"
model = "{model}"
max_concurrency = {concurrency}
timeout_s = 120
max_retries = 4

[design]
mode = "item"
languages = ["en"]
personas = [{personas}]
shuffle_options = false
reply_format = "{reply_format}"
seeds = [{seeds}]
temperature = [{temperature}]
top_p = [1.0]
max_tokens = {max_tokens}
constraint = "{constraint}"
measurement = "{measurement}"
"""


@dataclass(frozen=True)
class DemoOptions:
    """What the demo asks and of whom; the defaults are the README's main command."""

    endpoint: str = "llm"  # "llm" (SmolLM2 behind llama.cpp's server) or "sim" (the simulated endpoint)
    model: str = "smollm2"  # for "llm": "smollm2" or a path to any GGUF file
    seeds: int = 3  # sampling seeds 1..seeds: the bootstrap units
    slots: int = 4  # llama.cpp parallel slots
    seed: int = 1  # master seed of the sweep and of every resampling in the analysis
    temperature: float = 0.7
    reply_format: str = "number"
    constraint: str = "grammar"  # design.constraint: none, grammar (llama.cpp GBNF, one digit) or json_schema
    max_tokens: int = 2  # the grammar admits one digit; use 16 for fewshot and 48 for json without a constraint
    measurement: str = "distribution"  # design.measurement: distribution (log-probabilities) or sample


@dataclass(frozen=True)
class DemoResult:
    """Where the demo wrote, and its headline numbers."""

    run_dir: Path
    report: Path
    parse_rate: float  # share of answers with status ok
    partial_rate: float  # share of answers that are partial distributions (an option bounded, never 0)
    kendall: pl.DataFrame  # dimension, tau, ci_low, ci_high (one condition)


def demo_spec_text(
    options: DemoOptions,
    base_url: str,
    model: str,
    concurrency: int,
    *,
    endpoint: str | None = None,
    seeds: Sequence[int] | None = None,
) -> str:
    """The demo's sweep spec (TOML) for ``options`` against ``base_url``; ``endpoint`` names it (default: the
    demo's endpoint), ``seeds`` replaces ``1 … options.seeds``."""
    return _SPEC.format(
        endpoint=endpoint or options.endpoint,
        seed=options.seed,
        base_url=base_url,
        model=model,
        concurrency=concurrency,
        personas=", ".join(f'"{p}"' for p in PERSONAS),
        reply_format=options.reply_format,
        seeds=", ".join(str(s) for s in (seeds if seeds is not None else range(1, options.seeds + 1))),
        temperature=options.temperature,
        max_tokens=options.max_tokens,
        constraint=options.constraint,
        measurement=options.measurement,
    )


def run_demo(out: str | Path, options: DemoOptions = DemoOptions()) -> DemoResult:
    """Run, analyse and report the demo sweep into ``out``/run; returns its paths and headline numbers."""
    # Imported here: ``hofcat --help`` reads this module's options and must not load every stage.
    import polars as pl

    from runner.analyze.run import AnalysisOptions, analyze_run
    from runner.report.html import render_report
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import parse_spec

    if options.endpoint not in ENDPOINTS:
        raise ValueError(f"endpoint: {options.endpoint!r} is not one of {', '.join(ENDPOINTS)}")
    if options.seeds < 2:
        raise ValueError(f"seeds: {options.seeds} must be at least 2 (bootstrap intervals resample seeds)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "run"
    with _endpoint(options) as (base_url, model, concurrency):
        spec_path = out / "spec.toml"
        spec_path.write_text(demo_spec_text(options, base_url, model, concurrency))
        result = run_sweep(parse_spec(spec_path.read_text(), source=str(spec_path)), run_dir)
        if result.interrupted:
            raise KeyboardInterrupt
    analysis = analyze_run(run_dir, AnalysisOptions(seed=options.seed))
    report = render_report(run_dir)
    rates = pl.read_parquet(analysis / "status_rates.parquet")
    total = max(int(rates["count"].sum()), 1)
    ok, partial = (int(rates.filter(pl.col("status") == s)["count"].sum()) for s in ("ok", "partial"))
    kendall = pl.read_parquet(analysis / "kendall.parquet").select("dimension", "tau", "ci_low", "ci_high")
    return DemoResult(run_dir, report, ok / total, partial / total, kendall)


@contextlib.contextmanager
def _endpoint(options: DemoOptions) -> Iterator[tuple[str, str, int]]:
    """Start the chosen endpoint; yields (base_url, model name, client concurrency) and stops it on exit."""
    if options.endpoint == "sim":
        from runner.endpoints.sim.config import SimConfig
        from runner.endpoints.sim.server import SimServerThread

        with SimServerThread(SimConfig(seed=options.seed)) as sim:
            yield sim.base_url, SimConfig.model, 16
        return
    from runner.endpoints.llm import LocalLLM

    with LocalLLM(options.model, slots=options.slots) as llm:
        # Two requests per slot keep every slot busy while the next request is being prepared.
        yield llm.base_url, llm.model_name, 2 * options.slots
