"""Intervals for the population tau / CAT (runner/score/intervals.py): sign bounds against a brute-force
enumeration, consistency with the exact permutation test, coverage and null exclusion on the simulator's
respondent model, the rule-of-three floor for answers that never varied, and CAT v2's published means."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

from benches import coverage
from runner.score.cat import score_means
from runner.score.intervals import (
    answer_variance_floor,
    index_standard_errors,
    index_variance,
    sign_bounds,
    with_test,
)
from runner.score.means_file import read_means
from runner.survey.reference import load_reference

EXAMPLES = Path(__file__).resolve().parents[1] / "runner" / "data" / "examples"


def _brute_force_bounds(x, s, df, y, alpha):
    """min/max tau-b over every concordant/discordant/tied choice of the pairs a Welch t test cannot order."""
    i, j = np.triu_indices(len(x), 1)
    sy = np.sign(y[i] - y[j])
    fixed, free = [], []
    for a, b, syp in zip(i, j, sy, strict=True):
        se2 = s[a] ** 2 + s[b] ** 2
        nu = se2**2 / (s[a] ** 4 / df[a] + s[b] ** 4 / df[b])
        if abs(x[a] - x[b]) > student_t.ppf(1 - alpha / 2, nu) * math.sqrt(se2):
            fixed.append((np.sign(x[a] - x[b]), syp))
        else:
            free.append(syp)
    n_y = int((sy != 0).sum())
    values = []
    for choice in itertools.product((-1, 0, 1), repeat=len(free)):
        pairs = fixed + list(zip(choice, free, strict=True))
        n_x = sum(1 for sx, _ in pairs if sx != 0)
        if n_x:
            values.append(sum(sx * syp for sx, syp in pairs) / math.sqrt(n_x * n_y))
    return min(values), max(values)


@pytest.mark.parametrize("case", range(12))
def test_sign_bounds_equal_a_brute_force_over_the_undetermined_pair_orders(case):
    rng = np.random.default_rng(case)
    k = 4 + case % 2
    y = rng.integers(0, 4, k).astype(float) if case % 3 == 0 else rng.uniform(0, 100, k)  # ties in y sometimes
    x = rng.normal(0, 30, k)
    s = rng.uniform(2, 12, k)
    df = rng.integers(3, 30, k).astype(float)
    low, high, _ = sign_bounds(x, s, df, y, 0.05)
    want = _brute_force_bounds(x, s, df, y, 0.05)
    assert (low, high) == pytest.approx(want, abs=1e-12)


def test_sign_bounds_are_the_estimate_when_every_pair_is_determined_and_span_everything_when_none_is():
    y = np.array([10.0, 20, 30, 40])
    assert sign_bounds(np.array([1.0, 2, 3, 4]) * 100, np.ones(4), np.full(4, 20.0), y, 0.05)[:2] == (1.0, 1.0)
    assert sign_bounds(np.array([1.0, 2, 3, 4]), np.full(4, 50.0), np.full(4, 4.0), y, 0.05)[:2] == (-1.0, 1.0)


def test_interval_contains_zero_whenever_the_exact_p_exceeds_alpha():
    assert with_test(0.2, 0.6, 0.4, 0.06, 0.95) == (0.0, 0.6)
    assert with_test(0.2, 0.6, 0.4, 0.05, 0.95) == (0.2, 0.6)  # p ≤ α: the bounds stand
    assert with_test(-0.5, -0.1, 0.1, 0.01, 0.95) == (-0.5, 0.1)  # the estimate always inside
    assert with_test(0.2, 0.6, 0.4, math.nan, 0.95) == (0.0, 0.6)  # no test: no claim of an association
    rng = np.random.default_rng(5)
    for regime, k in (("null", 6), ("weak", 6), ("strong", 4), ("strong", 10)):
        for _ in range(6):
            r = coverage.replicate(5, k, regime, rng)
            lo, hi = r["tau_ci"].T
            defined = np.isfinite(lo)
            excluded = (lo > 0) | (hi < 0)
            assert (r["tau_p"][excluded & defined] <= 0.05).all()
            c_lo, c_hi = r["cat_ci"]
            assert not (c_lo > 0 or c_hi < 0) or r["cat_p"] <= 0.05


@pytest.mark.slow
def test_coverage_holds_in_interior_regimes_and_the_null_excludes_zero_at_most_at_the_level():
    """A small but meaningful replicate count: 40 planted truths per cell (the full table: benches/coverage.py)."""
    null = coverage.cell(5, 6, "null", 40, seed=3)
    assert null["tau_excludes_0"][0] <= 0.05 and null["cat_excludes_0"][0] <= 0.05
    assert null["contradictions"] == 0
    for regime, k in (("weak", 10), ("strong", 10), ("strong", 4)):
        row = coverage.cell(5, k, regime, 40, seed=3)
        assert row["tau"][0] >= 0.93 and row["cat"][0] >= 0.93, (regime, k, row)
        assert row["contradictions"] == 0
    assert coverage.cell(20, 10, "strong", 40, seed=3)["cat_excludes_0"][0] >= 0.9  # not vacuous: it finds signal


def test_answers_that_never_varied_carry_the_rule_of_three_variance():
    n = 5
    p = 1 - 0.05 ** (1 / n)
    assert answer_variance_floor(np.array([n]))[0] == pytest.approx(p * (1 - p))
    alike = np.full((n, 24), 3.0)  # five seeds, the same answer to every question
    se = index_standard_errors(alike)
    # PDI = 35(m07 − m02) + 25(m20 − m23): four independent means, each with variance p(1 − p)/n
    want = math.sqrt((2 * 35**2 + 2 * 25**2) * p * (1 - p) / n)
    assert se[0] == pytest.approx(want, rel=1e-12) and (se > 0).all()
    varied = np.random.default_rng(1).permuted(np.tile([1.0, 5.0, 1.0, 5.0, 3.0], (24, 1)), axis=1).T
    # answers that vary (variance ≥ 2, above the floor 0.20) keep their own covariance
    assert index_standard_errors(varied) ** 2 == pytest.approx(index_variance(np.cov(varied.T) / n))


def test_cat_v2_published_means_give_intervals_that_agree_with_their_p_values():
    reference = load_reference("hofstede-2015")
    result = score_means(read_means(EXAMPLES / "cat_v2_table5_gpt35.csv", reference), reference)
    for group in result["groups"]:
        low, high = group["cat_ci"]
        assert group["cat_p"] > 0.05 and low <= 0 <= high  # 3 countries: p ≥ 1/6, so 0 stays inside
        assert "always contains 0" in group["cat_ci_note"]
        for d, (lo, hi) in group["kendall_ci"].items():
            if group["kendall"][d] is not None:
                assert lo <= 0 <= hi and lo <= group["kendall"][d] <= hi
