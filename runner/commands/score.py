"""``hofcat score``: per-question means → VSM13 indices, Kendall tau-b per dimension, CAT score, mis-ranks."""

from __future__ import annotations

import argparse
import json

from runner.survey.vocab import UNDEFINED_TAU

NAME = "score"
HELP = "Score per-question means against a reference: indices, Kendall tau-b per dimension, CAT score, mis-ranks."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--means, --reference, --undefined-tau, --format, --constants."""
    parser.add_argument(
        "--means",
        required=True,
        metavar="FILE",
        help="long CSV with columns group,country,question,mean (optional std,n); 24 questions "
        "per group and country, means in [1, 5]",
    )
    parser.add_argument(
        "--reference",
        required=True,
        metavar="NAME_OR_CSV",
        help="a shipped reference set (hofstede-2015, hofstede-2015-arab-revised, arab-revised, "
        "human-nine-nations) or a CSV country,pdi,idv,mas,uai,lto,ivr",
    )
    parser.add_argument(
        "--undefined-tau",
        choices=UNDEFINED_TAU,
        default="nan",
        help="when one side is constant: nan = N/A, left out of the CAT mean (default); -1 = counts as -1.0 (CAT v1)",
    )
    parser.add_argument("--format", choices=("json", "table"), default="json", help="output format (default json)")
    parser.add_argument(
        "--constants",
        default="",
        metavar="DIM=C,...",
        help="index constants, e.g. pdi=20,mas=-5 (default 0 for every dimension)",
    )


def main(args: argparse.Namespace) -> int:
    """Print the result; a bad input prints one located error line and returns 2."""
    from runner.score.cat import render_table, score_means
    from runner.score.indices import parse_constants
    from runner.score.means_file import read_means
    from runner.survey.reference import load_reference

    constants = parse_constants(args.constants)
    reference = load_reference(args.reference)
    table = read_means(args.means, reference)
    result = score_means(table, reference, undefined_tau=args.undefined_tau, constants=constants)
    print(json.dumps(result, indent=2) if args.format == "json" else render_table(result))
    return 0
