"""``hofcat reparse RUN_DIR``: rebuild the answers an older parser wrote, from the stored responses."""

from __future__ import annotations

import argparse

NAME = "reparse"
HELP = (
    "Re-parse a run directory's stored responses with this hofcat's parser: every answers part an "
    "older parser wrote (or a crash left missing) is rewritten; nothing is sent again."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by hofcat run")


def main(args: argparse.Namespace) -> int:
    """Print what was rewritten; exit 2 when RUN_DIR is not a run directory or is in use."""
    import sys

    from runner.parse.stage import reparse
    from runner.rundir import read_manifest

    read_manifest(args.run_dir)  # a located error for a directory that is not a run
    result = reparse(args.run_dir)
    before = f" (were {', '.join(result.previous_versions)})" if result.previous_versions else ""
    print(
        f"hofcat reparse: {result.rewritten} answers parts rewritten{before}, {result.current} already current; "
        f"parser {result.parser_version} → {args.run_dir}",
        file=sys.stderr,
    )
    return 0
