"""``hofcat run SPEC --out RUN_DIR``: run a sweep, or resume it when RUN_DIR already holds part of it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from runner.sweep.plan import Selection
    from runner.sweep.spec import Spec

NAME = "run"
HELP = "Run the sweep a spec describes into RUN_DIR; the same command again resumes it."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SPEC, --out, --retry-failed, --log-every, --limit, --wait, --endpoint, --ray, --ray-workers."""
    parser.add_argument("spec", metavar="SPEC", help="the sweep spec (TOML)")
    parser.add_argument("--out", metavar="RUN_DIR", required=True, help="run directory (created, or resumed)")
    parser.add_argument(
        "--retry-failed", action="store_true", help="also retry the cells that exhausted their retries in earlier runs"
    )
    from runner.commands._args import positive_int, positive_seconds

    parser.add_argument(
        "--log-every",
        metavar="SECONDS",
        type=positive_seconds,
        default=60.0,
        help="seconds between progress lines when stderr is not a terminal (default 60)",
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=positive_int,
        help="pilot: send only the first N cells of the plan, dealt round-robin by endpoint; the same command "
        "without --limit resumes the rest",
    )
    parser.add_argument(
        "--wait",
        choices=("true", "false"),
        default="true",
        help="batch endpoints (execution = batch): wait for their batches (default), or submit them and return; "
        "the same command later collects them",
    )
    parser.add_argument(
        "--endpoint",
        metavar="NAME",
        action="append",
        default=[],
        help="send only this endpoint's cells (repeat for several); the others stay for a later run",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the sweep on a Ray cluster: 'auto' (on a node of the cluster), HOST:PORT or ray://HOST:10001; "
        "RUN_DIR must be reachable at the same path from every node (docs/distributed.md; pip install "
        "'hofcat[ray]')",
    )
    parser.add_argument(
        "--ray-workers",
        metavar="N",
        type=positive_int,
        help="with --ray: shards of the plan, one Ray task (one CPU) each (default: the cluster's CPUs)",
    )


# Exit status when the sweep finished but some cells failed for good: scripts must not mistake it for a
# clean run, and it is distinct from a bad spec (2) and an interruption (130).
EXIT_CELLS_FAILED = 3
# An endpoint was stopped (consecutive 401/403/404 replies or connection failures: bad key, unknown model, no
# server; or a reply from another model than the spec's): its cells were not sent; fix it and run it again.
EXIT_ENDPOINT_STOPPED = 4


def main(args: argparse.Namespace) -> int:
    """Exit 0 when every cell was stored, 3 when the sweep finished with failed cells (retry them with
    --retry-failed), 4 when an endpoint was stopped (fatal client errors, no server, another model; its cells
    remain), 130 when interrupted (resumable), 2 on a bad spec or RUN_DIR."""
    import gc
    import sys

    from runner.errors import UsageError
    from runner.rundir.schema import tables_without_pandas
    from runner.sweep.plan import select
    from runner.sweep.session import run_sweep
    from runner.sweep.spec import load_spec

    if args.ray_workers is not None and args.ray is None:
        raise UsageError("--ray-workers needs --ray ADDRESS")
    if args.ray is not None:
        from runner.sweep.cluster import ray_module

        ray_module()  # without the extra: one line saying how to install it, before the spec is read
    spec = load_spec(args.spec)
    selection = select(spec, endpoints=args.endpoint, limit=args.limit)
    warn_if_long(spec, selection, sys.stderr)
    tables_without_pandas()  # this process hands pyarrow no pandas objects: not worth 0.3 s of imports
    # Everything imported so far lives as long as the process: keep it out of the cyclic collector's
    # full passes, which otherwise rescan it while the sweep allocates (~20 µs per cell measured).
    gc.collect()
    gc.freeze()
    if args.ray is not None:
        from runner.sweep.cluster import run_sweep_on_ray

        result = run_sweep_on_ray(
            spec,
            args.out,
            address=args.ray,
            workers=args.ray_workers,
            retry_failed=args.retry_failed,
            log_every_s=args.log_every,
            selection=selection,
        )
    else:
        result = run_sweep(
            spec,
            args.out,
            retry_failed=args.retry_failed,
            log_every_s=args.log_every,
            selection=selection,
            wait=args.wait == "true",
        )
    if result.pending_batches and not result.interrupted:
        print(
            f"hofcat run: {result.pending_batches} batch(es) submitted and still at the provider; run the same "
            f"command again to collect them ({args.out})",
            file=sys.stderr,
        )
        return 0
    if result.interrupted:
        print(f"hofcat run: interrupted; run the same command again to resume ({args.out})", file=sys.stderr)
        return 130
    print(
        f"hofcat run: {result.stored} stored, {result.failed} failed, {result.already_stored} stored before "
        f"→ {args.out}",
        file=sys.stderr,
    )
    if selection.cells < selection.planned:
        print(
            f"hofcat run: pilot: {selection.cells} of the plan's {selection.planned} cells selected "
            f"(--limit/--endpoint); the same command without them sends the rest",
            file=sys.stderr,
        )
    for message in result.stopped_endpoints.values():
        print(f"hofcat run: {message}; fix it and run the same command again", file=sys.stderr)
    if result.stopped_endpoints:
        return EXIT_ENDPOINT_STOPPED
    # Earlier sessions' failures count too: a resume that skipped them has not fixed them.
    failed = result.failed + result.failed_before
    if failed:
        print(
            f"hofcat run: {failed} cells failed for good (see `hofcat status {args.out}`); "
            f"retry them with --retry-failed",
            file=sys.stderr,
        )
        return EXIT_CELLS_FAILED
    return 0


WARN_AFTER_S = 86400.0  # a sweep that cannot finish within a day is announced before it starts


def warn_if_long(spec: Spec, selection: Selection, stream: TextIO) -> float:
    """Print a warning to ``stream`` when the selected cells take more than a day at the endpoints' limits.

    Each endpoint's least time comes from ``runner.sweep.accounting.eta_s`` (its requests and tokens per minute,
    or its concurrency at an assumed reply time); endpoints run in parallel, so the sweep takes the longest.
    Counts the whole selection: cells stored by an earlier session are skipped, so a resume finishes sooner.
    Returns that estimate (seconds).
    """
    from runner.sweep.accounting import PlanEstimate, estimate, eta_s, format_duration

    longest, why = 0.0, ""
    for endpoint in selection.endpoints:
        full = estimate(spec, endpoint)
        n = selection.quota(endpoint)
        est = PlanEstimate(n, full.input_tokens * n // full.cells, full.output_tokens * n // full.cells)
        seconds, basis = eta_s(endpoint, est)
        if seconds > longest:
            longest, why = seconds, f"endpoint {endpoint.name!r}: {n} cells at {basis}"
    if longest > WARN_AFTER_S:
        print(
            f"hofcat run: warning: this sweep needs at least {format_duration(longest)} ({why}); "
            "try a pilot with --limit N, or a smaller design (`hofcat plan` shows the counts)",
            file=stream,
        )
    return longest
