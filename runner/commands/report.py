"""``hofcat report RUN_DIR``: a self-contained HTML report (figures + tables + provenance) of an analysed run."""

from __future__ import annotations

import argparse

NAME = "report"
HELP = "Write RUN_DIR/report/index.html (figures, the papers' tables, provenance) from RUN_DIR/analysis."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR only: every choice was made and recorded by `hofcat analyze`."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory analysed by `hofcat analyze`")


def main(args: argparse.Namespace) -> int:
    """Render the report and print its path."""
    from runner.report.html import render_report

    print(render_report(args.run_dir))
    return 0
