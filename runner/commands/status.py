"""``hofcat status RUN_DIR``: how far a run is — done, failed, remaining, tokens and cost."""

from __future__ import annotations

import argparse

NAME = "status"
HELP = "Summarise a run directory: cells done, failed and remaining, tokens used and cost."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR and --json."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by hofcat run")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def main(args: argparse.Namespace) -> int:
    """Print the status; exit 2 when RUN_DIR is not a run directory."""
    import json

    from runner.sweep.accounting import run_status

    status = run_status(args.run_dir)
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    cost = "" if status["cost"] is None else f", cost {status['cost']:.4f}"
    print(
        f"run {status['run']} (spec {status['spec_hash']}): {status['done']} done, {status['failed']} failed, "
        f"{status['remaining']} remaining of {status['planned']}; tokens {status['input_tokens']} in / "
        f"{status['output_tokens']} out{cost}"
    )
    for name, e in status["endpoints"].items():
        ecost = "" if e["cost"] is None else f", cost {e['cost']:.4f}"
        print(
            f"  {name}: {e['done']} done, {e['failed']} failed, tokens {e['input_tokens']} in / "
            f"{e['output_tokens']} out{ecost}"
        )
    return 0
