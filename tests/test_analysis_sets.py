"""Experiment-set measures against independent implementations (scipy, scikit-learn, scikit-bio) and the paper."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import f_oneway, pearsonr

from runner.analyze.agreement import masked_mean
from runner.analyze.design import infer_design
from runner.analyze.sets import centroid_correlations, disparity, factor_tests, set_separation
from runner.analyze.units import unit_array
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
    row = set_separation(units, human).row(0, named=True)
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


def test_permanova_and_permdisp_match_scikit_bio(units):
    from skbio import DistanceMatrix
    from skbio.stats.distance import permanova

    table = factor_tests(units, permutations=99, seed=1)
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
    small = set_separation(units, human, max_points=10, seed=2)
    assert (small["n_a"][0], small["n_b"][0]) == (10, 10)
    assert small.equals(set_separation(units, human, max_points=10, seed=2))
    assert not small.equals(set_separation(units, human, max_points=10, seed=3))
    assert factor_tests(units, permutations=9, max_points=10)["n"][0] == 20
