"""``hofcat repair RUN_DIR``: keep each cell's first committed response where two writers stored one cell."""

from __future__ import annotations

import argparse

NAME = "repair"
HELP = (
    "Make RUN_DIR's responses hold one row per cell again after two writers stored the same cells: each cell "
    "keeps its first committed row (part order, then row order); the later rows and their answers are dropped "
    "and every changed part is listed. Nothing is sent again."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by hofcat run")


def main(args: argparse.Namespace) -> int:
    """Print what was dropped per part; exit 2 when RUN_DIR is not a run directory or is in use."""
    import sys

    from runner.rundir import read_manifest
    from runner.rundir.repair import dedupe

    read_manifest(args.run_dir)  # a located error for a directory that is not a run
    result = dedupe(args.run_dir)
    for part, (responses, answers) in result.dropped.items():
        print(
            f"  responses/part-{part}.parquet: {responses} duplicate rows dropped ({answers} answer rows)",
            file=sys.stderr,
        )
    total = sum(r for r, _ in result.dropped.values())
    print(
        f"hofcat repair: {total} duplicate response rows dropped from {len(result.dropped)} parts, "
        f"{result.kept} cells kept → {args.run_dir}" + ("; run `hofcat analyze` again" if total else ""),
        file=sys.stderr,
    )
    return 0
