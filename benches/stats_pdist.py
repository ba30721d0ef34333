"""pdist: stats_core native against scipy.spatial.distance.pdist (same matrix, same process).

Run: python -m benches.stats_pdist. Outputs are checked equal (to 1e-12) before timing.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist

import stats_core
from benches.stats_timing import load, measure


def main() -> None:
    print(f"pdist, 24 features; {load()}")
    print("| n | metric | stats_core s | scipy s | ratio |")
    print("|---|---|---|---|---|")
    for n in (5000, 20000):
        x = np.random.default_rng(n).normal(size=(n, 24))
        for metric in ("euclidean", "cityblock"):
            ours = stats_core.pdist(x, metric)
            np.testing.assert_allclose(ours, pdist(x, metric), rtol=1e-12)
            del ours
            t_ours, _, _ = measure(lambda: stats_core.pdist(x, metric), repeat=3)
            t_scipy, _, _ = measure(lambda: pdist(x, metric), repeat=3)
            print(f"| {n} | {metric} | {t_ours:.3f} | {t_scipy:.3f} | {t_scipy / t_ours:.1f}x |")


if __name__ == "__main__":
    main()
