"""Batched Kendall tau-b at n = 4 and the bootstrap CI, against scipy.stats.kendalltau / scipy.stats.bootstrap.

Run: python -m benches.stats_kendall. Results are checked equal to scipy's before timing.
"""

from __future__ import annotations

import numpy as np
import scipy.stats

import stats_core
from benches.stats_timing import load, measure

ROWS = 200_000


def kendall() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(0, 5, size=(ROWS, 4)).astype(float)
    y = rng.integers(0, 5, size=(ROWS, 4)).astype(float)
    ours = stats_core.kendall_tau(x, y)
    for r in range(200):
        expected = scipy.stats.kendalltau(x[r], y[r]).statistic
        assert (np.isnan(expected) and np.isnan(ours[r])) or abs(ours[r] - expected) < 1e-12
    t_ours, _, _ = measure(lambda: stats_core.kendall_tau(x, y))
    calls = 2000
    t_scipy, _, _ = measure(lambda: [scipy.stats.kendalltau(x[r], y[r]) for r in range(calls)], repeat=2)
    per_ours, per_scipy = t_ours / ROWS, t_scipy / calls
    print(
        f"| kendall tau-b, n = 4, {ROWS} rows batched | {per_ours * 1e9:.0f} ns/tau | {per_scipy * 1e6:.0f} us/tau | {per_scipy / per_ours:.0f}x |"
    )


def bootstrap() -> None:
    rng = np.random.default_rng(2)
    samples = rng.normal(size=(4, 6, 10)) + np.arange(4)[:, None, None] * 0.3  # continuous: no undefined taus
    reference = rng.normal(size=(4, 6))

    def statistic(*countries, axis=-1):
        # scipy hands over (dims, [resamples,] units) per country: one kendalltau call per dim and resample
        means = np.stack([c.mean(axis=axis) for c in countries], axis=-1)
        out = np.empty(means.shape[:-1])
        for idx in np.ndindex(out.shape):
            out[idx] = scipy.stats.kendalltau(means[idx], reference[:, idx[0]]).statistic
        return out

    data = tuple(samples[c] for c in range(4))
    t_scipy, _, theirs = measure(
        lambda: scipy.stats.bootstrap(
            data,
            statistic,
            n_resamples=9999,
            axis=-1,
            vectorized=True,
            method="percentile",
            rng=np.random.default_rng(3),
        ),
        repeat=1,
    )
    t_ours, _, ours = measure(lambda: stats_core.bootstrap_kendall_tau(samples, reference, 9999, seed=3))
    np.testing.assert_allclose(ours.confidence_interval.low, theirs.confidence_interval.low, atol=1e-12)
    np.testing.assert_allclose(ours.confidence_interval.high, theirs.confidence_interval.high, atol=1e-12)
    print(
        f"| bootstrap CI, 9999 resamples, 6 dims x 4 countries x 10 units | {t_ours * 1e3:.1f} ms | {t_scipy:.1f} s | {t_scipy / t_ours:.0f}x |"
    )


def main() -> None:
    print(f"Kendall tau and bootstrap; {load()}")
    print("| task | stats_core | scipy | ratio |")
    print("|---|---|---|---|")
    kendall()
    bootstrap()


if __name__ == "__main__":
    main()
