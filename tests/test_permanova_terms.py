"""Multi-term PERMANOVA (``stats_core.permanova_terms``) against R vegan's adonis2, exact enumeration and a
direct least-squares implementation; backend and thread-count identity; null rejection rate; bad input."""

from __future__ import annotations

import csv
import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.spatial.distance as ssd
from scipy import stats

import stats_core
from tests.conftest import require_program

ROOT = Path(__file__).resolve().parents[1]
VEGAN_SCRIPT = Path(__file__).parent / "golden" / "vegan_permanova_terms.R"
BACKENDS = ["native", "numba", "numpy"]


def _labels(prefix: str, codes) -> np.ndarray:
    return np.array([f"{prefix}{c}" for c in codes])


def _design(kind: str) -> tuple[np.ndarray, dict, np.ndarray | None]:
    """(square distances, factors, strata or None) of one constructed design."""
    rng = np.random.default_rng(sum(map(ord, kind)))
    if kind in ("balanced", "balanced_strata"):
        a, b = np.repeat(np.arange(3), 8), np.tile(np.arange(2), 12)
    elif kind == "three_factors":
        a, b = rng.integers(0, 2, 30), rng.integers(0, 3, 30)
    else:  # unbalanced (and confounded): unequal, one cell small
        a = np.array([0] * 9 + [1] * 6 + [2] * 12)
        b = np.array([0, 1, 1, 0, 0, 1, 0, 0, 1] + [1, 0, 1, 1, 1, 0] + [0, 1] * 5 + [1, 1])
    x = rng.normal(size=(a.size, 6)) + 0.6 * a[:, None] * np.eye(6)[0] + 0.4 * (a * b)[:, None] * np.eye(6)[1]
    factors = {"a": _labels("a", a), "b": _labels("b", b)}
    if kind == "three_factors":
        factors["c"] = _labels("c", rng.integers(0, 3, a.size))
    d = ssd.squareform(ssd.pdist(np.exp(x), "braycurtis") if kind == "braycurtis" else ssd.pdist(x))
    if kind == "confounded":  # c is a relabelled a; the interaction misses the cell (a2, b1)
        factors["c"] = np.char.replace(factors["a"], "a", "c")
        keep = ~((a == 2) & (b == 1))
        d, factors = d[np.ix_(keep, keep)], {k: v[keep] for k, v in factors.items()}
    # strata cross both factors (pairs of consecutive objects share a stratum)
    strata = _labels("s", (np.arange(a.size) // 2) % 4) if kind.endswith("strata") else None
    return d, factors, strata


# (case id, design, terms, by): balanced and unbalanced, interactions, strata, Euclidean and Bray–Curtis.
CASES = [
    ("balanced_terms", "balanced", ["a", "b", "a:b"], "terms"),
    ("balanced_margin", "balanced", ["a", "b"], "margin"),
    ("unbalanced_terms", "unbalanced", ["a", "b", "a:b"], "terms"),
    ("unbalanced_terms_reversed", "unbalanced", ["b", "a"], "terms"),
    ("unbalanced_margin", "unbalanced", ["a", "b"], "margin"),
    ("unbalanced_margin_interaction", "unbalanced", ["a", "b", "a:b"], "margin"),
    ("strata_terms", "balanced_strata", ["a", "b", "a:b"], "terms"),
    ("strata_margin", "balanced_strata", ["b", "a"], "margin"),
    ("braycurtis_terms", "braycurtis", ["a", "b", "a:b"], "terms"),
    ("braycurtis_margin", "braycurtis", ["a", "b"], "margin"),
    ("three_factors_terms", "three_factors", ["a", "b", "c", "a:c"], "terms"),
    ("three_factors_margin", "three_factors", ["a", "b", "c", "a:c"], "margin"),
    ("confounded_terms", "confounded", ["a", "c", "b", "a:b"], "terms"),
    ("confounded_margin", "confounded", ["a", "c", "b"], "margin"),
    ("empty_cell_margin", "confounded", ["a", "b", "a:b"], "margin"),
]
PERMUTATIONS, SEED = 199, 20260


def _write_case(folder: Path, d, factors, strata, terms, by, perms) -> None:
    folder.mkdir(parents=True)
    np.savetxt(folder / "distances.csv", d, delimiter=",", fmt="%.17g")
    columns = dict(factors) | ({".strata": strata} if strata is not None else {})
    with open(folder / "factors.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(list(columns))
        writer.writerows(zip(*columns.values(), strict=True))
    (folder / "model.txt").write_text(" + ".join(terms) + "\n" + by + "\n")
    np.savetxt(folder / "permutations.csv", np.argsort(perms, axis=1) + 1, delimiter=",", fmt="%d")


@pytest.fixture(scope="module")
def vegan(tmp_path_factory) -> dict:
    """adonis2's table of every case, from one Rscript run: {case: {term: (Df, SS, R2, F, P)}}."""
    rscript = require_program("Rscript")
    root = tmp_path_factory.mktemp("adonis2")
    for name, kind, terms, by in CASES:
        d, factors, strata = _design(kind)
        perms = stats_core.permutation_indices(len(d), PERMUTATIONS, SEED, strata=strata)
        _write_case(root / name, d, factors, strata, terms, by, perms)
    folders = [str(root / name) for name, *_ in CASES]
    subprocess.run([rscript, str(VEGAN_SCRIPT), *folders], check=True, capture_output=True, timeout=600)
    tables = {}
    for name, *_ in CASES:
        with open(root / name / "adonis2.csv") as f:
            tables[name] = {row["term"]: row for row in csv.DictReader(f)}
    return tables


def _number(text: str) -> float:
    return float("nan") if text in ("NA", "") else float(text)


@pytest.mark.slow  # runs R with vegan
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("name", "kind", "terms", "by"), CASES, ids=[c[0] for c in CASES])
def test_permanova_terms_is_adonis2(vegan, name, kind, terms, by, backend):
    d, factors, strata = _design(kind)
    res = stats_core.permanova_terms(
        d, factors, terms, by=by, permutations=PERMUTATIONS, seed=SEED, strata=strata, backend=backend
    )
    table = vegan[name]
    # a term that adds no rank: vegan leaves its row out (sequential) or gives it Df 0 (marginal); ours has
    # df 0 and NaN F and p
    for row in res.rows:
        if row.term not in table or int(table[row.term]["Df"]) == 0:
            assert row.df == 0 and row.ss == 0.0 and np.isnan(row.f) and np.isnan(row.p_value)
    tested = [row for row in res.rows if row.df > 0]
    assert [r.term for r in tested] == [t for t, v in table.items() if t not in ("Residual", "Total") and int(v["Df"])]
    for row in tested:
        ref = table[row.term]
        assert row.df == int(ref["Df"])
        assert row.ss == pytest.approx(_number(ref["SumOfSqs"]), rel=1e-10)
        assert row.r_squared == pytest.approx(_number(ref["R2"]), rel=1e-10)
        assert row.f == pytest.approx(_number(ref["F"]), rel=1e-10)
        assert row.p_value == _number(ref["P"])  # the same permutations give the same count
    assert res.residual_df == int(table["Residual"]["Df"])
    assert res.residual_ss == pytest.approx(_number(table["Residual"]["SumOfSqs"]), rel=1e-10)
    assert res.total_ss == pytest.approx(_number(table["Total"]["SumOfSqs"]), rel=1e-12)


# ---- a direct implementation: least squares on full indicator coding, F for explicit permutations ----


def _indicators(factors: dict, term: str) -> np.ndarray:
    """Indicators of every level combination of a term's factors (spans what treatment contrasts add)."""
    keys = ["|".join(v) for v in zip(*(factors[f] for f in term.split(":")), strict=True)]
    levels = sorted(set(keys))
    return np.array([[k == level for level in levels] for k in keys], dtype=float)


def _model_ss(g: np.ndarray, factors: dict, terms: list[str]) -> tuple[float, int]:
    """(tr(H G), rank) of the model intercept + ``terms``, H from a least-squares projection."""
    n = g.shape[0]
    x = np.concatenate([np.ones((n, 1)), *(_indicators(factors, t) for t in terms)], axis=1)
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    u = u[:, s > 1e-9 * s[0]]
    return float(np.trace(u.T @ g @ u)) - float(g.sum()) / n, u.shape[1] - 1


def _direct_f(d: np.ndarray, factors: dict, terms: list[str], by: str) -> dict[str, float]:
    """F of each tested term by direct projections (sequential or marginal)."""
    n = d.shape[0]
    j = np.eye(n) - 1.0 / n
    g = -0.5 * j @ (d**2) @ j
    full, rank = _model_ss(g, factors, terms)
    ms_res = (np.trace(g) - full) / (n - rank - 1)
    out = {}
    for k, term in enumerate(terms):
        if by == "terms":
            before, r0 = _model_ss(g, factors, terms[:k]) if k else (0.0, 0)
            after, r1 = _model_ss(g, factors, terms[: k + 1])
        else:
            before, r0 = _model_ss(g, factors, [t for t in terms if t != term])
            after, r1 = full, rank
        out[term] = ((after - before) / (r1 - r0)) / ms_res
    return out


def _tiny() -> tuple[np.ndarray, dict]:
    rng = np.random.default_rng(8)
    a, b = np.array([0, 0, 0, 1, 1, 1, 1, 0]), np.array([0, 1, 0, 1, 0, 1, 1, 1])
    x = rng.normal(size=(8, 3)) + 0.8 * a[:, None]
    return ssd.squareform(ssd.pdist(x)), {"a": _labels("a", a), "b": _labels("b", b)}


@pytest.mark.parametrize("by", ["terms", "margin"])
def test_every_permuted_f_is_the_direct_projection_f(by):
    """p counts the permutations, from permutation_indices, whose directly computed F reaches the observed F."""
    d, factors = _tiny()
    terms, count, seed = ["a", "b"], 60, 5
    res = stats_core.permanova_terms(d, factors, terms, by=by, permutations=count, seed=seed, backend="numpy")
    observed = _direct_f(d, factors, terms, by)
    exceed = dict.fromkeys(terms, 0)
    for perm in stats_core.permutation_indices(8, count, seed):
        permuted = _direct_f(d, {k: v[perm] for k, v in factors.items()}, terms, by)
        for t in terms:
            exceed[t] += permuted[t] >= observed[t] * (1 - 1e-9)
    for row in res.rows:
        assert row.f == pytest.approx(observed[row.term], rel=1e-10)
        assert row.p_value == (exceed[row.term] + 1) / (count + 1)


@pytest.mark.slow  # enumerates 8! permutations
def test_p_converges_to_the_exact_enumeration_p():
    """Over all 8! relabellings the exact p; the Monte Carlo p lies within 4.5 binomial SDs of it."""
    d, factors = _tiny()
    cells = np.array([f"{a}|{b}" for a, b in zip(factors["a"], factors["b"], strict=True)])
    observed = _direct_f(d, factors, ["a", "b"], "terms")
    # F depends only on the multiset of cell labels per position; enumerate the distinct arrangements.
    arrangements = {tuple(cells[list(p)]) for p in itertools.permutations(range(8))}
    weight = math.factorial(8) / len(arrangements)  # every distinct arrangement is equally often reached
    hits = dict.fromkeys(["a", "b"], 0.0)
    for arr in arrangements:
        parts = np.array([c.split("|") for c in arr])
        f = _direct_f(d, {"a": parts[:, 0], "b": parts[:, 1]}, ["a", "b"], "terms")
        for t in hits:
            hits[t] += weight * (f[t] >= observed[t] * (1 - 1e-9))
    count = 20000
    res = stats_core.permanova_terms(d, factors, ["a", "b"], permutations=count, seed=3)
    for t, h in hits.items():
        exact = h / math.factorial(8)
        assert abs(res.row(t).p_value - exact) <= 4.5 * math.sqrt(exact * (1 - exact) / count) + 1 / count


@pytest.mark.parametrize("strata", [None, [0, 0, 0, 1, 1, 1]])
@pytest.mark.parametrize("by", ["terms", "margin"])
def test_a_design_with_few_relabellings_is_enumerated_and_its_p_is_exact(by, strata):
    """6 objects, 180 distinct relabellings (9 within two strata): all are visited once, so p is the exact
    enumeration p and never below the design's smallest attainable p, as a Monte Carlo p can fall."""
    rng = np.random.default_rng(4)
    a, b = np.array([0, 0, 0, 1, 1, 1]), np.array([0, 1, 0, 1, 0, 1])
    d = ssd.squareform(ssd.pdist(rng.normal(size=(6, 3)) + 0.7 * a[:, None]))
    factors = {"a": _labels("a", a), "b": _labels("b", b)}
    blocks = [range(6)] if strata is None else [range(3), range(3, 6)]
    observed = _direct_f(d, factors, ["a", "b"], by)
    seen, hits = set(), dict.fromkeys(["a", "b"], 0)
    for perms in itertools.product(*(itertools.permutations(block) for block in blocks)):
        order = [i for perm in perms for i in perm]
        arrangement = tuple(zip(a[order], b[order], strict=True))
        if arrangement in seen:
            continue
        seen.add(arrangement)
        f = _direct_f(d, {"a": _labels("a", a[order]), "b": _labels("b", b[order])}, ["a", "b"], by)
        for t in hits:
            hits[t] += f[t] >= observed[t] * (1 - 1e-9)
    res = stats_core.permanova_terms(d, factors, ["a", "b"], by=by, permutations=999, seed=1, strata=strata)
    assert res.exact and res.permutations == len(seen) - 1 == (179 if strata is None else 8)
    for t, h in hits.items():
        assert res.row(t).p_value == pytest.approx(h / len(seen), rel=1e-12)
    few = stats_core.permanova_terms(d, factors, ["a", "b"], by=by, permutations=5, seed=1, strata=strata)
    assert not few.exact and few.permutations == 5  # more relabellings than asked for: Monte Carlo as before


# ---- backends, threads, the one-term case ----


def test_backends_give_identical_results():
    d, factors, strata = _design("balanced_strata")
    results = [
        stats_core.permanova_terms(
            d, factors, ["a", "b", "a:b"], by=by, permutations=99, seed=4, strata=strata, backend=b
        )
        for b in BACKENDS
        for by in ("terms", "margin")
    ]
    tables = [r.to_polars().to_numpy()[:, 1:].astype(float) for r in results]
    for k, table in enumerate(tables[2:]):
        np.testing.assert_array_equal(table, tables[k % 2])


@pytest.mark.parametrize("backend", ["native", "numba"])
def test_kernel_sums_are_bit_identical_to_the_reference(backend):
    rng = np.random.default_rng(2)
    n, cells = 70, 5
    squares = rng.random(n * (n - 1) // 2) * 10
    rows = rng.integers(0, cells, size=(37, n)).astype(np.int32)
    reference = stats_core._backend.kernels("numpy").cell_pair_sums(squares, rows, cells)
    got = stats_core._backend.kernels(backend).cell_pair_sums(squares, rows, cells)
    assert np.array_equal(got, reference)
    i, j = np.triu_indices(n, 1)
    direct = np.zeros((cells, cells))
    np.add.at(direct, (rows[3, i], rows[3, j]), squares)
    np.testing.assert_allclose(reference[3], direct, rtol=1e-12)


@pytest.mark.parametrize("backend", ["native", "numba"])
def test_integer_design_sums_equal_the_reference_and_the_definition(backend):
    """cell_column_quanta: X̃ᵀ U X̃ of integer quanta (n past one 256-column tile, 37 rows: a partial lane group)
    equal to the numpy reference and to the pair-by-pair definition."""
    rng = np.random.default_rng(4)
    n, cells = 300, 5
    quanta = rng.integers(0, 2**23 + 1, size=n * (n - 1) // 2).astype(np.uint32)
    rows = rng.integers(0, cells, size=(37, n)).astype(np.int32)
    columns = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [0, 1]], dtype=np.uint8)
    reference = stats_core._backend.kernels("numpy").cell_column_quanta(quanta, rows, columns)
    got = stats_core._backend.kernels(backend).cell_column_quanta(quanta, rows, columns)
    assert got.dtype == np.uint64 and np.array_equal(got, reference)
    i, j = np.triu_indices(n, 1)
    x = np.concatenate([np.ones((cells, 1), np.int64), columns], axis=1)
    direct = np.einsum("k,kr,ks->rs", quanta.astype(np.int64), x[rows[36, i]], x[rows[36, j]])
    assert np.array_equal(reference[36].astype(np.int64), direct)


_THREADS_SCRIPT = """
import numpy as np, scipy.spatial.distance as ssd, stats_core
x = np.random.default_rng(1).normal(size=(300, 4))
a, b = np.arange(300) % 3, (np.arange(300) // 7) % 4
res = stats_core.permanova_terms(ssd.pdist(x), {"a": a, "b": b}, ["a", "b", "a:b"], permutations=199, seed=9,
                                 backend=BACKEND)
print([(r.ss.hex(), r.f.hex(), r.p_value) for r in res.rows], res.residual_ss.hex())
"""


@pytest.mark.slow  # starts six interpreters
@pytest.mark.parametrize("backend", ["native", "numba"])
def test_results_are_bit_identical_for_1_2_and_7_threads(backend):
    outputs = set()
    for threads in (1, 2, 7):
        env = os.environ | {
            "RAYON_NUM_THREADS": str(threads),
            "NUMBA_NUM_THREADS": str(threads),
            "PYTHONPATH": str(ROOT),
        }
        script = _THREADS_SCRIPT.replace("BACKEND", repr(backend))
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1


@pytest.mark.parametrize("strata", [None, np.arange(24) % 3])
def test_one_term_is_stats_core_permanova(strata):
    d, factors, _ = _design("balanced")
    one = stats_core.permanova(d, factors["a"], permutations=199, seed=12, strata=strata)
    res = stats_core.permanova_terms(d, {"a": factors["a"]}, permutations=199, seed=12, strata=strata)
    row = res.rows[0]
    assert row.f == pytest.approx(one.statistic, rel=1e-12)
    assert row.p_value == one.pvalue
    assert res.residual_ss == pytest.approx(one.ss_within, rel=1e-12)
    if strata is None:  # with strata, permanova's effect sizes are those within the strata
        assert row.r_squared == pytest.approx(one.r_squared, rel=1e-12)
        assert row.omega_squared == pytest.approx(one.omega_squared, rel=1e-12)


def test_permutations_stay_within_strata():
    strata = np.arange(30) % 4
    for perm in stats_core.permutation_indices(30, 50, 1, strata=strata):
        assert np.array_equal(strata[perm], strata)
        assert sorted(perm) == list(range(30))


# ---- null behaviour ----


@pytest.mark.slow  # 200 simulated designs per scheme
@pytest.mark.parametrize("by", ["terms", "margin"])
def test_a_factor_without_effect_rejects_at_the_nominal_rate(by):
    """b has no effect (a has a strong one): P(p_b ≤ 0.05) is 0.05 within the binomial 99.9 % range."""
    rng = np.random.default_rng(77)
    reps, alpha = 200, 0.05
    a = np.repeat(np.arange(3), 12)
    b = rng.permutation(np.tile(np.arange(2), 18))
    rejections = 0
    for rep in range(reps):
        x = rng.normal(size=(36, 5)) + 1.5 * a[:, None] * np.eye(5)[0]
        res = stats_core.permanova_terms(ssd.pdist(x), {"a": a, "b": b}, ["a", "b"], by=by, permutations=199, seed=rep)
        rejections += res.row("b").p_value <= alpha
    low, high = stats.binom.ppf([0.0005, 0.9995], reps, alpha)
    assert low <= rejections <= high


# ---- confounding and bad input ----


def test_confounded_term_has_df_0_and_nan_test():
    d, factors, _ = _design("unbalanced")
    alias = {"a": factors["a"], "b": factors["b"], "c": np.char.replace(factors["a"], "a", "c")}
    res = stats_core.permanova_terms(d, alias, ["a", "c", "b"], permutations=49, seed=1)
    c = res.row("c")
    assert c.df == 0 and c.ss == 0.0 and np.isnan(c.f) and np.isnan(c.p_value) and np.isnan(c.omega_squared)
    assert res.row("a").df == 2 and res.row("b").df == 1
    margin = stats_core.permanova_terms(d, alias, ["a", "c", "b"], by="margin", permutations=49, seed=1)
    assert margin.row("a").df == 0 and margin.row("c").df == 0 and margin.row("b").df == 1


def test_interaction_with_an_empty_cell_loses_one_df():
    d, factors, _ = _design("balanced")
    keep = ~((factors["a"] == "a2") & (factors["b"] == "b1"))
    sub = d[np.ix_(keep, keep)]
    res = stats_core.permanova_terms(sub, {k: v[keep] for k, v in factors.items()}, ["a", "b", "a:b"], permutations=0)
    assert [r.df for r in res.rows] == [2, 1, 1]
    assert np.isnan(res.rows[0].p_value)  # no permutations: no p
    direct = _direct_f(sub, {k: v[keep] for k, v in factors.items()}, ["a", "b", "a:b"], "terms")
    assert res.row("a:b").f == pytest.approx(direct["a:b"], rel=1e-10)


def test_polars_frame_factors_and_table():
    pl = pytest.importorskip("polars")
    d, factors, _ = _design("unbalanced")
    res = stats_core.permanova_terms(d, pl.DataFrame(factors), permutations=19, seed=2)
    same = stats_core.permanova_terms(d, factors, ["a", "b"], permutations=19, seed=2)
    assert res == same
    table = res.to_polars()
    assert table["term"].to_list() == ["a", "b", "Residual", "Total"]
    assert table["ss"][:3].sum() == pytest.approx(table["ss"][3], rel=1e-12)
    assert table["df"].to_list() == [2, 1, 23, 26]


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"factors": {"a": ["x", "y"] * 5}}, "factors['a']"),
        ({"terms": ["a", "z"]}, "terms[1]"),
        ({"terms": ["a", "a:q"]}, "terms[1]"),
        ({"factors": {"a": ["x"] * 12}}, "factors['a']"),
        ({"by": "type2"}, "by"),
        ({"distances": np.full(66, np.nan)}, "distances"),
        ({"strata": [0, 1] * 3}, "strata"),
        ({"terms": ["a", "a"]}, "terms[1]"),
        ({"factors": {"a": [None, "x"] * 6}}, "factors['a']"),
        ({"factors": {"a": [pd.NA, "x"] * 6}}, "factors['a']: contains a missing label"),
        ({"factors": {"a": [1, "1"] * 6}}, "factors['a']"),
        ({"factors": {"a": ["x", ("t",)] * 6}}, "factors['a']"),
        ({"factors": {}}, "factors"),
        ({"factors": {"a:b": ["x", "y"] * 6}}, "factors"),
        ({"strata": [None] * 12}, "strata"),
        ({"distances": ssd.pdist(np.arange(24.0).reshape(12, 2)) * 1e300}, "distances"),
        ({"backend": "gpu"}, "backend"),
    ],
)
def test_bad_input_raises_a_located_error(kwargs, where):
    base = {
        "distances": ssd.pdist(np.arange(24.0).reshape(12, 2)),
        "factors": {"a": ["x", "y"] * 6, "b": ["u"] * 6 + ["v"] * 6},
        "terms": None,
    }
    args = base | kwargs
    with pytest.raises(stats_core.InvalidInputError, match=None) as info:
        stats_core.permanova_terms(args.pop("distances"), args.pop("factors"), args.pop("terms"), **args)
    assert where in str(info.value)


