"""PERMANOVA: a hand-worked F, scikit-bio on random designs, backend parity, invariances, memory, errors."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.spatial.distance as ssd
from hypothesis import given, settings
from hypothesis import strategies as st
from skbio.stats.distance import DistanceMatrix
from skbio.stats.distance import permanova as skbio_permanova

import stats_core
from _stats_support import grouped_points
from stats_core.errors import InvalidInputError

BACKENDS = ["native", "numba", "numpy"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_worked_pseudo_f(backend):
    # Points 0, 1, 3, 6 on a line, groups {0, 1} and {3, 6}.
    # SS_T = (1/4)(1 + 9 + 36 + 4 + 25 + 9) = 21; SS_W = (1/2)(1) + (1/2)(9) = 5; SS_A = 16;
    # F = (16 / 1) / (5 / 2) = 6.4.
    d = ssd.pdist(np.array([[0.0], [1.0], [3.0], [6.0]]))
    result = stats_core.permanova(d, ["a", "a", "b", "b"], permutations=0, backend=backend)
    assert result.statistic == pytest.approx(6.4, rel=1e-14)
    assert np.isnan(result.pvalue)
    assert (result.n, result.groups, result.group_sizes) == (4, ("a", "b"), (2, 2))


def designs():
    """Integer-valued points (so distances tie) in 2–5 groups of sizes 1..12, string labels."""
    return grouped_points().map(lambda design: (design[0], np.array([f"g{c}" for c in design[1]])))


def _monte_carlo_close(ours: float, theirs: float, permutations: int) -> bool:
    """Two permutation p-values from different generators agree within 4 binomial SEs (+ one step)."""
    p = min(max(theirs, 1.0 / (permutations + 1)), 1 - 1.0 / (permutations + 1))
    return abs(ours - theirs) <= 4 * np.sqrt(p * (1 - p) / permutations) + 1.0 / (permutations + 1)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(design=designs(), square=st.booleans(), backend=st.sampled_from(BACKENDS), seed=st.integers(0, 2**32))
def test_matches_skbio_statistic(design, square, backend, seed):
    x, labels = design
    d = ssd.pdist(x)
    if not d.any():
        return  # all points equal: F is 0/0 in every implementation
    with np.errstate(all="ignore"):  # skbio divides by SS_W = 0 when every group is tight
        expected = skbio_permanova(DistanceMatrix(ssd.squareform(d)), labels, permutations=0)
    got = stats_core.permanova(ssd.squareform(d) if square else d, labels, permutations=19, seed=seed, backend=backend)
    if np.isinf(expected["test statistic"]) or np.isnan(expected["test statistic"]):
        assert np.isinf(got.statistic) or np.isnan(got.statistic)
        return
    assert got.statistic == pytest.approx(expected["test statistic"], rel=1e-10)
    # On tied data other partitions reach the same F up to rounding: skbio counts them or not by the
    # rounding, we always do (ties within 1e-9), so p-values are compared on continuous data below and
    # against an exhaustive count in test_pvalue_matches_an_exhaustive_permutation_count.
    assert 1 / 20 <= got.pvalue <= 1


def _unscreened_pvalue(d: np.ndarray, labels: np.ndarray, permutations: int, seed: int) -> float:
    """The p-value by the definition: every relabelling's SS_W computed exactly (numpy), no screen (the
    relabellings drawn, or all of them when they fit in ``permutations``, as ``permanova`` does)."""
    from stats_core import _reference, _resample, _validate

    n = labels.shape[0]
    codes, _, sizes = _validate.grouping("grouping", labels, n)
    inverse_sizes = 1.0 / sizes
    bound = _reference.permanova_observed(d, codes, inverse_sizes)[0] * (1 + _resample.TIE_RTOL)
    count, every = _resample.relabellings(codes, permutations, None)
    hits = sum(
        int((_reference.permanova_within(d, block, inverse_sizes) <= bound).sum())
        for block in _resample.permuted_label_blocks(_reference, codes, seed, count, every=every)
    )
    return _resample.permutation_pvalue(hits, count, every is not None)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    design=designs(),
    metric=st.sampled_from(["euclidean", "cityblock", "sqeuclidean", "chebyshev"]),
    duplicate=st.booleans(),
    scale=st.sampled_from([1.0, 1e-150, 1e150]),
    square=st.booleans(),
    backend=st.sampled_from(BACKENDS),
    seed=st.integers(0, 2**32),
)
def test_screened_pvalue_equals_the_unscreened_one(design, metric, duplicate, scale, square, backend, seed):
    # Whatever screen is chosen (factored for Euclidean distances, whose Gower matrix has low rank;
    # quantized otherwise), the p-value must be the one every permutation computed exactly gives — on tied
    # integer data, duplicated points, extreme magnitudes and square input.
    x, labels = design
    if duplicate:
        x = np.vstack([x, x[:3]])
        labels = np.concatenate([labels, labels[:3]])
    d = ssd.pdist(x, metric) * scale
    got = stats_core.permanova(ssd.squareform(d) if square else d, labels, permutations=59, seed=seed, backend=backend)
    assert got.pvalue == _unscreened_pvalue(d, labels, 59, seed)


def test_pvalue_matches_an_exhaustive_permutation_count():
    # 8 objects in groups of 4: all 70 distinct partitions are equally likely under random relabelling,
    # so with many permutations the p-value approaches (number of partitions with F >= F_obs) / 70.
    x = np.array([[0.0], [0.4], [1.1], [1.3], [2.0], [2.2], [3.5], [3.6]])
    labels = np.array([0, 0, 1, 0, 1, 1, 0, 1])
    d = ssd.pdist(x)
    observed = stats_core.permanova(d, labels, 0).statistic
    from itertools import combinations

    exact = np.mean(
        [
            stats_core.permanova(d, np.isin(np.arange(8), c).astype(int), 0).statistic >= observed - 1e-12
            for c in combinations(range(8), 4)
        ]
    )
    got = stats_core.permanova(d, labels, 19999, seed=5).pvalue
    assert abs(got - exact) < 4 * np.sqrt(exact * (1 - exact) / 19999) + 1e-4


@pytest.mark.slow
def test_same_seed_same_result_on_every_backend():
    rng = np.random.default_rng(11)
    x = rng.normal(size=(90, 6))
    labels = rng.integers(0, 3, 90)
    x[labels == 2] += 0.3
    d = ssd.pdist(x)
    results = [stats_core.permanova(d, labels, 499, seed=42, backend=b) for b in BACKENDS]
    assert len({r.pvalue for r in results}) == 1
    assert max(r.statistic for r in results) - min(r.statistic for r in results) < 1e-12 * results[0].statistic
    assert results[0].seed == 42
    sk = skbio_permanova(DistanceMatrix(ssd.squareform(d)), labels, permutations=499, seed=42)
    assert results[0].statistic == pytest.approx(sk["test statistic"], rel=1e-12)
    assert _monte_carlo_close(results[0].pvalue, sk["p-value"], 499)


def test_unseeded_call_records_a_seed_that_reproduces_it():
    d = ssd.pdist(np.random.default_rng(1).normal(size=(30, 3)))
    labels = np.arange(30) % 3
    first = stats_core.permanova(d, labels, 199)
    again = stats_core.permanova(d, labels, 199, seed=first.seed)
    assert (first.statistic, first.pvalue) == (again.statistic, again.pvalue)


def test_f_is_invariant_to_relabelling_groups():
    rng = np.random.default_rng(4)
    d = ssd.pdist(rng.normal(size=(40, 3)))
    labels = rng.integers(0, 4, 40)
    renamed = np.array(["w", "x", "y", "z"])[(labels + 2) % 4]
    a = stats_core.permanova(d, labels, 0).statistic
    b = stats_core.permanova(d, renamed, 0).statistic
    assert a == pytest.approx(b, rel=1e-13)


def test_condensed_input_is_never_expanded():
    n = 1200
    d = ssd.pdist(np.random.default_rng(0).normal(size=(n, 4)))
    labels = np.arange(n) % 3
    tracemalloc.start()
    stats_core.permanova(d, labels, permutations=50, seed=1, backend="native")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    square_bytes = n * n * 8
    assert peak < 0.25 * square_bytes, f"peak {peak} bytes vs square matrix {square_bytes}"


def test_many_groups_use_the_wide_label_path():
    # > 256 groups: the native kernel switches from byte to 32-bit labels.
    rng = np.random.default_rng(9)
    x = rng.normal(size=(600, 2))
    labels = np.arange(600) % 300
    d = ssd.pdist(x)
    native = stats_core.permanova(d, labels, 20, seed=3, backend="native")
    reference = stats_core.permanova(d, labels, 20, seed=3, backend="numpy")
    assert native.statistic == pytest.approx(reference.statistic, rel=1e-12)
    assert native.pvalue == reference.pvalue


@pytest.mark.parametrize(
    ("labels", "permutations", "seed", "message"),
    [
        ([0, 0, 0, 0], 9, 0, r"^grouping: needs at least 2 groups"),
        ([0, 1, 2, 3], 9, 0, r"^grouping: every group has a single member"),
        ([0, 1, 1], 9, 0, r"^grouping: expected 4 labels"),
        ([0, 0, 1, 1], -1, 0, r"^permutations: expected an integer >= 0"),
        ([0, 0, 1, 1], 9, -5, r"^seed: expected a non-negative integer"),
        ([0.0, np.nan, 1.0, 1.0], 9, 0, r"^grouping: contains NaN"),
    ],
)
def test_invalid_arguments_are_named(labels, permutations, seed, message):
    d = ssd.pdist(np.arange(4.0)[:, None])
    with pytest.raises(InvalidInputError, match=message):
        stats_core.permanova(d, labels, permutations, seed=seed)


def _screen_case(kind: str, n: int = 300) -> np.ndarray:
    """Condensed distances of one kind: low-rank Euclidean, full-rank cityblock, adversarial variants."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(n, 5))
    d = ssd.pdist(x, "cityblock" if kind in ("cityblock", "outlier", "ties", "tiny") else "euclidean")
    if kind == "outlier":
        d[17] = 1e6  # one huge distance: coarse quanta, many rechecks
    elif kind == "ties":
        d = np.round(d)
    elif kind == "tiny":
        d = d * 1e-160  # subnormal squares: no usable scale
    elif kind == "zero":
        d = np.zeros_like(d)
    elif kind == "indefinite":
        d = ssd.pdist(x, "braycurtis")
    return d


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["euclidean", "cityblock", "outlier", "ties", "tiny", "zero", "indefinite"])
def test_screened_counts_equal_exact_counts_at_and_around_the_bound(kind):
    # Every backend's screen (factored where Gower's matrix has low rank, else quantized) decides most
    # permutations and rechecks the rest exactly; put the bound exactly on permuted values (and a hair
    # either side) so the recheck decides, and compare with exact counts.
    from stats_core import _native, _numba, _reference, _screen

    d = _screen_case(kind)
    n = 300
    codes = (np.arange(n) % 3).astype(np.int32)
    perms = _reference.permutations(codes, 77, 0, 64)
    sizes = np.bincount(codes)
    inverse_sizes = 1.0 / sizes
    exact = _reference.permanova_within(d, perms, inverse_sizes)
    observed = _reference.permanova_observed(d, codes, inverse_sizes)
    # (offsets of 1e-12 stay clear of the last-bit differences between the backends' f64 summation orders)
    for bound in (
        np.median(exact),
        np.sort(exact)[5] * (1 + 1e-12),
        np.sort(exact)[40] * (1 - 1e-12),
        exact.min() * (1 + 1e-12),
    ):
        want = int((exact <= bound).sum())
        for kernels in (_native, _numba, _reference):
            screen = _screen.choose(kernels, d, inverse_sizes, sizes, observed, bound)
            assert screen.name == ("factored" if kind == "euclidean" else "quantized"), kernels.__name__
            assert _screen.count_at_most(kernels, d, perms, inverse_sizes, bound, screen) == want, kernels.__name__


