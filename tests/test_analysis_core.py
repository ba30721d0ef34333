"""Analysis of small runs whose answers are known: tables, indices, tau/CAT with bootstrap intervals."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import bootstrap

from runner.analyze.agreement import agreement_tables
from runner.analyze.design import infer_design
from runner.analyze.tables import question_table, status_rates, temperature_zero_disagreement
from runner.analyze.units import unit_array
from runner.errors import InputError
from runner.score.cat import score_means
from runner.score.indices import indices_from_means
from runner.score.means_file import MeansTable
from runner.score.ranking import rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import load_reference

COUNTRIES = ("U.S.A.", "China", "Arab countries", "Japan", "Germany", "Brazil")


def make_answers(seed: int = 0, *, models=("a", "b"), countries=COUNTRIES[:3], seeds=5, refusal=0.0, temps=(0.0,)):
    """Random answers 1–5 with a country-specific tilt; some refusals; one row per (cell, question)."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in models:
        for t in temps:
            for k, country in enumerate(countries):
                tilt = rng.uniform(-1, 1, size=24)
                for s in range(1, seeds + 1):
                    for q in range(1, 25):
                        value = int(np.clip(np.rint(3 + tilt[q - 1] + rng.normal(0, 0.8)), 1, 5))
                        refused = rng.random() < refusal
                        rows.append(
                            {
                                "model": model,
                                "temperature": t,
                                "country": country,
                                "seed": s,
                                "question": q,
                                "option_id": None if refused else value,
                                "status": "refusal" if refused else "ok",
                                "cell_key": f"{model}{k}{s}{q}",
                            }
                        )
    return pl.DataFrame(rows, schema_overrides={"option_id": pl.Int64})


def test_design_inference_and_errors():
    frame = make_answers()
    design = infer_design(frame.columns)
    assert design.factors == ("model", "temperature") and design.units == ("seed",)
    assert infer_design([*frame.columns, "gender", "age"]).units == ("seed", "gender", "age")
    with pytest.raises(InputError, match="missing column"):
        infer_design(["country", "question"])
    with pytest.raises(InputError, match="not in the answers"):
        infer_design(frame.columns, factors=["language"])
    with pytest.raises(InputError, match=r"factors: column\(s\) \['model'\] named more than once"):
        infer_design(frame.columns, factors=["model", "model"])  # `--factors model,model`: not a polars traceback


def test_question_table_matches_plain_python():
    frame = make_answers(refusal=0.2)
    table = question_table(frame.lazy(), ["model", "temperature"]).collect()
    for row in table.sample(20, seed=1).iter_rows(named=True):
        cell = frame.filter(
            (pl.col("model") == row["model"])
            & (pl.col("country") == row["country"])
            & (pl.col("question") == row["question"])
        )
        ok = [r["option_id"] for r in cell.iter_rows(named=True) if r["status"] == "ok"]
        assert row["n"] == len(ok) and row["status_ok"] == len(ok)
        assert row["status_refusal"] == cell.height - len(ok)
        if ok:
            assert row["mean"] == pytest.approx(np.mean(ok)) and row["std"] == pytest.approx(np.std(ok))


def test_point_estimates_equal_hofcat_score_on_the_same_means():
    frame = make_answers(3, refusal=0.1)
    ua = unit_array(frame.lazy(), infer_design(frame.columns))
    reference = load_reference("hofstede-2015")
    tables = agreement_tables(ua, reference, n_resamples=50)
    qt = question_table(frame.lazy(), ["model", "temperature"]).collect()
    for model in ("a", "b"):
        sub = qt.filter(pl.col("model") == model)
        means = np.array(
            [
                [sub.filter((pl.col("country") == c) & (pl.col("question") == q))["mean"][0] for q in range(1, 25)]
                for c in ua.countries
            ]
        )
        table = MeansTable(("g",), (ua.countries,), (means,), (means * np.nan,), (means * np.nan,), "memory")
        expected = score_means(table, reference)["groups"][0]
        got = tables["kendall"].filter(pl.col("model") == model)
        for d in DIMENSIONS:
            tau = got.filter(pl.col("dimension") == d)["tau"][0]
            assert (expected["kendall"][d] is None and math.isnan(tau)) or tau == pytest.approx(expected["kendall"][d])
        assert tables["cat"].filter(pl.col("model") == model)["cat_score"][0] == pytest.approx(expected["cat_score"])
        mis = tables["misranked"].filter(pl.col("model") == model)
        for c in ua.countries:
            assert mis.filter(pl.col("country") == c)["misranked"][0] == expected["misranked"][c]["count"]
        idx = tables["indices"].filter(pl.col("model") == model).sort("country")
        np.testing.assert_allclose(
            idx.select(DIMENSIONS).to_numpy(), indices_from_means(means)[np.argsort(ua.countries)], atol=1e-9
        )


