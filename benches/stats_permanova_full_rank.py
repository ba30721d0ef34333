"""PERMANOVA on full-rank (non-Euclidean) distances: stats_core native against scikit-bio's numba engine.

Run: python -m benches.stats_permanova_full_rank [--sizes 5000,10000] [--rounds 2]. 999 permutations, 3 groups;
distances whose Gower matrix is indefinite, so the quantized screen — the O(n²)-per-permutation kernel — does
the work: cityblock between 24-d normal points, Bray–Curtis between 24 answers on the 1–5 scale (VSM13's),
and a user-supplied matrix (every distance drawn uniformly from [1, 2]: a metric, full rank, no structure).
F is checked against skbio's (1e-10) first. The two calls alternate round by round on the same data (the
machine is shared), and the ratio is of CPU seconds (all threads), the figure load inflates least.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.spatial.distance import pdist, squareform
from skbio.stats.distance import DistanceMatrix
from skbio.stats.distance import permanova as skbio_permanova

import stats_core
from benches.stats_timing import load, measure
from stats_core.benchmark import threads

PERMUTATIONS = 999
KINDS = ("cityblock", "braycurtis", "user matrix")


def data(kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Condensed distances of the given kind between n objects in 3 groups with a small shift, and the labels."""
    rng = np.random.default_rng(n)
    labels = np.arange(n) % 3
    if kind == "cityblock":
        return pdist(rng.normal(size=(n, 24)) + 0.02 * labels[:, None], "cityblock"), labels
    if kind == "braycurtis":
        answers = np.clip(np.rint(rng.normal(3.0, 1.0, size=(n, 24)) + 0.05 * labels[:, None]), 1, 5)
        return pdist(answers, "braycurtis"), labels
    return rng.uniform(1.0, 2.0, size=n * (n - 1) // 2), labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,10000")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    warm_d, warm_l = data("cityblock", 60)
    skbio_permanova(DistanceMatrix(squareform(warm_d)), warm_l, permutations=9, engine="numba")
    stats_core.permanova(warm_d, warm_l, 9, seed=1)
    print(f"PERMANOVA, {PERMUTATIONS} permutations, 3 groups; {load()}; stats_core on {threads()} threads")
    print(
        "| distances | n | stats_core s (CPU s) | G pair-updates per CPU s | skbio numba s (CPU s) "
        "| skbio / stats_core, wall | skbio / stats_core, CPU |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        for kind in KINDS:
            d, labels = data(kind, n)
            dm = DistanceMatrix(squareform(d), validate=False)
            ours = stats_core.permanova(d, labels, PERMUTATIONS, seed=1)
            theirs = skbio_permanova(dm, labels, permutations=0)
            assert abs(ours.statistic - theirs["test statistic"]) <= 1e-10 * ours.statistic, "F differs from skbio"
            best_ours, best_theirs = (np.inf, 0.0), (np.inf, 0.0)
            for _ in range(args.rounds):  # alternate, so load changes hit both sides alike
                wall, cpu, _ = measure(lambda: stats_core.permanova(d, labels, PERMUTATIONS, seed=1), repeat=1)
                best_ours = min(best_ours, (cpu, wall))
                wall, cpu, _ = measure(
                    lambda: skbio_permanova(dm, labels, permutations=PERMUTATIONS, seed=1, engine="numba"), repeat=1
                )
                best_theirs = min(best_theirs, (cpu, wall))
            (cpu, wall), (skbio_cpu, skbio_wall) = best_ours, best_theirs
            updates = n * (n - 1) / 2 * (PERMUTATIONS + 1)
            print(
                f"| {kind} | {n} | {wall:.3f} ({cpu:.3f}) | {updates / cpu / 1e9:.1f} | {skbio_wall:.3f} ({skbio_cpu:.3f}) "
                f"| {skbio_wall / wall:.1f}x | **{skbio_cpu / cpu:.1f}x** |",
                flush=True,
            )
    print(f"{load()} at the end")


if __name__ == "__main__":
    main()