@pytest.mark.parametrize("scale", [0.0, 1e-300])
def test_distances_without_variation_are_never_significant(scale):
    # SS_T = 0 (or squares that underflow to 0): F is 0/0; no permutation can beat it, so p is 1 as in permanova.
    d = ssd.pdist(np.arange(24.0).reshape(12, 2)) * scale
    res = stats_core.permanova_terms(d, {"a": ["x", "y"] * 6}, permutations=99, seed=1)
    single = stats_core.permanova(d, ["x", "y"] * 6, permutations=99, seed=1)
    assert math.isnan(res.rows[0].f)
    assert res.rows[0].p_value == single.pvalue == 1.0


def test_a_saturated_model_is_refused():
    d = ssd.pdist(np.arange(8.0)[:, None])
    with pytest.raises(stats_core.InvalidInputError, match="no residual degrees of freedom"):
        stats_core.permanova_terms(d, {"a": np.arange(8) % 4, "b": np.arange(8) // 4}, ["a", "b", "a:b"])


# ---- the low-rank screen decides exactly what the exact kernel decides ----


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("n", "by"), [(6, "terms"), (36, "terms"), (36, "margin")])
def test_screened_counts_equal_exact_counts(monkeypatch, backend, n, by):
    """Euclidean distances in 3 dimensions: Gower's matrix has rank 3, the factor screen decides most
    permutations (n = 6: every F value recurs, so ties with the observed F are recomputed exactly)."""
    from stats_core import _terms_screen

    x = np.random.default_rng(n).normal(size=(n, 3))
    a, b = np.arange(n) % 2, (np.arange(n) // 2) % 3 if n > 6 else np.array([0, 0, 1, 1, 0, 1])
    x[:, 0] += 0.4 * a
    args = (ssd.pdist(x), {"a": a, "b": b}, ["a", "b", "a:b"])
    used = []
    real = _terms_screen.factor_screen

    def spy(*a, **k):
        used.append(real(*a, **k))
        return used[-1]

    monkeypatch.setattr(_terms_screen, "factor_screen", spy)
    screened = stats_core.permanova_terms(*args, by=by, permutations=999, seed=7, backend=backend)
    assert used[-1] is not None and used[-1].factor.shape[1] == 3
    monkeypatch.setattr(_terms_screen, "factor_screen", lambda *a, **k: None)
    exact = stats_core.permanova_terms(*args, by=by, permutations=999, seed=7, backend=backend)
    assert screened == exact
    assert 0.001 < min(r.p_value for r in exact.rows) < 1.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("n", "by", "terms"),
    [(6, "terms", "a+b+a:b"), (48, "terms", "a+b+a:b"), (48, "margin", "a+b+a:b"), (48, "terms", "b+a")],
)
def test_quantized_screen_counts_equal_exact_counts(monkeypatch, backend, n, by, terms):
    """Bray–Curtis distances (Gower's matrix not low rank): the integer screen's SS lie within its error bounds
    of the exact SS, it decides most permutations, and the counts are the exact kernel's (n = 6: every F value
    recurs, so ties with the observed F are recomputed exactly); main effects only, the sweeps are the 3 design
    columns instead of the 5 cells' but one."""
    from stats_core import _terms_screen

    rng = np.random.default_rng(n)
    a, b = np.arange(n) % 2, (np.arange(n) // 2) % 3 if n > 6 else np.array([0, 0, 1, 1, 0, 1])
    x = np.exp(rng.normal(size=(n, 5)) + 0.3 * a[:, None])
    args = (ssd.pdist(x, "braycurtis"), {"a": a, "b": b}, terms.split("+"))
    screens, exact_rows = [], []
    real_screen, real_exact = _terms_screen.quantized_screen, _terms_screen.Model.exact_forms

    def spy(squares, model, sizes, design):
        screens.append((real_screen(squares, model, sizes, design), model))
        return screens[-1][0]

    def counting_exact(self, kernels, squares, rows, cells):
        exact_rows.append(rows.shape[0])
        return real_exact(self, kernels, squares, rows, cells)

    monkeypatch.setattr(_terms_screen, "quantized_screen", spy)
    monkeypatch.setattr(_terms_screen.Model, "exact_forms", counting_exact)
    screened = stats_core.permanova_terms(*args, by=by, permutations=999, seed=7, backend=backend)
    screen, model = screens[-1]
    assert isinstance(screen, _terms_screen.QuantizedScreen)
    assert screen.columns.shape[1] == model.rank
    if n > 6:
        assert sum(exact_rows) < 100  # the observed F, and few undecided permutations
    kernels = stats_core._backend.kernels(backend)
    squares = np.square(args[0])
    cells = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    rows = cells[stats_core.permutation_indices(n, 200, 3)].astype(np.int32)
    count = model.vectors.shape[0]
    gap = np.abs(screen.forms(kernels, model, rows, count) - real_exact(model, kernels, squares, rows, count))
    assert (gap <= screen.errors).all()
    assert gap.max() > 0  # quantization is visible: the bound is not vacuous
    monkeypatch.setattr(_terms_screen, "quantized_screen", lambda *a, **k: None)
    exact = stats_core.permanova_terms(*args, by=by, permutations=999, seed=7, backend=backend)
    assert screened == exact
    assert 0.001 < min(r.p_value for r in exact.rows) < 1.0


def test_interactions_follow_main_effects_as_in_r_formulas():
    d, factors, _ = _design("unbalanced")
    listed = stats_core.permanova_terms(d, factors, ["a:b", "b", "a"], permutations=19, seed=3)
    ordered = stats_core.permanova_terms(d, factors, ["b", "a", "a:b"], permutations=19, seed=3)
    assert listed == ordered
    assert [r.term for r in listed.rows] == ["b", "a", "a:b"]


def test_a_design_with_almost_one_object_per_cell(monkeypatch):
    """Four main effects on 60 objects: ~50 occupied cells; F equals the direct projections, and sums are held
    a few permutations at a time (CHUNK_VALUES) with the same counts."""
    from stats_core import _terms_screen

    rng = np.random.default_rng(5)
    factors = {k: _labels(k, rng.integers(0, levels, 60)) for k, levels in zip("abcd", (4, 3, 3, 2), strict=True)}
    x = rng.normal(size=(60, 4)) + 0.5 * (factors["b"] == "b1")[:, None]
    d = ssd.squareform(ssd.pdist(np.exp(x), "braycurtis"))
    whole = stats_core.permanova_terms(d, factors, permutations=99, seed=2)
    direct = _direct_f(d, factors, ["a", "b", "c", "d"], "terms")
    for row in whole.rows:
        assert row.f == pytest.approx(direct[row.term], rel=1e-10)
    monkeypatch.setattr(_terms_screen, "CHUNK_VALUES", 1)
    assert stats_core.permanova_terms(d, factors, permutations=99, seed=2) == whole


@pytest.mark.parametrize("backend", ["native", "numba"])
def test_object_space_forms_are_bit_identical_and_equal_the_cell_sums_forms(backend):
    """cell_forms (many cells) equals −½ vᵀ B v from cell_pair_sums to rounding, and the reference bit for bit."""
    from stats_core import _terms_model

    rng = np.random.default_rng(3)
    n, cells = 40, 7
    squares = rng.random(n * (n - 1) // 2)
    rows = rng.integers(0, cells, size=(9, n)).astype(np.int32)
    vectors = rng.normal(size=(cells, 4))
    reference = stats_core._backend.kernels("numpy").cell_forms(squares, rows, vectors)
    assert np.array_equal(stats_core._backend.kernels(backend).cell_forms(squares, rows, vectors), reference)
    pair_sums = stats_core._backend.kernels("numpy").cell_pair_sums(squares, rows, cells)
    np.testing.assert_allclose(-reference, _terms_model.model_ss(pair_sums, vectors), rtol=1e-10)


def test_the_compiled_kernels_refuse_fortran_ordered_arrays():
    native = stats_core._backend.kernels("native")
    squares, rows = np.ones(6), np.zeros((2, 4), dtype=np.int32)
    with pytest.raises(ValueError, match="vectors: must be C-contiguous"):
        native.cell_forms(squares, rows, np.asfortranarray(np.ones((3, 2))))
    with pytest.raises(ValueError, match="factor: must be C-contiguous"):
        native.cell_factor_sums(np.asfortranarray(np.ones((4, 2))), rows, 1)
