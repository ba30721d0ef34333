"""Exact permutation p-values (``stats_core._resample.relabellings``): where every distinct relabelling fits in
the permutations asked for, PERMANOVA, PERMDISP and SS_h visit each once, and p equals a brute-force count over
all assignments written here independently (itertools over every permutation of the objects within strata,
statistics from their textbook formulas), on every backend; above that limit the seeded Monte Carlo draws stay.
``stats_core.log_relabellings`` (the count both the rule and the analysis's p_min use) is checked against the same
brute force, scipy's gammaln and the exact integer."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.spatial.distance as ssd
import scipy.special
import scipy.stats

import stats_core
from stats_core import _reference, _resample, _validate

BACKENDS = ["native", "numba", "numpy"]
RTOL = 1e-9  # a relabelling's statistic within this relative distance of the observed counts as reaching it


def _assignments(labels: np.ndarray, strata: np.ndarray | None) -> list[tuple]:
    """Every distinct assignment of ``labels`` reachable by permuting objects within strata (observed included)."""
    blocks = [np.arange(len(labels))] if strata is None else [np.flatnonzero(strata == s) for s in np.unique(strata)]
    seen: set[tuple] = set()
    for perms in itertools.product(*(itertools.permutations(b) for b in blocks)):
        out = labels.copy()
        for block, perm in zip(blocks, perms, strict=True):
            out[block] = labels[list(perm)]
        seen.add(tuple(out.tolist()))
    return sorted(seen)


def _pseudo_f(square: np.ndarray, labels: np.ndarray) -> float:
    """Anderson's pseudo-F from its definition: SS_T = Σ_{i<j} d²/n, SS_W = Σ_g Σ_{i<j ∈ g} d²/n_g."""
    n, groups = len(labels), np.unique(labels)
    upper = np.triu(square**2, 1)
    ss_t = upper.sum() / n
    ss_w = sum(upper[np.ix_(labels == g, labels == g)].sum() / (labels == g).sum() for g in groups)
    return ((ss_t - ss_w) / (len(groups) - 1)) / (ss_w / (n - len(groups)))


# (labels, strata): balanced, unbalanced with three groups, within two strata, unbalanced strata
DESIGNS = {
    "balanced": ([0, 0, 0, 1, 1, 1], None),
    "unbalanced": ([0, 1, 2, 1, 0, 1, 2], None),
    "strata": ([0, 1, 0, 1, 1, 0, 0, 1], [0, 0, 0, 0, 1, 1, 1, 1]),
    "unbalanced-strata": ([0, 0, 1, 1, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1, 1]),
}


def _design(name: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    labels, strata = DESIGNS[name]
    codes = np.array(labels)
    points = np.random.default_rng(seed).normal(size=(len(codes), 3)) + 0.8 * codes[:, None]
    return points, codes, None if strata is None else np.array(strata)


@pytest.mark.parametrize("name", list(DESIGNS))
def test_the_enumeration_is_every_distinct_assignment_once_observed_set_aside(name):
    _, codes, strata = _design(name, 0)
    every = _resample.enumeration(codes.astype(np.int32), _resample.strata_layout(strata, len(codes)), 10**6)
    rows = [tuple(r) for r in every.rows(0, every.others).tolist()]
    assert len(rows) == len(set(rows)) == every.others
    assert sorted([*rows, tuple(codes.tolist())]) == _assignments(codes, strata)
    # and in any ranges the rows are the same ones (the distributed path splits them)
    assert [tuple(r) for r in np.concatenate([every.rows(0, 7), every.rows(7, every.others)]).tolist()] == rows


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(DESIGNS))
def test_permanova_p_is_the_brute_force_proportion_of_all_relabellings(name, backend):
    points, codes, strata = _design(name, 1)
    square = ssd.squareform(ssd.pdist(points))
    observed = _pseudo_f(square, codes)
    every = _assignments(codes, strata)
    hits = sum(_pseudo_f(square, np.array(a)) >= observed * (1 - RTOL) for a in every)
    result = stats_core.permanova(square, codes, permutations=999, seed=1, strata=strata, backend=backend)
    assert result.exact and result.permutations == len(every) - 1
    assert result.statistic == pytest.approx(observed, rel=1e-10)
    assert result.pvalue == hits / len(every)
    assert 1 / len(every) <= result.pvalue < 1  # not degenerate: the count could have been wrong


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(DESIGNS))
def test_permdisp_p_is_the_brute_force_proportion_of_all_residual_relabellings(name, backend):
    # vegan's permutest.betadisper: the observed F of the distances to centroid, then F of the ANOVA residuals
    # under every other relabelling; p = (1 + #F ≥ observed) / N. On Euclidean points z is the plain distance.
    points, codes, strata = _design(name, 2)
    points *= 1 + codes[:, None]  # dispersions that differ by group
    groups = np.unique(codes)
    centroids = np.stack([points[codes == g].mean(axis=0) for g in groups])
    z = np.linalg.norm(points - centroids[codes], axis=1)
    residuals = z - np.array([z[codes == g].mean() for g in groups])[codes]
    observed = scipy.stats.f_oneway(*(z[codes == g] for g in groups)).statistic
    every = _assignments(codes, strata)
    others = [np.array(a) for a in every if a != tuple(codes.tolist())]
    hits = sum(
        scipy.stats.f_oneway(*(residuals[a == g] for g in groups)).statistic >= observed * (1 - RTOL) for a in others
    )
    result = stats_core.permdisp(ssd.pdist(points), codes, permutations=999, seed=1, strata=strata, backend=backend)
    assert result.exact and result.permutations == len(every) - 1
    assert result.statistic == pytest.approx(observed, rel=1e-9)
    assert result.pvalue == (hits + 1) / len(every)
    assert result.pvalue < 1


