"""Golden values from R vegan 2.6 (adonis2, betadisper(type = "centroid") + permutest, with and without strata).

tests/golden/vegan_golden.R generated tests/golden/vegan_golden.json; the second test reruns it when R is
installed (CI installs r-cran-vegan) and checks the stored file is what R produces.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import stats_core
from tests.conftest import require_program

GOLDEN = Path(__file__).parent / "golden"
CASES = ["euclidean_three_groups", "braycurtis_two_groups", "euclidean_strata"]
BACKENDS = ["native", "numba", "numpy"]


def _load() -> dict:
    return json.loads((GOLDEN / "vegan_golden.json").read_text())


def _monte_carlo_close(ours: float, theirs: float, permutations: int) -> bool:
    """Two permutation p-values from different RNGs agree within 4 binomial standard errors (+1 step)."""
    p = max(theirs, 1.0 / (permutations + 1))
    return abs(ours - theirs) <= 4 * np.sqrt(p * (1 - p) / permutations) + 1.0 / (permutations + 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_permanova_and_permdisp_match_vegan(case, backend):
    golden = _load()
    c = golden[case]
    d = np.array(c["distances"])
    strata = c.get("strata")  # adonis2(..., strata =) and permutest(how(blocks =)) where the case has blocks
    perm = stats_core.permanova(d, c["groups"], golden["permutations"], seed=1, strata=strata, backend=backend)
    assert perm.statistic == pytest.approx(c["adonis2_F"], rel=1e-12)
    if strata is None:  # adonis2's R2 ignores strata; ours is then within them (test_stats_permanova_strata.py)
        assert perm.r_squared == pytest.approx(c["adonis2_R2"], rel=1e-12)
    assert 1.0 - perm.ss_within / perm.ss_total == pytest.approx(c["adonis2_R2"], rel=1e-12)
    assert _monte_carlo_close(perm.pvalue, c["adonis2_p"], golden["permutations"])
    disp = stats_core.permdisp(d, c["groups"], golden["permutations"], seed=1, strata=strata, backend=backend)
    # vegan drops PCoA axes with |eigenvalue| < 1.5e-8 λ₁; the closed form keeps them: agreement ~1e-9.
    np.testing.assert_allclose(disp.distances_to_centroid, c["betadisper_distances"], rtol=1e-9, atol=1e-12)
    assert disp.statistic == pytest.approx(c["permutest_F"], rel=1e-9)
    assert _monte_carlo_close(disp.pvalue, c["permutest_p"], golden["permutations"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_blocked_permutations_are_what_makes_the_shift_significant(backend):
    # The strata case: blocks far apart drown a small shift when labels move freely (vegan p ≈ 0.98) and not
    # when they stay within blocks (≈ 0.07); ours must follow vegan on both sides.
    golden = _load()
    c = golden["euclidean_strata"]
    d = np.array(c["distances"])
    free = stats_core.permanova(d, c["groups"], golden["permutations"], seed=1, backend=backend)
    blocked = stats_core.permanova(d, c["groups"], golden["permutations"], seed=1, strata=c["strata"], backend=backend)
    assert _monte_carlo_close(free.pvalue, c["adonis2_p_unblocked"], golden["permutations"])
    assert free.pvalue > 0.9 and blocked.pvalue < 0.2
    assert free.strata is None and blocked.strata == tuple(sorted(set(c["strata"])))
    assert free.statistic == blocked.statistic


def test_bray_curtis_case_exercises_negative_eigenvalues():
    assert _load()["braycurtis_two_groups"]["betadisper_negative_eigenvalues"] > 0


@pytest.mark.slow  # runs R with vegan (CI)
def test_stored_values_are_what_vegan_produces(tmp_path):
    rscript = require_program("Rscript")
    out = tmp_path / "golden.json"
    subprocess.run([rscript, str(GOLDEN / "vegan_golden.R"), str(out)], check=True, capture_output=True, timeout=300)
    fresh, stored = json.loads(out.read_text()), _load()
    for case in CASES:
        for key, value in stored[case].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert fresh[case][key] == pytest.approx(value, rel=1e-12), (case, key)
            elif isinstance(value, list) and value and isinstance(value[0], float):
                np.testing.assert_allclose(fresh[case][key], value, rtol=1e-12)
            else:
                assert fresh[case][key] == value, (case, key)
