"""``hofcat report RUN_DIR``: a self-contained HTML report (figures + tables + provenance) of an analysed run."""

from __future__ import annotations

import argparse

NAME = "report"
HELP = "Write RUN_DIR/report/index.html (figures, the papers' tables, provenance) from RUN_DIR/analysis."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR, and the factors to facet by (every other choice was made and recorded by `hofcat analyze`)."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="run directory analysed by `hofcat analyze`")
    parser.add_argument(
        "--facets",
        default=None,
        metavar="FACTOR[,FACTOR]",
        help="the one or two varying factors small multiples are split by (default: the spec's [report] facets, "
        "else the two that explain most of the CAT score's variance across conditions)",
    )


def main(args: argparse.Namespace) -> int:
    """Render the report and print its path."""
    from runner.report.html import render_report

    facets = None if args.facets is None else [f.strip() for f in args.facets.split(",") if f.strip()]
    print(render_report(args.run_dir, facets=facets))
    return 0