def _ss_h(set_a: np.ndarray, set_b: np.ndarray, human: np.ndarray) -> float:
    """SS_h (Eq. 5) from its definition: (1/2N) Σ over both sets' nations of (b − a) / a_h."""
    n = len(human)
    a_h = ssd.cdist(human, human).sum(axis=1) / (n - 1)
    total = 0.0
    for own, other in ((set_a, set_b), (set_b, set_a)):
        a = ssd.cdist(own, own).sum(axis=1) / (n - 1)
        b = ssd.cdist(own, other).mean(axis=1)
        total += float(((b - a) / a_h).sum())
    return total / (2 * n)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("per_a", "per_b"), [((2, 2, 2), (2, 2, 2)), ((2, 1, 2), (1, 2, 3))])
def test_ss_h_p_is_the_brute_force_proportion_of_all_within_nation_deals(per_a, per_b, backend):
    human = np.array([[10.0, 40.0], [60.0, 20.0], [35.0, 80.0]])
    rng = np.random.default_rng(3)
    nations_a, nations_b = np.repeat(np.arange(3), per_a), np.repeat(np.arange(3), per_b)
    a = 0.4 * human[nations_a] + rng.normal(0, 6, (len(nations_a), 2))
    b = 0.4 * human[nations_b] + rng.normal(0, 6, (len(nations_b), 2)) + 4.0
    pooled = [np.vstack([a[nations_a == k], b[nations_b == k]]) for k in range(3)]

    def statistic(picks: tuple[tuple[int, ...], ...]) -> float:
        sides = [
            np.stack(
                [
                    pooled[k][[i for i in range(len(pooled[k])) if (i in p) == inside]].mean(axis=0)
                    for k, p in enumerate(picks)
                ]
            )
            for inside in (True, False)
        ]
        return _ss_h(sides[0], sides[1], human)

    deals = list(itertools.product(*(itertools.combinations(range(per_a[k] + per_b[k]), per_a[k]) for k in range(3))))
    observed = statistic(tuple(tuple(range(c)) for c in per_a))
    hits = sum(statistic(d) >= observed - RTOL * abs(observed) for d in deals)
    result = stats_core.ss_h_test(a, nations_a, b, nations_b, human, permutations=999, seed=2, backend=backend)
    assert (
        result.exact
        and result.permutations == len(deals) - 1 == math.prod(map(math.comb, np.add(per_a, per_b), per_a)) - 1
    )
    assert result.statistic == pytest.approx(observed, rel=1e-10)
    assert result.pvalue == hits / len(deals)
    assert result.null_distribution.shape == (len(deals) - 1,)
    assert 1 / len(deals) <= result.pvalue < 1


