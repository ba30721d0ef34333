"""Multi-term PERMANOVA: stats_core.permanova_terms per term against one single-term stats_core.permanova call,
and against R vegan::adonis2 with the same terms.

Run: python -m benches.permanova_terms_bench [--sizes 200,1000,3000] [--no-vegan]. 999 permutations, factors a
(3 levels) and b (2 levels), terms a + b and a + b + a:b, sequential SS. Two kinds of distances between the same
24-d points: Euclidean (Gower's matrix has rank 24: the low-rank screen, O(n·k) per permutation) and Bray–Curtis
(not low rank: the exact O(n²) kernel every permutation). vegan runs in Rscript on the same matrix with the same
permutation matrix (``stats_core.permutation_indices``), timed inside R around adonis2 alone; its F must equal
ours to 1e-9 and its p exactly (checked where it ran all 999 permutations). At n ≥ 1,000 vegan gets
``--vegan-permutations`` (default 199 at 1,000 and 49 at 3,000 and above) and its time is scaled to 999 (its cost
is linear in the permutations; marked in the table).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from scipy.spatial.distance import pdist

import stats_core
from benches.stats_timing import load, measure

PERMUTATIONS = 999
TERMS = (["a", "b"], ["a", "b", "a:b"])


def data(n: int, metric: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """n points in 24-d with a small effect of a: condensed distances and the factors a (3 levels), b (2)."""
    rng = np.random.default_rng(n)
    a, b = np.arange(n) % 3, (np.arange(n) // 3) % 2
    x = rng.normal(size=(n, 24)) + 0.05 * a[:, None]
    return pdist(np.exp(x) if metric == "braycurtis" else x, metric), {"a": a, "b": b}


def vegan_seconds(d: np.ndarray, factors: dict, terms: list[str], permutations: int, ours) -> float:
    """Seconds adonis2 takes on the same matrix with the same permutations (F and p checked against ``ours``)."""
    n = factors["a"].shape[0]
    perms = np.argsort(stats_core.permutation_indices(n, permutations, ours.seed), axis=1) + 1
    with tempfile.TemporaryDirectory() as tmp:
        dpath, ppath = Path(tmp) / "d.bin", Path(tmp) / "p.bin"
        d.astype("<f8").tofile(dpath)
        perms.astype("<i4").tofile(ppath)
        script = f"""suppressPackageStartupMessages(library(vegan))
        v <- readBin("{dpath}", "double", n = {d.shape[0]}, endian = "little")
        n <- {n}; m <- matrix(0, n, n); m[lower.tri(m)] <- v; d <- as.dist(m)
        p <- matrix(readBin("{ppath}", "integer", n = {perms.size}, size = 4, endian = "little"),
                    nrow = {permutations}, byrow = TRUE)
        a <- factor((0:(n - 1)) %% 3); b <- factor(((0:(n - 1)) %/% 3) %% 2)
        t <- system.time(r <- adonis2(d ~ {" + ".join(terms)}, permutations = p))[["elapsed"]]
        cat(t, sprintf("%.17g", r$F[seq_len({len(terms)})]), sprintf("%.17g", r[["Pr(>F)"]][seq_len({len(terms)})]), "\\n")"""
        out = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True, check=True).stdout.split()
    k = len(terms)
    f, p = np.array(out[1 : 1 + k], float), np.array(out[1 + k :], float)
    if permutations == ours.permutations:
        assert np.allclose(f, [r.f for r in ours.rows], rtol=1e-9), "F differs from vegan"
        assert np.array_equal(p, [r.p_value for r in ours.rows]), "p differs from vegan"
    return float(out[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,1000,3000")
    parser.add_argument("--no-vegan", action="store_true")
    parser.add_argument("--metrics", default="euclidean,braycurtis")
    args = parser.parse_args()
    print(f"permanova_terms, {PERMUTATIONS} permutations, native backend; {load()}")
    print(
        "| distances | n | terms | permanova_terms s | single-term permanova s | per term / single | vegan adonis2 s "
        "| vegan / ours |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    warm_d, warm_f = data(60, "euclidean")
    stats_core.permanova_terms(warm_d, warm_f, permutations=9, seed=1)
    for metric in args.metrics.split(","):
        for n in map(int, args.sizes.split(",")):
            d, factors = data(n, metric)
            single, _, _ = measure(lambda: stats_core.permanova(d, factors["a"], PERMUTATIONS, seed=1))
            for terms in TERMS:
                ours, _, result = measure(
                    lambda: stats_core.permanova_terms(d, factors, terms, permutations=PERMUTATIONS, seed=1)
                )
                vegan, note = float("nan"), ""
                if not args.no_vegan:
                    vperms = PERMUTATIONS if n < 1000 else 199 if n < 3000 else 49
                    vegan = vegan_seconds(d, factors, terms, vperms, result) * PERMUTATIONS / vperms
                    note = "" if vperms == PERMUTATIONS else f" (from {vperms})"
                print(
                    f"| {metric} | {n:,} | {' + '.join(terms)} | {ours:.3f} | {single:.3f} | "
                    f"{ours / len(terms) / single:.2f} | {vegan:.1f}{note} | {vegan / ours:.0f}x |",
                    flush=True,
                )
    print(load())


if __name__ == "__main__":
    main()
