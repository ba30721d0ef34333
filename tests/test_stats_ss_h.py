"""SS_h's permutation test (stats_core.ss_h_test): its statistic, its null distribution, backends, errors."""

from __future__ import annotations

from itertools import combinations, product

import numpy as np
import pytest

import stats_core
from stats_core.errors import InvalidInputError

BACKENDS = ["native", "numba", "numpy"]
HUMAN = np.array([[10.0, 40.0], [60.0, 20.0], [35.0, 80.0]])


def _sets(shift: float, per_nation: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    nations = np.repeat(np.arange(3), per_nation)
    a = 0.4 * HUMAN[nations] + rng.normal(0, 6, (len(nations), 2))
    b = 0.4 * HUMAN[nations] + rng.normal(0, 6, (len(nations), 2)) + shift
    return a, nations, b, nations


def test_statistic_is_ss_h_of_the_national_means():
    a, na, b, nb = _sets(5.0)
    result = stats_core.ss_h_test(a, na, b, nb, HUMAN, permutations=0)
    means = [np.stack([x[n == k].mean(axis=0) for k in range(3)]) for x, n in ((a, na), (b, nb))]
    assert result.statistic == pytest.approx(stats_core.ss_h(means[0], means[1], HUMAN), rel=1e-12)
    assert np.isnan(result.pvalue) and result.null_distribution.shape == (0,)


def test_pvalue_matches_an_exhaustive_count_of_within_nation_deals():
    # 3 nations × (2 + 2) points: C(4, 2)³ = 216 equally likely deals of each nation's points to the sets.
    a, na, b, nb = _sets(4.0, per_nation=2, seed=3)
    observed = stats_core.ss_h_test(a, na, b, nb, HUMAN, permutations=0).statistic
    pooled = [np.vstack([a[na == k], b[nb == k]]) for k in range(3)]
    hits = []
    for picks in product(*(combinations(range(4), 2) for _ in range(3))):
        sa = np.stack([pooled[k][list(p)].mean(axis=0) for k, p in enumerate(picks)])
        sb = np.stack([pooled[k][[i for i in range(4) if i not in p]].mean(axis=0) for k, p in enumerate(picks)])
        # ties within 1e-9 of |observed| count (SS_h is negative here: the whole-set swap ties it exactly)
        hits.append(stats_core.ss_h(sa, sb, HUMAN) >= observed - 1e-9 * abs(observed))
    exact = float(np.mean(hits))
    # 216 deals fit in the 9999 asked for: all are visited once, so p is this exact proportion
    got = stats_core.ss_h_test(a, na, b, nb, HUMAN, permutations=9999, seed=2)
    assert got.exact and got.permutations == 215 and got.pvalue == exact


def test_sets_that_do_not_differ_sit_at_the_null_and_shifted_sets_beyond_it():
    same = stats_core.ss_h_test(*_sets(0.0), HUMAN, permutations=499, seed=1)
    shifted = stats_core.ss_h_test(*_sets(12.0), HUMAN, permutations=499, seed=1)
    assert same.pvalue > 0.05 and shifted.pvalue < 0.01
    assert same.null_distribution.mean() < 0  # the baseline of sets that do not differ is negative
    assert shifted.statistic > np.quantile(shifted.null_distribution, 0.99)


def test_same_seed_same_result_on_every_backend():
    results = [stats_core.ss_h_test(*_sets(3.0), HUMAN, permutations=199, seed=5, backend=b) for b in BACKENDS]
    assert len({r.pvalue for r in results}) == 1
    np.testing.assert_allclose(results[0].null_distribution, results[2].null_distribution, rtol=1e-12)
    assert results[0].seed == 5 and results[0].method == "SS_h"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a, na, b, nb: (a, na[:-1], b, nb), r"^nations_a: expected 18 integer nation indices"),
        (lambda a, na, b, nb: (a, na, b, np.where(nb == 2, 1, nb)), r"^set_b: nation 2 has no point"),
        (lambda a, na, b, nb: (a[:, :1], na, b, nb), r"^set_a: set_a, set_b: expected \(points, 2\)"),
        (lambda a, na, b, nb: (a, na + 3, b, nb), r"^nations_a: expected 18 integer nation indices in 0..2"),
    ],
)
def test_invalid_arguments_are_named(change, message):
    with pytest.raises(InvalidInputError, match=message):
        stats_core.ss_h_test(*change(*_sets(0.0)), HUMAN, permutations=9)
