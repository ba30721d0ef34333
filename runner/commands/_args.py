"""Argument types shared by the commands: integers within the range their use can hold.

argparse's ``type=int`` takes any integer, and one past what a socket, an array size or a seed can hold ends
deep inside a library as a traceback; these refuse it at parse time with a one-line usage error (exit 2).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from runner.sweep.spec import INT32_MAX, INT64_MAX

__all__ = ["INT32_MAX", "INT64_MAX", "bounded_int", "port", "positive_int", "positive_seconds", "seed"]


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: the argument as an integer in ``low``-``high``, else a usage error saying so."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not an integer in {low}-{high}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


positive_int = bounded_int(1, INT64_MAX)  # counts and limits: what the store's int64 columns hold
port = bounded_int(0, 65535)  # 0: the system picks a free port
seed = bounded_int(0, INT64_MAX)  # every seed is stored as int64 and fed to numpy's SeedSequence


def positive_seconds(text: str) -> float:
    """An argparse ``type``: a finite number of seconds above 0 (0 or less would print in a busy loop, NaN never)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number of seconds above 0")
    return value


positive_seconds.__name__ = "seconds"  # argparse names the type in its own messages
