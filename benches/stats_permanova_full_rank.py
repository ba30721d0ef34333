"""PERMANOVA on full-rank (non-Euclidean) distances: stats_core native against scikit-bio's numba engine.

Run: python -m benches.stats_permanova_full_rank [--sizes 5000,10000] [--rounds 2] [--before PATH_TO_OTHER_native.so].
999 permutations, 3 groups;
distances whose Gower matrix is indefinite, so the quantized screen — the O(n²)-per-permutation kernel — does
the work: cityblock between 24-d normal points, Bray–Curtis between 24 answers on the 1–5 scale (VSM13's),
and a user-supplied matrix (every distance drawn uniformly from [1, 2]: a metric, full rank, no structure).
F is checked against skbio's (1e-10) first. The calls alternate round by round on the same data (the machine
is shared), and the ratio is of CPU seconds (all threads), the figure load inflates least. ``--before`` runs
the same ``stats_core.permanova`` on another build of the compiled module too (its p-value asserted equal).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from scipy.spatial.distance import pdist, squareform
from skbio.stats.distance import DistanceMatrix
from skbio.stats.distance import permanova as skbio_permanova

import stats_core
from benches.stats_timing import load, measure
from stats_core import _backend
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


def best_cpu(calls: dict[str, Callable[[], object]], rounds: int) -> dict[str, tuple[float, float]]:
    """Best (CPU s, wall s) of each call over ``rounds`` rounds, the calls alternating within each round."""
    best = dict.fromkeys(calls, (np.inf, 0.0))
    for _ in range(rounds):
        for name, call in calls.items():
            wall, cpu, _ = measure(call, repeat=1)
            best[name] = min(best[name], (cpu, wall))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,10000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", help="another build of stats_core/_native.abi3.so to time beside this one")
    args = parser.parse_args()
    before = _backend.other_native_build(args.before) if args.before else None
    warm_d, warm_l = data("cityblock", 60)
    skbio_permanova(DistanceMatrix(squareform(warm_d)), warm_l, permutations=9, engine="numba")
    stats_core.permanova(warm_d, warm_l, 9, seed=1)
    print(f"PERMANOVA, {PERMUTATIONS} permutations, 3 groups; {load()}; stats_core on {threads()} threads")
    print(
        "| distances | n | stats_core s (CPU s) | G pair-updates per CPU s | before s (CPU s) | before / now, CPU "
        "| skbio numba s (CPU s) | skbio / stats_core, wall | skbio / stats_core, CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        for kind in KINDS:
            d, labels = data(kind, n)
            dm = DistanceMatrix(squareform(d), validate=False)
            ours = stats_core.permanova(d, labels, PERMUTATIONS, seed=1)
            theirs = skbio_permanova(dm, labels, permutations=0)
            assert abs(ours.statistic - theirs["test statistic"]) <= 1e-10 * ours.statistic, "F differs from skbio"

            def run_before() -> object:
                assert before is not None
                with _backend.native_build(before):
                    result = stats_core.permanova(d, labels, PERMUTATIONS, seed=1, backend="native")
                assert result.pvalue == ours.pvalue, "the other build's p-value differs"
                return result

            calls: dict[str, Callable[[], object]] = {
                "now": lambda: stats_core.permanova(d, labels, PERMUTATIONS, seed=1, backend="native"),
                "skbio": lambda: skbio_permanova(dm, labels, permutations=PERMUTATIONS, seed=1, engine="numba"),
            }
            if before is not None:
                calls["before"] = run_before
            best = best_cpu(calls, args.rounds)
            (cpu, wall), (skbio_cpu, skbio_wall) = best["now"], best["skbio"]
            then = (
                f"{best['before'][1]:.3f} ({best['before'][0]:.3f}) | {best['before'][0] / cpu:.2f}x"
                if before is not None
                else "– | –"
            )
            updates = n * (n - 1) / 2 * (PERMUTATIONS + 1)
            print(
                f"| {kind} | {n} | {wall:.3f} ({cpu:.3f}) | {updates / cpu / 1e9:.1f} | {then} "
                f"| {skbio_wall:.3f} ({skbio_cpu:.3f}) | {skbio_wall / wall:.1f}x | **{skbio_cpu / cpu:.1f}x** |",
                flush=True,
            )
    print(f"{load()} at the end")


if __name__ == "__main__":
    main()