@pytest.mark.parametrize("kind", ["euclidean", "cityblock", "outlier", "indefinite"])
def test_screens_stay_within_their_margin_and_agree_across_backends(kind):
    # The margin is the screen's whole correctness argument: check it against exact SS_W on every
    # permutation, and that the three backends compute the same screened values.
    from stats_core import _native, _numba, _reference, _screen

    d = _screen_case(kind)
    codes = (np.arange(300) % 4).astype(np.int32)
    perms = _reference.permutations(codes, 5, 0, 40)
    sizes = np.bincount(codes)
    inverse_sizes = 1.0 / sizes
    exact = _reference.permanova_within(d, perms, inverse_sizes)
    observed = _reference.permanova_observed(d, codes, inverse_sizes)
    screens = [
        _screen.choose(k, d, inverse_sizes, sizes, observed, float(np.median(exact)))
        for k in (_native, _numba, _reference)
    ]
    values = [s.within(perms) for s in screens]
    for screen, value in zip(screens, values):
        assert np.all(np.abs(value - exact) <= screen.margin)
        np.testing.assert_allclose(value, values[2], rtol=1e-11)
    if kind == "euclidean":
        # points in 5 dimensions: rank 5, and a margin near rounding level
        assert screens[0].margin < 1e-8 * exact.mean()


