"""silhouette and davies_bouldin against scikit-learn; SS_h and MCD against the seed paper's definitions and tables."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as ssd
import sklearn.metrics
from hypothesis import given, settings
from hypothesis import strategies as st

import stats_core
from _stats_support import grouped_points
from stats_core.errors import InvalidInputError

BACKENDS = ["native", "numba", "numpy"]

# Table 3 of cultural-value-differences.txt: PDI IDV MAS UAI LTO IVR for the nine nations.
HUMAN = np.array(
    [
        [40, 91, 62, 46, 26, 68],
        [80, 20, 66, 30, 87, 24],
        [68, 71, 43, 86, 63, 48],
        [35, 67, 66, 65, 83, 40],
        [69, 38, 49, 76, 44, 59],
        [77, 48, 56, 40, 51, 26],
        [74, 20, 48, 8, 72, 46],
        [54, 46, 95, 92, 88, 42],
        [49, 65, 63, 49, 34, 63],
    ],
    dtype=float,
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(design=grouped_points(group_sizes=(1, 9)), square=st.booleans(), backend=st.sampled_from(BACKENDS))
def test_silhouette_and_davies_bouldin_match_sklearn(design, square, backend):
    x, labels = design  # ties and duplicate points; fewer clusters than points
    d = ssd.pdist(x)
    dist = ssd.squareform(d) if square else d
    expected = sklearn.metrics.silhouette_score(ssd.squareform(d), labels, metric="precomputed")
    assert stats_core.silhouette(dist, labels, backend=backend) == pytest.approx(expected, abs=1e-12)
    with np.errstate(all="ignore"):
        expected_db = sklearn.metrics.davies_bouldin_score(x, labels)
    assert stats_core.davies_bouldin(x, labels, backend=backend) == pytest.approx(expected_db, rel=1e-12)


@pytest.mark.parametrize(("n", "groups"), [(3, 2), (97, 4), pytest.param(1201, 9, marks=pytest.mark.slow)])
def test_group_row_sums_are_the_same_bits_on_native_and_numba(n, groups):
    # numba runs the native kernel's fixed row ranges and lanes in its order (the silhouette's and PERMDISP's
    # sums), so the two agree bit for bit, not just to rounding; condensed and square, plain and squared.
    from stats_core import _native, _numba

    rng = np.random.default_rng(n)
    codes = rng.integers(0, groups, size=n).astype(np.int32)
    condensed = ssd.pdist(rng.normal(size=(n, 5)))
    for distances in (condensed, ssd.squareform(condensed)):
        for squared in (False, True):
            native, native_ok = _native.group_row_sums(distances, codes, groups, squared)
            numba_sums, numba_ok = _numba.group_row_sums(distances, codes, groups, squared)
            np.testing.assert_array_equal(native, numba_sums)
            assert native_ok and numba_ok
            np.testing.assert_allclose(native.sum(axis=1), ssd.squareform(condensed ** (1 + squared)).sum(axis=1))


def test_silhouette_hand_worked():
    # a = {0, 1}, b = {4}: point 0: a=1, b=4 → 3/4; point 1: a=1, b=3 → 2/3; point 4: singleton → 0.
    d = ssd.pdist(np.array([[0.0], [1.0], [4.0]]))
    assert stats_core.silhouette(d, [0, 0, 1]) == pytest.approx((0.75 + 2 / 3 + 0) / 3)


def test_two_set_davies_bouldin_is_the_papers_eq_12():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(54, 6)), rng.normal(size=(54, 6)) + 1.0
    spread = lambda s: np.linalg.norm(s - s.mean(axis=0), axis=1).mean()  # noqa: E731
    eq12 = (spread(a) + spread(b)) / np.linalg.norm(a.mean(axis=0) - b.mean(axis=0))
    assert stats_core.davies_bouldin(np.vstack([a, b]), [0] * 54 + [1] * 54) == pytest.approx(eq12, rel=1e-12)


def test_mcd_reproduces_table_6_human_row():
    # Table 6, "Human Results": σ = 16.613 23.904 15.301 27.491 23.337 15.336, Distance 20.330, MCD 1.0
    # (printed to 3 decimals, some truncated: 23.9049 → 23.904). The population std (ddof=0) would give
    # 15.663 … and D = 19.168, so the paper used the sample std.
    result = stats_core.mcd(HUMAN, HUMAN)
    np.testing.assert_allclose(result.human_sigma, [16.613, 23.904, 15.301, 27.491, 23.337, 15.336], atol=1e-3)
    assert result.human_disparity == pytest.approx(20.330, abs=1e-3)
    assert result.statistic == 1.0


def test_mcd_scales_with_the_model_spread():
    model = HUMAN.mean(axis=0) + 0.25 * (HUMAN - HUMAN.mean(axis=0))
    assert stats_core.mcd(model, HUMAN).statistic == pytest.approx(0.25, rel=1e-12)


def test_ss_h_hand_worked_and_by_definition():
    # Two nations on a line. human: 0 and 10 → a_h = 10 for both. set_a: 0, 2 (a = 2); set_b: 5, 7 (a = 2).
    # b for set_a's nations: (5 + 7)/2 = 6 and (3 + 5)/2 = 4; for set_b's: (5 + 3)/2 = 4 and (7 + 5)/2 = 6.
    # SS_h = (1/4)[(6-2) + (4-2) + (4-2) + (6-2)]/10 = 0.3.
    human = np.array([[0.0], [10.0]])
    assert stats_core.ss_h([[0.0], [2.0]], [[5.0], [7.0]], human) == pytest.approx(0.3)
    # Identical sets: b counts the nation's own twin at distance 0 among N, a divides by N − 1, so
    # b = a (N − 1)/N; with human = the set, a = a_h and SS_h = −1/N exactly.
    assert stats_core.ss_h(HUMAN, HUMAN, HUMAN) == pytest.approx(-1 / 9, rel=1e-12)


def test_ss_h_exceeds_one_when_sets_are_further_apart_than_nations():
    shifted = HUMAN + np.array([200.0, 0, 0, 0, 0, 0])
    assert stats_core.ss_h(HUMAN, shifted, HUMAN) > 1.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats_core.silhouette(ssd.pdist(np.eye(3)), [0, 1, 2]), r"^labels: needs 2 <= clusters <= n - 1"),
        (lambda: stats_core.davies_bouldin(np.eye(3), [0, 0]), r"^labels: expected 3 labels"),
        (lambda: stats_core.ss_h(HUMAN, HUMAN[:5], HUMAN), r"^set_b: expected shape \(9, 6\)"),
        (lambda: stats_core.ss_h(HUMAN, HUMAN, np.zeros((9, 6))), r"^human: nation 0 is at distance 0"),
        (lambda: stats_core.mcd(HUMAN, np.ones((9, 6))), r"^human: every dimension is constant"),
        (lambda: stats_core.mcd(HUMAN[:, :3], HUMAN), r"^human: has 6 dimensions but model has 3"),
    ],
)
def test_invalid_arguments_are_named(call, message):
    with pytest.raises(InvalidInputError, match=message):
        call()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (-1.0, r"^distances: contains a negative distance \(.*-1\.0\)+ at flat index 4$"),
        (np.nan, r"^distances: contains a non-finite value \(.*nan\)+ at flat index 4$"),
        (np.inf, r"^distances: contains a non-finite value \(.*inf\)+ at flat index 4$"),
    ],
)
def test_silhouette_names_the_first_bad_distance(backend, bad, message):
    # The kernel checks values while summing; the error must still name the first bad entry exactly.
    d = ssd.pdist(np.arange(12.0).reshape(6, 2))
    d[4] = bad
    d[9] = -2.0
    with pytest.raises(InvalidInputError, match=message):
        stats_core.silhouette(d, [0, 0, 0, 1, 1, 1], backend=backend)
