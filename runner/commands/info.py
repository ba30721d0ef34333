"""``hofcat info``: versions, the live stats backend and where data is read from."""

from __future__ import annotations

import argparse
import json

NAME = "info"
HELP = "Print hofcat's version, the live stats_core backend and the data directory."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def main(args: argparse.Namespace) -> int:
    """Print one JSON object describing this installation."""
    import stats_core
    from runner import __version__
    from runner.paths import DATA_DIR

    print(
        json.dumps(
            {
                "hofcat": __version__,
                "stats_backend": stats_core.backend(),
                "stats_backends_available": list(stats_core.available()),
                "data_dir": str(DATA_DIR),
            },
            indent=2,
        )
    )
    return 0
