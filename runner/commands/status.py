"""``hofcat status RUN_DIR``: how far a run is — done, failed, remaining, tokens and cost; failures grouped.

Failures are grouped by error class, HTTP status and message (the message's first ``MESSAGE_CHARS``
characters, already redacted when stored), largest groups first, so one wrong key or a flaky proxy shows as
one line with a count instead of hundreds of rows. Endpoints the last session stopped are listed with why.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

MESSAGE_CHARS = 160  # of a stored error message, for grouping and display
TOP_GROUPS = 5  # failure groups printed (all of them go into --json)

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
    status["failure_groups"] = failure_groups(args.run_dir)
    last = status.get("last_session") or {}
    status["stopped_endpoints"] = last.get("stopped_endpoints") or {}
    status["batches"] = batch_states(args.run_dir)
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
        ecost = "" if e["cost"] is None else f", cost {e['cost']:.4f} of at most {e['cost_max']:.4f}"
        print(
            f"  {name}: {e['done']} done, {e['failed']} failed, tokens {e['input_tokens']} in / "
            f"{e['output_tokens']} out (plan bounds {e['input_tokens_max']} / {e['output_tokens_max']}){ecost}"
        )
    groups = status["failure_groups"]
    if groups:
        print(f"failures by class and message ({len(groups)} groups):")
    for g in groups[:TOP_GROUPS]:
        status_text = "" if g["http_status"] is None else f" HTTP {g['http_status']}"
        print(f"  {g['count']} × {g['error_class']}{status_text} on {', '.join(g['endpoints'])}: {g['message']}")
    if len(groups) > TOP_GROUPS:
        print(f"  ... {len(groups) - TOP_GROUPS} more groups (--json lists them all)")
    for message in status["stopped_endpoints"].values():
        print(f"last session: {message}")
    if status["batches"]:
        print(f"provider batches ({len(status['batches'])}):")
    for b in status["batches"]:
        print(
            f"  {b['endpoint']}: {b['batch_id'] or '(not yet at the provider)'} {b['state']}"
            f"{'' if b['provider_status'] is None else ' / ' + b['provider_status']}, {b['n']} cells, "
            f"attempt {b['attempt']}"
        )
    return 0


def batch_states(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's provider batches (``execution = "batch"``): endpoint, id, state, provider status, cells."""
    from runner.rundir.batches import read_journal

    keep = ("endpoint", "batch_id", "state", "provider_status", "n", "attempt", "tag")
    return [{k: entry.get(k) for k in keep} for entry in read_journal(run_dir)]


def failure_groups(run_dir: str | Path) -> list[dict[str, Any]]:
    """Cells failed for good (no later response), grouped by (error class, HTTP status, message); largest first."""
    from runner.sweep.accounting import failed_for_good

    latest = failed_for_good(run_dir, ["endpoint", "error_class", "http_status", "error_message"])
    counts: Counter[tuple] = Counter()
    endpoints: dict[tuple, set[str]] = {}
    for endpoint, error_class, http_status, message in latest.values():
        text = " ".join((message or "").split())
        key = (error_class, http_status, text[:MESSAGE_CHARS] + ("…" if len(text) > MESSAGE_CHARS else ""))
        counts[key] += 1
        endpoints.setdefault(key, set()).add(endpoint)
    return [
        {"count": n, "error_class": c, "http_status": h, "message": m, "endpoints": sorted(endpoints[(c, h, m)])}
        for (c, h, m), n in sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    ]
