"""VSM13 index formulas against hand-worked examples; per-question statistics against numpy."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from runner.errors import InputError
from runner.score.indices import WEIGHTS, indices_from_means, indices_table, parse_constants, question_stats
from runner.survey.dimensions import DIMENSIONS


def _means(**answers: float) -> np.ndarray:
    """24 means of 3 (neutral) with some questions set: _means(q7=4, q2=1)."""
    m = np.full(24, 3.0)
    for key, value in answers.items():
        m[int(key[1:]) - 1] = value
    return m


# Each case moves only the four questions of one dimension; the other five indices must stay 0.
HAND_WORKED = {
    # PDI = 35(m07 - m02) + 25(m20 - m23) = 35(4 - 1) + 25(5 - 2) = 105 + 75 = 180
    "pdi": (dict(q7=4, q2=1, q20=5, q23=2), 180.0),
    # IDV = 35(m04 - m01) + 35(m09 - m06) = 35(2.5 - 1.5) + 35(1 - 3.2) = 35 - 77 = -42
    "idv": (dict(q4=2.5, q1=1.5, q9=1, q6=3.2), -42.0),
    # MAS = 35(m05 - m03) + 35(m08 - m10) = 35(2 - 4) + 35(4.6 - 1.6) = -70 + 105 = 35  (35, not 25, on m08 - m10)
    "mas": (dict(q5=2, q3=4, q8=4.6, q10=1.6), 35.0),
    # UAI = 40(m18 - m15) + 25(m21 - m24) = 40(2 - 3.5) + 25(4 - 1) = -60 + 75 = 15
    "uai": (dict(q18=2, q15=3.5, q21=4, q24=1), 15.0),
    # LTO = 40(m13 - m14) + 25(m19 - m22) = 40(5 - 1) + 25(1.4 - 1) = 160 + 10 = 170
    "lto": (dict(q13=5, q14=1, q19=1.4, q22=1), 170.0),
    # IVR = 35(m12 - m11) + 40(m17 - m16) = 35(1 - 2) + 40(3 - 2.2) = -35 + 32 = -3
    "ivr": (dict(q12=1, q11=2, q17=3, q16=2.2), -3.0),
}


@pytest.mark.parametrize("dim", DIMENSIONS)
def test_each_formula_hand_worked(dim):
    answers, expected = HAND_WORKED[dim]
    got = dict(zip(DIMENSIONS, indices_from_means(_means(**answers)), strict=True))
    for d in DIMENSIONS:
        assert got[d] == pytest.approx(expected if d == dim else 0.0, abs=1e-12)


def test_all_six_at_once_and_constants_shift_only_their_dimension():
    answers = {k: v for case, _ in HAND_WORKED.values() for k, v in case.items()}
    expected = np.array([HAND_WORKED[d][1] for d in DIMENSIONS])
    np.testing.assert_allclose(indices_from_means(_means(**answers)), expected, atol=1e-12)
    shifted = indices_from_means(_means(**answers), {"pdi": 20, "ivr": -3.5})
    np.testing.assert_allclose(shifted - expected, [20, 0, 0, 0, 0, -3.5], atol=1e-12)


def test_batched_shapes_and_equal_to_rowwise():
    rng = np.random.default_rng(7)
    means = rng.uniform(1, 5, size=(4, 3, 24))
    out = indices_from_means(means)
    assert out.shape == (4, 3, 6)
    np.testing.assert_allclose(out[2, 1], indices_from_means(means[2, 1]))
    # every dimension uses exactly four questions, weights summing to zero
    assert ((WEIGHTS != 0).sum(axis=0) == 4).all() and np.allclose(WEIGHTS.sum(axis=0), 0)


def test_missing_question_spoils_only_its_dimensions():
    m = _means()
    m[14] = np.nan  # Q15 → UAI only
    out = dict(zip(DIMENSIONS, indices_from_means(m), strict=True))
    assert math.isnan(out["uai"]) and all(out[d] == 0 for d in DIMENSIONS if d != "uai")


def test_bad_shapes_and_constants():
    with pytest.raises(InputError, match="24 questions"):
        indices_from_means(np.ones(23))
    with pytest.raises(InputError, match="unknown dimension"):
        indices_from_means(np.ones(24), {"pd": 1})


def test_parse_constants():
    assert parse_constants("pdi=20, IDV=-5.5") == {"pdi": 20.0, "idv": -5.5}
    assert parse_constants("") == {}
    with pytest.raises(InputError, match="DIM=NUMBER"):
        parse_constants("pdi:20")
    with pytest.raises(InputError, match=r"'x' .*not a number"):
        parse_constants("mas=x")


def test_question_stats_matches_numpy():
    rng = np.random.default_rng(3)
    rows = []
    for group in ("a", "b"):
        for q in (1, 2):
            answers = rng.integers(1, 6, size=7).astype(float).tolist() + [None]
            rows += [{"group": group, "question": q, "answer": a} for a in answers]
    frame = pl.DataFrame(rows, schema={"group": pl.String, "question": pl.Int64, "answer": pl.Int64})
    stats = question_stats(frame, ["group"]).collect()
    for row in stats.iter_rows(named=True):
        values = np.array(
            [
                r["answer"]
                for r in rows
                if r["group"] == row["group"] and r["question"] == row["question"] and r["answer"] is not None
            ],
            dtype=float,
        )
        assert row["n"] == 7
        assert row["mean"] == pytest.approx(values.mean())
        assert row["std"] == pytest.approx(values.std(ddof=0))
    sample = question_stats(frame, ["group"], ddof=1).collect()
    assert sample["std"][0] == pytest.approx(np.std([r["answer"] for r in rows[:7]], ddof=1))


def test_indices_table_pivots_long_means():
    long = pl.DataFrame(
        {
            "group": ["g"] * 24 + ["h"] * 24,
            "question": list(range(1, 25)) * 2,
            "mean": _means(q7=4, q2=1, q20=5, q23=2).tolist() + _means(q13=5, q14=1, q19=1.4, q22=1).tolist(),
        }
    )
    table = indices_table(long, ["group"]).sort("group")
    assert table["pdi"].to_list() == pytest.approx([180.0, 0.0])
    assert table["lto"].to_list() == pytest.approx([0.0, 170.0])
    partial = indices_table(long.filter(pl.col("question") != 15), ["group"])
    assert partial["uai"].is_nan().all() and not partial["pdi"].is_nan().any()
