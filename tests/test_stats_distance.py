"""pdist / squareform against scipy.spatial.distance, on every backend, plus validation of distance inputs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as ssd
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stats_core
from stats_core.distance import METRICS
from stats_core.errors import InvalidInputError

BACKENDS = ["native", "numba", "numpy"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_worked_distances(backend):
    x = [[1.0, 2.0], [4.0, 6.0], [1.0, 2.0]]
    assert stats_core.pdist(x, "euclidean", backend=backend).tolist() == [5.0, 0.0, 5.0]
    assert stats_core.pdist(x, "cityblock", backend=backend).tolist() == [7.0, 0.0, 7.0]
    assert stats_core.pdist(x, "chebyshev", backend=backend).tolist() == [4.0, 0.0, 4.0]
    assert stats_core.pdist(x, "braycurtis", backend=backend) == pytest.approx([7 / 13, 0.0, 7 / 13])


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=2, max_side=30),
        elements=st.integers(0, 5).map(float),
    ),
    metric=st.sampled_from(METRICS),
    backend=st.sampled_from(BACKENDS),
)
def test_matches_scipy_on_integer_data_with_ties(x, metric, backend):
    # Zero rows make cosine/braycurtis 0/0: scipy's NaN must be reproduced, so compare with equal_nan.
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = ssd.pdist(x, metric)
    got = stats_core.pdist(x, metric, backend=backend)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("metric", METRICS)
def test_matches_scipy_float32_and_float64(backend, metric):
    rng = np.random.default_rng(3)
    x64 = rng.normal(size=(67, 24)) + 3.0
    for x in (x64, x64.astype(np.float32)):
        np.testing.assert_allclose(
            stats_core.pdist(x, metric, backend=backend), ssd.pdist(x, metric), rtol=1e-12, atol=1e-14
        )


def test_backends_agree_bitwise_on_euclidean():
    x = np.random.default_rng(5).normal(size=(50, 24))
    native = stats_core.pdist(x, backend="native")
    np.testing.assert_array_equal(native, stats_core.pdist(x, backend="numba"))
    np.testing.assert_allclose(native, stats_core.pdist(x, backend="numpy"), rtol=1e-14)


def test_square_form_is_symmetric_with_zero_diagonal_and_round_trips():
    x = np.random.default_rng(2).normal(size=(40, 6))
    sq = stats_core.pdist_square(x, "cityblock")
    np.testing.assert_array_equal(sq, sq.T)
    assert np.all(np.diagonal(sq) == 0)
    np.testing.assert_array_equal(sq, ssd.squareform(ssd.pdist(x, "cityblock")))
    np.testing.assert_array_equal(stats_core.squareform(sq), stats_core.pdist(x, "cityblock"))


def test_unknown_metric_and_bad_input_name_the_argument():
    with pytest.raises(InvalidInputError, match=r"^metric: 'minkowski' is not one of"):
        stats_core.pdist([[1.0], [2.0]], "minkowski")
    with pytest.raises(InvalidInputError, match=r"^X: expected a 2-D"):
        stats_core.pdist(np.ones((2, 2, 2)))
    with pytest.raises(InvalidInputError, match=r"^X: contains a non-finite value at index \(1, 0\)"):
        stats_core.pdist([[1.0], [np.nan]])


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.array([[0.0, 1.0], [2.0, 0.0]]), r"^distances: not symmetric"),
        (np.array([[1.0, 1.0], [1.0, 0.0]]), r"^distances: diagonal must be zero"),
        (np.array([[0.0, -1.0], [-1.0, 0.0]]), r"^distances: contains a negative distance"),
        (np.array([1.0, np.nan, 2.0]), r"^distances: contains a non-finite value"),
        (np.array([1.0, 2.0]), r"^distances: condensed length 2 is not n\(n-1\)/2"),
        (np.zeros((2, 3)), r"^distances: expected a condensed vector or a square"),
    ],
)
def test_invalid_distance_matrices_are_rejected_by_name(matrix, message):
    with pytest.raises(InvalidInputError, match=message):
        stats_core.permanova(matrix, [0, 1, 1][: 2 if matrix.ndim == 2 else 3], permutations=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cosine_is_within_1e_15_of_scipy(backend):
    # scipy's formula 1 − u·v / (‖u‖‖v‖), the norms once per row; scipy's order of summation differs from the
    # features' order the native and numba kernels share, so agreement is to rounding: ≤ 1e-15 absolute
    rng = np.random.default_rng(29)
    x = np.vstack([rng.normal(size=(150, 24)) + 0.5, np.clip(np.rint(3 + rng.normal(size=(50, 24))), 1, 5)])
    x[7] = 3.0 * x[3]  # parallel rows: distance 0 up to rounding
    got, expected = stats_core.pdist(x, "cosine", backend=backend), ssd.pdist(x, "cosine")
    assert np.abs(got - expected).max() <= 1e-15
    assert got[(np.triu_indices(200, 1)[0] == 3) & (np.triu_indices(200, 1)[1] == 7)][0] <= 1e-15
    if backend == "numba":
        np.testing.assert_array_equal(got, stats_core.pdist(x, "cosine", backend="native"))
