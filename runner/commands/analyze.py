"""``hofcat analyze RUN_DIR``: tables, intervals and tests from a run's parsed answers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runner.commands._args import bounded_int, seed
from runner.survey.vocab import UNDEFINED_TAU

NAME = "analyze"
HELP = "Analyse a run directory's parsed answers: per-question tables, indices, tau/CAT with bootstrap CIs, set tests."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR and the analysis choices (all recorded in analysis/summary.json)."""
    parser.add_argument(
        "run_dir",
        metavar="RUN_DIR",
        nargs="+",
        help="run directory holding the parsed answers; several (with --out) are analysed as one design, "
        "the run a factor",
    )
    parser.add_argument(
        "--out", metavar="DIR", default=None, help="where a combined analysis of several runs goes (DIR/analysis)"
    )
    parser.add_argument(
        "--allow-mixed",
        action="store_true",
        help="analyse runs together although their parser, reference or instrument text differ (recorded)",
    )
    parser.add_argument(
        "--reference",
        default=None,
        metavar="NAME_OR_CSV",
        help="reference set for Kendall tau (default: the run manifest's, else hofstede-2015)",
    )
    parser.add_argument(
        "--human-reference",
        default="human-nine-nations",
        metavar="NAME_OR_CSV",
        help="human reference for D/MCD and SS_h (default human-nine-nations)",
    )
    parser.add_argument("--undefined-tau", choices=UNDEFINED_TAU, default="nan", help="undefined-tau policy")
    parser.add_argument(
        "--unparseable",
        choices=("drop", "neutral"),
        default="drop",
        help="answers whose parse status is not ok: dropped or scored 3 (default drop)",
    )
    parser.add_argument(
        "--health-items",
        choices=("answered", "neutral"),
        default="answered",
        help="Q15 and Q18: scored as answered or pinned to 3 (default answered)",
    )
    parser.add_argument(
        "--partial",
        choices=("sample", "drop"),
        default="sample",
        help="distribution cells whose options were not all listed (status partial): scored by their reply's own "
        "option, or dropped like unparseable answers (default sample)",
    )
    parser.add_argument(
        "--use-extracted",
        action="store_true",
        help="score the answers `hofcat extract` restated (status extracted) instead of leaving them unparsed",
    )
    parser.add_argument(
        "--resamples", type=bounded_int(1, 10**7), default=1000, help="bootstrap resamples (default 1000)"
    )
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence level (default 0.95)")
    parser.add_argument(
        "--permutations",
        type=bounded_int(0, 10**7),
        default=999,
        help="PERMANOVA/PERMDISP permutations, and the Monte Carlo relabellings of tau/CAT p-values beyond 9 "
        "countries (fewer are enumerated exactly) (default 999)",
    )
    parser.add_argument(
        "--max-points",
        type=bounded_int(2, 10**7),
        default=1000,
        help="respondents per set in distance-based measures; larger sets are subsampled (seeded)",
    )
    parser.add_argument(
        "--permutation-blocks",
        choices=("country", "none"),
        default="country",
        help="PERMANOVA/PERMDISP permute the labels within each country, or freely (default country)",
    )
    parser.add_argument(
        "--points",
        choices=("identity", "seed"),
        default="identity",
        help="set measures' data points: one per country × identity (its seeds averaged) or one per seed "
        "(default identity)",
    )
    parser.add_argument(
        "--embedding",
        choices=("vsm", "items"),
        default="vsm",
        help="what the report's t-SNE embeds: the six VSM scores of each point or its 24 items (default vsm)",
    )
    parser.add_argument("--seed", type=seed, default=0, help="seed of every resampling (default 0)")
    parser.add_argument("--factors", default=None, metavar="COL,...", help="condition columns (default: inferred)")
    parser.add_argument(
        "--units",
        default=None,
        metavar="COL,...",
        help="resampling unit columns (default: seed, plus respondent/gender/age if present)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the analysis and print where it went plus the CAT scores."""
    from runner.analyze.run import AnalysisOptions, analyze_run
    from runner.parse.policy import Policy

    def cols(text: str | None) -> tuple[str, ...] | None:
        return None if text is None else tuple(c.strip() for c in text.split(",") if c.strip())

    options = AnalysisOptions(
        reference=args.reference,
        human_reference=args.human_reference,
        undefined_tau=args.undefined_tau,
        n_resamples=args.resamples,
        confidence_level=args.confidence,
        permutations=args.permutations,
        seed=args.seed,
        max_points=args.max_points,
        permutation_blocks=None if args.permutation_blocks == "none" else args.permutation_blocks,
        points=args.points,
        embedding=args.embedding,
        factors=cols(args.factors),
        units=cols(args.units),
        policy=Policy(unparseable=args.unparseable, health_items=args.health_items, partial=args.partial),
        extracted=args.use_extracted,
    )
    if not 0 < options.confidence_level < 1:  # the integer options' ranges are their argument types'
        print(f"hofcat analyze: error: --confidence {options.confidence_level} is not in (0, 1)", file=sys.stderr)
        return 2
    if len(args.run_dir) > 1 or args.out is not None:
        from runner.analyze.combine import analyze_runs

        if args.out is None:
            print(
                "hofcat analyze: error: several run directories need --out DIR for the combined analysis",
                file=sys.stderr,
            )
            return 2
        out = analyze_runs(args.run_dir, args.out, options, allow_mixed=args.allow_mixed)
    else:
        out = analyze_run(args.run_dir[0], options)
    print(f"analysis written to {out}")
    for line in headline(out):
        print(line)
    return 0


HEADLINE_CONDITIONS = 3  # conditions whose CAT score and taus are printed; the tables hold them all


def headline(analysis_dir: Path) -> list[str]:
    """The analysis' headline numbers as printable lines: answers and parse rate, CAT and tau with their intervals
    and p-values for the first conditions, and the caveats (what thin data could not support)."""
    import json
    import math

    import polars as pl

    from runner.escape import condition_label

    summary = json.loads((analysis_dir / "summary.json").read_text(encoding="utf-8"))
    factors = [f for f in summary["design"]["factors"] if f != "_all"]
    rates = pl.read_parquet(analysis_dir / "status_rates.parquet")
    ok = int(rates.filter(pl.col("status") == "ok")["count"].sum())
    total = int(summary["answers"])
    rate = f" ({ok / total:.1%} parsed ok)" if total else ""
    lines = [
        f"answers: {total:,}{rate}; {summary['conditions']} condition(s), {len(summary['countries'])} country(ies)"
    ]

    def num(value: object, digits: int = 2) -> str:
        return "n/a" if not isinstance(value, int | float) or math.isnan(value) else f"{value:.{digits}f}"

    def label(row: dict) -> str:
        return condition_label((f, row[f]) for f in factors) or "all"

    cat = pl.read_parquet(analysis_dir / "cat.parquet")
    kendall = pl.read_parquet(analysis_dir / "kendall.parquet")
    for row in cat.head(HEADLINE_CONDITIONS).iter_rows(named=True):
        where = label(row)
        lines.append(
            f"{where}: CAT {num(row['cat_score'], 1)} [{num(row['ci_low'], 1)}, {num(row['ci_high'], 1)}], "
            f"p {num(row['cat_p'], 3)}, {row['n_countries']} countries"
        )
        taus = kendall.filter(*[pl.col(f) == row[f] for f in factors]) if factors else kendall
        lines.append(
            "  tau: "
            + "; ".join(
                f"{t['dimension'].upper()} {num(t['tau'])} [{num(t['ci_low'])}, {num(t['ci_high'])}] "
                f"p {num(t['kendall_p'], 3)}"
                for t in taus.iter_rows(named=True)
            )
        )
    if cat.height > HEADLINE_CONDITIONS:
        lines.append(f"… {cat.height - HEADLINE_CONDITIONS} more conditions in {analysis_dir / 'cat.parquet'}")
    lines.extend(f"caveat: {c}" for c in summary.get("caveats", []))
    if warnings := summary.get("warnings"):
        lines.append(f"{len(warnings)} warning(s) in {analysis_dir / 'warnings.parquet'}")
    return lines
