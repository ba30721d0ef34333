"""PERMANOVA on Ray vs in one process, on this machine: what the Ray layer costs (same result, bit for bit).

    python -m benches.ray_permanova [--cpus 2] [--permutations 99999]

Starts a local Ray instance with ``--cpus`` CPUs (workers with one rayon thread each, as docs/distributed.md
advises) and times ``stats_core.permanova`` inside ``stats_core.distributed.on_ray`` against the plain call,
which uses every core through rayon. On one machine the two use the same cores, so the ratio measures the
overhead of tasks and the object store, not a speed-up; across nodes each node adds its cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import stats_core
from stats_core import distributed


def _median_time(call, repeats: int = 3) -> tuple[float, object]:
    """Median wall time of ``call()`` over ``repeats`` runs (seconds) and its last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    """Print a Markdown table: design, local time, Ray time per blocks_per_worker, ratio Ray / local."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--permutations", type=int, default=99_999)
    args = parser.parse_args()
    import ray

    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    distributed.ray_init(
        ray,
        "local",
        num_cpus=args.cpus,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"RAYON_NUM_THREADS": "1"}},
    )
    rng = np.random.default_rng(0)
    print(f"{args.permutations} permutations, {args.cpus} Ray CPUs, load {os.getloadavg()[0]:.1f}")
    print("| design | screen | local s | Ray s (1 / 4 blocks per worker) | ratio Ray / local |")
    print("|---|---|---|---|---|")
    for n, dims, screen in [(1000, 6, "factored"), (1000, 60, "quantized")]:
        points = rng.normal(size=(n, dims))
        points[: n // 4] += 0.05
        d, labels = stats_core.pdist(points), np.repeat(np.arange(4), n // 4)
        local_s, local = _median_time(lambda: stats_core.permanova(d, labels, args.permutations, seed=1))
        ray_s = []
        for per_worker in (1, 4):
            with distributed.on_ray(blocks_per_worker=per_worker):
                stats_core.permanova(d, labels, 99, seed=1)  # warm the worker processes
                seconds, remote = _median_time(lambda: stats_core.permanova(d, labels, args.permutations, seed=1))
            assert remote.pvalue == local.pvalue, (remote.pvalue, local.pvalue)
            ray_s.append(seconds)
        print(
            f"| n = {n}, {dims} dims, 4 groups | {screen} | {local_s:.2f} | {ray_s[0]:.2f} / {ray_s[1]:.2f} "
            f"| {ray_s[0] / local_s:.2f} / {ray_s[1] / local_s:.2f} |"
        )
    ray.shutdown()


if __name__ == "__main__":
    main()
