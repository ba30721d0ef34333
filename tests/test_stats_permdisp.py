"""PERMDISP: distances to centroid and F against scikit-bio, a hand-worked case, parity and errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as ssd
import scipy.stats
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from skbio.stats.distance import DistanceMatrix
from skbio.stats.distance import permdisp as skbio_permdisp

import stats_core
from _stats_support import grouped_points
from stats_core.errors import InvalidInputError

BACKENDS = ["native", "numba", "numpy"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_worked_distances_to_centroid(backend):
    # Group a: points 0 and 2 (centroid 1, distances 1, 1); group b: 10, 11, 15 (centroid 12: 2, 1, 3).
    # ANOVA on z = [1, 1, 2, 1, 3]: means 1 and 2, grand 1.6; SSB = 2(0.36) + 3(0.16) = 1.2;
    # SSW = 0 + (0 + 1 + 1) = 2; F = (1.2 / 1) / (2 / 3) = 1.8.
    d = ssd.pdist(np.array([[0.0], [2.0], [10.0], [11.0], [15.0]]))
    result = stats_core.permdisp(d, list("aabbb"), permutations=0, backend=backend)
    np.testing.assert_allclose(result.distances_to_centroid, [1, 1, 2, 1, 3], atol=1e-12)
    assert result.statistic == pytest.approx(1.8, rel=1e-12)


# skbio's PCoA keeps only positive eigenvalues, while vegan (and we) subtract the negative axes too, so the
# two agree only on Euclidean distances — and only of rank ≤ 10, since skbio's permdisp keeps its first
# `dimensions=10` principal coordinates (next test); the non-Euclidean case is checked against vegan's golden values.
@settings(max_examples=15, deadline=None)
@given(
    design=grouped_points(group_sizes=(2, 10), groups=(2, 4), features=(1, 5), values=(1, 5)),
    square=st.booleans(),
    backend=st.sampled_from(BACKENDS),
)
def test_statistic_matches_skbio_centroid_on_euclidean_distances(design, square, backend):
    x, labels = design
    d = ssd.pdist(x)
    if not d.any():
        return
    try:
        with np.errstate(all="ignore"):
            expected = skbio_permdisp(DistanceMatrix(ssd.squareform(d)), labels, test="centroid", permutations=0)
    except ValueError as exc:  # skbio's PCoA refuses some rank-deficient tiny designs
        assume("cannot extend distance matrix size" not in str(exc))
        raise
    got = stats_core.permdisp(ssd.squareform(d) if square else d, labels, permutations=0, backend=backend)
    if np.isfinite(expected["test statistic"]):
        assert got.statistic == pytest.approx(expected["test statistic"], rel=1e-7, abs=1e-9)


def _exact_permdisp_f(x: np.ndarray, labels: np.ndarray) -> float:
    """One-way ANOVA F of the Euclidean distances of points to their group's centroid, from the coordinates."""
    z = np.array([np.linalg.norm(x[i] - x[labels == labels[i]].mean(axis=0)) for i in range(len(x))])
    return scipy.stats.f_oneway(*[z[labels == g] for g in np.unique(labels)]).statistic


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # skbio's PCoA warns about its negligible eigenvalues
def test_permdisp_is_exact_on_24_dimensional_points_where_skbio_truncates():
    # hofcat's points are 24-d (item answers): Gower's matrix has rank 24, above the 10 principal coordinates
    # skbio 0.7's permdisp keeps by default (also with method="eigh"). Ours equals the F computed from the
    # coordinates; skbio's equals it only with dimensions=n. docs/stats_core.md quotes the size of the gap.
    errors = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        n, g = 24 + 12 * seed, 2 + seed % 3
        labels = np.arange(n) % g
        x = rng.normal(size=(n, 24)) * (1 + 0.3 * labels[:, None])  # groups differ in spread
        if seed % 2:
            x = np.clip(np.rint(3 + x), 1, 5)  # answers on the 1–5 scale
        exact = _exact_permdisp_f(x, labels)
        for backend in BACKENDS:
            assert stats_core.permdisp(ssd.pdist(x), labels, 0, backend=backend).statistic == pytest.approx(
                exact, rel=1e-12
            )
        dm = DistanceMatrix(ssd.squareform(ssd.pdist(x)))
        full = skbio_permdisp(dm, labels, test="centroid", permutations=0, dimensions=n)["test statistic"]
        assert full == pytest.approx(exact, rel=1e-9)
        default = skbio_permdisp(dm, labels, test="centroid", permutations=0)["test statistic"]
        errors.append(abs(default - exact) / exact)
    assert max(errors) > 0.05, errors


def test_same_seed_same_result_on_every_backend():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(80, 4))
    labels = np.arange(80) % 4
    x[labels == 1] *= 1.6
    d = ssd.pdist(x)
    results = [stats_core.permdisp(d, labels, 499, seed=7, backend=b) for b in BACKENDS]
    assert len({r.pvalue for r in results}) == 1
    for r in results[1:]:
        np.testing.assert_allclose(r.distances_to_centroid, results[0].distances_to_centroid, rtol=1e-12)
    assert results[0].pvalue < 0.05


def test_a_group_of_one_is_rejected():
    d = ssd.pdist(np.arange(5.0)[:, None])
    with pytest.raises(InvalidInputError, match=r"^grouping: group 'b' has 1 member\(s\); at least 2 required"):
        stats_core.permdisp(d, list("aaaab"))
