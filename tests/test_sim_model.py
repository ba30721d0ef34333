"""The generative model: its distributions match the documented formulas, and its truth is the reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import optimize, special

from runner.endpoints.sim import AnswerModel
from runner.endpoints.sim.data import load_scores
from runner.endpoints.sim.respondent import INDEX_TERMS, MEAN_BOUNDS
from runner.score.indices import indices_from_means

K = np.arange(1, 6)


def reference_distribution(target: float, spread: float, temperature: float, top_p: float) -> np.ndarray:
    """docs/simulator.md written independently: logits θ(k−3) − (k−3)²/(2s²), θ from the mean at T = 1."""

    def logits(theta: float) -> np.ndarray:
        return theta * (K - 3) - (K - 3) ** 2 / (2 * spread**2)

    theta = optimize.brentq(lambda t: special.softmax(logits(t)) @ K - target, -50, 50, xtol=1e-13)
    if temperature == 0:
        return (np.arange(5) == np.argmax(logits(theta))).astype(float)
    p = special.softmax(logits(theta) / temperature)
    order = np.argsort(-p, kind="stable")
    keep = order[: int(np.searchsorted(np.cumsum(p[order]), top_p - 1e-12)) + 1]
    q = np.zeros(5)
    q[keep] = p[keep]
    return q / q.sum()


@pytest.mark.parametrize(("target", "spread"), [(1.5, 1.0), (2.625, 1.0), (3.0, 0.6), (3.9, 1.3), (4.6, 1.0)])
@pytest.mark.parametrize(
    ("temperature", "top_p"), [(1.0, 1.0), (0.5, 1.0), (1.7, 1.0), (1.0, 0.7), (0.0, 1.0), (1.0, 0.0)]
)
def test_answer_distribution_matches_an_independent_implementation(
    target: float, spread: float, temperature: float, top_p: float
) -> None:
    from runner.endpoints.sim.respondent import _solve_theta, answer_distribution

    got = answer_distribution(_solve_theta(target, spread), spread, temperature, top_p)
    np.testing.assert_allclose(got, reference_distribution(target, spread, temperature, top_p), atol=1e-9)
    if temperature == 1.0 and top_p == 1.0:
        assert float(np.dot(got, K)) == pytest.approx(target, abs=1e-9)


def test_expected_indices_equal_signal_times_reference_minus_50() -> None:
    scores = load_scores("hofstede-2015")
    for signal in (1.0, 2.0):
        model = AnswerModel(scores, signal=signal)
        checked = 0
        for country, row in scores.table.items():
            targets = [model.target_mean(country, q) for q in range(1, 25)]
            if not all(MEAN_BOUNDS[0] < t < MEAN_BOUNDS[1] for t in targets):
                continue  # clamped targets keep the order but not the exact value
            means = np.array([model.expected_mean(country, q) for q in range(1, 25)])
            indices = indices_from_means(means)  # runner.score.indices, the scorer real runs use
            expected = [0.0 if row[d] is None else signal * (row[d] - 50.0) for d in INDEX_TERMS]
            np.testing.assert_allclose(indices, expected, atol=1e-6, err_msg=country)
            checked += 1
        assert checked > 80


@pytest.mark.parametrize(("temperature", "top_p"), [(0.0, 1.0), (0.3, 1.0), (1.0, 1.0), (1.5, 1.0), (1.0, 0.8)])
def test_expected_index_is_monotone_in_the_reference_score(temperature: float, top_p: float) -> None:
    grid = np.arange(0.0, 121.0, 2.0)
    table = {f"c{s:g}": dict.fromkeys(INDEX_TERMS, float(s)) for s in grid}
    model = AnswerModel(table)
    for dim in INDEX_TERMS:
        values = np.array([model.expected_indices(c, temperature, top_p)[dim] for c in table])
        steps = np.diff(values)
        assert np.all(steps >= -1e-9), (dim, values)
        if top_p == 1.0 and temperature > 0:
            assert np.all(steps > 0), f"{dim}: strictly increasing at T > 0"
        else:
            assert len(np.unique(values.round(9))) >= 6, f"{dim}: the staircase must have several levels"


def test_missing_and_unknown_countries_are_neutral() -> None:
    plain = AnswerModel(load_scores("hofstede-2015"))
    saudi = plain.truth("Saudi Arabia")
    assert saudi["reference"]["pdi"] is None and saudi["expected_index"]["pdi"] == pytest.approx(0.0, abs=1e-9)
    assert saudi["expected_index"]["lto"] == pytest.approx(2.0 * (36 - 50))
    unknown = plain.truth("Atlantis")
    assert unknown["country"] is None
    assert all(v == pytest.approx(0.0, abs=1e-9) for v in unknown["expected_index"].values())
    revised = AnswerModel(load_scores("hofstede-2015-arab-revised")).truth("Saudi Arabia")
    assert revised["expected_index"]["pdi"] == pytest.approx(2.0 * (72 - 50))


def test_aliases_resolve_to_the_reference_country() -> None:
    model = AnswerModel(load_scores("hofstede-2015"))
    assert model.truth("United States") == model.truth("U.S.A.") == model.truth("usa")


def test_sampling_follows_the_distribution() -> None:
    import random

    from scipy import stats

    model = AnswerModel(load_scores("hofstede-2015"))
    rng = random.Random(0)
    grid = itertools.product(["Japan", "Mexico"], [5, 19], [1.0, 0.6], [1.0, 0.8])
    for country, question, temperature, top_p in grid:
        counts = np.bincount(
            [model.sample(country, question, temperature, top_p, rng) for _ in range(3000)], minlength=6
        )[1:]
        probs = np.array(model.distribution(country, question, temperature, top_p))
        assert np.all(counts[probs == 0] == 0)
        kept = probs > 0
        if kept.sum() > 1:
            assert stats.chisquare(counts[kept], 3000 * probs[kept]).pvalue > 1e-4
