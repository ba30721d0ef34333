"""PERMANOVA effect sizes within strata: R² and ω² of the groups inside the blocks (docs/stats_core.md).

With ``strata``, R² = SS_A,s / SS_T,s and ω² = (SS_A,s − df_A MS_R) / (SS_A,s + (n − df_A) MS_R), made of the
``strata:groups`` and residual rows of ``adonis2(d ~ strata / groups)`` (golden values from R vegan 2.6,
tests/golden/vegan_strata_effects.R), of their definition in exact arithmetic, and checked by simulation: under a
true null ω² averages 0 however much the blocks differ, and with a planted effect it recovers the population share.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.spatial.distance as ssd

import stats_core
from stats_core.permanova import effect_sizes
from tests.conftest import require_program

GOLDEN = Path(__file__).parent / "golden"
CASES = ["balanced_euclidean", "unbalanced_euclidean", "braycurtis"]
BACKENDS = ["native", "numba", "numpy"]


def _golden() -> dict:
    return json.loads((GOLDEN / "vegan_strata_effects.json").read_text())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_within_strata_effect_sizes_are_adonis2_nested_rows(case, backend):
    c = _golden()[case]
    assert c["nested_rows"] == ["strata", "strata:groups", "Residual", "Total"]
    (df_strata, df_among, df_res, df_total), (ss_strata, ss_among, ss_res, ss_total) = c["nested_df"], c["nested_ss"]
    n = int(df_total) + 1
    # our degrees of freedom: df_A = cells − strata, df_R = n − cells
    strata, cells = set(c["strata"]), set(zip(c["strata"], c["groups"], strict=True))
    assert (df_strata, df_among, df_res) == (len(strata) - 1, len(cells) - len(strata), n - len(cells))
    res = stats_core.permanova(np.array(c["distances"]), c["groups"], 0, strata=c["strata"], backend=backend)
    assert res.ss_total == pytest.approx(ss_total, rel=1e-12)
    assert res.ss_total_within_strata == pytest.approx(ss_total - ss_strata, rel=1e-10)
    assert res.ss_within_cells == pytest.approx(ss_res, rel=1e-12)
    assert res.r_squared == pytest.approx(ss_among / (ss_among + ss_res), rel=1e-10)
    ms_res = ss_res / df_res
    omega = (ss_among - df_among * ms_res) / (ss_among + (n - df_among) * ms_res)
    assert res.omega_squared == pytest.approx(omega, rel=1e-9)
    # F and its test stay adonis2(d ~ groups, strata = strata)'s; that call's R2 ignores the strata
    assert res.statistic == pytest.approx(c["blocked_F"], rel=1e-12)
    assert 1.0 - res.ss_within / res.ss_total == pytest.approx(c["blocked_R2"], rel=1e-12)
    assert abs(res.r_squared - c["blocked_R2"]) > 0.01


def _exact_ss(d2: dict, members: list[int]) -> Fraction:
    """(1/m) Σ_{i<j} d²_ij of one set of objects, in exact arithmetic."""
    if len(members) < 2:
        return Fraction(0)
    return sum((d2[i, j] for i, j in itertools.combinations(members, 2)), Fraction(0)) / len(members)


@pytest.mark.parametrize("backend", BACKENDS)
def test_within_strata_sums_equal_their_definition_in_exact_arithmetic(backend):
    # 23 objects, 4 strata of unequal size (one a singleton), 3 groups, a group missing from a stratum
    rng = np.random.default_rng(11)
    strata = np.array([0] * 7 + [1] * 6 + [2] + [3] * 9)[rng.permutation(23)]
    groups = rng.integers(0, 3, 23)
    groups[strata == 1] = np.arange(6) % 2
    d = ssd.pdist(rng.normal(size=(23, 3)) + 4 * strata[:, None], "cityblock")
    square = ssd.squareform(d)
    d2 = {(i, j): Fraction(square[i, j]) ** 2 for i in range(23) for j in range(i + 1, 23)}
    members = lambda mask: list(np.nonzero(mask)[0])  # noqa: E731
    total = sum(_exact_ss(d2, members(strata == s)) for s in range(4))
    cells = [(s, g) for s in range(4) for g in range(3) if ((strata == s) & (groups == g)).any()]
    within = sum(_exact_ss(d2, members((strata == s) & (groups == g))) for s, g in cells)
    df_among, df_res = len(cells) - 4, 23 - len(cells)
    ms = within / df_res
    res = stats_core.permanova(d, groups, 0, strata=strata, backend=backend)
    assert res.ss_total_within_strata == pytest.approx(float(total), rel=1e-13)
    assert res.ss_within_cells == pytest.approx(float(within), rel=1e-13)
    assert res.r_squared == pytest.approx(float((total - within) / total), rel=1e-12)
    omega = (total - within - df_among * ms) / (total - within + (23 - df_among) * ms)
    assert res.omega_squared == pytest.approx(float(omega), rel=1e-12)


def _simulated(rng, spread: float, shift: float, strata: int = 8, per_cell: int = 5, dims: int = 4):
    """Two groups × ``per_cell`` in each stratum; strata offset by N(0, spread²) per dimension; noise N(0, 1) per
    dimension; group effects ±shift on the first dimension (population ω² = shift² / (shift² + dims))."""
    stratum = np.repeat(np.arange(strata), 2 * per_cell)
    group = np.tile(np.repeat([0, 1], per_cell), strata)
    x = rng.normal(size=(len(stratum), dims)) + spread * rng.normal(size=(strata, dims))[stratum]
    x[:, 0] += shift * (2 * group - 1)
    return stats_core.permanova(stats_core.pdist(x), group, 0, strata=stratum)


@pytest.mark.parametrize(
    ("spread", "shift", "omega"),
    [(0.0, 0.0, 0.0), (10.0, 0.0, 0.0), (10.0, 1.0, 0.2), (0.0, 1.0, 0.2)],
    ids=["null-equal-blocks", "null-distant-blocks", "effect-distant-blocks", "effect-equal-blocks"],
)
def test_mean_omega_squared_recovers_the_truth_however_much_blocks_differ(spread, shift, omega):
    rng = np.random.default_rng(int(10 * spread + 100 * shift))
    results = [_simulated(rng, spread, shift) for _ in range(300)]
    within = np.array([r.omega_squared for r in results])
    assert abs(within.mean() - omega) < 4 * within.std() / np.sqrt(len(within)) + 0.002, within.mean()
    # the one-way ω² (blocks counted as residual) is what strata correct: far below the truth when blocks differ
    n = results[0].n
    one_way = np.array([effect_sizes(r.ss_total, r.ss_within, 1, n - 2, n)[1] for r in results])
    if spread > 0:
        assert one_way.mean() < omega - 0.008
    if shift == 0:  # R² under the null averages df_A / (n − strata)
        assert np.mean([r.r_squared for r in results]) == pytest.approx(8 / 72, rel=0.1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_degenerate_within_strata_designs(backend):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(12, 2))
    d = stats_core.pdist(x)
    groups = np.arange(12) % 3
    # one stratum: the one-way effect sizes
    one = stats_core.permanova(d, groups, 0, strata=np.zeros(12), backend=backend)
    free = stats_core.permanova(d, groups, 0, backend=backend)
    assert one.r_squared == pytest.approx(free.r_squared, rel=1e-13)
    assert one.omega_squared == pytest.approx(free.omega_squared, rel=1e-12)
    assert free.ss_total_within_strata is None and free.ss_within_cells is None
    # each stratum holds one group: nothing varies between groups inside a stratum
    res = stats_core.permanova(d, groups, 0, strata=groups + 10, backend=backend)
    assert res.r_squared == 0.0 and res.omega_squared == 0.0
    # every stratum × group cell a singleton: no residual degrees of freedom, ω² undefined
    pairs = np.repeat(np.arange(6), 2)
    res = stats_core.permanova(d, np.tile([0, 1], 6), 0, strata=pairs, backend=backend)
    assert res.r_squared == 1.0 and np.isnan(res.omega_squared)


@pytest.mark.slow  # runs R with vegan
def test_stored_values_are_what_vegan_produces(tmp_path):
    rscript = require_program("Rscript")
    out = tmp_path / "golden.json"
    script = GOLDEN / "vegan_strata_effects.R"
    subprocess.run([rscript, str(script), str(out)], check=True, capture_output=True, timeout=300)
    fresh, stored = json.loads(out.read_text()), _golden()
    for case in CASES:
        for key, value in stored[case].items():
            if isinstance(value, list) and value and isinstance(value[0], float):
                np.testing.assert_allclose(fresh[case][key], value, rtol=1e-12)
            elif isinstance(value, float):
                assert fresh[case][key] == pytest.approx(value, rel=1e-12), (case, key)
            else:
                assert fresh[case][key] == value, (case, key)
