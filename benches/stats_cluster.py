"""silhouette: stats_core against sklearn.metrics.silhouette_score at n = 5000 (24-d, 4 clusters).

Run: python -m benches.stats_cluster. Both from the same precomputed distances, and both from the raw points
(ours = pdist + silhouette). Values are checked equal before timing.
"""

from __future__ import annotations

import numpy as np
import sklearn.metrics
from scipy.spatial.distance import squareform

import stats_core
from benches.stats_timing import load, measure


def main() -> None:
    n = 5000
    rng = np.random.default_rng(4)
    labels = np.arange(n) % 4
    x = rng.normal(size=(n, 24)) + 0.3 * labels[:, None]
    d = stats_core.pdist(x)
    square = squareform(d)
    expected = sklearn.metrics.silhouette_score(square, labels, metric="precomputed")
    assert abs(stats_core.silhouette(d, labels) - expected) < 1e-12
    print(f"silhouette, n = {n}; {load()}")
    print("| input | stats_core s | sklearn s | ratio |")
    print("|---|---|---|---|")
    t_ours, _, _ = measure(lambda: stats_core.silhouette(d, labels))
    t_sk, _, _ = measure(lambda: sklearn.metrics.silhouette_score(square, labels, metric="precomputed"))
    print(
        f"| precomputed distances (ours condensed, sklearn square) | {t_ours:.3f} | {t_sk:.3f} | {t_sk / t_ours:.1f}x |"
    )
    t_ours, _, _ = measure(lambda: stats_core.silhouette(stats_core.pdist(x), labels))
    t_sk, _, _ = measure(lambda: sklearn.metrics.silhouette_score(x, labels))
    print(f"| raw 24-d points (distances included) | {t_ours:.3f} | {t_sk:.3f} | {t_sk / t_ours:.1f}x |")


if __name__ == "__main__":
    main()
