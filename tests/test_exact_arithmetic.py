"""hofcat's published statistics against exact arithmetic (fractions.Fraction), through the paths users call.

The oracle here is independent of the code under test: the VSM 2013 formulas are written out again from
docs/methodology.md, means are Fractions of integer answer sums (or of the decimals a means CSV holds), tau-b is
(C − D)/sqrt(n_x·n_y) from integer counts, ranks are competition ranks of Fractions, and permutation p-values
enumerate every relabelling in integers (CAT scores, sums of square roots, to 60 digits). The designs are
adversarial: two countries whose indices are equal rationals reached through different float paths (a shifted
pair of question means, different numbers of seeds), ties in the reference, constants. The standard: equal in
exact arithmetic means equal (bitwise) in the output, every number within rounding of the exact one.
"""

from __future__ import annotations

import itertools
import json
import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import stats_core
from runner.analyze.run import AnalysisOptions, analyze_answers, analyze_run
from runner.cli import main
from runner.survey.reference import load_reference

DIMS = ("pdi", "idv", "mas", "uai", "lto", "ivr")
# docs/methodology.md, "Dimension indices": dimension → ((weight, plus, minus), (weight, plus, minus))
VSM13 = {
    "pdi": ((35, 7, 2), (25, 20, 23)),
    "idv": ((35, 4, 1), (35, 9, 6)),
    "mas": ((35, 5, 3), (35, 8, 10)),
    "uai": ((40, 18, 15), (25, 21, 24)),
    "lto": ((40, 13, 14), (25, 19, 22)),
    "ivr": ((35, 12, 11), (40, 17, 16)),
}
COUNTRIES = ("U.S.A.", "China", "Japan", "Germany", "France", "Brazil")
HIGH = Context(prec=60)


def exact_indices(means: dict[int, Fraction], constants: dict[str, Fraction] | None = None) -> list[Fraction]:
    """The six indices of one country in exact arithmetic."""
    c = constants or {}
    return [sum(w * (means[p] - means[m]) for w, p, m in VSM13[d]) + c.get(d, Fraction(0)) for d in DIMS]


def counts(x, y) -> tuple[int, int]:
    """Tau-b as (C − D, n_x·n_y), integers, from exactly compared values."""
    s = nx = ny = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        a = (x[i] > x[j]) - (x[i] < x[j])
        b = (y[i] > y[j]) - (y[i] < y[j])
        s, nx, ny = s + a * b, nx + (a != 0), ny + (b != 0)
    return s, nx * ny


def tau_value(s: int, p: int) -> Decimal:
    return HIGH.divide(Decimal(s), HIGH.sqrt(Decimal(p)))


def ranks(values) -> list[int]:
    return [1 + sum(v > u for v in values) for u in values]


def close(published: float, exact, scale: float = 1.0) -> bool:
    """Within what float64 rounding of a short computation can explain (a few ulps of the magnitude)."""
    return (
        abs(Decimal(published) - Decimal(exact.numerator) / Decimal(exact.denominator))
        <= Decimal(4e-16 * max(scale, abs(float(exact))))
        if isinstance(exact, Fraction)
        else abs(Decimal(published) - exact) <= Decimal(4e-16 * max(scale, 1.0))
    )


def exact_p(
    x: list[list[Fraction]], y: list[list[int]]
) -> tuple[list[Fraction | None], Fraction | None, list[Fraction | None]]:
    """Two-sided permutation p of |tau| per dimension and of |CAT|, over all relabellings (the score definition:
    the same relabelling of the countries on every dimension, the reference fixed), and the smallest attainable
    p of each (six dimensions, then the CAT score): the share of relabellings reaching the largest value."""
    k = len(x)
    dims = len(x[0])

    def stats(perm):
        per = [counts([x[perm[i]][d] for i in range(k)], [y[i][d] for i in range(k)]) for d in range(dims)]
        taus = [tau_value(s, p) for s, p in per if p]
        cat = HIGH.divide(sum(taus, Decimal(0)), Decimal(len(taus))) if taus else None
        return per, cat

    obs, obs_cat = stats(tuple(range(k)))
    hits, cat_hits, total = [0] * dims, 0, 0
    squares, cats = [[] for _ in range(dims)], []  # every relabelling's tau² and |CAT|, for the attainable minima
    for perm in itertools.permutations(range(k)):
        total += 1
        per, cat = stats(perm)
        for d in range(dims):
            (s, p), (so, po) = per[d], obs[d]
            if p and po and Fraction(s * s, p) >= Fraction(so * so, po):
                hits[d] += 1
            if p:
                squares[d].append(Fraction(s * s, p))
        if cat is not None:
            cats.append(abs(cat))
        if cat is not None and obs_cat is not None and abs(cat) >= abs(obs_cat) - Decimal("1e-40"):
            cat_hits += 1
    minima = [Fraction(v.count(max(v)), total) if v else None for v in squares]
    minima.append(Fraction(sum(c >= max(cats) - Decimal("1e-40") for c in cats), total) if cats else None)
    return (
        [Fraction(h, total) if obs[d][1] else None for d, h in enumerate(hits)],
        Fraction(cat_hits, total) if obs_cat is not None else None,
        minima,
    )


