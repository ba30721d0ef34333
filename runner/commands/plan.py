"""``hofcat plan SPEC``: what a sweep would send, counted, without sending anything."""

from __future__ import annotations

import argparse

NAME = "plan"
HELP = "Count a spec's cells per factor, estimate tokens and (with prices) cost; sends nothing."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SPEC and --json."""
    parser.add_argument("spec", metavar="SPEC", help="the sweep spec (TOML)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def main(args: argparse.Namespace) -> int:
    """Print the plan summary; exit 2 on a bad spec."""
    import json

    from runner.sweep.accounting import plan_summary
    from runner.sweep.spec import load_spec

    summary = plan_summary(load_spec(args.spec))
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"run {summary['run']} (spec {summary['spec_hash']}): {summary['cells']} cells")
    print("  " + " × ".join(f"{n} {name}" for name, n in summary["factors"].items()))
    for name, e in summary["endpoints"].items():
        price = "" if e["cost_max"] is None else f", cost at most {e['cost_max']:.4f}"
        print(
            f"  {name}: {e['cells']} cells, ~{e['input_tokens_estimate']} input tokens, "
            f"at most {e['output_tokens_max']} output tokens{price}"
        )
    if summary["cost_max"] is not None:
        print(f"  total cost at most {summary['cost_max']:.4f}")
    return 0
