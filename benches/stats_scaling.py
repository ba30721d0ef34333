"""Scaling of PERMANOVA (199 permutations) and pdist (24-d) with n, with peak resident memory.

Run: python -m benches.stats_scaling. PERMANOVA runs on Euclidean distances (Gower's matrix has rank 24:
the factored screen, O(n²·k) once plus O(n·k) per permutation) and on cityblock distances (the quantized
screen, O(n²) per permutation). Time should grow as n²; memory is the condensed matrix plus O(n·k) for
PERMANOVA (the input is never expanded) and the n(n−1)/2 output for pdist.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

import stats_core
from benches.stats_timing import load, measure

PERMUTATIONS = 199


def peak_extra_mb(fn: Callable[[], object]) -> float:
    """Peak resident memory during ``fn`` above the resident memory before it, in MiB (Linux).

    Resets the kernel's high-water mark (VmHWM) through /proc/self/clear_refs, so allocations made by the
    Rust extension count too (tracemalloc sees only Python's).
    """

    def status(key: str) -> float:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(key))
        return float(line.split()[1]) / 1024

    Path("/proc/self/clear_refs").write_text("5")
    before = status("VmRSS:")
    fn()
    return status("VmHWM:") - before


def main() -> None:
    print(f"scaling; {load()}")
    print(
        "| n | condensed MiB | pdist s | pdist peak RSS increase MiB | PERMANOVA Euclidean (factored) s | peak RSS increase MiB | s / n² (ns) "
        "| PERMANOVA cityblock (quantized) s | peak RSS increase MiB | s / n² (ns) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in (500, 1000, 2000, 5000, 10000, 20000):
        x = np.random.default_rng(n).normal(size=(n, 24))
        labels = np.arange(n) % 3
        pdist_peak = peak_extra_mb(lambda: stats_core.pdist(x))
        t_pdist, _, d = measure(lambda: stats_core.pdist(x), repeat=1)
        cells = [f"{n}", f"{d.nbytes / 2**20:.0f}", f"{t_pdist:.3f}", f"{pdist_peak:.0f}"]
        for metric in ("euclidean", "cityblock"):
            if metric != "euclidean":
                d = None  # free the previous matrix before the next one is allocated (peak memory)
                d = stats_core.pdist(x, metric)
            perm_peak = peak_extra_mb(lambda d=d: stats_core.permanova(d, labels, PERMUTATIONS, seed=1))
            t_perm, _, _ = measure(lambda d=d: stats_core.permanova(d, labels, PERMUTATIONS, seed=1), repeat=1)
            cells += [f"{t_perm:.3f}", f"{perm_peak:.1f}", f"{t_perm / n**2 * 1e9:.1f}"]
        print("| " + " | ".join(cells) + " |")
        del d


if __name__ == "__main__":
    main()