# ---------------------------------------------------------------------------------------------------- designs


def tie_design(seed: int, k: int) -> tuple[list[np.ndarray], list[tuple[int, int, str]]]:
    """Integer answers (U_k units × 24) for k countries, with exact index ties that float64 breaks.

    Country 1 is country 0 with, per dimension, one (plus, minus) question pair shifted by the same answer
    sums — the difference, hence the index, is unchanged, the float means are not; countries have different
    numbers of units (5, 10, 4, …), so equal means are also reached through different counts.
    """
    rng = np.random.default_rng(seed)
    sizes = [5, 10, 4, 8, 5, 2][:k]
    answers = [rng.integers(2, 5, size=(u, 24)) for u in sizes]
    base = answers[0]
    twin = np.repeat(base, 2, axis=0)  # 10 units, the same means as country 0
    ties = []
    for d in DIMS:
        _, plus, minus = VSM13[d][int(rng.integers(0, 2))]
        shift = int(rng.integers(1, 4))  # raise `shift` answers of both questions by one (all start ≤ 4)
        rows = rng.choice(twin.shape[0], size=shift, replace=False)
        twin[rows, plus - 1] += 1
        twin[rows, minus - 1] += 1
        ties.append((0, 1, d))
    answers[1] = twin
    return answers, ties


def exact_means(units: np.ndarray) -> dict[int, Fraction]:
    return {q + 1: Fraction(int(units[:, q].sum()), units.shape[0]) for q in range(24)}


