"""``hofcat run SPEC --out RUN_DIR``: run a sweep, or resume it when RUN_DIR already holds part of it."""

from __future__ import annotations

import argparse

NAME = "run"
HELP = "Run the sweep a spec describes into RUN_DIR; the same command again resumes it."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SPEC, --out, --retry-failed, --log-every."""
    parser.add_argument("spec", metavar="SPEC", help="the sweep spec (TOML)")
    parser.add_argument("--out", metavar="RUN_DIR", required=True, help="run directory (created, or resumed)")
    parser.add_argument(
        "--retry-failed", action="store_true", help="also retry the cells that exhausted their retries in earlier runs"
    )
    parser.add_argument(
        "--log-every",
        metavar="SECONDS",
        type=float,
        default=60.0,
        help="seconds between progress lines when stderr is not a terminal (default 60)",
    )


# Exit status when the sweep finished but some cells failed for good: scripts must not mistake it for a
# clean run, and it is distinct from a bad spec (2) and an interruption (130).
EXIT_CELLS_FAILED = 3


def main(args: argparse.Namespace) -> int:
    """Exit 0 when every cell was stored, 3 when the sweep finished with failed cells (retry them with
    --retry-failed), 130 when interrupted (resumable), 2 on a bad spec or RUN_DIR."""
    import gc
    import sys

    from runner.sweep.session import run_sweep
    from runner.sweep.spec import load_spec

    spec = load_spec(args.spec)
    # Everything imported so far lives as long as the process: keep it out of the cyclic collector's
    # full passes, which otherwise rescan it while the sweep allocates (~20 µs per cell measured).
    gc.collect()
    gc.freeze()
    result = run_sweep(spec, args.out, retry_failed=args.retry_failed, log_every_s=args.log_every)
    if result.interrupted:
        print(f"hofcat run: interrupted; run the same command again to resume ({args.out})", file=sys.stderr)
        return 130
    print(
        f"hofcat run: {result.stored} stored, {result.failed} failed, {result.already_stored} stored before "
        f"→ {args.out}",
        file=sys.stderr,
    )
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
