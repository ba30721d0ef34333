"""stats_core.kendall_tau on long vectors: Knight's O(n log n) counts against scipy and a brute-force count.

Every backend computes tau-b from the same three integer counts with the same float operations, so the
backends agree bit for bit whichever counting method (pairwise up to PAIRWISE_MAX, Knight's above) ran.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import stats_core
from stats_core import _numba_kendall, _reference

BACKENDS = stats_core.available()
PAIRWISE_MAX = _reference.PAIRWISE_MAX


def brute_force_tau(x: np.ndarray, y: np.ndarray) -> float:
    """Tau-b from the integer counts of every pair (numpy signs, rows in blocks), in the kernels' float operations."""
    score = not_tied_x = not_tied_y = 0
    for lo in range(0, len(x), 256):
        sx = np.sign(x[lo : lo + 256, None] - x[None, :])
        sy = np.sign(y[lo : lo + 256, None] - y[None, :])
        later = np.arange(len(x))[None, :] > np.arange(lo, min(lo + 256, len(x)))[:, None]
        score += int((sx * sy)[later].sum())
        not_tied_x += int((sx != 0)[later].sum())
        not_tied_y += int((sy != 0)[later].sum())
    denom = np.sqrt(float(not_tied_x) * float(not_tied_y))
    return float("nan") if denom == 0.0 else min(1.0, max(-1.0, score / denom))


def pair(n: int, ties: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Correlated x, y of length n: continuous ('none'), few levels ('many': answers on a 1–5 scale), or a mix."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    y = 0.4 * x + rng.normal(size=n)
    if ties == "many":
        x, y = np.clip(np.round(x + 3), 1, 5), np.clip(np.round(y + 3), 1, 5)
    elif ties == "some":
        x = np.round(x * 20) / 20  # x ties in runs, y continuous but with repeated values
        y[: n // 3] = y[n // 3 : 2 * (n // 3)]
    return x, y


@pytest.mark.parametrize("ties", ["none", "some", "many"])
@pytest.mark.parametrize("n", [PAIRWISE_MAX + 1, 1_000, 10_000, 100_000])
def test_long_vectors_match_scipy_on_every_backend(n, ties):
    x, y = pair(n, ties, seed=n)
    expected = scipy.stats.kendalltau(x, y).statistic
    got = [stats_core.kendall_tau(x, y, backend=b) for b in BACKENDS]
    assert len(set(got)) == 1, dict(zip(BACKENDS, got))  # bit for bit
    # scipy divides by two square roots, the kernels by one of the product: a few ulps apart at most
    assert abs(got[0] - expected) <= 4e-16, (got[0], expected)
    if n <= 1_000:
        assert got[0] == brute_force_tau(x, y)


@pytest.mark.parametrize("n", [PAIRWISE_MAX - 1, PAIRWISE_MAX, PAIRWISE_MAX + 1, 3 * PAIRWISE_MAX])
def test_both_counting_methods_give_the_brute_force_value_at_the_switch(n):
    x, y = pair(n, "many", seed=7)
    x[::5], y[1::7] = -0.0, 0.0  # −0.0 ties with 0.0 in every method
    x[: n // 4] = 0.0
    want = brute_force_tau(x, y)
    assert _numba_kendall.tau_b(x, y) == want
    for backend in BACKENDS:
        assert stats_core.kendall_tau(x, y, backend=backend) == want, backend


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(PAIRWISE_MAX - 3, 3 * PAIRWISE_MAX),
    levels=st.sampled_from([2, 3, 7, 1_000_000]),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1.0, 1e-300, 1e300]),
)
def test_knight_counts_equal_brute_force_counts(n, levels, seed, scale):
    rng = np.random.default_rng(seed)
    x = (rng.integers(0, levels, n) - levels // 2) * scale
    y = (rng.integers(0, levels, n) - levels // 2) * scale
    want = brute_force_tau(x, y)
    got = [stats_core.kendall_tau(x, y, backend=b) for b in BACKENDS]
    assert all(g == want or (np.isnan(g) and np.isnan(want)) for g in got), (got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_constant_side_is_nan_and_rows_keep_their_shape(backend):
    n = 4 * PAIRWISE_MAX
    x, y = pair(n, "some", seed=3)
    assert np.isnan(stats_core.kendall_tau(np.full(n, 2.5), y, backend=backend))
    assert stats_core.kendall_tau(x, x, backend=backend) == 1.0
    assert stats_core.kendall_tau(x, -x, backend=backend) == -1.0
    rows = np.stack([x, -x, y, np.zeros(n)]).reshape(2, 2, n)
    other = np.stack([y, y, x, y]).reshape(2, 2, n)
    got = stats_core.kendall_tau(rows, other, backend=backend)
    assert got.shape == (2, 2)
    want = [scipy.stats.kendalltau(a, b).statistic for a, b in zip(rows.reshape(4, n), other.reshape(4, n))]
    np.testing.assert_allclose(got.ravel(), want, rtol=0, atol=4e-16)
    assert np.isnan(got[1, 1])
