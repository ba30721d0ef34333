"""stats_core's published numbers are bit-identical on 1, 2 and 7 threads, and across backends where documented.

Rayon sizes its pool and numba its workers once per process, so each thread count runs
``tests/_determinism_probe.py`` in its own subprocess (RAYON_NUM_THREADS = NUMBA_NUM_THREADS =
OPENBLAS_NUM_THREADS = t) and the SHA-256 of every result's bytes is compared. 7 threads on a 2-core machine
still splits the work 7 ways: what a kernel's reduction order depends on is the pool size, not the cores.
The PERMANOVA and PERMDISP kernels are covered by their own tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

THREADS = (1, 2, 7)
PROBE = Path(__file__).with_name("_determinism_probe.py")
ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("pdist", "pdist6", "kendall", "bootstrap", "silhouette", "davies_bouldin", "ss_h", "mcd", "distributed")


@pytest.fixture(scope="module")
def runs() -> dict[int, dict]:
    """Thread count → the probe's JSON (the thread counts it saw, and name → SHA-256 of each result)."""
    out = {}
    for t in THREADS:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.update({name: str(t) for name in ("RAYON_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
        env.pop("STATS_CORE_BACKEND", None)
        done = subprocess.run(
            [sys.executable, str(PROBE)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        out[t] = json.loads(done.stdout)
    return out


def test_each_probe_ran_with_its_thread_count(runs):
    for t, run in runs.items():
        assert run["threads"] == {"rayon": str(t), "numba": t}


def test_the_probe_covers_every_family_on_every_backend(runs):
    names = runs[1]["results"].keys()
    for family in FAMILIES:
        assert any(name.split("/")[0] == family for name in names), family
    assert {name.rsplit("/", 1)[-1] for name in names} >= {"native", "numba", "numpy"}


@pytest.mark.parametrize("family", FAMILIES)
def test_results_are_bit_identical_on_1_2_and_7_threads(runs, family):
    one = {k: v for k, v in runs[1]["results"].items() if k.split("/")[0] == family}
    assert one
    for t in THREADS[1:]:
        other = {k: v for k, v in runs[t]["results"].items() if k.split("/")[0] == family}
        assert other.keys() == one.keys()
        assert [k for k in one if one[k] != other[k]] == [], f"differ between 1 and {t} threads"


# native and numba run the same operations in the same order (docs/stats_core.md, "Determinism"); numpy, the
# readable reference, sums in numpy's order and agrees to the documented rounding instead.
SAME_ON_NATIVE_AND_NUMBA = (
    "pdist",
    "pdist6",
    "kendall",
    "bootstrap",
    "silhouette",
    "davies_bouldin",
    "ss_h",
    "distributed",
)


@pytest.mark.parametrize("family", SAME_ON_NATIVE_AND_NUMBA)
def test_native_and_numba_agree_bit_for_bit(runs, family):
    results = runs[2]["results"]
    natives = [k for k in results if k.split("/")[0] == family and k.endswith("/native")]
    assert natives
    for name in natives:
        assert results[name] == results[name.removesuffix("native") + "numba"], name
