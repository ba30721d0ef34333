"""PERMANOVA with blocked permutations (``strata``) against the same call without: the native cost of blocks.

Run: python -m benches.stats_permanova_strata. Same distances, same grouping (3 groups), 999 permutations,
native backend; the blocked call keeps permutations within 10 strata ("countries", objects interleaved so
that every block is scattered over the matrix). Both calls are timed alternately in one process (best of 5);
the ratio blocked / free is the cost of the blocked generator (``permutations_within``) plus the one pass that
the within-strata effect sizes add (``permanova.within_strata``). Euclidean distances
between 24-d points (the factored screen, where label generation is the largest share of the work) and
cityblock (the quantized screen).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import pdist

import stats_core
from benches.stats_timing import load, measure

PERMUTATIONS = 999
STRATA = 10


def data(n: int, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Condensed distances between n 24-d points, 3 group labels, and 10 interleaved strata labels."""
    rng = np.random.default_rng(n)
    labels = np.arange(n) % 3
    strata = rng.integers(0, STRATA, n)
    x = rng.normal(size=(n, 24)) + 0.02 * labels[:, None] + 0.5 * strata[:, None]
    return pdist(x, metric), labels, strata


def main() -> None:
    print(f"PERMANOVA native, {PERMUTATIONS} permutations, 3 groups, {STRATA} strata; {load()}")
    print("| distances | n | free s (CPU s) | strata s (CPU s) | strata / free |")
    print("|---|---|---|---|---|")
    for metric, n in (("euclidean", 2000), ("euclidean", 5000), ("cityblock", 2000)):
        d, labels, strata = data(n, metric)
        free_result = stats_core.permanova(d, labels, PERMUTATIONS, seed=1, backend="native")
        blocked_result = stats_core.permanova(d, labels, PERMUTATIONS, seed=1, strata=strata, backend="native")
        assert free_result.statistic == blocked_result.statistic
        free, blocked = (float("inf"), 0.0), (float("inf"), 0.0)
        for _ in range(5):  # alternate, so that load changes hit both alike
            f = measure(lambda: stats_core.permanova(d, labels, PERMUTATIONS, seed=1, backend="native"), repeat=1)
            b = measure(
                lambda: stats_core.permanova(d, labels, PERMUTATIONS, seed=1, strata=strata, backend="native"),
                repeat=1,
            )
            free, blocked = min(free, f[:2]), min(blocked, b[:2])
        print(
            f"| {metric} | {n} | {free[0]:.3f} ({free[1]:.3f}) | {blocked[0]:.3f} ({blocked[1]:.3f}) | "
            f"{blocked[0] / free[0]:.2f}x |"
        )


if __name__ == "__main__":
    main()
