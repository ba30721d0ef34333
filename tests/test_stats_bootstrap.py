"""bootstrap_kendall_tau against scipy.stats.bootstrap (same seed → same resamples), parity, NaN policy, errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import stats_core
from stats_core.errors import InvalidInputError

BACKENDS = ["native", "numba", "numpy"]


def _scipy_reference(samples: np.ndarray, reference: np.ndarray, n_resamples: int, method: str, seed: int):
    """scipy.stats.bootstrap with one sample per country and scipy's own kendalltau as the statistic."""
    countries = samples.shape[-3]

    def statistic(*per_country, axis=-1):
        means = np.stack([s.mean(axis=axis) for s in per_country], axis=-1)  # (..., D, [B,] C)
        out = np.empty(means.shape[:-1])
        for idx in np.ndindex(out.shape):
            # idx = (group?, dim, [resample]); the reference column is (group?, :, dim)
            dim = idx[samples.ndim - 3]
            ref = reference[..., dim] if reference.ndim == 2 else reference[idx[0], :, dim]
            out[idx] = scipy.stats.kendalltau(means[idx], ref).statistic
        return out

    data = tuple(np.moveaxis(samples, -3, 0)[c] for c in range(countries))
    return scipy.stats.bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        method=method,
        axis=-1,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )


@pytest.mark.slow
@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_matches_scipy_bootstrap_exactly(method, backend):
    rng = np.random.default_rng(5)
    # Integer answers, shifted per country: ties in the means are frequent, and exact in any order.
    samples = rng.integers(1, 6, size=(4, 6, 10)).astype(float) * 7 + np.arange(4)[:, None, None] * 3
    reference = rng.normal(size=(4, 6))
    expected = _scipy_reference(samples, reference, 299, method, seed=11)
    got = stats_core.bootstrap_kendall_tau(samples, reference, 299, method=method, seed=11, backend=backend)
    np.testing.assert_allclose(got.bootstrap_distribution, expected.bootstrap_distribution, atol=1e-12)
    np.testing.assert_allclose(got.confidence_interval.low, expected.confidence_interval.low, atol=1e-12)
    np.testing.assert_allclose(got.confidence_interval.high, expected.confidence_interval.high, atol=1e-12)
    np.testing.assert_allclose(got.standard_error, expected.standard_error, atol=1e-12)
    np.testing.assert_allclose(
        got.statistic, [scipy.stats.kendalltau(samples[:, d].mean(axis=1), reference[:, d]).statistic for d in range(6)]
    )
    assert got.undefined.sum() == 0 and got.seed == 11


def test_leading_groups_axis_matches_scipy():
    rng = np.random.default_rng(9)
    samples = rng.normal(size=(3, 4, 2, 5))
    reference = rng.normal(size=(3, 4, 2))
    expected = _scipy_reference(samples, reference, 99, "percentile", seed=2)
    got = stats_core.bootstrap_kendall_tau(samples, reference, 99, seed=2)
    assert got.statistic.shape == (3, 2) and got.bootstrap_distribution.shape == (3, 2, 99)
    np.testing.assert_allclose(got.bootstrap_distribution, expected.bootstrap_distribution, atol=1e-12)
    np.testing.assert_allclose(got.confidence_interval.low, expected.confidence_interval.low, atol=1e-12)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 2), st.integers(2, 5), st.integers(1, 3), st.integers(2, 6)),
    seed=st.integers(0, 2**32),
    method=st.sampled_from(["percentile", "bca"]),
)
def test_backends_agree_and_tau_stays_in_range(shape, seed, method):
    rng = np.random.default_rng(seed)
    samples = rng.integers(1, 4, size=shape).astype(float)
    reference = rng.integers(0, 3, size=shape[1:3]).astype(float)
    results = [
        stats_core.bootstrap_kendall_tau(samples, reference, 200, method=method, seed=seed, backend=b) for b in BACKENDS
    ]
    for r in results[1:]:
        np.testing.assert_array_equal(r.bootstrap_distribution, results[0].bootstrap_distribution)
        np.testing.assert_array_equal(r.confidence_interval.low, results[0].confidence_interval.low)
        np.testing.assert_array_equal(r.confidence_interval.high, results[0].confidence_interval.high)
    dist = results[0].bootstrap_distribution
    assert np.all((dist[~np.isnan(dist)] >= -1) & (dist[~np.isnan(dist)] <= 1))
    assert np.array_equal(results[0].undefined, np.isnan(dist).sum(axis=-1))


def test_undefined_taus_are_counted_and_left_out():
    # Country means tie in every resample on dimension 1 (all answers equal): tau undefined there.
    rng = np.random.default_rng(0)
    samples = rng.integers(1, 6, size=(4, 2, 8)).astype(float)
    samples[:, 1, :] = 3.0
    reference = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]])
    result = stats_core.bootstrap_kendall_tau(samples, reference, 300, seed=1)
    assert np.isnan(result.statistic[1]) and result.undefined[1] == 300
    assert np.isnan(result.confidence_interval.low[1]) and np.isnan(result.standard_error[1])
    assert np.isfinite(result.confidence_interval.low[0]) and result.undefined[0] < 300


