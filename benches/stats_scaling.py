"""Scaling of PERMANOVA (199 permutations) and pdist (24-d) with n, with peak traced memory.

Run: python -m benches.stats_scaling. Time should grow as n²; memory is the condensed matrix plus O(n)
for PERMANOVA (the input is never expanded) and the n(n−1)/2 output for pdist.
"""

from __future__ import annotations

import tracemalloc

import numpy as np

import stats_core
from benches.stats_timing import load, measure

PERMUTATIONS = 199


def main() -> None:
    print(f"scaling; {load()}")
    print("| n | condensed MB | pdist s | pdist peak MB | PERMANOVA s (199 perms) | PERMANOVA peak extra MB | s / n² (PERMANOVA, ns) |")
    print("|---|---|---|---|---|---|---|")
    for n in (500, 1000, 2000, 5000, 10000, 20000):
        x = np.random.default_rng(n).normal(size=(n, 24))
        labels = np.arange(n) % 3
        tracemalloc.start()
        d = stats_core.pdist(x)
        _, pdist_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        t_pdist, _, _ = measure(lambda: stats_core.pdist(x), repeat=1)
        tracemalloc.start()
        stats_core.permanova(d, labels, PERMUTATIONS, seed=1)
        _, perm_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        t_perm, _, _ = measure(lambda: stats_core.permanova(d, labels, PERMUTATIONS, seed=1), repeat=1)
        print(f"| {n} | {d.nbytes / 2**20:.0f} | {t_pdist:.3f} | {pdist_peak / 2**20:.0f} | {t_perm:.3f} | "
              f"{perm_peak / 2**20:.1f} | {t_perm / n**2 * 1e9:.1f} |")
        del d


if __name__ == "__main__":
    main()
