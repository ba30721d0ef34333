"""Comparisons between conditions (runner/score/compare.py, runner/analyze/comparisons.py): the exact paired swap
p-values against a brute-force enumeration with scipy, the Monte Carlo path, the interval's consistency with the
test, and the tables ``hofcat analyze`` writes (with the family's Holm / BH adjustment)."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from scipy.stats import kendalltau

import runner as hofcat
from runner.analyze.run import AnalysisOptions, analyze_answers
from runner.endpoints.sim.respondent import AnswerModel
from runner.score import compare
from runner.score.compare import condition_difference
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import load_reference
from runner.survey.vocab import QUESTIONS


def _taus(scores: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """scipy's tau-b per dimension over the countries with a reference score, and their mean (CAT)."""
    taus = []
    for d in range(scores.shape[1]):
        keep = np.isfinite(ref[:, d])
        taus.append(kendalltau(scores[keep, d], ref[keep, d]).statistic)
    taus = np.array(taus, dtype=float)
    return np.append(taus, np.nanmean(taus))


def _brute_force(a: np.ndarray, b: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Two-sided p of A − B over all 2^K swaps of the countries' score vectors, enumerated one by one."""
    observed = _taus(a, ref) - _taus(b, ref)
    hits = np.zeros(observed.shape)
    total = 0
    for swap in itertools.product((False, True), repeat=a.shape[0]):
        m = np.array(swap)[:, None]
        d = _taus(np.where(m, b, a), ref) - _taus(np.where(m, a, b), ref)
        hits += np.abs(d) >= np.abs(observed) - 1e-12
        total += 1
    return hits / total


def _errors(k: int, rng: np.random.Generator):
    return tuple((rng.uniform(5, 20, (k, 6)), np.full((k, 6), 4.0)) for _ in range(2))


@pytest.mark.parametrize("case", range(8))
def test_swap_p_values_equal_a_brute_force_enumeration(case):
    rng = np.random.default_rng(case)
    k = 3 + case % 4
    ref = rng.integers(0, 5, (k, 6)).astype(float) if case % 2 else rng.uniform(0, 100, (k, 6))  # ties in ref
    ref[0, 2] = np.nan if k > 3 else ref[0, 2]  # a country without a reference score on UAI
    a = rng.integers(-40, 40, (k, 6)).astype(float)  # integer scores: ties on both sides
    b = a + rng.normal(0, 25, (k, 6)).round()
    got = condition_difference((a, b), _errors(k, rng), ref)
    want = _brute_force(a, b, ref)
    defined = np.isfinite(got.difference)
    np.testing.assert_allclose(got.p[defined], want[:6][defined], rtol=0, atol=1e-12)
    assert got.cat_p == pytest.approx(want[6], abs=1e-12)
    assert got.method == "exact" and got.swaps == 2**k
    np.testing.assert_allclose(got.difference, (_taus(a, ref) - _taus(b, ref))[:6], atol=1e-12)


def test_the_most_extreme_difference_gets_the_smallest_attainable_p():
    rng = np.random.default_rng(1)
    k = 5
    ref = rng.uniform(0, 100, (k, 6))
    a = ref.copy()  # perfectly ranked
    b = -ref  # perfectly reversed: no swap gives a larger |A − B|
    got = condition_difference((a, b), _errors(k, rng), ref)
    assert got.cat_difference == pytest.approx(2.0)
    np.testing.assert_allclose(got.p, got.p_min)
    # swapping the country with the smallest score keeps every rank (it stays the smallest on both sides)
    np.testing.assert_allclose(got.p, _brute_force(a, b, ref)[:6])
    assert (got.p >= 2 / 2**k).all() and got.cat_p == pytest.approx(got.cat_p_min)


def test_monte_carlo_swaps_agree_with_the_exact_p_and_are_reproducible(monkeypatch):
    rng = np.random.default_rng(4)
    k = 10
    ref = rng.uniform(0, 100, (k, 6))
    a = ref + rng.normal(0, 40, (k, 6))
    b = rng.normal(0, 40, (k, 6))
    errors = _errors(k, rng)
    exact = condition_difference((a, b), errors, ref)
    monkeypatch.setattr(compare, "EXACT_MAX", 5)
    drawn = condition_difference((a, b), errors, ref, monte_carlo=4000, seed=(3, 1))
    again = condition_difference((a, b), errors, ref, monte_carlo=4000, seed=(3, 1))
    assert drawn.method == "monte-carlo" and drawn.swaps == 4000
    np.testing.assert_array_equal(drawn.p, again.p)
    se = np.sqrt(exact.p * (1 - exact.p) / 4000) + 1 / 4001
    assert (np.abs(drawn.p - exact.p) <= 4 * se).all()


def test_difference_interval_contains_the_estimate_and_excludes_zero_only_with_a_significant_test():
    rng = np.random.default_rng(9)
    for _ in range(20):
        k = int(rng.integers(3, 9))
        ref = rng.uniform(0, 100, (k, 6))
        a = ref + rng.normal(0, rng.choice([5, 60]), (k, 6))
        b = rng.normal(0, 40, (k, 6))
        got = condition_difference((a, b), _errors(k, rng), ref)
        assert (got.low <= got.difference + 1e-12).all() and (got.difference <= got.high + 1e-12).all()
        excluded = (got.low > 0) | (got.high < 0)
        assert (got.p[excluded] <= 0.05).all()
        assert got.cat_low <= got.cat_difference <= got.cat_high
        assert not (got.cat_low > 0 or got.cat_high < 0) or got.cat_p <= 0.05


def _answers(countries: list[str], seeds: int) -> pl.DataFrame:
    """Simulated answers of two models: one that follows Hofstede's scores strongly, one that ignores them."""
    reference = load_reference("hofstede-2015")
    table = {c: dict(zip(DIMENSIONS, map(float, reference.matrix([c])[0]), strict=True)) for c in countries}
    rng = np.random.default_rng(0)
    rows = []
    for model, signal in (("aligned", 4.0), ("flat", 0.0)):
        sim = AnswerModel(table, signal=signal)
        for c in countries:
            for q in QUESTIONS:
                probs = sim.distribution(c, q, 1.0, 1.0)
                for seed, option in enumerate(rng.choice(5, size=seeds, p=probs) + 1):
                    rows.append({"model": model, "country": c, "seed": seed, "question": q, "status": "ok",
                                 "option_id": int(option)})  # fmt: skip
    return pl.DataFrame(rows, schema_overrides={"option_id": pl.Int16})


def test_analysis_writes_paired_differences_with_the_family_adjustment():
    countries = ["Germany", "Japan", "Brazil", "China", "Sweden", "Mexico", "India", "U.S.A."]
    tables, summary = analyze_answers(_answers(countries, 20).lazy(), AnalysisOptions(n_resamples=20, permutations=99))
    cat = tables["cat_differences"]
    kendall = tables["kendall_differences"]
    assert cat.height == 1 and kendall.height == 6
    row = cat.row(0, named=True)
    assert {row["condition_a"], row["condition_b"]} == {"model=aligned", "model=flat"}
    assert row["factor"] == "model" and row["n_countries"] == 8 and row["p_method"] == "exact"
    sign = 1 if row["condition_a"] == "model=aligned" else -1
    assert sign * row["difference"] > 0.5 and row["p"] <= 2 / 2**8 + 1e-12  # the most extreme of the 256 swaps
    assert row["ci_low"] <= row["difference"] <= row["ci_high"]
    cats = tables["cat"]
    by_model = dict(zip(cats["model"], cats["cat_score"], strict=True))
    assert row["difference"] == pytest.approx(by_model[row["condition_a"][6:]] - by_model[row["condition_b"][6:]])
    assert {"p_holm", "p_bh"} <= set(cat.columns) and {"p_holm", "p_bh"} <= set(kendall.columns)
    families = {f["family"]: f["m"] for f in summary["multiple_comparisons"]}
    assert families["kendall_differences.p"] == 6 and families["cat_differences.p"] == 1


def test_python_api_compares_any_two_conditions_as_the_analysis_does(tmp_path):
    countries = ["Germany", "Japan", "Brazil", "China"]
    frame = _answers(countries, 10)
    frame.write_parquet(tmp_path / "answers.parquet")
    options = AnalysisOptions(n_resamples=10, permutations=99)
    got = hofcat.compare_conditions(tmp_path, {"model": "aligned"}, {"model": "flat"}, options)
    assert got["dimension"].to_list() == [*DIMENSIONS, "cat"]
    tables, _ = analyze_answers(frame.lazy(), options)
    cat = tables["cat_differences"].row(0, named=True)
    sign = 1 if cat["condition_a"] == "model=aligned" else -1
    row = got.row(6, named=True)
    assert row["difference"] == pytest.approx(sign * cat["difference"]) and row["p"] == pytest.approx(cat["p"])
    assert row["p_min"] == pytest.approx(2 / 2**4) and "always contains 0" in row["note"]  # 4 countries: p ≥ 1/8
    with pytest.raises(hofcat.InputError, match="modle is not a factor"):
        hofcat.compare_conditions(tmp_path, {"modle": "x"}, {"model": "flat"})
    with pytest.raises(hofcat.InputError, match="matches 0 conditions"):
        hofcat.compare_conditions(tmp_path, {"model": "x"}, {"model": "flat"})
