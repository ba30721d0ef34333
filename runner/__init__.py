"""hofcat's runner: spec → plan → execute → store → parse → score → analyse → report."""

from __future__ import annotations

import importlib.metadata

try:
    __version__ = importlib.metadata.version("hofcat")
except importlib.metadata.PackageNotFoundError:  # running from a checkout that was never built
    __version__ = "0+unknown"