def _drawn_pvalue(square: np.ndarray, codes: np.ndarray, permutations: int, seed: int) -> float:
    """PERMANOVA's Monte Carlo p from the seeded generator's draws, counted by the numpy reference kernel."""
    _, _, sizes = _validate.grouping("grouping", codes, len(codes))
    inverse_sizes = 1.0 / sizes
    bound = _reference.permanova_observed(square, codes.astype(np.int32), inverse_sizes)[0] * (1 + _resample.TIE_RTOL)
    blocks = _resample.permuted_label_blocks(_reference, codes.astype(np.int32), seed, permutations)
    hits = sum(int((_reference.permanova_within(square, b, inverse_sizes) <= bound).sum()) for b in blocks)
    return (hits + 1) / (permutations + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_rule_enumerate_when_every_relabelling_fits_else_the_seeded_draws(backend):
    # 3 + 3 objects: 20 distinct relabellings, 19 besides the observed one
    points, codes, _ = _design("balanced", 4)
    square = ssd.squareform(ssd.pdist(points))
    exact = stats_core.permanova(square, codes, permutations=19, seed=9, backend=backend)
    assert exact.exact and exact.permutations == 19
    for permutations in (18, 5):  # fewer asked for than there are: Monte Carlo, draws as before
        drawn = stats_core.permanova(square, codes, permutations=permutations, seed=9, backend=backend)
        assert not drawn.exact and drawn.permutations == permutations and drawn.seed == 9
        assert drawn.pvalue == _drawn_pvalue(square, codes, permutations, 9)
    assert math.isnan(stats_core.permanova(square, codes, permutations=0, backend=backend).pvalue)
    # a large design: n = 40 in two groups has C(40, 20) ≈ 1.4e11 relabellings, far above any request
    rng = np.random.default_rng(5)
    big, big_codes = ssd.squareform(ssd.pdist(rng.normal(size=(40, 2)))), np.repeat([0, 1], 20)
    drawn = stats_core.permanova(big, big_codes, permutations=199, seed=3, backend=backend)
    assert not drawn.exact and drawn.pvalue == _drawn_pvalue(big, big_codes, 199, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_design_with_no_other_relabelling_has_exact_p_one(backend):
    # each stratum holds one group: no within-stratum relabelling changes the labels, so p = 1 exactly
    points, codes, _ = _design("balanced", 5)
    for test in (stats_core.permanova, stats_core.permdisp):
        result = test(ssd.pdist(points), codes, permutations=99, strata=codes, backend=backend)
        assert result.exact and result.permutations == 0 and result.pvalue == 1.0


def test_enumeration_is_bounded_by_the_permutations_asked_for_and_by_its_tables_memory():
    one_out = np.zeros(2048, np.int32)
    one_out[0] = 1  # 2,048 relabellings: the single 1 in any place
    count, every = _resample.relabellings(one_out, 2047, None)
    assert every is not None and count == 2047
    assert (every.rows(0, count).sum(axis=1) == 1).all() and not every.rows(0, count)[:, 0].any()
    assert _resample.relabellings(one_out, 2046, None) == (2046, None)  # one more than asked for: drawn
    # as many relabellings, but a table of 4,096 × 4,096 labels (over BLOCK_CELLS): drawn, memory stays bounded
    longer = np.zeros(4096, np.int32)
    longer[0] = 1
    assert _resample.relabellings(longer, 9999, None) == (9999, None)
    # within strata the tables are per stratum: 2,000 strata of (0, 1) give 2^2000 relabellings, drawn
    pairs = np.tile(np.array([0, 1], np.int32), 2000)
    assert _resample.relabellings(pairs, 10**6, _resample.strata_layout(np.repeat(np.arange(2000), 2), 4000))[1] is None


# (labels, strata) whose relabellings are counted by brute force: DESIGNS, then designs no permutation test takes
# (a single group, a single object, text labels in text strata with a stratum holding one group)
COUNTED = {
    **DESIGNS,
    "single-group": ([7, 7, 7, 7, 7], None),
    "one-element": (["a"], None),
    "text": (["x", "y", "y", "x", "z", "y", "y"], ["s", "t", "s", "t", "s", "u", "u"]),
}


@pytest.mark.parametrize("name", list(COUNTED))
def test_log_relabellings_is_the_log_of_the_brute_force_count_of_distinct_relabellings(name):
    labels, strata = COUNTED[name]
    count = len(_assignments(np.array(labels), None if strata is None else np.array(strata)))
    assert math.exp(stats_core.log_relabellings(labels, strata)) == pytest.approx(count, rel=1e-12)


def test_log_relabellings_of_a_large_design_is_the_log_multinomial_within_strata():
    rng = np.random.default_rng(11)
    strata = rng.choice(3, size=200_000, p=[0.6, 0.3, 0.1])
    labels = rng.choice(5, size=200_000, p=[0.4, 0.3, 0.2, 0.07, 0.03])
    cells = np.bincount(strata * 5 + labels, minlength=15).reshape(3, 5)
    expected = scipy.special.gammaln(cells.sum(axis=1) + 1).sum() - scipy.special.gammaln(cells + 1).sum()
    assert stats_core.log_relabellings(labels, strata) == pytest.approx(expected, rel=1e-12)
    # a medium one against the exact integer: the multinomial as a product of binomials, its log taken exactly
    small = labels[:3000]
    sizes = np.bincount(small)
    exact = math.prod(math.comb(int(c), int(k)) for c, k in zip(np.cumsum(sizes), sizes, strict=True))
    assert stats_core.log_relabellings(small) == pytest.approx(math.log(exact), rel=1e-13)


@pytest.mark.parametrize(("labels", "strata"), [(3, None), ([], None), ([0, 1, 1], [0, 0]), ([[0, 1], [1, 0]], None)])
def test_log_relabellings_refuses_what_is_not_one_label_per_object(labels, strata):
    with pytest.raises(stats_core.InvalidInputError):
        stats_core.log_relabellings(labels, strata)
