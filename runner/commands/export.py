"""``hofcat export RUN_DIR``: one tidy long table (a row per parsed answer, with its factors) for other tools."""

from __future__ import annotations

import argparse

NAME = "export"
HELP = (
    "Write one tidy table of RUN_DIR's answers joined with their design factors, run name, spec hash and "
    "session (default RUN_DIR/export/answers.parquet); streams part by part."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR, --format and --out."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by hofcat run")
    parser.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="file format (default parquet)")
    parser.add_argument(
        "--out", metavar="FILE", default=None, help="file to write (default RUN_DIR/export/answers.FORMAT)"
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="CSV only: write text cells as stored, for machine pipelines. By default a cell a spreadsheet would "
        "evaluate (beginning with = + - @, a tab or a carriage return, other than a plain number) gets a leading "
        "' so that opening the file runs nothing; Parquet always keeps raw values",
    )


def main(args: argparse.Namespace) -> int:
    """Export and print the file written and its size."""
    import sys

    from runner.export.tidy import export_run

    if args.raw and args.format != "csv":
        print("hofcat export: --raw applies to --format csv only (Parquet always keeps raw values)", file=sys.stderr)
        return 2
    result = export_run(args.run_dir, args.out, args.format, raw_csv=args.raw)
    print(f"hofcat export: {result.rows} rows × {len(result.columns)} columns", file=sys.stderr)
    print(result.path)
    return 0
