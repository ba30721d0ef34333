"""PERMANOVA and PERMDISP: the same bits on 1, 2 and 7 threads; backends within the documented bound.

Each thread count runs in its own interpreter (RAYON_NUM_THREADS / NUMBA_NUM_THREADS are read once, at the
first parallel call), which prints every published number as float.hex; the runs are compared byte for byte.
The designs take each path that reaches a number: the quantized screen (cityblock: indefinite Gower matrix),
the factored screen (Euclidean), strata (the within-strata sums), the exact kernel's recheck, and PERMDISP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.distance import pdist

import stats_core

ROOT = Path(__file__).resolve().parents[1]

# Published numbers of each design, as float.hex strings (exact bits), printed as one JSON object.
CHILD = """
import json, sys
import numpy as np
from scipy.spatial.distance import pdist
import stats_core

backend = sys.argv[1]
rng = np.random.default_rng(29)
n = 640
labels = np.arange(n) % 3
strata = (np.arange(n) // 7) % 5
x = rng.normal(size=(n, 6)) + 0.05 * labels[:, None]
out = {}
for name, d, kwargs in [
    ("cityblock", pdist(x, "cityblock"), {}),
    ("euclidean", pdist(x), {}),
    ("cityblock strata", pdist(x, "cityblock"), {"strata": strata}),
    ("user matrix", rng.uniform(1.0, 2.0, size=n * (n - 1) // 2), {}),
]:
    r = stats_core.permanova(d, labels, 199, seed=7, backend=backend, **kwargs)
    fields = ("statistic", "pvalue", "ss_total", "ss_within", "r_squared", "omega_squared",
              "ss_total_within_strata", "ss_within_cells")
    out[name] = {f: float(getattr(r, f)).hex() for f in fields if getattr(r, f) is not None}
    p = stats_core.permdisp(d, labels, 199, seed=7, backend=backend, **kwargs)
    out[name + " permdisp"] = {"statistic": float(p.statistic).hex(), "pvalue": float(p.pvalue).hex(),
                               "z": p.distances_to_centroid.tobytes().hex()}
print(json.dumps(out))
"""


def published(backend: str, threads: int) -> dict:
    """Every published number of the designs, as exact bits, from a fresh interpreter on ``threads`` threads."""
    env = dict(
        os.environ,
        RAYON_NUM_THREADS=str(threads),
        NUMBA_NUM_THREADS=str(threads),
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD, backend], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["native", "numba"])
def test_permanova_and_permdisp_are_bit_identical_on_1_2_and_7_threads(backend):
    one = published(backend, 1)
    for threads in (2, 7):
        other = published(backend, threads)
        for design, numbers in one.items():
            assert other[design] == numbers, f"{backend}, {design}: 1 thread vs {threads}"


# The bounds docs/stats_core.md states for numbers whose summation order differs between backends: the sums of
# squares to SUM_RTOL relative; SS_A = SS_T − SS_W, hence F and R², to SUM_RTOL · SS_T / SS_A relative; PERMDISP's
# distances to centroid to SUM_RTOL of the largest, its F to 1e-12.
SUM_RTOL = 1e-14


@pytest.mark.parametrize("metric", ["cityblock", "euclidean", "braycurtis"])
def test_backends_agree_within_the_documented_bound_and_on_the_p_value(metric):
    rng = np.random.default_rng(3)
    n = 300
    labels = np.arange(n) % 4
    d = pdist(rng.uniform(1.0, 5.0, size=(n, 5)) + 0.1 * labels[:, None], metric)
    backends = ("native", "numba", "numpy")
    results = {b: stats_core.permanova(d, labels, 99, seed=11, backend=b) for b in backends}
    disp = {b: stats_core.permdisp(d, labels, 99, seed=11, backend=b) for b in backends}
    native, native_disp = results["native"], disp["native"]
    amplification = native.ss_total / (native.ss_total - native.ss_within)
    for backend in backends:
        r, p = results[backend], disp[backend]
        assert (r.pvalue, p.pvalue) == (native.pvalue, native_disp.pvalue), backend
        for field, rtol in [
            ("ss_total", SUM_RTOL),
            ("ss_within", SUM_RTOL),
            ("statistic", SUM_RTOL * amplification),
            ("r_squared", SUM_RTOL * amplification),
        ]:
            want, got = getattr(native, field), getattr(r, field)
            assert abs(got - want) <= rtol * abs(want), (backend, field, got, want)
        z, want_z = p.distances_to_centroid, native_disp.distances_to_centroid
        assert np.max(np.abs(z - want_z)) <= SUM_RTOL * np.max(want_z), backend
        assert abs(p.statistic - native_disp.statistic) <= 1e-12 * native_disp.statistic, backend
