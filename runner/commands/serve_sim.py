"""``hofcat serve-sim``: run the simulated OpenAI-compatible endpoint until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
from pathlib import Path

from runner.commands._args import INT64_MAX, bounded_int, port, seed

NAME = "serve-sim"
HELP = "Serve simulated respondents with known VSM13 truth on an OpenAI-compatible endpoint (see docs/simulator.md)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Address, generative model, limits and fault rates."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=port, default=8011, help="port; 0 picks a free one (default 8011)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of every random choice the server makes")
    parser.add_argument("--model", default="sim-1", help="model name listed by /v1/models (default sim-1)")
    parser.add_argument(
        "--reference", default="hofstede-2015", help="reference set name or CSV whose country scores drive the answers"
    )
    parser.add_argument(
        "--signal",
        type=float,
        default=2.0,
        help="expected index points per reference score point (default 2.0; 0 = no signal)",
    )
    parser.add_argument("--spread", type=float, default=1.0, help="base answer dispersion, > 0 (default 1.0)")
    parser.add_argument(
        "--position-bias",
        type=float,
        default=0.0,
        help="planted option-order effect: logits per displayed position, |b| <= 100 (> 0 recency, < 0 primacy)",
    )
    parser.add_argument(
        "--effect",
        action="append",
        default=[],
        metavar="FACTOR=SIZE",
        help="plant an effect of a design factor (language, labels, reply_format, mode, framing, model, "
        "measurement: sample, distribution or verbalized): SIZE answer points of spread between its levels per "
        "question; once per factor, repeatable",
    )
    parser.add_argument(
        "--latency-ms",
        default="0",
        help="latency: MS, uniform:LO:HI, exponential:MEAN or lognormal:MEDIAN:SIGMA (default 0)",
    )
    parser.add_argument(
        "--rpm", type=bounded_int(1, INT64_MAX), default=None, help="requests per minute before 429 (default unlimited)"
    )
    parser.add_argument(
        "--burst",
        type=bounded_int(1, INT64_MAX),
        default=None,
        help="requests per second before 429 (default unlimited)",
    )
    parser.add_argument(
        "--tpm",
        type=bounded_int(1, INT64_MAX),
        default=None,
        help="tokens (prompt + max_tokens) per minute before 429 (default unlimited)",
    )
    parser.add_argument("--error-rate", type=float, default=0.0, help="share of attempts answered 500/502/503")
    parser.add_argument(
        "--malformed-rate",
        type=float,
        default=0.0,
        help="share of attempts answered 200 with truncated JSON or an HTML page",
    )
    parser.add_argument("--hang-rate", type=float, default=0.0, help="share of attempts that hang for --hang-s")
    parser.add_argument("--hang-s", type=float, default=600.0, help="how long a hanging attempt waits (default 600)")
    parser.add_argument("--refusal-rate", type=float, default=0.0, help="share of replies that refuse to answer")
    parser.add_argument("--chatty-rate", type=float, default=0.0, help="share of replies wrapped in prose/markdown")
    parser.add_argument(
        "--ambiguous-rate",
        type=float,
        default=0.0,
        help="share of replies naming a second option beside the answer ('2 or 3': parsed as ambiguous)",
    )
    parser.add_argument(
        "--verbalized-temperature",
        type=float,
        default=1.0,
        help="verbalized replies state p^(1/T), renormalised: < 1 overconfident, > 1 hedging (default 1)",
    )
    parser.add_argument(
        "--verbalized-noise", type=float, default=0.0, help="sd of per-request noise on stated log-probabilities"
    )
    parser.add_argument(
        "--verbalized-malformed-rate", type=float, default=0.0, help="share of verbalized replies malformed"
    )
    parser.add_argument("--log", type=Path, default=None, help="append every request to this JSON Lines file")


def config_from_args(args: argparse.Namespace) -> object:
    """The SimConfig the options describe (raises SimConfigError naming a bad option)."""
    from runner.endpoints.sim import Latency, SimConfig

    return SimConfig(
        seed=args.seed,
        model=args.model,
        reference=args.reference,
        signal=args.signal,
        spread=args.spread,
        position_bias=args.position_bias,
        effects=effect_sizes(args.effect),
        latency=Latency.parse(args.latency_ms),
        requests_per_minute=args.rpm,
        burst=args.burst,
        tokens_per_minute=args.tpm,
        error_rate=args.error_rate,
        malformed_rate=args.malformed_rate,
        hang_rate=args.hang_rate,
        hang_s=args.hang_s,
        refusal_rate=args.refusal_rate,
        chatty_rate=args.chatty_rate,
        ambiguous_rate=args.ambiguous_rate,
        log_path=args.log,
        verbalized_temperature=args.verbalized_temperature,
        verbalized_noise=args.verbalized_noise,
        verbalized_malformed_rate=args.verbalized_malformed_rate,
    )


def effect_sizes(given: list[str]) -> dict[str, float]:
    """``["language=0.3", …]`` → {factor: size}; a malformed one raises SimConfigError naming it."""
    from runner.errors import SimConfigError

    sizes: dict[str, float] = {}
    for text in given:
        factor, sep, size = text.partition("=")
        if factor.strip() in sizes:  # a second size would silently replace the first
            raise SimConfigError("--effect", text, f"one size per factor ({factor.strip()!r} is given twice)")
        try:
            sizes[factor.strip()] = float(size)
        except ValueError:
            raise SimConfigError("--effect", text, "FACTOR=SIZE, e.g. language=0.3") from None
        if not sep:
            raise SimConfigError("--effect", text, "FACTOR=SIZE, e.g. language=0.3")
    return sizes


def main(args: argparse.Namespace) -> int:
    """Serve until SIGTERM/SIGINT; the first stdout line is the base URL clients use. A port that cannot be
    listened on (busy, or a host not on this machine) is a one-line error, exit 2."""
    import asyncio
    import signal
    import sys

    from runner.endpoints.sim import SimServer

    config = config_from_args(args)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with SimServer(config, host=args.host, port=args.port) as server:  # type: ignore[arg-type]
            print(server.base_url, flush=True)
            print(
                f"hofcat serve-sim: serving on {server.base_url} (seed {args.seed}); Ctrl-C stops",
                file=sys.stderr,
                flush=True,
            )
            await stop.wait()
            total = server.log.total
        print(f"hofcat serve-sim: stopped after {total} requests", file=sys.stderr, flush=True)

    try:
        asyncio.run(serve())
    except OSError as exc:  # a bad --host/--port: exit 2 with one line, as serve-llm
        import errno

        from runner.errors import InputError

        if exc.errno == errno.EADDRINUSE:
            problem = f"is already in use ({exc.strerror})"
        else:
            problem = f"cannot be listened on ({exc.strerror or exc})"
        raise InputError(f"--port {args.port}: {args.host}:{args.port} {problem}") from None
    return 0
