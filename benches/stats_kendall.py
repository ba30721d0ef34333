"""Kendall tau-b against scipy: one long pair of vectors, the batched short rows, and the bootstrap CI.

Run: python -m benches.stats_kendall [--before PATH_TO_OTHER_native.so] [--no-scipy-bootstrap]. Results are
checked equal to scipy's (and across backends) before timing. ``--before`` loads another build of the compiled
module (e.g. main's ``stats_core/_native.abi3.so``) and times its kernels on the same data, alternating with
this one, for before/after ratios of the batched short-row path.
"""

from __future__ import annotations

import argparse
from types import ModuleType

import numpy as np
import scipy.stats

import stats_core
from benches.stats_timing import load, measure
from stats_core import _numba, _reference
from stats_core._backend import kernels, other_native_build

ROWS = 200_000


def long_vectors(sizes: tuple[int, ...]) -> None:
    """One pair of long vectors: every backend, checked equal, against scipy.stats.kendalltau."""
    print(f"\nLong vectors; {load()}")
    print("| n | ties | native ms (CPU ms) | numba ms | numpy ms | scipy ms | scipy / native |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(4)
    for n in sizes:
        for ties in ("none", "1–5 scale"):
            x = rng.normal(size=n)
            y = 0.4 * x + rng.normal(size=n)
            if ties != "none":
                x, y = np.clip(np.round(x + 3), 1, 5), np.clip(np.round(y + 3), 1, 5)
            expected = scipy.stats.kendalltau(x, y).statistic
            times = {}
            for backend in ("native", "numba", "numpy"):
                repeat = 1 if backend == "numpy" else 3
                wall, cpu, got = measure(lambda b=backend: stats_core.kendall_tau(x, y, backend=b), repeat=repeat)
                assert abs(got - expected) <= 4e-16, (backend, got, expected)
                times[backend] = (wall, cpu, got)
            assert len({t[2] for t in times.values()}) == 1  # bit for bit across backends
            t_scipy, _, _ = measure(lambda: scipy.stats.kendalltau(x, y))
            native = times["native"]
            print(
                f"| {n:,} | {ties} | {native[0] * 1e3:.1f} ({native[1] * 1e3:.1f}) | {times['numba'][0] * 1e3:.1f} | "
                f"{times['numpy'][0] * 1e3:.0f} | {t_scipy * 1e3:.1f} | **{t_scipy / native[0]:.1f}x** |"
            )


def batched(before: ModuleType | None) -> None:
    """Many short rows at once (the analysis's use) against one scipy call per tau; and against ``before``."""
    print(f"\nBatched short rows; {load()}")
    print(
        "| n | rows | native ns/tau | before ns/tau | before / native | numba ns/tau | scipy us/tau | scipy / native |"
    )
    print("|---|---|---|---|---|---|---|---|")
    _native = kernels("native")  # only _backend imports the compiled module

    rng = np.random.default_rng(1)
    for n, rows in ((4, ROWS), (8, ROWS), (24, ROWS // 4), (100, ROWS // 40)):
        x = rng.integers(0, 5, size=(rows, n)).astype(float)
        y = rng.integers(0, 5, size=(rows, n)).astype(float)
        ours = _native.kendall_tau_b_rows(x, y)
        np.testing.assert_array_equal(_numba.kendall_tau_b_rows(x, y), ours)
        np.testing.assert_array_equal(_reference.kendall_tau_b_rows(x[:2000], y[:2000]), ours[:2000])
        for r in range(200):
            expected = scipy.stats.kendalltau(x[r], y[r]).statistic
            assert (np.isnan(expected) and np.isnan(ours[r])) or abs(ours[r] - expected) <= 4e-16
        best = {"native": np.inf, "before": np.inf}
        for _ in range(5):  # alternate the two builds so that load changes hit both
            best["native"] = min(best["native"], measure(lambda: _native.kendall_tau_b_rows(x, y), 1)[0])
            if before is not None:
                np.testing.assert_array_equal(before.kendall_tau_b_rows(x, y), ours)
                best["before"] = min(best["before"], measure(lambda: before.kendall_tau_b_rows(x, y), 1)[0])
        t_numba, _, _ = measure(lambda: _numba.kendall_tau_b_rows(x, y))
        calls = 2000
        t_scipy, _, _ = measure(lambda: [scipy.stats.kendalltau(x[r], y[r]) for r in range(calls)], repeat=2)
        per = {k: v / rows for k, v in best.items()}
        before_cells = (
            f"{per['before'] * 1e9:.0f} | {per['before'] / per['native']:.2f}x" if before is not None else "– | –"
        )
        print(
            f"| {n} | {rows:,} | {per['native'] * 1e9:.0f} | {before_cells} | {t_numba / rows * 1e9:.0f} | "
            f"{t_scipy / calls * 1e6:.0f} | {t_scipy / calls / per['native']:.0f}x |"
        )


def bootstrap(before: ModuleType | None, with_scipy: bool) -> None:
    """The bootstrap CI against scipy.stats.bootstrap (``with_scipy``); its kernel against ``before``'s."""
    print(f"\nBootstrap CI, 9999 resamples, 6 dims x 4 countries x 10 units; {load()}")
    rng = np.random.default_rng(2)
    samples = rng.normal(size=(4, 6, 10)) + np.arange(4)[:, None, None] * 0.3  # continuous: no undefined taus
    reference = rng.normal(size=(4, 6))

    def statistic(*countries, axis=-1):
        # scipy hands over (dims, [resamples,] units) per country: one kendalltau call per dim and resample
        means = np.stack([c.mean(axis=axis) for c in countries], axis=-1)
        out = np.empty(means.shape[:-1])
        for idx in np.ndindex(out.shape):
            out[idx] = scipy.stats.kendalltau(means[idx], reference[:, idx[0]]).statistic
        return out

    data = tuple(samples[c] for c in range(4))
    if not with_scipy:
        _bootstrap_kernel(before, rng)
        return
    t_scipy, _, theirs = measure(
        lambda: scipy.stats.bootstrap(
            data,
            statistic,
            n_resamples=9999,
            axis=-1,
            vectorized=True,
            method="percentile",
            rng=np.random.default_rng(3),
        ),
        repeat=1,
    )
    t_ours, _, ours = measure(lambda: stats_core.bootstrap_kendall_tau(samples, reference, 9999, seed=3))
    np.testing.assert_allclose(ours.confidence_interval.low, theirs.confidence_interval.low, atol=1e-12)
    np.testing.assert_allclose(ours.confidence_interval.high, theirs.confidence_interval.high, atol=1e-12)
    print(f"| bootstrap_kendall_tau | {t_ours * 1e3:.1f} ms | scipy {t_scipy:.1f} s | {t_scipy / t_ours:.0f}x |")
    _bootstrap_kernel(before, rng)


def _bootstrap_kernel(before: ModuleType | None, rng: np.random.Generator) -> None:
    """The compiled bootstrap kernel, 9999 resamples of 6 dims x 10 units, against ``before``'s (alternating)."""
    if before is None:
        return
    _native = kernels("native")  # only _backend imports the compiled module

    print("| countries | answers | kernel CPU ms | before CPU ms | before / now |")
    print("|---|---|---|---|---|")
    for countries, answers in ((4, "continuous"), (4, "1–5 scale"), (20, "1–5 scale"), (40, "continuous")):
        samples = rng.normal(size=(1, countries, 6, 10))
        if answers != "continuous":
            samples = np.clip(np.rint(samples * 1.5 + 3), 1, 5)
        reference = rng.normal(size=(1, countries, 6))
        indices = np.ascontiguousarray(rng.integers(0, 10, size=(countries, 9999, 10)).astype(np.int32))
        now = _native.bootstrap_kendall(samples, reference, indices)
        np.testing.assert_array_equal(before.bootstrap_kendall(samples, reference, indices), now)
        best = {"now": np.inf, "before": np.inf}
        for _ in range(9):  # CPU seconds: the machine is shared, wall time moves with its load
            best["now"] = min(
                best["now"], measure(lambda: _native.bootstrap_kendall(samples, reference, indices), 1)[1]
            )
            best["before"] = min(
                best["before"], measure(lambda: before.bootstrap_kendall(samples, reference, indices), 1)[1]
            )
        print(
            f"| {countries} | {answers} | {best['now'] * 1e3:.2f} | {best['before'] * 1e3:.2f} | "
            f"{best['before'] / best['now']:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="another build of stats_core/_native.abi3.so to time side by side")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="long-vector lengths, comma-separated")
    parser.add_argument(
        "--no-scipy-bootstrap", action="store_true", help="time the bootstrap kernel without scipy's (~40 s)"
    )
    args = parser.parse_args()
    before = other_native_build(args.before) if args.before else None
    long_vectors(tuple(int(s) for s in args.sizes.split(",")))
    batched(before)
    bootstrap(before, with_scipy=not args.no_scipy_bootstrap)


if __name__ == "__main__":
    main()
