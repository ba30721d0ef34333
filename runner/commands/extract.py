"""``hofcat extract RUN_DIR``: ask an extractor model to restate the answers the parser found ambiguous."""

from __future__ import annotations

import argparse
import sys

NAME = "extract"
HELP = (
    "Extractor fallback: send each stored answer the parser found ambiguous (or --statuses) to an extractor "
    "model (an endpoint of the run's spec, or the local llama.cpp model) that restates the chosen option as one "
    "position or NONE; results go to RUN_DIR/extractions with status extracted, raw replies untouched. "
    "`hofcat analyze --use-extracted` scores them."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUN_DIR, --endpoint/--local, --spec, --statuses, --constraint, --retry-failed, --limit, --max-tokens."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a directory written by hofcat run")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--endpoint", metavar="NAME", help="the extractor: this endpoint of the run's spec (or of --spec FILE)"
    )
    where.add_argument(
        "--local",
        metavar="smollm2|PATH.gguf",
        help="the extractor: start the local llama.cpp server with this model, then stop it",
    )
    parser.add_argument("--spec", metavar="FILE", default=None, help="take --endpoint from this spec instead")
    parser.add_argument(
        "--statuses",
        default="ambiguous",
        metavar="S,...",
        help="parse statuses to extract: ambiguous (default), no_answer, out_of_range, invalid_format",
    )
    parser.add_argument(
        "--constraint",
        choices=("auto", "none", "grammar", "json_schema", "choice"),
        default="auto",
        help="hold the extractor's reply to a position or NONE: grammar (llama.cpp), choice (vLLM), json_schema "
        "(structured outputs), none; auto = grammar with --local, none otherwise",
    )
    parser.add_argument("--retry-failed", action="store_true", help="send again the requests that failed before")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="send at most N requests this time")
    parser.add_argument("--max-tokens", type=int, default=16, help="extractor reply length cap (default 16)")


def main(args: argparse.Namespace) -> int:
    """Run the extraction and print what it stored; exit 2 on bad options (a located one-line error)."""
    from runner.extract.stage import extract_answers, spec_endpoint
    from runner.rundir import read_manifest
    from runner.sweep.spec import EndpointConfig, load_spec

    read_manifest(args.run_dir)  # a located error for a directory that is not a run
    statuses = tuple(s.strip() for s in args.statuses.split(",") if s.strip())
    constraint = args.constraint if args.constraint != "auto" else ("grammar" if args.local else "none")
    options = dict(
        statuses=statuses,
        constraint=constraint,
        retry_failed=args.retry_failed,
        limit=args.limit,
        max_tokens=args.max_tokens,
    )
    if args.local:
        from runner.endpoints.llm import LocalLLM

        with LocalLLM(model=args.local, slots=2) as llm:
            endpoint = EndpointConfig(
                name="local", provider="openai", base_url=llm.base_url, model=llm.model_name, max_concurrency=4,
                timeout_s=120.0,
            )  # fmt: skip
            result = extract_answers(args.run_dir, endpoint, **options)
    else:
        endpoint = spec_endpoint(args.run_dir, args.endpoint, load_spec(args.spec) if args.spec else None)
        result = extract_answers(args.run_dir, endpoint, **options)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result.counts.items())) or "nothing"
    left = f", {result.left} left (--limit)" if result.left else ""
    print(
        f"hofcat extract: {result.sent} sent to {endpoint.name} ({endpoint.model}): {counts}; "
        f"{result.already} already extracted{left} → {args.run_dir}/extractions",
        file=sys.stderr,
    )
    return 0
