"""pdist: stats_core native against scipy.spatial.distance.pdist (same matrix, same process), every metric.

Run: python -m benches.stats_pdist [--sizes 5000,20000] [--features 24] [--rounds 3]. Outputs are checked
equal before timing (to 1e-12 relative; cosine to 1e-15 absolute). The two sides alternate, round after round
(so a change in the machine's load hits both), and each keeps its best round. Ratios in wall time (what a user
waits; both of our threads against scipy's one) and in CPU time (the work, which a shared machine's load does
not distort as much).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from scipy.spatial.distance import pdist

import stats_core
from benches.stats_timing import load, measure
from stats_core.distance import METRICS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,20000", help="numbers of rows, comma-separated")
    parser.add_argument("--features", default="24", help="numbers of features (columns), comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per side (best kept)")
    args = parser.parse_args()
    print(f"pdist; {load()}")
    print("| n × features | metric | stats_core s (CPU s) | scipy s (CPU s) | ratio, wall | ratio, CPU | load |")
    print("|---|---|---|---|---|---|---|")
    for k in (int(s) for s in args.features.split(",")):
        for n in (int(s) for s in args.sizes.split(",")):
            x = np.random.default_rng(n + k).normal(size=(n, k))
            for metric in METRICS:
                ours, theirs = stats_core.pdist(x, metric), pdist(x, metric)
                if metric == "cosine":
                    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)
                else:
                    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
                del ours, theirs
                best = {"ours": (float("inf"),) * 2, "scipy": (float("inf"),) * 2}
                for _ in range(args.rounds):
                    for side, fn in (
                        ("ours", lambda: stats_core.pdist(x, metric)),
                        ("scipy", lambda: pdist(x, metric)),
                    ):
                        wall, cpu, _ = measure(fn, repeat=1)
                        best[side] = min(best[side], (wall, cpu), key=lambda t: t[1])
                (t_ours, cpu), (t_scipy, cpu_scipy) = best["ours"], best["scipy"]
                print(
                    f"| {n} × {k} | {metric} | {t_ours:.4f} ({cpu:.4f}) | {t_scipy:.4f} ({cpu_scipy:.4f}) | "
                    f"{t_scipy / t_ours:.1f}x | {cpu_scipy / max(cpu, 1e-9):.1f}x | {os.getloadavg()[0]:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