def test_screen_margins_are_tight_enough_to_decide_almost_every_permutation():
    # The point of the screens: on ordinary data the margin is far below the spread of SS_W over
    # permutations (~1e-4 relative here), so almost nothing is recomputed.
    from stats_core import _native, _screen

    rng = np.random.default_rng(5)
    codes = (np.arange(2000) % 3).astype(np.int32)
    sizes = np.bincount(codes)
    for metric, name, relative in (("euclidean", "factored", 1e-8), ("cityblock", "quantized", 5e-7)):
        d = ssd.pdist(rng.normal(size=(2000, 24)), metric)
        observed = _native.permanova_observed(d, codes, 1.0 / sizes)
        screen = _screen.choose(_native, d, 1.0 / sizes, sizes, observed, observed[0])
        assert screen.name == name
        assert screen.margin / observed[0] < relative


def test_observed_pass_gives_row_sums_and_largest_square_on_every_backend():
    from stats_core import _native, _numba, _reference

    rng = np.random.default_rng(8)
    d = ssd.pdist(rng.normal(size=(57, 3)))
    square = ssd.squareform(d)
    codes = (np.arange(57) % 2).astype(np.int32)
    for kernels in (_native, _numba, _reference):
        for matrix in (d, square):
            _within, total, largest, row_sums, valid = kernels.permanova_observed(
                matrix, codes, 1.0 / np.bincount(codes)
            )
            np.testing.assert_allclose(row_sums, (square**2).sum(axis=1), rtol=1e-12)
            assert largest == (d**2).max() and valid
            assert total == pytest.approx((d**2).sum(), rel=1e-12)


