"""Where a PERMANOVA call spends its time: each step of ``stats_core.permanova`` timed alone (native backend).

Run: python -m benches.stats_permanova_steps. Best of 7, wall and CPU milliseconds (all threads), n = 2000
and 5000, 999 permutations, the data of ``benches.stats_permanova``.
"""

from __future__ import annotations

import numpy as np

import stats_core
from benches.stats_permanova import PERMUTATIONS, data
from benches.stats_timing import load, measure
from stats_core import _resample, _screen, _validate
from stats_core._backend import kernels


def main() -> None:
    print(f"PERMANOVA steps, native, {PERMUTATIONS} permutations; {load()}")
    print("| n | step | wall ms | CPU ms |")
    print("|---|---|---|---|")
    native = kernels("native")
    for n in (2000, 5000):
        d, labels = data(n)
        codes, _, sizes = _validate.grouping("grouping", labels, n)
        inv = 1.0 / sizes.astype(np.float64)
        key = _resample.permutation_key(1)
        perms = native.permutations(codes, key, 0, PERMUTATIONS)
        observed = native.permanova_observed(d, codes, inv)
        bound = observed[0] * (1 + _resample.TIE_RTOL)
        screen = _screen.choose(native, d, inv, sizes, observed, bound)
        quantized = _screen.quantized(native, d, inv, sizes, observed[2], bound)
        steps = {
            "whole permanova call": lambda: stats_core.permanova(d, labels, PERMUTATIONS, seed=1, backend="native"),
            "observed SS_W, Σd², max d², row sums, value check (one pass)": lambda: native.permanova_observed(
                d, codes, inv
            ),
            "permutations": lambda: native.permutations(codes, key, 0, PERMUTATIONS),
            "choose the screen (Gower factor + residual pass)": lambda: _screen.choose(
                native, d, inv, sizes, observed, bound
            ),
            f"count with the chosen ({screen.name}) screen": lambda: _screen.count_at_most(
                native, d, perms, inv, bound, screen
            ),
            "count with the quantized screen": lambda: _screen.count_at_most(native, d, perms, inv, bound, quantized),
        }
        for name, fn in steps.items():
            wall, cpu, _ = measure(fn, repeat=7)
            print(f"| {n} | {name} | {wall * 1e3:.1f} | {cpu * 1e3:.1f} |")


if __name__ == "__main__":
    main()
