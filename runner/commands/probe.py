"""``hofcat probe``: does an endpoint honour ``seed``? Repeats identical requests and prints the verdict as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from runner.commands._args import INT32_MAX, bounded_int, seed
from runner.survey.vocab import PROVIDERS

NAME = "probe"
HELP = (
    "Determinism probe: repeat identical chat requests (temperature 0, a fixed seed, temperature > 0 with "
    "one seed and with many) against an endpoint, or the bundled local model, and print the verdict as JSON."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--base-url/--model or --local, --provider, --api-key-env, --repeats, --max-tokens, --seed."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--base-url", help="the endpoint's base URL, e.g. http://127.0.0.1:8080/v1")
    where.add_argument(
        "--local",
        metavar="smollm2|PATH.gguf",
        help="start the local llama.cpp server with this model for the probe, then stop it",
    )
    parser.add_argument("--model", help="model name sent in requests (required with --base-url)")
    parser.add_argument("--provider", default="openai", choices=PROVIDERS)
    parser.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    parser.add_argument("--repeats", type=bounded_int(2, 10**5), default=6, help="requests per condition (default: 6)")
    parser.add_argument(
        "--max-tokens", type=bounded_int(1, INT32_MAX), default=24, help="reply length cap (default: 24)"
    )
    parser.add_argument("--seed", type=seed, default=1234, help="the fixed seed (default: 1234)")


def main(args: argparse.Namespace) -> int:
    """Print the probe's ``to_dict()``; exit status 0, or 2 on bad options or when every request failed."""
    import asyncio

    from runner.endpoints.llm import LocalLLM
    from runner.sweep.probe import probe_determinism

    if args.base_url and not args.model:
        print("hofcat probe: --model is required with --base-url", file=sys.stderr)
        return 2
    options = dict(
        repeats=args.repeats,
        max_tokens=args.max_tokens,
        seed=args.seed,
        provider_name=args.provider,
        api_key_env=args.api_key_env,
    )
    try:
        if args.local:
            with LocalLLM(model=args.local) as llm:
                probe = asyncio.run(probe_determinism(llm.base_url, args.model or llm.model_name, **options))
        else:
            probe = asyncio.run(probe_determinism(args.base_url, args.model, **options))
    except ValueError as exc:  # a bad option; HofcatError is caught by runner.cli
        print(f"hofcat probe: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(probe.to_dict(), indent=2))
    return 0
