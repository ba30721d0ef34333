"""The ``hofcat`` console script and ``python -m hofcat``: hofcat's own ``runner.cli``, whatever the working folder
holds (``import hofcat`` claims the names ``runner`` and ``stats_core`` for hofcat's packages first)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``hofcat`` command with ``argv`` (default: the process arguments); its exit status."""
    import hofcat  # noqa: F401  (loads hofcat's runner before the import below can find another)
    from runner.cli import main as run
    from runner.escape import terminal_process

    terminal_process()  # a traceback quoting a server is escaped too (runner.cli.main escapes what it prints)
    return run(argv)
