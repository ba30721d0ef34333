"""``hofcat demo --out DIR``: the README's main command — a real sweep, analysed and reported."""

from __future__ import annotations

import argparse
import sys

from runner.commands._args import bounded_int, seed

NAME = "demo"
HELP = (
    "Run a small sweep (4 personas × 24 questions × seeds, item mode) on a built-in endpoint — by default "
    "SmolLM2-135M behind llama.cpp's server — then analyse it and write the HTML report."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--out, --endpoint, --model, --seeds, --slots, --seed."""
    from runner.endpoints.demo import ENDPOINTS, DemoOptions

    d = DemoOptions()
    parser.add_argument("--out", metavar="DIR", default="demo-run", help="output folder (default demo-run)")
    parser.add_argument(
        "--endpoint",
        choices=ENDPOINTS,
        default=d.endpoint,
        help="llm: the local model (default); sim: the simulated endpoint (known truth)",
    )
    parser.add_argument("--model", default=d.model, help="for --endpoint llm: smollm2 (default) or PATH.gguf")
    parser.add_argument(
        "--seeds", type=bounded_int(1, 10**6), default=d.seeds, help=f"sampling seeds per question (default {d.seeds})"
    )
    parser.add_argument(
        "--slots", type=bounded_int(1, 1024), default=d.slots, help=f"llama.cpp parallel slots (default {d.slots})"
    )
    parser.add_argument("--seed", type=seed, default=d.seed, help=f"master seed (default {d.seed})")
    parser.add_argument(
        "--measurement",
        choices=("distribution", "sample"),
        default=d.measurement,
        help="distribution: option probabilities from log-probabilities (default); sample: one sampled answer",
    )


def main(args: argparse.Namespace) -> int:
    """Print the parse rate, Kendall tau per dimension with intervals, and the report's path."""
    from runner.endpoints.demo import DemoOptions, run_demo

    if args.endpoint == "llm":
        # the optional parts, checked before anything is written: one line naming the install command
        from runner.endpoints.llm import require_server, resolve_model

        require_server()
        resolve_model(args.model)
    options = DemoOptions(
        endpoint=args.endpoint,
        model=args.model,
        seeds=args.seeds,
        slots=args.slots,
        seed=args.seed,
        measurement=args.measurement,
    )
    try:
        result = run_demo(args.out, options)
    except ValueError as exc:  # a bad option; HofcatError is caught by runner.cli
        print(f"hofcat demo: error: {exc}", file=sys.stderr)
        return 2
    print(f"measurement: {options.measurement} (docs/measurement.md)")
    partial = (
        f", {result.partial_rate:.1%} partial distributions (an option's probability bounded, not listed; scored "
        "by the partial policy: docs/measurement.md)"
        if result.partial_rate
        else ""
    )
    print(f"parse rate: {result.parse_rate:.1%} of answers parsed as ok{partial}")
    print("Kendall tau-b per dimension against hofstede-2015 (95% interval for the population tau, docs/analysis.md):")
    for row in result.kendall.iter_rows(named=True):
        print(f"  {row['dimension'].upper():>3}  {_num(row['tau'])}  [{_num(row['ci_low'])}, {_num(row['ci_high'])}]")
    print(f"report: {result.report}")
    return 0


def _num(value: float | None) -> str:
    """A tau or bound for the terminal; undefined ones print as n/a."""
    return "  n/a" if value is None or value != value else f"{value:+.2f}"
