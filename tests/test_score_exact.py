"""Exact ties and exact permutation p-values: results equal exact arithmetic (fractions) on every backend.

Issue 13: with 5 seeds every mean is a multiple of 0.2 and two countries can have equal indices that float64
computes as −14.000000000000007 and −13.999999999999993; the broken tie changed tau and the mis-ranks.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import stats_core
from runner.analyze.agreement import agreement_tables
from runner.analyze.units import UnitArray
from runner.cli import main
from runner.score.indices import FORMULAS, indices_from_means
from runner.score.permutation import permutation_pvalues
from runner.score.ranking import merge_ties, rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import load_reference

BACKENDS = stats_core.available()
COUNTRIES = ("U.S.A.", "China", "Japan", "Germany")


def _tie_answers() -> np.ndarray:
    """(4 countries, 5 seeds, 24) integer answers; U.S.A. and China have exactly equal IDV, float64 says not."""
    rng = np.random.default_rng(3)
    answers = rng.integers(1, 6, size=(4, 5, 24)).astype(np.float64)
    # IDV = 35(m04 − m01) + 35(m09 − m06): means 3.2, 3.8, 4.2, 3.2 vs 3.6, 4.2, 4.2, 3.2 → both −14 exactly
    for k, items in ((0, (16, 19, 21, 16)), (1, (18, 21, 21, 16))):
        for q, total in zip((1, 4, 6, 9), items, strict=True):
            base = [total // 5] * 5
            for i in range(total % 5):
                base[i] += 1
            answers[k, :, q - 1] = base
    return answers


def _exact_indices(answers: np.ndarray) -> list[list[Fraction]]:
    """Indices in exact arithmetic: means as Fractions of integer sums, the official weights."""
    out = []
    for country in answers:
        means = [Fraction(int(country[:, q].sum()), country.shape[0]) for q in range(24)]
        row = []
        for d in DIMENSIONS:
            (w1, p1, m1), (w2, p2, m2) = FORMULAS[d]
            row.append(int(w1) * (means[p1 - 1] - means[m1 - 1]) + int(w2) * (means[p2 - 1] - means[m2 - 1]))
        out.append(row)
    return out


def _sign(a, b) -> int:
    return int(a > b) - int(a < b)


def _tau_counts(x, y) -> tuple[int, int]:
    """Tau-b as (C − D, n_x · n_y) in integers."""
    n = len(x)
    s = nx = ny = 0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = _sign(x[i], x[j]), _sign(y[i], y[j])
            s += a * b
            nx += a != 0
            ny += b != 0
    return s, nx * ny


def _tau(x, y) -> float:
    num, den = _tau_counts(x, y)
    return num / math.sqrt(den) if den else math.nan


def _competition(values) -> list[int]:
    return [1 + sum(v > u for v in values) for u in values]


def test_float_indices_break_the_tie_that_exact_arithmetic_has():
    answers = _tie_answers()
    exact = _exact_indices(answers)
    assert exact[0][1] == exact[1][1] == -14
    floats = indices_from_means(answers.mean(axis=1), exact=False)
    assert floats[0, 1] != floats[1, 1]  # the float64 defect the ranking must not see
    merged = merge_ties(floats[:, 1])
    assert merged[0] == merged[1] and len(set(merged.tolist())) == len({e[1] for e in exact})
    rounded = indices_from_means(answers.mean(axis=1))  # the default: exact, rounded once
    assert rounded[0, 1] == rounded[1, 1] == -14.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_tau_and_misranks_equal_exact_arithmetic_on_every_backend(backend):
    answers = _tie_answers()
    exact = _exact_indices(answers)
    ref = load_reference("hofstede-2015").matrix(COUNTRIES)
    got = rank_agreement(indices_from_means(answers.mean(axis=1))[None], ref, backend=backend)
    for j in range(6):
        x = [row[j] for row in exact]
        assert got.kendall[0, j] == pytest.approx(_tau(x, ref[:, j].tolist()), abs=1e-12)
        model_rank, ref_rank = _competition(x), _competition(ref[:, j].tolist())
        assert got.model_rank[0, :, j].tolist() == model_rank
        assert got.misranked[0, :, j].tolist() == [m != r for m, r in zip(model_rank, ref_rank, strict=True)]
    # summation order does not matter: the same means summed backwards give the same tau
    backwards = indices_from_means(answers[:, ::-1].cumsum(axis=1)[:, -1] / 5)
    again = rank_agreement(backwards[None], ref, backend=backend)
    np.testing.assert_array_equal(again.kendall, got.kendall)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_analysis_tau_misranks_and_intervals_equal_exact_arithmetic(backend):
    answers = _tie_answers()
    units = UnitArray(
        pl.DataFrame({"_all": [1]}),
        COUNTRIES,
        pl.DataFrame({"seed": list(range(1, 6))}),
        answers[None].copy(),
    )
    reference = load_reference("hofstede-2015")
    ref = reference.matrix(COUNTRIES)
    resamples = 300
    tables = agreement_tables(units, reference, n_resamples=resamples, seed=5, backend=backend)
    kendall = tables["kendall"]
    exact = _exact_indices(answers)
    for j in range(6):
        assert kendall["tau"][j] == pytest.approx(_tau([r[j] for r in exact], ref[:, j].tolist()), abs=1e-12)
    mis = tables["misranked"].sort("country")
    for name in COUNTRIES:
        k = COUNTRIES.index(name)
        expected = sum(_competition([r[j] for r in exact])[k] != _competition(ref[:, j].tolist())[k] for j in range(6))
        assert mis.filter(pl.col("country") == name)["misranked"][0] == expected
    # the bootstrap, recomputed in exact arithmetic from the same documented draws
    draws = stats_core.bootstrap_indices([5] * 4, resamples, (5, 0))
    taus = np.empty((resamples, 6))
    for r in range(resamples):
        resampled = np.stack([answers[k, draws[k][r]] for k in range(4)])
        ex = _exact_indices(resampled)
        taus[r] = [_tau([row[j] for row in ex], ref[:, j].tolist()) for j in range(6)]
    low, high = stats_core.percentile_interval(taus.T)
    np.testing.assert_allclose(kendall["boot_low"].to_numpy(), low, atol=1e-12)
    np.testing.assert_allclose(kendall["boot_high"].to_numpy(), high, atol=1e-12)
    # the estimand interval is the same on every backend, and holds its point estimate
    assert (kendall["ci_low"] <= kendall["tau"]).all() and (kendall["tau"] <= kendall["ci_high"]).all()
    if backend != BACKENDS[0]:
        first = agreement_tables(units, reference, n_resamples=resamples, seed=5, backend=BACKENDS[0])["kendall"]
        assert first.select("ci_low", "ci_high").equals(kendall.select("ci_low", "ci_high"))


def _brute_force(x: np.ndarray, y: np.ndarray) -> tuple[list[float], float]:
    """Share of all relabellings with |tau| ≥ |observed| per dimension (integers), and for the CAT score."""
    k, dims = x.shape
    obs = [_tau_counts(x[:, d].tolist(), y[:, d].tolist()) for d in range(dims)]
    obs_cat = np.mean([n / math.sqrt(d) for n, d in obs if d])
    hits, cat_hits, total = [0] * dims, 0, 0
    for perm in itertools.permutations(range(k)):
        total += 1
        taus = []
        for d in range(dims):
            n, den = _tau_counts([x[p, d] for p in perm], y[:, d].tolist())
            if den and obs[d][1] and n * n * obs[d][1] >= obs[d][0] ** 2 * den:
                hits[d] += 1
            if den:
                taus.append(n / math.sqrt(den))
        if taus and abs(np.mean(taus)) >= abs(obs_cat) - 1e-12:
            cat_hits += 1
    return [h / total if obs[d][1] else math.nan for d, h in enumerate(hits)], cat_hits / total


@pytest.mark.slow
@pytest.mark.parametrize("k", [3, 4, 5, 6, 7, 8])
def test_exact_pvalues_equal_brute_force_enumeration_with_ties(k):
    rng = np.random.default_rng(k)
    x = rng.integers(0, 3, size=(k, 6)).astype(float) * 0.2  # few levels: ties in the model …
    y = rng.integers(0, 4, size=(k, 6)).astype(float)  # … and in the reference
    x[:, 0] = np.arange(k)  # one dimension without ties
    got = permutation_pvalues(x, y)
    kendall, cat = _brute_force(x, y)
    np.testing.assert_allclose(got.kendall_p, kendall, rtol=0, atol=1e-15)
    assert got.cat_p == pytest.approx(cat, abs=1e-15)
    assert got.method == "exact" and got.relabellings == math.factorial(k)


def test_attainable_minimum_for_three_and_four_countries():
    for k, expected in ((3, 1 / 3), (4, 1 / 12)):
        x = np.tile(np.arange(k, dtype=float)[:, None], (1, 6))
        got = permutation_pvalues(x, x)
        np.testing.assert_allclose(got.kendall_p, expected)
        np.testing.assert_allclose(got.kendall_p_min, expected)
        assert got.cat_p == pytest.approx(expected) and got.cat_p_min == pytest.approx(expected)


def test_monte_carlo_beyond_nine_countries_is_seeded_with_its_error():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(11, 6))
    y = x + rng.normal(size=(11, 6))
    a = permutation_pvalues(x, y, monte_carlo=999, seed=(1, 2))
    b = permutation_pvalues(x, y, monte_carlo=999, seed=(1, 2))
    c = permutation_pvalues(x, y, monte_carlo=999, seed=(1, 3))
    assert a.method == "monte-carlo" and a.relabellings == 999
    np.testing.assert_array_equal(a.kendall_p, b.kendall_p)
    assert not np.array_equal(a.kendall_p, c.kendall_p)
    assert (a.kendall_p >= 1 / 1000).all() and (a.standard_error_kendall > 0).all()


def _means_csv(tmp_path, missing: str | None = None) -> str:
    rng = np.random.default_rng(4)
    countries = ("USA", "China", "Japan", "Germany")
    lines = ["group,country,question,mean"]
    for c in countries:
        for q in range(1, 25):
            value = f"{rng.uniform(1, 5):.2f}"
            if missing is not None and c == "China" and q == 19:
                value = missing
            lines.append(f"g,{c},{q},{value}")
    path = tmp_path / "means.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_score_json_carries_exact_p_values(tmp_path, capsys):
    assert main(["score", "--means", _means_csv(tmp_path), "--reference", "hofstede-2015"]) == 0
    group = json.loads(capsys.readouterr().out)["groups"][0]
    assert set(group["kendall_p"]) == set(group["kendall"]) == set(DIMENSIONS)
    assert group["p_method"] == "exact"
    # 4 countries: 2 of the 24 relabellings reach |tau| = 1, unless the reference ties (MAS: Japan = Germany = 66)
    assert [group["kendall_p_min"][d] for d in DIMENSIONS if d != "mas"] == pytest.approx([1 / 12] * 5)
    assert group["kendall_p_min"]["mas"] == pytest.approx(4 / 24)
    x = np.array([[group["indices"][c][d] for d in DIMENSIONS] for c in group["countries"]])
    ref = load_reference("hofstede-2015").matrix(group["countries"])
    kendall, cat = _brute_force(x, ref)
    assert list(group["kendall_p"].values()) == pytest.approx(kendall)
    assert group["cat_p"] == pytest.approx(cat) and group["cat_p_min"] is not None


@pytest.mark.parametrize("marker", ["", "NA", "Data Not Available", "n/a"])
def test_score_accepts_missing_means_and_reports_excluded_dimensions(tmp_path, capsys, marker):
    assert main(["score", "--means", _means_csv(tmp_path, marker), "--reference", "hofstede-2015"]) == 0
    group = json.loads(capsys.readouterr().out)["groups"][0]
    assert group["excluded_missing_means"] == {"lto": {"China": [19]}}  # LTO = 40(m13 − m14) + 25(m19 − m22)
    assert group["indices"]["China"]["lto"] is None and group["kendall"]["lto"] is None
    assert group["kendall_p"]["lto"] is None
    assert all(group["kendall"][d] is not None for d in DIMENSIONS if d != "lto")
    assert group["cat_score"] == pytest.approx(np.mean([group["kendall"][d] for d in DIMENSIONS if d != "lto"]))
    assert (
        main(["score", "--means", _means_csv(tmp_path, marker), "--reference", "hofstede-2015", "--format", "table"])
        == 0
    )
    assert "LTO: not scored, a mean is missing for China (Q19)" in capsys.readouterr().out


def test_score_reports_estimand_intervals_when_std_and_n_are_given(tmp_path, capsys):
    rng = np.random.default_rng(8)
    lines = ["group,country,question,mean,std,n"] + [
        f"g,{c},{q},{rng.uniform(1.5, 4.5):.2f},{rng.uniform(0.5, 1.2):.2f},20"
        for c in ("USA", "China", "Japan", "Germany", "Brazil")
        for q in range(1, 25)
    ]
    path = tmp_path / "means.csv"
    path.write_text("\n".join(lines) + "\n")
    assert main(["score", "--means", str(path), "--reference", "hofstede-2015"]) == 0
    group = json.loads(capsys.readouterr().out)["groups"][0]
    for d in DIMENSIONS:
        low, high = group["kendall_ci"][d]
        assert -1 <= low <= group["kendall"][d] <= high <= 1
    low, high = group["cat_ci"]
    assert low <= group["cat_score"] <= high and high - low > 0
    assert main(["score", "--means", _means_csv(tmp_path), "--reference", "hofstede-2015"]) == 0
    plain = json.loads(capsys.readouterr().out)["groups"][0]
    assert plain["kendall_ci"] is None and plain["cat_ci"] is None  # no std and n: no interval
