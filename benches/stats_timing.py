"""Timing helpers shared by the stats_core benchmarks: best-of wall time, CPU time, machine load."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


def measure(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, float, Any]:
    """Best wall seconds and the CPU seconds (all threads) of that run, over ``repeat`` calls; and a result."""
    best = (float("inf"), 0.0, None)
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        result = fn()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if wall < best[0]:
            best = (wall, cpu, result)
    return best


def load() -> str:
    """The 1-minute load average and core count, printed with every table (the machine is shared)."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
