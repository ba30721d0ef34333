"""Run by tests/test_thread_determinism.py in a subprocess whose thread counts the environment fixes.

Prints one JSON object: the thread counts the process saw, and for every published number of the stats_core
calls below (each backend where the call takes one) the hex of its bytes. Rayon sizes its pool and numba its
workers once per process (RAYON_NUM_THREADS, NUMBA_NUM_THREADS), hence one process per thread count.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable

import numpy as np

import stats_core
from stats_core import _resample, distributed
from stats_core.distance import METRICS

BACKENDS = ("native", "numba", "numpy")


def _bytes(value: object) -> str:
    """SHA-256 of every float of a result (array, float, or a result object's numeric fields), in order."""
    if hasattr(value, "__dataclass_fields__"):
        fields = (getattr(value, name) for name in value.__dataclass_fields__)
        kept = [f for f in fields if isinstance(f, (float, int, np.ndarray)) or hasattr(f, "low")]
        return hashlib.sha256("|".join(_bytes(f) for f in kept).encode()).hexdigest()
    if hasattr(value, "low") and hasattr(value, "high"):  # a ConfidenceInterval
        return _bytes(value.low) + "/" + _bytes(value.high)
    return hashlib.sha256(np.ascontiguousarray(np.asarray(value, dtype=np.float64)).tobytes()).hexdigest()


class SplitDistributor:
    """``_resample.Distributor`` running ``distributed.ranges`` in this process: Ray's split without Ray."""

    def __init__(self, parts: int) -> None:
        self.parts = parts

    def count(self, count_block: Callable[[np.ndarray], int], design: _resample.Design) -> int:
        """Ranges of ``distributed.ranges`` counted one by one and summed, as the Ray driver sums its tasks."""
        bounds = distributed.ranges(design.permutations, self.parts, _resample.LANES)
        return sum(_resample.count_range(count_block, design, a, b) for a, b in bounds)

    def resamples(self, kernel: Callable[..., np.ndarray], x: np.ndarray, ref: np.ndarray, indices: np.ndarray):
        """The kernel per range of resamples, stacked in order, as the Ray driver stacks its tasks."""
        bounds = distributed.ranges(indices.shape[1], self.parts)
        return np.concatenate([kernel(x, ref, np.ascontiguousarray(indices[:, a:b])) for a, b in bounds], axis=0)


def results() -> dict[str, str]:
    """Name → bytes of every result below; sizes span several parallel tasks on every kernel."""
    rng = np.random.default_rng(29)
    out: dict[str, str] = {}
    x = rng.normal(size=(700, 24)) + 0.3
    for metric in METRICS:
        for backend in BACKENDS:
            out[f"pdist/{metric}/{backend}"] = _bytes(stats_core.pdist(x, metric, backend=backend))
            out[f"pdist6/{metric}/{backend}"] = _bytes(stats_core.pdist(x[:300, :6], metric, backend=backend))
    # Kendall: one long pair with ties (above the native kernel's parallel sort length) and a batch of rows
    long_x, long_y = rng.integers(0, 500, size=70_000), rng.integers(0, 500, size=70_000) + 0.5 * rng.random(70_000)
    rows_x, rows_y = rng.normal(size=(64, 400)), rng.integers(0, 9, size=(64, 400)).astype(float)
    for backend in BACKENDS:
        out[f"kendall/long/{backend}"] = _bytes(stats_core.kendall_tau(long_x, long_y, backend=backend))
        out[f"kendall/batch/{backend}"] = _bytes(stats_core.kendall_tau(rows_x, rows_y, backend=backend))
    # bootstrap tau intervals: 2 groups × 20 countries × 6 dims × 15 units
    samples = rng.normal(size=(2, 20, 6, 15)) + np.arange(20)[None, :, None, None] * 0.05
    reference = rng.normal(size=(2, 20, 6))
    for backend in ("native", "numba"):
        for method in ("percentile", "bca"):
            res = stats_core.bootstrap_kendall_tau(samples, reference, 499, method=method, seed=7, backend=backend)
            out[f"bootstrap/{method}/{backend}"] = _bytes(res)
    # cluster measures: 5 uneven clusters of 900 points (three draws: a last-bit difference in the group sums need
    # not reach every silhouette), condensed distances
    clusterings = []
    for draw in range(3):
        labels = rng.integers(0, 5, size=900)
        points = rng.normal(size=(900, 24)) + labels[:, None] * (0.2 + 0.2 * draw)
        clusterings.append((labels, points, stats_core.pdist(points, backend="native")))
    human, model = rng.normal(size=(30, 6)) * 10, rng.normal(size=(30, 6)) * 8
    set_a, set_b = human + rng.normal(size=(30, 6)), human + rng.normal(size=(30, 6)) + 0.5
    for backend in BACKENDS:
        for draw, (labels, points, distances) in enumerate(clusterings):
            out[f"silhouette/{draw}/{backend}"] = _bytes(stats_core.silhouette(distances, labels, backend=backend))
            out[f"davies_bouldin/{draw}/{backend}"] = _bytes(stats_core.davies_bouldin(points, labels, backend=backend))
        out[f"ss_h/{backend}"] = _bytes(stats_core.ss_h(set_a, set_b, human, backend=backend))
    out["mcd"] = _bytes(stats_core.mcd(model, human))
    # ss_h_test and the bootstrap through distributed's range split, as many ranges as threads
    nations = np.tile(np.arange(30), 3)
    pts_a = human[nations] + rng.normal(size=(90, 6))
    pts_b = human[nations] + rng.normal(size=(90, 6)) + 0.2
    token = _resample.DISTRIBUTOR.set(SplitDistributor(int(os.environ["RAYON_NUM_THREADS"])))
    try:
        for backend in ("native", "numba"):
            test = stats_core.ss_h_test(pts_a, nations, pts_b, nations, human, 199, seed=3, backend=backend)
            out[f"distributed/ss_h_test/{backend}"] = _bytes(test)
            boot = stats_core.bootstrap_kendall_tau(samples, reference, 199, method="bca", seed=5, backend=backend)
            out[f"distributed/bootstrap/{backend}"] = _bytes(boot)
    finally:
        _resample.DISTRIBUTOR.reset(token)
    return out


if __name__ == "__main__":
    import numba

    threads = {"rayon": os.environ.get("RAYON_NUM_THREADS"), "numba": numba.get_num_threads()}
    json.dump({"threads": threads, "results": results()}, sys.stdout)
