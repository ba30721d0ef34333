"""PERMANOVA: stats_core (native, numba) against scikit-bio 0.7 (engine="numba") and R vegan::adonis2.

Run: python -m benches.stats_permanova [--vegan]. Same distances, same grouping, 999 permutations; the
statistic is checked against skbio's before timing. vegan runs in Rscript back to back on the same
matrix (timed inside R around adonis2 only). Two kinds of distances between the same 24-d points:
Euclidean (Gower's matrix has rank 24: the factored screen) and cityblock (indefinite Gower matrix: the
quantized screen, i.e. the O(n²) kernel every permutation).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.spatial.distance import pdist, squareform
from skbio.stats.distance import DistanceMatrix
from skbio.stats.distance import permanova as skbio_permanova

import stats_core
from benches.stats_timing import load, measure
from stats_core._backend import kernels

PERMUTATIONS = 999


def data(n: int, metric: str = "euclidean") -> tuple[np.ndarray, np.ndarray]:
    """n points in 24-d (the VSM questionnaire) in 3 groups with a small shift: condensed distances, labels."""
    rng = np.random.default_rng(n)
    labels = np.arange(n) % 3
    x = rng.normal(size=(n, 24)) + 0.02 * labels[:, None]
    return pdist(x, metric), labels


def screen_name(d: np.ndarray, labels: np.ndarray) -> str:
    """Which screen stats_core's native backend picks for these distances."""
    from stats_core import _screen, _validate

    native = kernels("native")
    codes, _, sizes = _validate.grouping("grouping", labels, labels.shape[0])
    observed = native.permanova_observed(d, codes, 1.0 / sizes)
    return _screen.choose(native, d, 1.0 / sizes, sizes, observed, observed[0]).name


def vegan_seconds(d: np.ndarray, labels: np.ndarray, statistic: float) -> float:
    """Seconds R vegan::adonis2 takes for 999 permutations on the same condensed matrix (its F checked)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "d.bin"
        d.astype("<f8").tofile(path)
        n = labels.shape[0]
        script = f"""suppressPackageStartupMessages(library(vegan))
        v <- readBin("{path}", "double", n = {d.shape[0]}, endian = "little")
        n <- {n}; m <- matrix(0, n, n); m[lower.tri(m)] <- v; d <- as.dist(m)
        g <- factor(rep(0:2, length.out = n))
        t <- system.time(a <- adonis2(d ~ g, permutations = {PERMUTATIONS}))[["elapsed"]]
        cat(t, sprintf("%.17g", a$F[1]), "\\n")"""
        out = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True, check=True).stdout.split()
        assert abs(float(out[1]) - statistic) <= 1e-9 * statistic, "F differs from vegan"
        return float(out[0])


def main() -> None:
    with_vegan = "--vegan" in sys.argv
    print(f"PERMANOVA, {PERMUTATIONS} permutations, 3 groups, distances between 24-d points; {load()}")
    print(
        "| distances (screen) | n | stats_core native s (CPU s) | pair-updates/s | numba s | numba / native | skbio numba s (CPU s) | native vs skbio, wall (CPU) | vegan adonis2 s | native vs vegan |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for metric in ("euclidean", "cityblock"):  # compile both screens' numba kernels before timing
        warm_d, warm_l = data(60, metric)
        skbio_permanova(DistanceMatrix(squareform(warm_d)), warm_l, permutations=9, engine="numba")
        stats_core.permanova(warm_d, warm_l, 9, seed=1, backend="numba")
    # and the exact kernel that rechecks permutations screened too close to call
    kernels("numba").permanova_within(warm_d, warm_l[None, :].astype(np.int32), np.full(3, 1 / 20))
    for metric, n in (("euclidean", 2000), ("euclidean", 5000), ("cityblock", 2000), ("cityblock", 5000)):
        d, labels = data(n, metric)
        dm = DistanceMatrix(squareform(d))
        ours = stats_core.permanova(d, labels, PERMUTATIONS, seed=1)
        theirs = skbio_permanova(dm, labels, permutations=PERMUTATIONS, seed=1, engine="numba")
        assert abs(ours.statistic - theirs["test statistic"]) <= 1e-10 * ours.statistic, "F differs from skbio"
        native, native_cpu, _ = measure(lambda: stats_core.permanova(d, labels, PERMUTATIONS, seed=1, backend="native"))
        numba, _, _ = measure(lambda: stats_core.permanova(d, labels, PERMUTATIONS, seed=1, backend="numba"), repeat=1)
        skbio, skbio_cpu, _ = measure(
            lambda: skbio_permanova(dm, labels, permutations=PERMUTATIONS, seed=1, engine="numba"), repeat=2
        )
        updates = n * (n - 1) / 2 * (PERMUTATIONS + 1) / native
        vegan = (
            vegan_seconds(d, labels, ours.statistic)
            if with_vegan and (metric, n) == ("euclidean", 2000)
            else float("nan")
        )
        print(
            f"| {metric} ({screen_name(d, labels)}) | {n} | {native:.3f} ({native_cpu:.3f}) | {updates / 1e9:.1f} G | {numba:.3f} | "
            f"{numba / native:.1f}x | {skbio:.3f} ({skbio_cpu:.3f}) | {skbio / native:.1f}x ({skbio_cpu / native_cpu:.1f}x) | "
            f"{vegan:.1f} | {vegan / native:.0f}x |"
        )


if __name__ == "__main__":
    main()