def test_identical_seeds_give_a_degenerate_bootstrap_but_not_certainty():
    frame = make_answers(seeds=1)
    frame = pl.concat([frame.with_columns(seed=pl.lit(s)) for s in range(1, 6)])  # five identical seeds
    tables = agreement_tables(
        unit_array(frame.lazy(), infer_design(frame.columns)), load_reference("hofstede-2015"), n_resamples=100
    )
    cat = tables["cat"]
    assert (cat["boot_low"] == cat["cat_score"]).all() and (cat["boot_high"] == cat["cat_score"]).all()
    # five alike answers are not certainty: the rule-of-three floor leaves an interval around the estimate
    assert (cat["ci_low"] < cat["cat_score"]).all() or (cat["cat_score"] < cat["ci_high"]).all()
    assert ((cat["ci_low"] <= cat["cat_score"]) & (cat["cat_score"] <= cat["ci_high"])).all()
    assert (tables["indices"]["pdi_se"] > 0).all()
    assert cat["interval_note"].str.contains("answered alike").all()


@pytest.mark.slow
def test_bootstrap_interval_agrees_with_scipy_bootstrap():
    """Same statistic, resampled within each country by scipy.stats.bootstrap (independent samples)."""
    frame = make_answers(5, models=("a",), countries=COUNTRIES, seeds=12)
    ua = unit_array(frame.lazy(), infer_design(frame.columns))
    reference = load_reference("hofstede-2015")
    ours = agreement_tables(ua, reference, n_resamples=4000, seed=1)["cat"]
    ref = reference.matrix(ua.countries)

    def cat(*samples, axis):
        # scipy passes each sample as (24, ..., units): questions first, units on ``axis``
        means = np.stack([np.moveaxis(s.mean(axis=axis), 0, -1) for s in samples], axis=-2)  # (..., K, 24)
        flat = means.reshape(-1, len(samples), 24)
        return rank_agreement(indices_from_means(flat), ref).cat_score.reshape(means.shape[:-2])

    data = tuple(ua.values[0, k] for k in range(len(ua.countries)))  # (12, 24) each
    res = bootstrap(
        data, cat, n_resamples=4000, method="percentile", paired=False, vectorized=True, rng=np.random.default_rng(2)
    )
    assert ours["boot_low"][0] == pytest.approx(res.confidence_interval.low, abs=0.02)
    assert ours["boot_high"][0] == pytest.approx(res.confidence_interval.high, abs=0.02)
    assert ours["boot_low"][0] < ours["cat_score"][0] < ours["boot_high"][0]


def test_bootstrap_is_seeded():
    frame = make_answers(7, seeds=4)
    ua = unit_array(frame.lazy(), infer_design(frame.columns))
    reference = load_reference("hofstede-2015")
    a = agreement_tables(ua, reference, n_resamples=200, seed=4)["kendall"]
    b = agreement_tables(ua, reference, n_resamples=200, seed=4)["kendall"]
    c = agreement_tables(ua, reference, n_resamples=200, seed=5)["kendall"]
    assert a.equals(b) and not a.equals(c)


def test_error_percentage_and_countries_without_reference():
    frame = make_answers(countries=("U.S.A.", "China", "Arab countries", "Atlantis"))
    tables = agreement_tables(
        unit_array(frame.lazy(), infer_design(frame.columns)), load_reference("hofstede-2015"), n_resamples=20
    )
    assert tables["countries_without_reference"]["country"].to_list() == ["Atlantis"]
    mis = tables["misranked"]
    for country in ("U.S.A.", "China"):
        rows = mis.filter(pl.col("country") == country)
        expected = 100 * np.mean((rows["misranked"] / rows["of"]).to_numpy())
        got = tables["error_percentage"].filter(pl.col("country") == country)["error_pct"][0]
        assert got == pytest.approx(expected)


def test_status_rates_and_temperature_zero_disagreement():
    rows = []
    # temperature 0: Q1 answered 2,2,2 (agree), Q2 answered 2,3,2 (disagree), Q3 one ok answer (not repeated)
    for q, answers in ((1, [2, 2, 2]), (2, [2, 3, 2]), (3, [4, None, None])):
        for s, a in enumerate(answers, start=1):
            rows.append(
                {
                    "endpoint": "e",
                    "temperature": 0.0,
                    "country": "China",
                    "seed": s,
                    "question": q,
                    "option_id": a,
                    "status": "ok" if a else "no_answer",
                }
            )
    rows.append(
        {
            "endpoint": "e",
            "temperature": 1.0,
            "country": "China",
            "seed": 1,
            "question": 1,
            "option_id": None,
            "status": "refusal",
        }
    )
    frame = pl.DataFrame(rows, schema_overrides={"option_id": pl.Int64}).lazy()
    assert temperature_zero_disagreement(frame, ["endpoint", "temperature"]) == {
        "groups": 2,
        "disagreeing": 1,
        "share": 0.5,
    }
    rates = status_rates(frame, ["endpoint"])
    assert rates.filter(pl.col("status") == "ok")["count"][0] == 7
    assert rates.filter(pl.col("status") == "no_answer")["share"][0] == pytest.approx(2 / 10)
    assert rates.filter(pl.col("status") == "refusal")["share"][0] == pytest.approx(1 / 10)
    assert temperature_zero_disagreement(frame, ["endpoint"])["share"] is None


