"""How hofcat starts a Python child (the simulator's server process, the local model's server): with hofcat's own
packages, whatever the working folder holds.

``python -m …`` and ``python -c …`` put the working folder first on the child's import path, where a research
folder's own ``runner.py`` or ``runner/`` would shadow hofcat's. ``-P`` (Python 3.11) leaves it out, and the folder
holding hofcat's ``runner`` goes first on ``PYTHONPATH`` instead, so the child imports the code its parent runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["CODE_ROOT", "child_env", "python_command"]

CODE_ROOT = str(Path(__file__).resolve().parent.parent)  # the folder holding runner/ (and stats_core/)


def python_command(*args: str) -> list[str]:
    """This interpreter with ``args`` (``-m module …`` or ``-c code``), the working folder kept off its path."""
    return [sys.executable, "-P", *args]


def child_env() -> dict[str, str]:
    """This environment, with the folder holding hofcat's ``runner`` first on the child's import path."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": CODE_ROOT + (os.pathsep + path if path else "")}
