"""What a methods reviewer checks: intervals that cover the estimand, SEs, warnings, reliability, adjusted p."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.multitest import multipletests

from benches import coverage
from runner.analyze.agreement import MIN_RESPONDENTS, agreement_tables, bootstrap_indices_of
from runner.analyze.multiplicity import adjust_families, benjamini_hochberg, holm
from runner.analyze.reliability import cronbach_alpha, icc_oneway, reliability_table
from runner.analyze.units import UnitArray
from runner.score.indices import indices_from_means
from runner.score.intervals import index_standard_errors, mean_covariance
from runner.survey.reference import load_reference


def _units(values: np.ndarray, countries: tuple[str, ...]) -> UnitArray:
    """One condition; ``values`` (K, U, 24)."""
    return UnitArray(
        pl.DataFrame({"model": ["m"]}), countries, pl.DataFrame({"seed": range(values.shape[1])}), values[None].copy()
    )


@pytest.mark.slow
def test_coverage_quick_mode_meets_nominal_for_interior_truths_and_holds_point_estimates():
    rows = coverage.run(quick=True, replicates=20, seed=1)
    assert {(r["seeds"], r["countries"], r["truth"]) for r in rows} >= {(20, 10, "interior")}
    for r in rows:
        assert r["inside"] == 1.0  # every point estimate inside its own interval
        if r["truth"] == "interior":
            assert r["ci_tau"] >= 0.85 and r["ci_cat"] >= 0.85, r
    target = next(r for r in rows if (r["seeds"], r["countries"], r["truth"]) == (20, 10, "interior"))
    assert target["ci_tau"] > target["boot_tau"]  # the percentile bootstrap of the estimator covers less
    assert "| 20 | 10 | 2 | interior |" in coverage.render(rows)


def test_index_standard_errors_equal_the_se_of_unit_indices_on_complete_data():
    rng = np.random.default_rng(2)
    values = rng.integers(1, 6, size=(30, 24)).astype(float)
    se = index_standard_errors(values)
    np.testing.assert_allclose(se, indices_from_means(values).std(axis=0, ddof=1) / np.sqrt(30), rtol=1e-12)
    values[0, 6] = np.nan  # Q07 (PDI) missing once: PDI's SE uses 29 answers of Q07, the others stay as they were
    cov, n = mean_covariance(values)
    assert n[6] == 29 and cov[6, 6] == pytest.approx(np.nanvar(values[:, 6], ddof=1) / 29)
    assert index_standard_errors(values)[1:] == pytest.approx(se[1:])


def test_bootstrap_blocks_equal_one_block():
    rng = np.random.default_rng(3)
    own = [rng.integers(1, 6, size=(u, 24)).astype(float) for u in (5, 9, 7)]
    own[1][2, 4] = np.nan
    whole = bootstrap_indices_of(own, 50, (1, 0), block_cells=10**9)
    small = bootstrap_indices_of(own, 50, (1, 0), block_cells=30)  # one resample per block
    np.testing.assert_allclose(small, whole, rtol=0, atol=1e-12)


def test_warnings_for_few_respondents_few_countries_and_missing_reference():
    rng = np.random.default_rng(4)
    countries = ("U.S.A.", "China", "Saudi Arabia")
    tables = agreement_tables(
        _units(rng.integers(1, 6, size=(3, 5, 24)).astype(float), countries),
        load_reference("hofstede-2015"),
        n_resamples=20,
    )
    warnings = tables["warnings"]
    few = warnings.filter(pl.col("kind") == "few_respondents")
    assert sorted(few["country"]) == sorted(countries) and f"< {MIN_RESPONDENTS}" in few["message"][0]
    missing = warnings.filter(pl.col("kind") == "missing_reference")
    # the 2015 matrix has #NULL! for Saudi Arabia's PDI, IDV, MAS and UAI
    assert set(missing["dimension"]) == {"pdi", "idv", "mas", "uai"} and set(missing["country"]) == {"Saudi Arabia"}
    two = agreement_tables(
        _units(rng.integers(1, 6, size=(2, 25, 24)).astype(float), countries[:2]),
        load_reference("hofstede-2015"),
        n_resamples=20,
    )
    assert two["warnings"]["kind"].to_list() == ["few_countries"]
    assert two["cat"].height == 1  # still ranked, with the warning beside it


def test_cronbach_alpha_and_icc_hand_worked():
    # alpha: k = 2 items (1, 2, 3) and (1, 3, 2): var 1 each, var of sum (2, 5, 5) = 3 → 2 (1 − 2/3) = 2/3
    assert cronbach_alpha(np.array([[1, 1], [2, 3], [3, 2]])) == pytest.approx(2 / 3)
    # ICC: subjects (1, 1), (3, 3): MSW 0, MSB > 0 → 1; subjects (1, 2), (2, 1): MSB 0 → (0 − 0.5)/(0 + 0.5) = −1
    assert icc_oneway([np.array([1.0, 1.0]), np.array([3.0, 3.0])])[:2] == (1.0, 1.0)
    single, _, subjects = icc_oneway([np.array([1.0, 2.0]), np.array([2.0, 1.0])])
    assert single == pytest.approx(-1.0) and subjects == 2
    # balanced case against the ANOVA formula written out
    rng = np.random.default_rng(5)
    x = rng.normal(size=(8, 1)) + rng.normal(size=(8, 3))
    msb = 3 * ((x.mean(axis=1) - x.mean()) ** 2).sum() / 7
    msw = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum() / 16
    assert icc_oneway(list(x))[0] == pytest.approx((msb - msw) / (msb + 2 * msw))


def test_reliability_table_per_condition():
    rng = np.random.default_rng(6)
    values = rng.integers(1, 6, size=(4, 10, 24)).astype(float)
    values[:, :, :] = values[:, :1, :]  # every seed answers alike → ICC 1
    table = reliability_table(_units(values, ("U.S.A.", "China", "Japan", "Germany")))
    icc = table.filter(pl.col("measure") == "icc1")["value"][0]
    assert icc == pytest.approx(1.0)
    alpha = table.filter(pl.col("measure").str.starts_with("cronbach"))
    assert set(alpha["measure"]) == {"cronbach_alpha_units", "cronbach_alpha_countries"} and alpha.height == 12


def test_holm_and_bh_match_statsmodels_and_families_are_named():
    rng = np.random.default_rng(7)
    p = rng.uniform(size=40) ** 3
    p[[3, 17]] = np.nan
    ok = np.isfinite(p)
    np.testing.assert_allclose(holm(p)[ok], multipletests(p[ok], method="holm")[1], rtol=1e-14)
    np.testing.assert_allclose(benjamini_hochberg(p)[ok], multipletests(p[ok], method="fdr_bh")[1], rtol=1e-14)
    assert np.isnan(holm(p)[3]) and np.isnan(benjamini_hochberg(p)[17])
    tables = {"kendall": pl.DataFrame({"kendall_p": p}, nan_to_null=False), "other": pl.DataFrame({"x": [1]})}
    families = adjust_families(tables)
    assert families == [{"family": "kendall.kendall_p", "tests": "tau per dimension × condition", "m": 38}]
    assert {"kendall_p", "kendall_p_holm", "kendall_p_bh"} <= set(tables["kendall"].columns)