def test_store_layout_derivations(tmp_path):
    """No persona: country from the language and language 'native'; shuffled from shuffle_seed; part pairing."""
    from runner.analyze.load import load_answers

    responses = pl.DataFrame(
        {
            "cell_key": ["k1", "k2", "k3"],
            "endpoint": "e",
            "language": ["en", "zh", "zh"],
            "framing": ["none", "none", "persona"],
            "country": [None, None, "Japan"],
            "seed": [1, 1, 1],
            "temperature": [0.0] * 3,
            "option_order": [[1, 2, 3, 4, 5], [2, 1, 3, 4, 5], [1, 2, 3, 4, 5]],
            "shuffle_seed": [None, 9, 4],
            "response_text": ["2", "3", "4"],
        }
    )
    answers = pl.DataFrame(
        {
            "cell_key": ["k1", "k2", "k3"],
            "question": [1, 1, 1],
            "option_id": [2, 3, 4],
            "status": ["ok"] * 3,
            "parser_version": "x",
        }
    )
    for name, frame in (("responses", responses), ("answers", answers)):
        (tmp_path / name).mkdir()
        frame.write_parquet(tmp_path / name / "part-000001.parquet")
    got = load_answers(tmp_path).collect().sort("option_id")
    assert got["country"].to_list() == ["U.S.A.", "China", "Japan"]
    assert got["language"].to_list() == ["native", "native", "zh"]
    assert got["shuffled"].to_list() == [False, True, True]  # k3's random order happened to be 1-5
    assert "cell_key" not in got.columns and "response_text" not in got.columns


def test_one_condition_draws_exactly_what_bootstrap_kendall_tau_draws():
    """One bootstrap: the analysis's draws are stats_core.bootstrap_indices(..., (seed, c)), and (seed, 0) is the
    stream of bootstrap_kendall_tau(seed=seed) — so on complete data the intervals are the same numbers."""
    import stats_core

    reference = load_reference("hofstede-2015")
    for seed in (0, 3):
        frame = make_answers(seed, models=("a",), countries=COUNTRIES, seeds=8)
        ua = unit_array(frame.lazy(), infer_design(frame.columns))
        assert ua.conditions.height == 1 and np.isfinite(ua.values).all()
        ours = agreement_tables(ua, reference, n_resamples=500, seed=seed)["kendall"]
        samples = np.moveaxis(indices_from_means(ua.values[0]), -1, 1)  # (countries, 6, units)
        core = stats_core.bootstrap_kendall_tau(samples, reference.matrix(ua.countries), 500, seed=seed)
        # the analysis rounds each tau once from its integer counts (runner/score/ranking.py, rounded_tau); the
        # kernel computes (C − D) / sqrt(n_x n_y) in float64: the same draws, within an ulp
        np.testing.assert_allclose(ours["tau"].to_numpy(), core.statistic, rtol=0, atol=4e-16)
        np.testing.assert_allclose(ours["boot_low"].to_numpy(), core.confidence_interval.low, rtol=0, atol=4e-16)
        np.testing.assert_allclose(ours["boot_high"].to_numpy(), core.confidence_interval.high, rtol=0, atol=4e-16)
        np.testing.assert_array_equal(ours["undefined_share"].to_numpy() * 500, core.undefined)


def test_each_condition_draws_its_own_documented_stream(monkeypatch):
    import runner.analyze.agreement as agreement
    import stats_core

    calls = []
    real = agreement.bootstrap_index_blocks

    def spy(sizes, n_resamples, seed, block):
        calls.append((tuple(sizes), n_resamples, seed))
        yield from real(sizes, n_resamples, seed, block)
        # the blocks are bootstrap_indices' draws, cut into pieces
        whole = stats_core.bootstrap_indices(sizes, n_resamples, seed)
        pieces = list(real(sizes, n_resamples, seed, 7))
        for k, draws in enumerate(whole):
            np.testing.assert_array_equal(np.concatenate([p[k] for p in pieces]), draws)

    monkeypatch.setattr(agreement, "bootstrap_index_blocks", spy)
    frame = make_answers(2, temps=(0.0, 1.0), seeds=4)  # 2 models × 2 temperatures = 4 conditions
    ua = unit_array(frame.lazy(), infer_design(frame.columns))
    agreement_tables(ua, load_reference("hofstede-2015"), n_resamples=30, seed=9)
    assert calls == [((4, 4, 4), 30, (9, c)) for c in range(4)]
