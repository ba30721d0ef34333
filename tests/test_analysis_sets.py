"""Experiment-set measures against independent implementations (scipy, scikit-learn, scikit-bio) and the paper."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import f_oneway, pearsonr

import stats_core
from runner.analyze.agreement import masked_mean
from runner.analyze.design import infer_design
from runner.analyze.sets import (
    centroid_correlations,
    disparity,
    factor_groups,
    factor_tests,
    identity_correlations,
    respondent_table,
    set_pairs,
    set_separation,
)
from runner.analyze.units import unit_array
from runner.errors import InputError
from runner.score.indices import indices_from_means
from runner.survey.reference import load_reference
from test_analysis_core import make_answers

NINE = ("U.S.A.", "China", "France", "Germany", "Brazil", "India", "Singapore", "Japan", "South Africa")


@pytest.fixture(scope="module")
def units():
    frame = make_answers(2, models=("a", "b"), countries=NINE, seeds=6, refusal=0.02)
    return unit_array(frame.lazy(), infer_design(frame.columns))


def test_centroid_correlation_is_pearson_of_mean_vectors(units):
    table = centroid_correlations(units)
    assert table.height == 1 and table["factor"][0] == "model"
    ca, cb = (masked_mean(units.values[c].reshape(-1, 24), axis=0) for c in (0, 1))
    expected = pearsonr(ca, cb)
    assert table["pearson_r"][0] == pytest.approx(expected.statistic)
    assert table["pvalue"][0] == pytest.approx(expected.pvalue)


def test_disparity_reproduces_the_human_row_of_the_paper(units):
    table = disparity(units, load_reference("human-nine-nations"))
    assert table["nations"].to_list() == [9, 9]
    # value-differences study, Table 6 "Human Results": D = 20.330 (sigma with ddof 1 over its Table 3)
    assert table["d_human"][0] == pytest.approx(20.330, abs=5e-4)
    national = indices_from_means(
        np.stack([masked_mean(units.values[0, units.countries.index(n)], axis=0) for n in NINE])
    )
    np.testing.assert_allclose(
        table.select([f"sigma_{d}" for d in ("pdi", "idv", "mas", "uai", "lto", "ivr")]).row(0),
        national.std(axis=0, ddof=1),
        rtol=1e-9,
    )
    assert table["mcd"][0] == pytest.approx(national.std(axis=0, ddof=1).mean() / 20.330, rel=1e-4)


def test_separation_matches_sklearn_and_the_ss_h_equation(units):
    from sklearn.metrics import davies_bouldin_score, silhouette_score

    human = load_reference("human-nine-nations")
    row = set_separation(units, human, points="seed").row(0, named=True)
    points = [units.values[c][np.isfinite(units.values[c]).all(axis=2)] for c in (0, 1)]
    x = np.vstack([indices_from_means(p) for p in points])
    labels = np.repeat([0, 1], [len(p) for p in points])
    assert row["silhouette"] == pytest.approx(silhouette_score(x, labels))
    assert row["davies_bouldin"] == pytest.approx(davies_bouldin_score(x, labels))
    # SS_h (Eq. 4-5), written out directly
    nat = [
        indices_from_means(np.stack([masked_mean(units.values[c, units.countries.index(n)], axis=0) for n in NINE]))
        for c in (0, 1)
    ]
    h = human.matrix(NINE)

    def mean_dist(p, others, skip_self):
        d = np.linalg.norm(others - p, axis=1)
        return d.sum() / (len(others) - 1) if skip_self else d.mean()

    total = 0.0
    for own, other in ((nat[0], nat[1]), (nat[1], nat[0])):
        for i in range(9):
            a, b, ah = mean_dist(own[i], own, True), mean_dist(own[i], other, False), mean_dist(h[i], h, True)
            total += (b - a) / ah
    assert row["ss_h"] == pytest.approx(total / 18)
    # 6 seeds per nation and set: the within-nation deals number far more than 999, so the p is drawn
    assert row["ss_h_exact"] is False and 0 < row["ss_h_p"] <= 1


def test_permanova_and_permdisp_match_scikit_bio(units):
    from skbio import DistanceMatrix
    from skbio.stats.distance import permanova

    table = factor_tests(units, permutations=99, seed=1, points="seed")
    assert table["factor"].to_list() == ["model"] and table["levels"][0].to_list() == ["a", "b"]
    points = [units.values[c][np.isfinite(units.values[c]).all(axis=2)] for c in (0, 1)]
    x = np.vstack(points)
    labels = np.repeat(["a", "b"], [len(p) for p in points])
    dm = DistanceMatrix(np.sqrt(((x[:, None] - x[None]) ** 2).sum(axis=2)))
    assert table["permanova_f"][0] == pytest.approx(permanova(dm, labels, permutations=0)["test statistic"])
    # PERMDISP on Euclidean distances: one-way ANOVA of each point's distance to its group centroid
    z = [np.linalg.norm(p - p.mean(axis=0), axis=1) for p in points]
    assert table["permdisp_f"][0] == pytest.approx(f_oneway(*z).statistic)
    assert 0 < table["permanova_p"][0] <= 1 and table["n"][0] == len(x)


def test_distance_measures_subsample_large_sets_reproducibly(units):
    human = load_reference("human-nine-nations")
    small = set_separation(units, human, max_points=10, seed=2, points="seed")
    assert (small["n_a"][0], small["n_b"][0]) == (10, 10)
    assert small.equals(set_separation(units, human, max_points=10, seed=2, points="seed"))
    assert not small.equals(set_separation(units, human, max_points=10, seed=3, points="seed"))
    assert factor_tests(units, permutations=9, max_points=10, points="seed")["n"][0] == 20


def _temperature_answers(shift: float, seed: int = 4) -> pl.DataFrame:
    """Nine countries with strong tilts shared by both temperatures; temperature 1 shifts every answer by ``shift``."""
    rng = np.random.default_rng(seed)
    tilts = rng.uniform(-1.5, 1.5, size=(len(NINE), 24))
    rows = []
    for t in (0.0, 1.0):
        for k, country in enumerate(NINE):
            for s in range(1, 7):
                values = np.clip(np.rint(3 + tilts[k] + t * shift + rng.normal(0, 0.8, 24)), 1, 5).astype(int)
                rows += [
                    {"temperature": t, "country": country, "seed": s, "question": q + 1, "option_id": int(v)}
                    for q, v in enumerate(values)
                ]
    return pl.DataFrame(rows).with_columns(status=pl.lit("ok"))


def test_factor_tests_block_permutations_within_country():
    # A real temperature effect next to large country differences: pooled permutations drown it, blocked
    # ones (adonis2's strata = country) find it; F does not depend on the blocks, R² and ω² are within country.
    frame = _temperature_answers(0.2)
    units = unit_array(frame.lazy(), infer_design(frame.columns))
    blocked = factor_tests(units, permutations=999, seed=3, points="seed").row(0, named=True)
    pooled = factor_tests(units, permutations=999, seed=3, blocks=None, points="seed").row(0, named=True)
    assert (blocked["blocks"], pooled["blocks"]) == ("country", "none")
    for key in ("permanova_f", "permdisp_f"):
        assert blocked[key] == pooled[key]
    assert blocked["permanova_omega2"] > 0.01 > pooled["permanova_omega2"]  # the countries no longer count as noise
    assert blocked["permanova_p"] < 0.01 < 0.1 < pooled["permanova_p"]
    # the same test called directly, with each respondent's country as the stratum
    points = [units.values[c][np.isfinite(units.values[c]).all(axis=2)] for c in (0, 1)]
    countries = np.concatenate([np.nonzero(np.isfinite(units.values[c]).all(axis=2))[0] for c in (0, 1)])
    direct = stats_core.permanova(
        stats_core.pdist(np.vstack(points)), np.repeat([0, 1], [len(p) for p in points]), 999, 3, strata=countries
    )
    assert blocked["permanova_p"] == direct.pvalue and blocked["permanova_r2"] == direct.r_squared
    assert blocked["permanova_omega2"] == direct.omega_squared
    assert blocked["permanova_omega2"] < blocked["permanova_r2"]


def test_factor_tests_say_when_their_p_is_exact(units):
    # Two models × 3 seeds in one country: 20 distinct splits of 6 points, each visited once — p is the share of
    # splits (observed included) whose pseudo-F is at least the observed one, counted here with scikit-bio's F.
    from itertools import combinations

    from skbio import DistanceMatrix
    from skbio.stats.distance import permanova

    frame = make_answers(5, countries=NINE[:1], seeds=3)
    small = unit_array(frame.lazy(), infer_design(frame.columns))
    row = factor_tests(small, permutations=999, seed=1, points="seed").row(0, named=True)
    assert (row["exact"], row["permutations"], row["n"]) == (True, 19, 6)
    points = [small.values[c][np.isfinite(small.values[c]).all(axis=2)] for c in (0, 1)]
    dm = DistanceMatrix(stats_core.squareform(stats_core.pdist(np.vstack(points))))
    f_of = [
        permanova(dm, np.isin(np.arange(6), split).astype(int), permutations=0)["test statistic"]
        for split in combinations(range(6), 3)
    ]
    at_least = sum(f >= row["permanova_f"] * (1 - 1e-9) for f in f_of)
    assert row["permanova_p"] == pytest.approx(at_least / 20, abs=1e-12)
    assert row["p_min"] == pytest.approx(1 / 20) and row["note"] is None  # 0.05 is reachable, just
    two_by_two = make_answers(5, countries=NINE[:1], seeds=2)
    tiny = factor_tests(unit_array(two_by_two.lazy(), infer_design(two_by_two.columns)), points="seed").row(
        0, named=True
    )
    assert (tiny["permutations"], tiny["p_min"]) == (5, pytest.approx(1 / 6))  # C(4, 2) = 6 splits
    assert tiny["note"] == "cannot reach p < 0.05: smallest attainable p = 0.167"
    drawn = factor_tests(units, permutations=99, seed=1, points="seed").row(0, named=True)
    assert (drawn["exact"], drawn["permutations"]) == (False, 99)


def test_factor_tests_reject_unknown_blocks(units):
    with pytest.raises(InputError, match="permutation blocks"):
        factor_tests(units, permutations=9, blocks="model")


def _identity_answers(seeds: int = 3, seed: int = 6) -> pl.DataFrame:
    """Two models (served by two endpoints) × two languages, 3 countries × 2 genders × 2 ages, ``seeds`` seeds."""
    rng = np.random.default_rng(seed)
    rows = []
    for endpoint, model in (("e7", "m7"), ("e70", "m70")):
        for language in ("en", "zh"):
            for country in NINE[:3]:
                tilt = rng.uniform(-1, 1, 24)
                for gender in ("female", "male"):
                    for age in (25, 45):
                        for s in range(1, seeds + 1):
                            values = np.clip(np.rint(3 + tilt + rng.normal(0, 0.7, 24)), 1, 5).astype(int)
                            rows += [
                                {
                                    "endpoint": endpoint,
                                    "model": model,
                                    "language": language,
                                    "country": country,
                                    "gender": gender,
                                    "age": age,
                                    "seed": s,
                                    "question": q + 1,
                                    "option_id": int(v),
                                }
                                for q, v in enumerate(values)
                            ]
    return pl.DataFrame(rows).with_columns(status=pl.lit("ok"))


@pytest.fixture(scope="module")
def identity_units():
    frame = _identity_answers()
    return unit_array(frame.lazy(), infer_design(frame.columns))


def test_identity_points_average_each_identitys_seeds(identity_units):
    u = identity_units
    table = respondent_table(u)
    assert table.height == 4 * 3 * 4  # sets × countries × (gender × age)
    assert set(table["identity"]) == {f"gender={g}, age={a}" for g in ("female", "male") for a in (25, 45)}
    first = table.row(0, named=True)
    c = u.condition_labels().index(first["set"])
    k = u.countries.index(first["country"])
    gender, age = (part.split("=")[1] for part in first["identity"].split(", "))
    mask = ((u.units["gender"] == gender) & (u.units["age"] == int(age))).to_numpy()
    expected = u.values[c, k, mask].mean(axis=0)
    np.testing.assert_allclose([first[f"q{q}"] for q in range(1, 25)], expected)
    np.testing.assert_allclose(
        [first[d] for d in ("pdi", "idv", "mas", "uai", "lto", "ivr")], indices_from_means(expected)
    )
    assert respondent_table(u, points="seed").height == 4 * 3 * 4 * 3


def test_aliased_factors_are_one_and_cross_pairs_differ_in_model_and_language(identity_units):
    assert factor_groups(identity_units) == [("endpoint", "model"), ("language",)]
    plain = set_pairs(identity_units)
    assert sorted(f for _, _, f in plain) == ["endpoint/model"] * 2 + ["language"] * 2
    cross = [f for _, _, f in set_pairs(identity_units, cross=True) if f not in ("endpoint/model", "language")]
    assert cross == ["endpoint/model × language"] * 2
    separation = set_separation(identity_units, load_reference("human-nine-nations"), permutations=99)
    assert separation.height == 6 and separation["ss_h"].is_not_null().all()
    assert separation["ss_h_p"].is_between(0.01, 1.0).all() and separation["ss_h_null_mean"].is_not_null().all()
    tests = factor_tests(identity_units, permutations=99)
    assert sorted(tests["factor"]) == ["endpoint/model"] * 2 + ["language"] * 2
    assert (tests["n"] == 24).all()  # 12 identity points per set


def test_identity_correlations_are_pearson_of_group_means(identity_units):
    u = identity_units
    table = identity_correlations(u)
    assert table.height == 4 * 3  # sets × (country, gender, age)
    row = table.filter(pl.col("context") == "country").row(0, named=True)
    points = respondent_table(u).filter(pl.col("set") == row["set"])
    means = [
        points.filter(pl.col("country") == n).select([f"q{q}" for q in range(1, 25)]).to_numpy().mean(axis=0)
        for n in sorted(set(points["country"]))
    ]
    rs = [pearsonr(means[i], means[j]).statistic for i in range(3) for j in range(i + 1, 3)]
    assert (row["groups"], row["pairs"]) == (3, 3)
    assert row["mean_r"] == pytest.approx(np.mean(rs)) and row["min_r"] == pytest.approx(min(rs))
    gender = table.filter(pl.col("context") == "gender").row(0, named=True)
    assert (gender["groups"], gender["pairs"]) == (2, 1)


def test_points_option_is_checked(identity_units):
    with pytest.raises(InputError, match="points"):
        respondent_table(identity_units, points="respondent")
