"""The ``hofcat`` command: subcommands only; each lives in its own module under ``runner/commands``.

A command module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``main(args) -> int``, and keeps
heavy imports inside ``main`` so that ``hofcat --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from runner import __version__
from runner.errors import HofcatError

COMMAND_MODULES = (
    "runner.commands.info",
    "runner.commands.examples",
    "runner.commands.score",
    "runner.commands.parse_text",
    "runner.commands.plan",
    "runner.commands.run",
    "runner.commands.status",
    "runner.commands.reparse",
    "runner.commands.repair",
    "runner.commands.extract",
    "runner.commands.serve_sim",
    "runner.commands.serve_llm",
    "runner.commands.probe",
    "runner.commands.analyze",
    "runner.commands.report",
    "runner.commands.export",
    "runner.commands.demo",
    "runner.commands.bench",
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per command module."""
    parser = argparse.ArgumentParser(
        prog="hofcat",
        description="Measure the cultural values that language models express with Hofstede's VSM 2013.",
    )
    parser.add_argument("--version", action="version", version=f"hofcat {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_main=module.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hofcat`` console script; returns the process exit status."""
    from runner.escape import terminal_streams

    # everything printed (names from a spec, messages quoting a server) shows control characters as escapes
    with terminal_streams():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run its command; the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status = int(args._main(args) or 0)
        sys.stdout.flush()  # a reader that went away fails here, not in the interpreter's exit flush
        return status
    except HofcatError as exc:
        # a deliberate error already names what was wrong: one line, no traceback (runner/errors.py)
        print(f"hofcat {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (``hofcat ... | head``): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # a file the system refused (full disk, read-only, I/O error): it names the file
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"hofcat {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from runner.escape import terminal_process

    terminal_process()  # as the console script (hofcat/cli.py): tracebacks escaped too
    sys.exit(main())
