"""Kendall tau-b per dimension (checked against scipy), CAT score, mis-ranks and the undefined-tau policies."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from runner.errors import InputError
from runner.score.ranking import Agreement, competition_ranks, error_percentage, rank_agreement


def _one_dim(model: list[float], ref: list[float], dim: int = 0, fill: float = 0.0):
    """indices (1, K, 6) and reference (K, 6) with ``dim`` set and the other dimensions 'perfect'."""
    k = len(model)
    x = np.tile(np.arange(k, 0, -1, dtype=float)[:, None], (1, 6))
    r = x.copy()  # reference equal to the model on the other dims → tau 1 there
    x[:, dim], r[:, dim] = model, ref
    return x[None], r


def test_tau_b_matches_scipy_on_random_inputs_with_ties():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 4, size=(60, 5, 6)).astype(float)  # few levels → many ties
    ref = rng.integers(0, 4, size=(5, 6)).astype(float)
    agreement = rank_agreement(x, ref)
    for g in range(60):
        for j in range(6):
            expected = kendalltau(x[g, :, j], ref[:, j]).statistic
            if np.isnan(expected):
                assert np.isnan(agreement.kendall[g, j]) and agreement.undefined[g, j]
            else:
                assert agreement.kendall[g, j] == pytest.approx(expected, abs=1e-12)
                assert not agreement.undefined[g, j]


def test_hand_worked_tau_and_misranks():
    # reference 80 > 60 > 40 (ranks 1, 2, 3); model 10 < 30 > 20 (ranks 3, 1, 2): every country mis-ranked.
    # pairs: (A,B) discordant, (A,C) discordant, (B,C) concordant → tau = (1 - 2) / 3 = -1/3
    x, ref = _one_dim([10, 30, 20], [80, 60, 40])
    a = rank_agreement(x, ref)
    assert a.kendall[0, 0] == pytest.approx(-1 / 3)
    np.testing.assert_array_equal(a.kendall[0, 1:], 1.0)
    assert a.cat_score[0] == pytest.approx((5 - 1 / 3) / 6)
    assert a.misranked[0, :, 0].tolist() == [True, True, True]
    assert a.misranked_count[0].tolist() == [1, 1, 1]


def test_model_tie_uses_tau_b_denominator_and_shared_rank():
    # model 10 = 10 > 5 → ranks 1, 1, 3; reference ranks 1, 2, 3 → only B mis-ranked.
    # tau-b = (2 - 0) / sqrt((3 - 1)(3 - 0)) = 2 / sqrt(6)
    x, ref = _one_dim([10, 10, 5], [80, 60, 40])
    a = rank_agreement(x, ref)
    assert a.kendall[0, 0] == pytest.approx(2 / np.sqrt(6))
    assert a.model_rank[0, :, 0].tolist() == [1, 1, 3]
    assert a.misranked[0, :, 0].tolist() == [False, True, False]


def test_undefined_tau_policies():
    x, ref = _one_dim([7, 7, 7], [80, 60, 40], dim=2)  # model constant on MAS
    nan = rank_agreement(x, ref, undefined_tau="nan")
    assert np.isnan(nan.kendall[0, 2]) and nan.undefined[0, 2]
    assert nan.cat_score[0] == pytest.approx(1.0)  # mean of the five defined dims
    assert not nan.counted[0, :, 2].any() and nan.misranked_share[0].tolist() == [0, 0, 0]
    minus = rank_agreement(x, ref, undefined_tau="-1")
    assert minus.kendall[0, 2] == -1.0 and minus.undefined[0, 2]
    assert minus.cat_score[0] == pytest.approx(4 / 6)
    # counted as usual: all tie at rank 1, so the two countries not ranked first in the reference are mis-ranked
    assert minus.misranked[0, :, 2].tolist() == [False, True, True]
    with pytest.raises(InputError, match="undefined_tau"):
        rank_agreement(x, ref, undefined_tau="zero")


def test_constant_reference_is_undefined_too():
    x, ref = _one_dim([1, 2, 3], [50, 50, 50])
    assert np.isnan(rank_agreement(x, ref).kendall[0, 0])
    assert rank_agreement(x, ref, undefined_tau="-1").kendall[0, 0] == -1


def test_missing_reference_excludes_country_from_that_dimension_only():
    x, ref = _one_dim([3, 1, 2, 4], [10, 30, 20, np.nan], dim=4)
    a = rank_agreement(x, ref)
    assert a.compared[:, 4].tolist() == [True, True, True, False] and a.compared[:, :4].all()
    assert a.kendall[0, 4] == pytest.approx(kendalltau([3, 1, 2], [10, 30, 20]).statistic)
    assert not a.counted[0, 3, 4] and a.counted[0, 3, 0]
    assert np.isnan(a.reference_rank[3, 4]) and np.isnan(a.model_rank[0, 3, 4])


def test_missing_index_gives_nan_not_policy():
    x, ref = _one_dim([1, np.nan, 3], [10, 30, 20], dim=1)
    a = rank_agreement(x, ref, undefined_tau="-1")
    assert np.isnan(a.kendall[0, 1]) and not a.undefined[0, 1]


def test_competition_ranks():
    np.testing.assert_array_equal(competition_ranks(np.array([5.0, 9, 9, 1])), [3, 1, 1, 4])
    r = competition_ranks(np.array([5.0, 9, np.nan, 1]))
    assert r[:2].tolist() == [2, 1] and np.isnan(r[2]) and r[3] == 3


def test_error_percentage_averages_per_group_shares():
    # CAT v2 Table 2 averages percentages over models: U.S. 60 %, 83 %, 100 % → 81 %.
    misranked = np.zeros((3, 1, 6), dtype=bool)
    counted = np.ones((3, 1, 6), dtype=bool)
    counted[0, 0, 5] = False  # first model: only five dimensions defined
    misranked[0, 0, :3] = True
    misranked[1, 0, :5] = True
    misranked[2, 0, :] = True
    empty = np.zeros((3, 6))
    a = Agreement(
        kendall=empty,
        undefined=empty.astype(bool),
        cat_score=np.zeros(3),
        compared=np.ones((1, 6), bool),
        misranked=misranked,
        counted=counted,
        model_rank=np.zeros((3, 1, 6)),
        reference_rank=np.zeros((1, 6)),
        policy="nan",
    )
    assert error_percentage(a)[0] == pytest.approx(100 * (3 / 5 + 5 / 6 + 1) / 3)
    assert round(float(error_percentage(a)[0])) == 81
