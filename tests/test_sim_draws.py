"""The simulator's random streams: uniform, reproducible, and the latency distributions have their parameters."""

from __future__ import annotations

import statistics

import numpy as np
from scipy import stats

from runner.endpoints.sim import Latency, SimConfig
from runner.endpoints.sim.faults import latency_s
from runner.endpoints.sim.seeding import Draws


def test_draws_are_uniform_and_reproducible() -> None:
    values = [Draws(7, "stream", i).random() for i in range(4000)]  # first draw of many streams
    values += [d.random() for d in [Draws(7, "one")] for _ in range(4000)]  # many draws of one stream
    assert all(0.0 <= v < 1.0 for v in values)
    assert stats.kstest(values, "uniform").pvalue > 1e-3
    assert [Draws(1, "a").random() for _ in range(3)] == [Draws(1, "a").random() for _ in range(3)]
    first, second = Draws(1, "a"), Draws(1, "b")
    assert [first.random() for _ in range(20)] != [second.random() for _ in range(20)]
    normals = [d.gauss(2.0, 3.0) for d in [Draws(3)] for _ in range(5000)]
    assert abs(statistics.fmean(normals) - 2.0) < 0.2 and abs(statistics.stdev(normals) - 3.0) < 0.2


def test_latency_distributions_have_their_parameters() -> None:
    def sample(spec: str) -> np.ndarray:
        config = SimConfig(seed=2, latency=Latency.parse(spec))
        return np.array([latency_s(config, f"request-{i}", 0) * 1000.0 for i in range(4000)])

    assert np.all(sample("50") == 50.0) and np.all(sample("0") == 0.0)
    uniform = sample("uniform:20:80")
    assert uniform.min() >= 20 and uniform.max() < 80 and abs(uniform.mean() - 50) < 2
    exponential = sample("exponential:100")
    assert abs(exponential.mean() - 100) < 6 and stats.kstest(exponential / 100, "expon").pvalue > 1e-3
    lognormal = sample("lognormal:200:0.5")
    assert abs(np.median(lognormal) - 200) < 10 and abs(np.log(lognormal).std() - 0.5) < 0.03
    assert np.array_equal(sample("lognormal:200:0.5"), lognormal), "seeded: the same requests wait the same"