def test_keep_distribution_false_drops_it():
    samples = np.random.default_rng(1).normal(size=(3, 2, 4))
    result = stats_core.bootstrap_kendall_tau(samples, np.eye(3, 2), 50, seed=1, keep_distribution=False)
    assert result.bootstrap_distribution is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"samples": np.ones((3, 2))}, r"^samples: expected at least 3 dimension"),
        ({"samples": np.ones((1, 2, 4))}, r"^samples: needs >= 2 countries"),
        ({"reference": np.ones((4, 2))}, r"^reference: expected shape \(3, 2\)"),
        ({"confidence_level": 1.5}, r"^confidence_level: expected a number in \(0, 1\)"),
        ({"method": "basic"}, r"^method: 'basic' is not one of"),
        ({"n_resamples": 0}, r"^n_resamples: expected an integer >= 1"),
        ({"seed": "x"}, r"^seed: expected a non-negative integer"),
    ],
)
def test_invalid_arguments_are_named(kwargs, message):
    args = {"samples": np.ones((3, 2, 4)), "reference": np.ones((3, 2)), **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        stats_core.bootstrap_kendall_tau(**args)


def test_bootstrap_indices_are_scipys_draws_stratum_after_stratum():
    rng = np.random.default_rng(4)
    expected = [rng.integers(0, n, (50, n)) for n in (3, 7, 1)]
    got = stats_core.bootstrap_indices([3, 7, 1], 50, 4)
    assert len(got) == 3 and all(g.dtype == np.int64 for g in got)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)
    # a sequence seed is SeedSequence entropy: (seed, c) is a stream per c, and numpy zero-pads, so (4, 0) is 4
    for g, e in zip(stats_core.bootstrap_indices([3, 7, 1], 50, (4, 0)), expected, strict=True):
        np.testing.assert_array_equal(g, e)
    other = stats_core.bootstrap_indices([3, 7, 1], 50, (4, 1))
    assert not all(np.array_equal(g, e) for g, e in zip(other, expected, strict=True))
    ss = np.random.default_rng(np.random.SeedSequence([4, 1]))
    np.testing.assert_array_equal(other[0], ss.integers(0, 3, (50, 3)))


def test_bootstrap_kendall_tau_draws_with_bootstrap_indices():
    """Its distribution is the kernel applied to bootstrap_indices(sizes, B, seed): one random stream."""
    rng = np.random.default_rng(3)
    samples = rng.normal(size=(4, 2, 6))
    reference = rng.normal(size=(4, 2))
    got = stats_core.bootstrap_kendall_tau(samples, reference, 80, seed=21)
    draws = stats_core.bootstrap_indices([6] * 4, 80, 21)
    means = np.stack([samples[c][:, d].mean(axis=-1) for c, d in enumerate(draws)], axis=-1)  # (2, 80, 4)
    taus = np.array(
        [[scipy.stats.kendalltau(means[j, b], reference[:, j]).statistic for b in range(80)] for j in range(2)]
    )
    np.testing.assert_allclose(got.bootstrap_distribution, taus, atol=1e-12)


def test_percentile_interval_is_the_one_bootstrap_kendall_tau_reports():
    rng = np.random.default_rng(8)
    samples = rng.integers(1, 4, size=(4, 3, 6)).astype(float)
    samples[:, 2] = 2.0  # dimension 2: every resample undefined
    result = stats_core.bootstrap_kendall_tau(samples, rng.normal(size=(4, 3)), 400, confidence_level=0.9, seed=2)
    interval = stats_core.percentile_interval(result.bootstrap_distribution, 0.9)
    np.testing.assert_array_equal(interval.low, result.confidence_interval.low)
    np.testing.assert_array_equal(interval.high, result.confidence_interval.high)
    assert np.isnan(interval.low[2]) and np.isnan(interval.high[2])
    values = np.array([0.3, np.nan, -0.2, 1.0, 0.5])
    low, high = stats_core.percentile_interval(values, 0.5)
    assert low == pytest.approx(np.quantile(values[~np.isnan(values)], 0.25))
    assert high == pytest.approx(np.quantile(values[~np.isnan(values)], 0.75))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats_core.bootstrap_indices([3, 0], 10, 1), r"^sizes: expected an integer >= 1"),
        (lambda: stats_core.bootstrap_indices([3], 0, 1), r"^n_resamples: expected an integer >= 1"),
        (lambda: stats_core.bootstrap_indices([3], 10, -1), r"^seed: expected a non-negative integer"),
        (lambda: stats_core.bootstrap_indices([3], 10, (1, -2)), r"^seed: expected a non-negative integer"),
        (lambda: stats_core.bootstrap_indices([3], 10, ()), r"^seed: expected a non-negative integer"),
        (lambda: stats_core.bootstrap_indices([3], 10, "1"), r"^seed: expected a non-negative integer"),
        (lambda: stats_core.percentile_interval(np.ones(5), 1.0), r"^confidence_level: expected a number in"),
        (lambda: stats_core.percentile_interval(np.float64(1.0)), r"^distribution: expected resamples"),
    ],
)
def test_resampling_helpers_name_bad_arguments(call, message):
    with pytest.raises(InvalidInputError, match=message):
        call()
