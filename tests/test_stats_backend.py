"""Backend selection and the Kendall tau-b chain through every backend, against scipy."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

import stats_core
from stats_core.errors import InvalidInputError

BACKENDS = ["native", "numba", "numpy"]


def test_native_backend_is_live_after_build():
    assert stats_core.backend() == "native"
    assert stats_core.available() == ("native", "numba", "numpy")


@pytest.mark.parametrize("forced", BACKENDS)
def test_environment_variable_forces_backend(forced):
    env = dict(os.environ, STATS_CORE_BACKEND=forced)
    out = subprocess.run(
        [sys.executable, "-c", "import stats_core; print(stats_core.backend())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == forced


def test_unknown_backend_is_rejected_by_name():
    with pytest.raises(stats_core.InvalidInputError, match="backend: 'fortran'"):
        stats_core.kendall_tau([1, 2], [1, 2], backend="fortran")


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_worked_tau_b_with_ties(backend):
    # 6 pairs: one tied in x only, one tied in y only, four concordant → 4 / sqrt(5 * 5).
    assert stats_core.kendall_tau([1, 1, 2, 3], [1, 2, 2, 3], backend=backend) == pytest.approx(0.8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_constant_side_gives_nan(backend):
    assert np.isnan(stats_core.kendall_tau([2, 2, 2, 2], [1, 2, 3, 4], backend=backend))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=30),
    backend=st.sampled_from(BACKENDS),
)
def test_tau_b_matches_scipy_with_ties(data, backend):
    x, y = (np.array(v, dtype=float) for v in zip(*data))
    expected = scipy.stats.kendalltau(x, y).statistic
    got = stats_core.kendall_tau(x, y, backend=backend)
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_batched_rows_match_one_by_one():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 5, size=(3, 6, 4)).astype(float)
    y = rng.integers(0, 5, size=(3, 6, 4)).astype(float)
    got = stats_core.kendall_tau(x, y)
    assert got.shape == (3, 6)
    for idx in np.ndindex(3, 6):
        expected = scipy.stats.kendalltau(x[idx], y[idx]).statistic
        np.testing.assert_equal(got[idx], expected) if np.isnan(expected) else None
        if not np.isnan(expected):
            assert got[idx] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("bad", [[1.0, np.nan], [1.0, np.inf]])
def test_non_finite_input_names_the_argument(bad):
    with pytest.raises(InvalidInputError, match=r"^x: contains a non-finite value at index \(1,\)"):
        stats_core.kendall_tau(bad, [1.0, 2.0])


def test_shape_mismatch_names_the_argument():
    with pytest.raises(InvalidInputError, match=r"^y: shape \(3,\) differs"):
        stats_core.kendall_tau([1, 2], [1, 2, 3])
