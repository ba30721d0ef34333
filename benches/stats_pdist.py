"""pdist: stats_core native against scipy.spatial.distance.pdist (same matrix, same process), every metric.

Run: python -m benches.stats_pdist [--sizes 5000,20000]. Outputs are checked equal before timing (to 1e-12
relative; cosine to 1e-15 absolute). Ratios in wall time (what a user waits; both of our threads against scipy's
one) and in CPU time (the work, which a shared machine's load does not distort as much).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.spatial.distance import pdist

import stats_core
from benches.stats_timing import load, measure
from stats_core.distance import METRICS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,20000", help="numbers of rows (24 features), comma-separated")
    args = parser.parse_args()
    print(f"pdist, 24 features; {load()}")
    print("| n | metric | stats_core s (CPU s) | scipy s (CPU s) | ratio, wall | ratio, CPU |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        x = np.random.default_rng(n).normal(size=(n, 24))
        for metric in METRICS:
            ours, theirs = stats_core.pdist(x, metric), pdist(x, metric)
            if metric == "cosine":
                np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)
            else:
                np.testing.assert_allclose(ours, theirs, rtol=1e-12)
            del ours, theirs
            t_ours, cpu, _ = measure(lambda: stats_core.pdist(x, metric), repeat=3)
            t_scipy, cpu_scipy, _ = measure(lambda: pdist(x, metric), repeat=3)
            print(
                f"| {n} | {metric} | {t_ours:.3f} ({cpu:.3f}) | {t_scipy:.3f} ({cpu_scipy:.3f}) | "
                f"{t_scipy / t_ours:.1f}x | {cpu_scipy / cpu:.1f}x |"
            )


if __name__ == "__main__":
    main()