def reference_with_ties(path, countries) -> tuple[str, list[list[int]]]:
    """A reference CSV over ``countries`` with ties on every dimension (and integer scores)."""
    rng = np.random.default_rng(len(countries))
    scores = rng.integers(0, 3, size=(len(countries), 6)) * 10 + 20
    scores[0] = scores[1]  # the tied pair also ties in the reference on every dimension
    lines = ["country,pdi,idv,mas,uai,lto,ivr"] + [
        f"{c},{','.join(str(int(v)) for v in row)}" for c, row in zip(countries, scores, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path), scores.tolist()


# ---------------------------------------------------------------------------------------------- hofcat score


def means_csv(path, answers, countries, group="g") -> list[dict[int, Fraction]]:
    """Write the exact means as decimals (every mean is a multiple of 1/U with U ∈ {2, 4, 5, 8, 10})."""
    lines = ["group,country,question,mean"]
    out = []
    for c, units in zip(countries, answers, strict=True):
        m = exact_means(units)
        out.append(m)
        for q in range(1, 25):
            text = f"{m[q].numerator / m[q].denominator:.6f}".rstrip("0").rstrip(".")
            assert Fraction(text) == m[q]
            lines.append(f"{group},{c},{q},{text}")
    path.write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.parametrize(("seed", "k"), [(1, 3), (2, 4), (3, 5), (4, 6), (5, 4)])
@pytest.mark.parametrize("constants", ["", "pdi=20,mas=-5.5,ivr=0.1"])
def test_score_cli_equals_exact_arithmetic(tmp_path, capsys, seed, k, constants):
    countries = COUNTRIES[:k]
    answers, ties = tie_design(seed, k)
    means = means_csv(tmp_path / "means.csv", answers, countries)
    ref_path, ref = reference_with_ties(tmp_path / "ref.csv", countries)
    shift = {d: Fraction(v) for d, v in (p.split("=") for p in constants.split(",") if p)}
    args = ["score", "--means", str(tmp_path / "means.csv"), "--reference", ref_path]
    assert main([*args, *(["--constants", constants] if constants else [])]) == 0
    group = json.loads(capsys.readouterr().out)["groups"][0]
    exact = [exact_indices(m, shift) for m in means]
    published = [[group["indices"][c][d] for d in DIMS] for c in countries]
    # (1) indices: within rounding, exact ties bitwise, exact order kept
    for j, d in enumerate(DIMS):
        col = [row[j] for row in exact]
        pub = [row[j] for row in published]
        assert all(close(p, e, 100.0) for p, e in zip(pub, col, strict=True)), (d, pub, col)
        for a, b in itertools.combinations(range(k), 2):
            assert (pub[a] == pub[b]) == (col[a] == col[b]), (d, a, b, pub[a], pub[b])
            assert (pub[a] < pub[b]) == (col[a] < col[b])
    for a, b, d in ties:
        j = DIMS.index(d)
        assert exact[a][j] == exact[b][j] and published[a][j] == published[b][j]
    # (2) tau, CAT, mis-ranks
    taus = []
    for j, d in enumerate(DIMS):
        s, p = counts([row[j] for row in exact], [row[j] for row in ref])
        if p == 0:
            assert group["kendall"][d] is None
            continue
        taus.append(tau_value(s, p))
        assert close(group["kendall"][d], taus[-1]), (d, group["kendall"][d], s, p)
    cat = HIGH.divide(sum(taus, Decimal(0)), Decimal(len(taus)))
    assert close(group["cat_score"], cat)
    for i, c in enumerate(countries):
        mis = [
            d
            for j, d in enumerate(DIMS)
            if group["kendall"][d] is not None
            and ranks([row[j] for row in exact])[i] != ranks([row[j] for row in ref])[i]
        ]
        assert group["misranked"][c]["dimensions"] == mis
    # (3) exact permutation p-values: the published float is the exact fraction, rounded
    p_tau, p_cat, minima = exact_p(exact, ref)
    for j, d in enumerate(DIMS):
        assert group["kendall_p"][d] == (None if p_tau[j] is None else float(p_tau[j])), d
        if p_tau[j] is not None:
            assert group["kendall_p_min"][d] == float(minima[j]), d
    assert group["cat_p"] == float(p_cat) and group["p_method"] == "exact"
    assert group["cat_p_min"] == float(minima[6])


def test_equal_taus_from_different_counts_are_one_float(tmp_path, capsys):
    """tau = 1/sqrt(2) from (C − D, n_x n_y) = (1, 2) and from (3, 18): the same number, the same float."""
    from runner.score.ranking import rounded_tau

    got = rounded_tau(np.array([1, 3, 5, -2]), np.array([2, 18, 50, 8]))
    assert got[0] == got[1] == got[2] == -got[3]
    assert abs(Decimal(got[0]) - HIGH.sqrt(Decimal("0.5"))) <= Decimal(2**-53)  # the nearest float to 1/sqrt(2)
    # the float formula used before breaks the tie: 3/sqrt(18) ≠ 1/sqrt(2) in float64
    assert 3 / math.sqrt(18) != 1 / math.sqrt(2)


# ------------------------------------------------------------------------------------------- hofcat analyze


def answer_frame(answers, countries) -> pl.DataFrame:
    rows = []
    for c, units in zip(countries, answers, strict=True):
        for u, row in enumerate(units):
            rows += [
                {"model": "m", "country": c, "seed": u + 1, "question": q + 1, "status": "ok", "option_id": int(a)}
                for q, a in enumerate(row)
            ]
    return pl.DataFrame(rows, schema_overrides={"option_id": pl.Int16})


def write_run_dir(root, answers, countries) -> None:
    """A tiny run directory by hand (manifest, one responses part, its answers part), as the bench's
    ``benches/analysis_memory.write_run`` lays one out: one item-mode cell per country × seed × question."""
    rows = [
        (c, u + 1, q + 1, int(a))
        for c, units in zip(countries, answers, strict=True)
        for u, row in enumerate(units)
        for q, a in enumerate(row)
    ]
    n = len(rows)
    keys = [f"c{i}" for i in range(n)]
    country, seed, question, option = (list(col) for col in zip(*rows, strict=True))
    responses = pl.DataFrame(
        {
            "cell_key": keys,
            "endpoint": "hand",
            "provider": "openai",
            "model": "m",
            "language": "en",
            "mode": "item",
            "question": pl.Series(question, dtype=pl.Int16),
            "framing": "persona",
            "country": country,
            "age": pl.Series([None] * n, dtype=pl.Int16),
            "gender": pl.Series([None] * n, dtype=pl.String),
            "option_order": [[1, 2, 3, 4, 5]] * n,
            "reply_format": "number",
            "seed": pl.Series(seed, dtype=pl.Int64),
            "temperature": 0.7,
            "top_p": 1.0,
            "max_tokens": pl.Series([16] * n, dtype=pl.Int32),
            "response_text": [str(o) for o in option],
        }
    )
    parsed = pl.DataFrame(
        {
            "cell_key": keys,
            "question": pl.Series(question, dtype=pl.Int16),
            "option_id": pl.Series(option, dtype=pl.Int16),
            "status": "ok",
            "hedged": [False] * n,
            "displayed": pl.Series(option, dtype=pl.Int16),
            "parser_version": "hand",
        }
    )
    for name, frame in (("responses", responses), ("answers", parsed)):
        (root / name).mkdir(parents=True)
        frame.write_parquet(root / name / "part-000001.parquet")
    (root / "manifest.json").write_text(json.dumps({"format": "hofcat-run/1", "reference": "hofstede-2015"}))


@pytest.mark.parametrize(("seed", "k"), [(11, 4), (12, 5), (13, 6)])
def test_analysis_tables_equal_exact_arithmetic(tmp_path, seed, k):
    """``hofcat analyze``'s path (``analyze_run``) on a hand-built run directory; the Parquet tables it writes."""
    countries = COUNTRIES[:k]
    answers, ties = tie_design(seed, k)
    ref_path, ref = reference_with_ties(tmp_path / "ref.csv", countries)
    write_run_dir(tmp_path / "run", answers, countries)
    folder = analyze_run(
        tmp_path / "run", AnalysisOptions(reference=ref_path, n_resamples=20, permutations=9, baseline_replicates=2)
    )
    tables = {name: pl.read_parquet(folder / f"{name}.parquet") for name in ("indices", "kendall", "cat", "misranked")}
    exact = [exact_indices(exact_means(a)) for a in answers]
    idx = tables["indices"]
    published = [[idx.filter(pl.col("country") == c)[d][0] for d in DIMS] for c in countries]
    for j in range(6):
        col, pub = [row[j] for row in exact], [row[j] for row in published]
        assert all(close(p, e, 100.0) for p, e in zip(pub, col, strict=True))
        for a, b in itertools.combinations(range(k), 2):
            assert (pub[a] == pub[b]) == (col[a] == col[b])
    assert all(published[a][DIMS.index(d)] == published[b][DIMS.index(d)] for a, b, d in ties)
    kendall = tables["kendall"]
    p_tau, p_cat, minima = exact_p(exact, ref)
    taus = []
    for j, d in enumerate(DIMS):
        row = kendall.filter(pl.col("dimension") == d)
        s, p = counts([r[j] for r in exact], [r[j] for r in ref])
        if p == 0:
            assert math.isnan(row["tau"][0]) and math.isnan(row["kendall_p"][0])
            continue
        taus.append(tau_value(s, p))
        assert close(row["tau"][0], taus[-1])
        assert row["kendall_p"][0] == float(p_tau[j]) and row["p_method"][0] == "exact"
        assert row["kendall_p_min"][0] == float(minima[j])
    cat = tables["cat"]
    assert close(cat["cat_score"][0], HIGH.divide(sum(taus, Decimal(0)), Decimal(len(taus))))
    assert cat["cat_p"][0] == float(p_cat) and cat["cat_p_min"][0] == float(minima[6])
    mis = tables["misranked"]
    for i, c in enumerate(countries):
        expected = sum(
            ranks([r[j] for r in exact])[i] != ranks([r[j] for r in ref])[i]
            for j in range(6)
            if counts([r[j] for r in exact], [r[j] for r in ref])[1]
        )
        assert mis.filter(pl.col("country") == c)["misranked"][0] == expected


def test_identical_units_give_bitwise_point_and_bootstrap_cat(tmp_path):
    """Every resample of identical units is the observed data: its CAT must be the published CAT, bit for bit."""
    answers, _ = tie_design(21, 4)
    answers = [np.repeat(a[:1], len(a), axis=0) for a in answers]
    ref_path, _ = reference_with_ties(tmp_path / "ref.csv", COUNTRIES[:4])
    tables, _ = analyze_answers(
        answer_frame(answers, COUNTRIES[:4]).lazy(),
        AnalysisOptions(reference=ref_path, n_resamples=30, permutations=9, baseline_replicates=2),
    )
    cat = tables["cat"]
    assert cat["boot_low"][0] == cat["cat_score"][0] == cat["boot_high"][0]


# ---------------------------------------------------------------------------------------------- stats_core


@pytest.mark.slow
@pytest.mark.parametrize("backend", stats_core.available())
def test_kendall_tau_takes_floats_as_given(backend):
    """stats_core.kendall_tau compares the floats it is given exactly (like scipy): equal floats tie, floats an
    ulp apart do not; its tau is (C − D)/sqrt(n_x n_y) of those comparisons within an ulp."""
    x = np.array([0.1 + 0.2, 0.3, 0.3, 1.0, 2.0])  # 0.30000000000000004 > 0.3: not a tie
    y = np.array([1.0, 1.0, 2.0, 3.0, 3.0])
    s, p = counts([Fraction(v) for v in x], [Fraction(v) for v in y])
    got = stats_core.kendall_tau(x, y, backend=backend)
    assert close(got, tau_value(s, p))
    tied = x.copy()
    tied[0] = 0.3
    s2, p2 = counts([Fraction(v) for v in tied], [Fraction(v) for v in y])
    assert (s2, p2) != (s, p) and close(stats_core.kendall_tau(tied, y, backend=backend), tau_value(s2, p2))


@pytest.mark.slow
@pytest.mark.parametrize("backend", stats_core.available())
def test_bootstrap_kendall_tau_of_integer_units_is_exact(backend):
    """Integer (or any dyadic) unit values: every resampled mean is an exact sum over the count, rounded once,
    so means equal in exact arithmetic tie in every resample; the distribution equals exact arithmetic."""
    rng = np.random.default_rng(7)
    samples = rng.integers(1, 6, size=(4, 6, 5)).astype(np.float64)
    samples[1] = samples[0][:, ::-1]  # the same units in another order: equal means, other summation order
    reference = np.array(
        [[30, 40, 50, 60, 70, 80], [30, 40, 50, 60, 70, 80], [10, 90, 20, 60, 70, 10], [50, 10, 80, 20, 95, 40]],
        dtype=np.float64,
    )
    res = stats_core.bootstrap_kendall_tau(samples, reference, n_resamples=40, seed=3, backend=backend)
    draws = stats_core.bootstrap_indices([5] * 4, 40, 3)
    for r in range(40):
        means = [[Fraction(int(samples[c, d, draws[c][r]].sum()), 5) for d in range(6)] for c in range(4)]
        for d in range(6):
            s, p = counts([m[d] for m in means], reference[:, d].tolist())
            got = res.bootstrap_distribution[d, r]
            assert (math.isnan(got) and p == 0) or close(got, tau_value(s, p))


def _square_design() -> tuple[np.ndarray, np.ndarray]:
    """Eight points: two unit squares (group a, group b) — many relabellings give exactly the same pseudo-F."""
    square = np.array([[0.1, 0.1], [0.1, 0.7], [0.7, 0.1], [0.7, 0.7]])
    points = np.concatenate([square, square + [2.3, 0.0]])
    return points, np.array(["a"] * 4 + ["b"] * 4)


def exact_ss_within(d2: dict, labels) -> Fraction:
    groups = {}
    for i, g in enumerate(labels):
        groups.setdefault(g, []).append(i)
    return sum(
        (Fraction(1, len(m)) * sum(d2[i, j] for i, j in itertools.combinations(m, 2)) for m in groups.values()),
        Fraction(0),
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", stats_core.available())
def test_permanova_counts_exact_f_ties_as_at_least_observed(backend):
    """Two squares, eight points: the observed F equals the exact F of the points' Fractions (d² exact), every split
    whose exact SS_W equals the observed one gives the same published F (to 1e-12), and the mirrored labelling —
    the same exact F — gets the same p-value from the same seed."""
    points, labels = _square_design()
    exact_points = [[Fraction(v) for v in row] for row in points]
    d2 = {
        (i, j): sum((a - b) ** 2 for a, b in zip(exact_points[i], exact_points[j], strict=True))
        for i, j in itertools.combinations(range(8), 2)
    }
    n, g = 8, 2
    ss_total = sum(d2.values(), Fraction(0)) / n
    observed = exact_ss_within(d2, labels)
    distances = stats_core.pdist(points, "euclidean", backend=backend)
    res = stats_core.permanova(distances, labels, permutations=0, seed=1, backend=backend)
    f_exact = ((ss_total - observed) / (g - 1)) / (observed / (n - g))
    assert close(res.statistic, f_exact, float(f_exact))
    # every relabelling: F equal in exact arithmetic must compare as equal (≥ observed both ways)
    ties = 0
    for members in itertools.combinations(range(8), 4):
        relabel = np.array(["a" if i in members else "b" for i in range(8)])
        if exact_ss_within(d2, relabel) == observed:
            ties += 1
            f = stats_core.permanova(distances, relabel, permutations=0, seed=1, backend=backend).statistic
            assert f == pytest.approx(res.statistic, rel=1e-12)
    assert ties >= 2
    # the permutation test: p = (k + 1)/(P + 1) with k counting F_perm ≥ F_obs, exact ties included; here the
    # observed split is the most extreme one, so k = the permutations that drew an exactly tied split
    big = stats_core.permanova(distances, labels, permutations=999, seed=5, backend=backend)
    swapped = stats_core.permanova(distances, labels[::-1].copy(), permutations=999, seed=5, backend=backend)
    assert big.pvalue == swapped.pvalue  # the mirrored labelling has the same exact F: the same count


@pytest.mark.slow
@pytest.mark.parametrize("backend", stats_core.available())
def test_permanova_with_every_relabelling_tied_has_p_one(backend):
    """Points at the vertices of a regular simplex, scaled by 0.1: every split has the same SS_W exactly, so
    every permuted F equals the observed one and p = (P + 1)/(P + 1) = 1 (distances computed by pdist)."""
    points = 0.1 * np.eye(6)
    labels = np.array([0, 0, 0, 1, 1, 1])
    res = stats_core.permanova(stats_core.pdist(points), labels, permutations=199, seed=2, backend=backend)
    assert res.pvalue == 1.0
    assert res.statistic == pytest.approx(1.0, rel=1e-12)  # SS_A/(g−1) ÷ SS_W/(n−g) = (1/5·... ) exactly 1


def _kite(shift) -> np.ndarray:
    """Five points whose distances to their centroid are (in exact arithmetic) a fixed profile."""
    kite = np.array([[0.0, 0.3], [0.0, -0.3], [0.1, 0.0], [-0.1, 0.0], [0.7, 0.0]])
    return kite + shift


@pytest.mark.slow
@pytest.mark.parametrize("backend", stats_core.available())
def test_permdisp_equal_dispersions_have_f_zero_and_p_one(backend):
    """The same kite twice (the second rotated by 90° and moved): the groups' mean distances to centroid are
    equal in exact arithmetic, so F = 0 and every permuted F is ≥ 0 = F_obs: p = 1 exactly. Float64 gave
    F ≈ 4e-31 and p = 0.897 (native) / 0.83 (numba)."""
    a = _kite([0.0, 0.0])
    b = a[:, ::-1] * [1, -1] + [5.3, 1.1]
    points = np.concatenate([a, b])
    labels = np.array([0] * 5 + [1] * 5)
    res = stats_core.permdisp(stats_core.pdist(points), labels, permutations=999, seed=1, backend=backend)
    assert res.statistic == 0.0 and res.pvalue == 1.0


@pytest.mark.parametrize("backend", stats_core.available())
def test_permdisp_degenerate_dispersions_are_undefined_not_backend_noise(backend):
    """Two translated squares: every object at the same distance from its centroid (exactly), so the ANOVA is
    0/0 and the permuted residuals are all 0: F NaN and p NaN on every backend (was inf / 24.0 / an exception).
    Each group constant but the groups different: F = inf, and still no permuted F (p NaN, as vegan's NA)."""
    square = np.array([[0.1, 0.1], [0.1, 0.7], [0.7, 0.1], [0.7, 0.7]])
    points = np.concatenate([square, square + [2.3, 0.0]])
    labels = np.array([0] * 4 + [1] * 4)
    res = stats_core.permdisp(stats_core.pdist(points), labels, permutations=99, seed=1, backend=backend)
    assert math.isnan(res.statistic) and math.isnan(res.pvalue)
    wide = np.concatenate([square, 3.0 * square + [2.3, 0.0]])
    res = stats_core.permdisp(stats_core.pdist(wide), labels, permutations=99, seed=1, backend=backend)
    assert res.statistic == math.inf and math.isnan(res.pvalue)


@pytest.mark.slow
@pytest.mark.parametrize("backend", stats_core.available())
def test_permdisp_counts_exactly_tied_permutations(backend):
    """Group b's kite mirrored: the residual permutations that only swap mirror images give an F equal in exact
    arithmetic to the observed one; the p-value must equal the one of the mirrored labelling (same exact F)."""
    a = _kite([0.0, 0.0])
    b = 2.0 * a + [4.1, 0.3]
    points = np.concatenate([a, b])
    labels = np.array([0] * 5 + [1] * 5)
    dist = stats_core.pdist(points)
    res = stats_core.permdisp(dist, labels, permutations=999, seed=4, backend=backend)
    flipped = stats_core.permdisp(dist, 1 - labels, permutations=999, seed=4, backend=backend)
    assert res.statistic == pytest.approx(flipped.statistic, rel=1e-12)
    assert 0 < res.pvalue < 1 and res.pvalue == pytest.approx(flipped.pvalue, abs=0.02)


def write_means(path, rows: dict[str, dict[int, str]]) -> list[dict[int, Fraction]]:
    """A means CSV from decimal texts; returns the exact means the texts denote."""
    lines = ["group,country,question,mean"]
    for c, qs in rows.items():
        lines += [f"g,{c},{q},{qs[q]}" for q in range(1, 25)]
    path.write_text("\n".join(lines) + "\n")
    return [{q: Fraction(t) for q, t in qs.items()} for qs in rows.values()]


def test_distinct_indices_closer_than_1e9_stay_distinct(tmp_path, capsys):
    """Means 3 and 3.00000000001 (an index 3.5e-10 apart): distinct in exact arithmetic, so distinct ranks —
    the 1e-9 merge merged them (tau 0.8165 instead of 1)."""
    base = dict.fromkeys(range(1, 25), "3")
    rows = {"U.S.A.": dict(base), "China": dict(base), "Japan": dict(base)}
    rows["China"][7] = "3.00000000001"
    rows["Japan"][7] = "4.5"
    means = write_means(tmp_path / "means.csv", rows)
    ref = tmp_path / "ref.csv"
    ref.write_text("country,pdi,idv,mas,uai,lto,ivr\nU.S.A.,10,1,1,1,1,1\nChina,20,2,2,2,2,2\nJapan,30,3,3,3,3,3\n")
    assert main(["score", "--means", str(tmp_path / "means.csv"), "--reference", str(ref)]) == 0
    group = json.loads(capsys.readouterr().out)["groups"][0]
    exact = [exact_indices(m) for m in means]
    assert exact[0][0] < exact[1][0] < exact[2][0]
    pdi = [group["indices"][c]["pdi"] for c in rows]
    assert pdi[0] < pdi[1] < pdi[2] and all(close(p, e[0], 100.0) for p, e in zip(pdi, exact, strict=True))
    assert group["kendall"]["pdi"] == 1.0 and group["misranked"]["China"]["count"] == 0


@pytest.mark.parametrize("policy", ["nan", "-1"])
def test_a_dimension_constant_in_exact_arithmetic_is_undefined(tmp_path, capsys, policy):
    """PDI equal for every country in exact arithmetic, reached by shifting m07 and m02 (and m20, m23) by the same
    decimals: float64 gave four different PDIs and a tau; exact arithmetic has a constant side (undefined)."""
    rng = np.random.default_rng(9)
    rows = {}
    for c, shift in zip(COUNTRIES[:4], ("0", "0.1", "0.3", "0.7"), strict=True):
        qs = {q: f"{rng.integers(10, 40) / 10:g}" for q in range(1, 25)}
        qs[7], qs[2], qs[20], qs[23] = (str(Fraction(b) + Fraction(shift)) for b in ("3.1", "2.2", "1.9", "3.4"))
        qs = {q: (f"{float(Fraction(t)):.10g}") for q, t in qs.items()}
        rows[c] = qs
    means = write_means(tmp_path / "means.csv", rows)
    exact = [exact_indices(m) for m in means]
    assert len({e[0] for e in exact}) == 1
    assert main(["score", "--means", str(tmp_path / "means.csv"), "--reference", "hofstede-2015",
                 f"--undefined-tau={policy}"]) == 0  # fmt: skip
    group = json.loads(capsys.readouterr().out)["groups"][0]
    assert len({group["indices"][c]["pdi"] for c in rows}) == 1
    assert group["kendall_undefined"] == ["pdi"]
    if policy == "nan":
        assert group["kendall"]["pdi"] is None and group["kendall_p"]["pdi"] is None
    else:
        assert group["kendall"]["pdi"] == -1.0 and group["kendall_p"]["pdi"] == 1.0  # every relabelling: −1
        ref = load_reference("hofstede-2015").matrix(list(rows))[:, 0].tolist()
        ref_ranks = ranks(ref)
        for i, c in enumerate(rows):
            assert ("pdi" in group["misranked"][c]["dimensions"]) == (ref_ranks[i] != 1)


def test_error_percentage_is_exact():
    """Shares 0, 0, 5/6 for one country and 0, 1/6, 4/6 for another: both 250/9 % exactly, so the same float
    (the float mean gave 27.777777777777782 and 27.777777777777775)."""
    from runner.score.ranking import Agreement, error_percentage

    misranked = np.zeros((3, 2, 6), dtype=bool)
    counted = np.ones((3, 2, 6), dtype=bool)
    misranked[2, 0, :5] = True
    misranked[1, 1, :1] = True
    misranked[2, 1, :4] = True
    a = Agreement(
        kendall=np.zeros((3, 6)),
        undefined=np.zeros((3, 6), bool),
        cat_score=np.zeros(3),
        compared=np.ones((2, 6), bool),
        misranked=misranked,
        counted=counted,
        model_rank=np.zeros((3, 2, 6)),
        reference_rank=np.zeros((2, 6)),
        policy="nan",
    )
    got = error_percentage(a)
    assert got[0] == got[1] == float(Fraction(250, 9))


def test_cat_score_of_the_same_taus_in_another_order_is_one_float():
    """Two groups whose six taus are the same numbers on different dimensions have equal CAT scores in exact
    arithmetic; summing in dimension order published them an ulp apart."""
    from runner.score.ranking import rank_agreement

    rng = np.random.default_rng(2)
    ref = np.tile(np.array([10.0, 20, 30, 40, 50, 60, 70])[:, None], (1, 6))
    mismatches = 0
    for _ in range(40):
        one = rng.permutation(np.tile(np.arange(7.0)[:, None], (1, 6)), axis=0)
        for j in range(6):
            one[:, j] = rng.permutation(7) + rng.integers(0, 2, 7) * 0.5  # ties and disorder
        order = rng.permutation(6)
        got = rank_agreement(np.stack([one, one[:, order]]), ref, tie_resolution=0.0)
        assert sorted(got.kendall[0]) == sorted(got.kendall[1])
        mismatches += got.cat_score[0] != got.cat_score[1]
        taus = [tau_value(*counts(one[:, j].tolist(), ref[:, j].tolist())) for j in range(6)]
        assert close(got.cat_score[0], HIGH.divide(sum(taus, Decimal(0)), Decimal(6)))
    assert mismatches == 0


@pytest.mark.parametrize("backend", stats_core.available())
def test_distances_of_integer_points_are_exact_on_every_backend(backend):
    """Integer coordinates (answers, sums of answers): squared Euclidean and cityblock distances are exact integers,
    Euclidean the correctly rounded square root of that integer — distances equal in exact arithmetic are one
    float, however they were reached (pdist, pdist_square, another pair order)."""
    rng = np.random.default_rng(3)
    points = rng.integers(1, 6, size=(30, 24)).astype(np.float64)
    points[7] = points[3][::-1]  # a pair whose distances to others differ in summation order only
    exact_sq = [
        sum((Fraction(int(a)) - int(b)) ** 2 for a, b in zip(points[i], points[j], strict=True))
        for i, j in itertools.combinations(range(30), 2)
    ]
    sq = stats_core.pdist(points, "sqeuclidean", backend=backend)
    assert [Fraction(v) for v in sq] == exact_sq
    euclid = stats_core.pdist(points, "euclidean", backend=backend)
    np.testing.assert_array_equal(euclid, np.sqrt(np.array([float(v) for v in exact_sq])))
    city = stats_core.pdist(points, "cityblock", backend=backend)
    assert all(v == sum(abs(a - b) for a, b in zip(points[i], points[j], strict=True))
               for v, (i, j) in zip(city, itertools.combinations(range(30), 2), strict=True))  # fmt: skip
    np.testing.assert_array_equal(stats_core.squareform(stats_core.pdist_square(points, backend=backend)), euclid)


@pytest.mark.parametrize("constant", [1e-7, 2.5e-7, 3.0000000001e-9, -1e-12])
def test_constants_without_a_small_rational_are_added_exactly(constant: float) -> None:
    """A constant like 1e-7 has no fraction with denominator ≤ 10⁶: its binary value (denominator 2^76) once
    overflowed int64 (``OverflowError`` from ``hofcat score --constants pdi=1e-7``); it is added exactly now."""
    from runner.score.indices import indices_from_means

    means = np.full((2, 24), 3.0)
    means[1, 6] = 3.5  # PDI: 35 · (m07 − m02) = 17.5
    got = indices_from_means(means, {"pdi": constant})[:, 0]
    assert got.tolist() == [float(Fraction(constant)), float(Fraction(constant) + Fraction(35, 2))]