@pytest.mark.parametrize("function", [stats_core.permanova, stats_core.permdisp])
@pytest.mark.parametrize("backend", ["native", "numba", "numpy"])
@pytest.mark.parametrize(
    ("bad", "what"), [(-1.0, "a negative distance"), (np.nan, "a non-finite value"), (np.inf, "a non-finite value")]
)
def test_bad_condensed_distance_is_named_on_every_backend(function, backend, bad, what):
    # The first kernel pass checks the values (PERMANOVA's observed sums, PERMDISP's group row sums); the
    # message must still name the first bad entry.
    d = np.linspace(1.0, 2.0, 15)
    d[6], d[11] = bad, -3.0
    with pytest.raises(InvalidInputError, match=rf"^distances: contains {what} \(.*\)+ at flat index 6$"):
        function(d, [0, 0, 0, 1, 1, 1], permutations=9, seed=1, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_worked_effect_sizes(backend):
    # The hand-worked design above: SS_T = 21, SS_W = 5, SS_A = 16, g = 2, n = 4, MS_W = 5 / 2.
    # R² = 16 / 21; ω² = (SS_A − (g − 1) MS_W) / (SS_T + MS_W) = (16 − 2.5) / (21 + 2.5) = 27 / 47.
    d = ssd.pdist(np.array([[0.0], [1.0], [3.0], [6.0]]))
    result = stats_core.permanova(d, ["a", "a", "b", "b"], permutations=0, backend=backend)
    assert result.ss_total == pytest.approx(21.0, rel=1e-14)
    assert result.ss_within == pytest.approx(5.0, rel=1e-14)
    assert result.r_squared == pytest.approx(16 / 21, rel=1e-14)
    assert result.omega_squared == pytest.approx(27 / 47, rel=1e-14)


def test_omega_squared_is_near_zero_without_an_effect_and_below_r_squared():
    # ω² corrects R²'s upward bias: with no effect its mean over designs is ≈ 0 while R²'s is ≈ (g − 1)/(n − 1).
    rng = np.random.default_rng(3)
    r2, w2 = [], []
    for _ in range(200):
        result = stats_core.permanova(ssd.pdist(rng.normal(size=(30, 4))), np.arange(30) % 3, 0)
        r2.append(result.r_squared)
        w2.append(result.omega_squared)
    assert np.mean(r2) == pytest.approx(2 / 29, rel=0.15)
    assert abs(np.mean(w2)) < 0.01
    assert all(w < r for w, r in zip(w2, r2))


def _blocked_design(seed: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """8 countries far apart, two temperatures × 5 respondents in each, a small temperature shift."""
    rng = np.random.default_rng(seed)
    country = np.repeat(np.arange(8), 10)
    temperature = np.tile(np.repeat([0, 1], 5), 8)
    x = rng.normal(size=(80, 6)) + 4.0 * rng.normal(size=(8, 6))[country] + 0.5 * temperature[:, None]
    return ssd.pdist(x), temperature, np.array([f"c{k}" for k in country])


@pytest.mark.parametrize("function", [stats_core.permanova, stats_core.permdisp])
def test_blocked_test_gives_the_same_result_on_every_backend(function):
    d, temperature, country = _blocked_design()
    results = [function(d, temperature, 499, seed=9, strata=country, backend=b) for b in BACKENDS]
    assert len({r.pvalue for r in results}) == 1
    assert results[0].strata == tuple(f"c{k}" for k in range(8))


def test_blocked_permutations_stay_within_strata_and_agree_across_backends():
    from stats_core import _native, _numba, _reference, _resample

    rng = np.random.default_rng(4)
    codes = rng.integers(0, 3, 70).astype(np.int32)
    strata = rng.integers(0, 5, 70)
    layout = _resample.strata_layout(strata, 70)
    rows = [
        k.permutations_within(codes, layout.order, layout.starts, 99, 13, 64) for k in (_native, _numba, _reference)
    ]
    np.testing.assert_array_equal(rows[0], rows[1])
    np.testing.assert_array_equal(rows[0], rows[2])
    for row in rows[0]:
        for s in range(5):
            assert sorted(row[strata == s]) == sorted(codes[strata == s])
    assert (rows[0] != codes).any()


def test_one_stratum_is_the_unblocked_test_bit_for_bit():
    d, temperature, _ = _blocked_design()
    free = stats_core.permanova(d, temperature, 299, seed=4)
    one = stats_core.permanova(d, temperature, 299, seed=4, strata=np.zeros(80))
    assert (free.pvalue, free.statistic) == (one.pvalue, one.statistic)
    assert one.strata == (0.0,)


def test_blocks_recover_an_effect_that_free_permutations_drown():
    # The case: a real temperature effect, tested pooled over countries and within country.
    d, temperature, country = _blocked_design()
    free = stats_core.permanova(d, temperature, 999, seed=1)
    blocked = stats_core.permanova(d, temperature, 999, seed=1, strata=country)
    assert free.statistic == blocked.statistic
    assert free.pvalue > 0.1 and blocked.pvalue < 0.01
    # the effect sizes too: within country the temperature explains far more than of the pooled variation
    assert blocked.r_squared > 5 * free.r_squared and blocked.omega_squared > 0.05 > free.omega_squared


def test_blocked_pvalue_matches_an_exhaustive_count_of_within_block_relabellings():
    # Two blocks of 4 (2 + 2 labels each): 6 × 6 = 36 equally likely within-block partitions.
    from itertools import combinations, product

    x = np.array([[0.0], [0.5], [1.4], [1.5], [10.0], [10.9], [11.1], [12.0]])
    labels = np.array([0, 1, 0, 1, 1, 0, 0, 1])
    strata = np.repeat([0, 1], 4)
    d = ssd.pdist(x)
    observed = stats_core.permanova(d, labels, 0).statistic
    hits = []
    for a, b in product(combinations(range(4), 2), combinations(range(4, 8), 2)):
        relabelled = np.isin(np.arange(8), a + b).astype(int)
        hits.append(stats_core.permanova(d, relabelled, 0).statistic >= observed * (1 - 1e-9))
    exact = float(np.mean(hits))
    # 36 relabellings fit in the 19999 asked for: all are visited once, so p is this exact proportion
    got = stats_core.permanova(d, labels, 19999, seed=5, strata=strata)
    assert got.exact and got.permutations == 35 and got.pvalue == exact
    free = stats_core.permanova(d, labels, 19999, seed=5).pvalue
    assert abs(free - exact) > 0.05  # the blocks change the answer here


@pytest.mark.parametrize("backend", BACKENDS)
def test_blocked_screened_pvalue_equals_the_unscreened_one(backend):
    from stats_core import _reference, _resample, _validate

    d, temperature, country = _blocked_design(7)
    for metric_d in (d, np.sqrt(d)):  # Euclidean (factored screen) and a non-Euclidean one (quantized)
        got = stats_core.permanova(metric_d, temperature, 199, seed=8, strata=country, backend=backend)
        codes, _, sizes = _validate.grouping("grouping", temperature, 80)
        inverse_sizes = 1.0 / sizes
        bound = _reference.permanova_observed(metric_d, codes, inverse_sizes)[0] * (1 + _resample.TIE_RTOL)
        layout = _resample.strata_layout(country, 80)
        count = sum(
            int((_reference.permanova_within(metric_d, block, inverse_sizes) <= bound).sum())
            for block in _resample.permuted_label_blocks(_reference, codes, 8, 199, layout)
        )
        assert got.pvalue == _resample.permutation_pvalue(count, 199)


@pytest.mark.parametrize(
    ("strata", "message"),
    [
        ([0, 0, 1], r"^strata: expected 4 labels"),
        ([0.0, np.nan, 1.0, 1.0], r"^strata: contains NaN"),
    ],
)
@pytest.mark.parametrize("function", [stats_core.permanova, stats_core.permdisp])
def test_invalid_strata_are_named(function, strata, message):
    d = ssd.pdist(np.arange(4.0)[:, None])
    with pytest.raises(InvalidInputError, match=message):
        function(d, [0, 0, 1, 1], 9, seed=0, strata=strata)
