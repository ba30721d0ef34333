"""How fast stats_core is on this machine, side by side with the peers a user would otherwise run.

Each workload builds seeded data, runs stats_core and every installed peer on the same data, checks that each
peer's statistic equals stats_core's before anything is timed (a speed ratio between different answers means
nothing, so a mismatch raises ``BenchmarkMismatchError``), then times each arm: the best wall seconds of
``repeat`` calls and the CPU seconds (all threads) of that call. R's vegan is timed inside R around the call
alone, so R's start-up is not counted against it.

Workloads (``size`` is the number of objects n, or of countries for ``kendall-bootstrap``):

- ``permanova-factored``: PERMANOVA of Euclidean distances between 24-d points in 3 groups (Gower's matrix has
  rank 24, so stats_core's factored screen does the work); peers scikit-bio (numba engine) and vegan adonis2.
- ``permanova-fullrank``: the same points under cityblock distances (an indefinite Gower matrix: the exact
  O(n²)-per-permutation kernel); same peers.
- ``permdisp``: PERMDISP around centroids of the Euclidean distances; peers scikit-bio (``test="centroid"``,
  all PCoA dimensions — its defaults, the median and 10 dimensions, compute another statistic) and vegan
  betadisper + permutest.
- ``pdist``: condensed distances for euclidean, cityblock, braycurtis and cosine; peer scipy.
- ``kendall-bootstrap``: bootstrap tau-b of 6 dimensions' country means (20 units per country) against a
  reference; peer scipy.stats.kendalltau on the same resamples (the first ``PEER_RESAMPLES`` of them; its time
  is scaled to the full count, which the ``check`` column says).

Work is counted in the units each kernel does: pair-updates (n(n−1)/2 distances read per permutation,
the observed labelling included), distances, permutations or resampled taus; ``rate`` is work per second.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stats_core._backend import backend as live_backend
from stats_core.errors import StatsCoreError

WORKLOADS = ("permanova-factored", "permanova-fullrank", "permdisp", "pdist", "kendall-bootstrap")
PEERS = ("scikit-bio", "scipy", "vegan")
PDIST_METRICS = ("euclidean", "cityblock", "braycurtis", "cosine")
PEER_RESAMPLES = 200  # scipy's kendalltau is called once per (resample, dimension) from Python
DIMENSIONS = 24  # the VSM questionnaire's items: the points PERMANOVA sees in hofcat's analysis
RTOL = 1e-9  # a peer's statistic must agree with stats_core's to this relative tolerance


class BenchmarkMismatchError(StatsCoreError):
    """A peer computed a different statistic from stats_core on the same data: no ratio is reported."""


@dataclass(frozen=True)
class Measurement:
    """One timed arm: ``speedup`` is the peer's seconds over stats_core's (1.0 for stats_core itself)."""

    workload: str
    size: int
    implementation: str  # "stats_core" or one of PEERS
    engine: str  # stats_core's backend, or the peer's engine / function
    threads: int
    seconds: float
    cpu_seconds: float  # NaN where the peer's CPU time is not known
    work: float
    work_unit: str
    rate: float  # work per second
    speedup: float
    cpu_speedup: float  # the peer's CPU seconds over stats_core's (NaN where unknown)
    check: str  # "reference" for stats_core; how the peer's statistic was checked


@dataclass(frozen=True)
class Skipped:
    """A peer that was not run, and why (not installed, or has no equivalent of the workload)."""

    workload: str
    implementation: str
    reason: str


@dataclass(frozen=True)
class BenchmarkReport:
    """Every measurement and skip of one ``run``, with the conditions they were measured under."""

    measurements: tuple[Measurement, ...]
    skipped: tuple[Skipped, ...]
    backend: str
    threads: int
    load_average: float  # 1-minute load when the run ended: the machine may be shared
    cores: int
    permutations: int
    resamples: int
    settings: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class _Outcome:
    """What one call of an arm returns: the statistic checked, and R's own timing where the arm is R."""

    statistic: np.ndarray
    seconds: float | None = None
    cpu_seconds: float | None = None


@dataclass(frozen=True)
class _Arm:
    implementation: str
    engine: str
    call: Callable[[], _Outcome]
    scale: float = 1.0  # the peer did 1/scale of the work: its seconds are multiplied by scale
    note: str = ""


def threads() -> int:
    """The worker threads stats_core's native and numba kernels use: RAYON_NUM_THREADS, else usable cores."""
    forced = os.environ.get("RAYON_NUM_THREADS", "").strip()
    if forced.isdigit() and int(forced) > 0:
        return int(forced)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def available_peers() -> dict[str, str | None]:
    """Each peer mapped to None when it can run here, else the reason it cannot."""
    rscript = shutil.which("Rscript")
    vegan = "Rscript is not on PATH" if rscript is None else None
    if vegan is None:
        found = subprocess.run(
            [rscript, "-e", "quit(status = !requireNamespace('vegan', quietly = TRUE))"],
            capture_output=True,
            check=False,
        )
        vegan = None if found.returncode == 0 else "R has no vegan package (install.packages('vegan'))"
    return {
        "scikit-bio": None if importlib.util.find_spec("skbio") else "not installed (pip install scikit-bio)",
        "scipy": None if importlib.util.find_spec("scipy") else "not installed (pip install scipy)",
        "vegan": vegan,
    }


def run(
    workloads: Sequence[str] = WORKLOADS,
    sizes: Sequence[int] = (1000, 2000),
    countries: Sequence[int] = (20, 60),
    *,
    permutations: int = 999,
    resamples: int = 2000,
    peers: Sequence[str] = PEERS,
    repeat: int = 3,
    seed: int = 1,
    backend: str = "auto",
    progress: Callable[[int, int, str], None] | None = None,
) -> BenchmarkReport:
    """Time each workload at each size for stats_core and each installed peer; statistics checked equal first.

    ``sizes`` are object counts n for the distance workloads, ``countries`` the country counts for
    ``kendall-bootstrap``. ``progress(done, total, label)`` is called before each arm and once at the end.
    """
    for kind, names, allowed in (("workload", workloads, WORKLOADS), ("peer", peers, PEERS)):
        unknown = [name for name in names if name not in allowed]
        if unknown:
            raise StatsCoreError(f"unknown {kind} {unknown[0][:200]!r}: expected one of {', '.join(allowed)}")
    engine = live_backend() if backend == "auto" else backend
    reasons = available_peers()
    plans: list[tuple[str, int, list[_Arm], float, str]] = []
    skipped: list[Skipped] = []
    for workload in workloads:
        for size in countries if workload == "kendall-bootstrap" else sizes:
            arms, work, unit, missing = _arms(workload, size, permutations, resamples, peers, reasons, seed, engine)
            plans.append((workload, size, arms, work, unit))
            skipped += [s for s in missing if s not in skipped]
    total = sum(len(plan[2]) for plan in plans)
    measurements: list[Measurement] = []
    done = 0
    for workload, size, arms, work, unit in plans:
        reference: _Outcome | None = None
        ours, ours_cpu = math.nan, math.nan
        for arm in arms:
            if progress is not None:
                progress(done, total, f"{workload} n={size}: {arm.implementation}")
            first = arm.call()  # the check (and, for numba, the compilation) happens before any timing
            if reference is None:
                reference, check = first, "reference"
            else:
                check = _checked(workload, size, arm, first.statistic, reference.statistic)
            seconds, cpu = _timed(arm, first, repeat)
            seconds, cpu = seconds * arm.scale, cpu * arm.scale
            if arm.implementation == "stats_core":
                ours, ours_cpu = seconds, cpu
            measurements.append(
                Measurement(
                    workload=workload,
                    size=size,
                    implementation=arm.implementation,
                    engine=arm.engine,
                    threads=threads() if arm.implementation == "stats_core" else 0,
                    seconds=seconds,
                    cpu_seconds=cpu,
                    work=work,
                    work_unit=unit,
                    rate=work / seconds if seconds > 0 else math.inf,
                    speedup=seconds / ours if ours > 0 else math.nan,
                    cpu_speedup=cpu / ours_cpu if ours_cpu > 0 else math.nan,
                    check=check,
                )
            )
            done += 1
    if progress is not None:
        progress(done, total, "done")
    return BenchmarkReport(
        measurements=tuple(measurements),
        skipped=tuple(skipped),
        backend=engine,
        threads=threads(),
        load_average=os.getloadavg()[0],
        cores=os.cpu_count() or 1,
        permutations=permutations,
        resamples=resamples,
        settings={"repeat": repeat, "seed": seed, "sizes": list(sizes), "countries": list(countries)},
    )


def _timed(arm: _Arm, first: _Outcome, repeat: int) -> tuple[float, float]:
    """Best wall seconds over ``repeat`` calls (the checking call counted when R timed itself) and its CPU."""
    best = (math.inf, math.nan)
    if first.seconds is not None:
        best = (first.seconds, first.cpu_seconds if first.cpu_seconds is not None else math.nan)
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        outcome = arm.call()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if outcome.seconds is not None:  # R's own clock: its start-up is not the peer's work
            wall, cpu = outcome.seconds, outcome.cpu_seconds if outcome.cpu_seconds is not None else math.nan
        if wall < best[0]:
            best = (wall, cpu)
    return best


def _checked(workload: str, size: int, arm: _Arm, theirs: np.ndarray, ours: np.ndarray) -> str:
    """``arm``'s statistic against stats_core's: the check column's text, or BenchmarkMismatchError."""
    theirs, ours = np.asarray(theirs, dtype=float), np.asarray(ours, dtype=float)
    same_nan = np.isnan(theirs) & np.isnan(ours)
    scale = np.maximum(np.abs(ours), np.finfo(float).tiny)
    worst = float(np.max(np.where(same_nan, 0.0, np.abs(theirs - ours) / scale), initial=0.0))
    if theirs.shape != ours.shape or not worst <= RTOL:
        raise BenchmarkMismatchError(
            f"{workload} n={size}: {arm.implementation} ({arm.engine}) computed a different statistic from "
            f"stats_core (max relative difference {worst:.3g}); no speed ratio is reported"
        )
    return f"equal (rel. diff {worst:.1e}){arm.note}"


def _points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n seeded points in 24 dimensions in 3 groups with a small shift between groups, and their labels."""
    rng = np.random.default_rng([seed, n])
    labels = np.arange(n) % 3
    return rng.normal(size=(n, DIMENSIONS)) + 0.02 * labels[:, None], labels


def _arms(
    workload: str,
    size: int,
    permutations: int,
    resamples: int,
    peers: Sequence[str],
    reasons: dict[str, str | None],
    seed: int,
    engine: str,
) -> tuple[list[_Arm], float, str, list[Skipped]]:
    """stats_core's arm first, then each requested peer that can run; the work and its unit; the skips."""
    import stats_core

    builders: dict[str, Callable[[], _Arm]] = {}
    if workload.startswith("permanova") or workload == "permdisp":
        x, labels = _points(size, seed)
        metric = "cityblock" if workload == "permanova-fullrank" else "euclidean"
        d = stats_core.pdist(x, metric)
        if workload == "permdisp":
            test, work, unit = stats_core.permdisp, float(permutations + 1), "permutations"
        else:
            test, work, unit = stats_core.permanova, size * (size - 1) / 2 * (permutations + 1), "pair-updates"
        ours = _Arm(
            "stats_core", engine, lambda: _Outcome(test(d, labels, permutations, seed, backend=engine).statistic)
        )
        builders["scikit-bio"] = lambda: _skbio_arm(workload, d, labels, permutations, seed)
        builders["vegan"] = lambda: _vegan_arm(workload, d, labels, permutations)
    elif workload == "pdist":
        x, _ = _points(size, seed)
        x = np.abs(x)  # Bray–Curtis is defined on non-negative abundances
        work, unit = float(size * (size - 1) / 2 * len(PDIST_METRICS)), "distances"

        def all_metrics() -> _Outcome:
            return _Outcome(np.concatenate([stats_core.pdist(x, m, backend=engine) for m in PDIST_METRICS]))

        ours = _Arm("stats_core", engine, all_metrics)
        builders["scipy"] = lambda: _scipy_pdist_arm(x)
    else:
        samples, reference = _survey(size, seed)
        work, unit = float(resamples), "resamples"

        def bootstrap() -> _Outcome:
            result = stats_core.bootstrap_kendall_tau(
                samples, reference, resamples, seed=seed, keep_distribution=True, backend=engine
            )
            return _Outcome(result.bootstrap_distribution[:, :PEER_RESAMPLES])

        ours = _Arm("stats_core", engine, bootstrap)
        builders["scipy"] = lambda: _scipy_kendall_arm(samples, reference, resamples, seed)
    arms, skipped = [ours], []
    for peer in peers:
        if peer not in builders:
            continue  # this peer has no equivalent of the workload: nothing to say
        if reasons[peer] is not None:
            skipped.append(Skipped(workload, peer, str(reasons[peer])))
        else:
            arms.append(builders[peer]())
    return arms, work, unit, skipped


def _skbio_arm(workload: str, d: np.ndarray, labels: np.ndarray, permutations: int, seed: int) -> _Arm:
    import warnings

    from scipy.spatial.distance import squareform
    from skbio.stats.distance import DistanceMatrix, permanova, permdisp

    matrix = DistanceMatrix(squareform(d))

    def call() -> _Outcome:
        with warnings.catch_warnings():  # scikit-bio's own deprecation and eigenvalue notes are not results
            warnings.simplefilter("ignore")
            if workload == "permdisp":
                out = permdisp(matrix, labels, test="centroid", dimensions=0, permutations=permutations, seed=seed)
            else:
                out = permanova(matrix, labels, permutations=permutations, seed=seed, engine="numba")
        return _Outcome(np.array(out["test statistic"]))

    return _Arm("scikit-bio", "permdisp centroid" if workload == "permdisp" else "numba", call)


_VEGAN = {
    "permanova": "a <- adonis2(d ~ g, permutations = {p}); s <- a$F[1]",
    "permdisp": "b <- betadisper(d, g, type = 'centroid'); a <- permutest(b, permutations = {p}); s <- a$tab$F[1]",
}


def _vegan_arm(workload: str, d: np.ndarray, labels: np.ndarray, permutations: int) -> _Arm:
    """vegan's adonis2 or betadisper + permutest in one Rscript call, timed inside R around that call alone."""
    n = labels.shape[0]
    call_text = _VEGAN["permdisp" if workload == "permdisp" else "permanova"].format(p=permutations)
    script = f"""suppressPackageStartupMessages(library(vegan))
    args <- commandArgs(trailingOnly = TRUE)
    v <- readBin(args[1], "double", n = {d.shape[0]}, endian = "little")
    m <- matrix(0, {n}, {n}); m[lower.tri(m)] <- v; d <- as.dist(m)
    g <- factor(readBin(args[2], "integer", n = {n}, size = 4, endian = "little"))
    t <- system.time({{ {call_text} }})
    cat(sprintf("%.6f %.6f %.17g\\n", t[["elapsed"]], t[["user.self"]] + t[["sys.self"]], s))"""

    def call() -> _Outcome:
        with tempfile.TemporaryDirectory(prefix="hofcat-bench-") as folder:
            paths = [Path(folder) / "d.bin", Path(folder) / "g.bin"]
            d.astype("<f8").tofile(paths[0])
            labels.astype("<i4").tofile(paths[1])
            done = subprocess.run(
                ["Rscript", "-e", script, *map(str, paths)], capture_output=True, text=True, check=False
            )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise StatsCoreError(f"vegan failed: {last[:300]}")
        wall, cpu, statistic = (float(v) for v in done.stdout.split()[-3:])
        return _Outcome(np.array(statistic), seconds=wall, cpu_seconds=cpu)

    engine = "betadisper+permutest" if workload == "permdisp" else "adonis2"
    return _Arm("vegan", engine, call)


def _scipy_pdist_arm(x: np.ndarray) -> _Arm:
    from scipy.spatial.distance import pdist

    return _Arm("scipy", "pdist", lambda: _Outcome(np.concatenate([pdist(x, m) for m in PDIST_METRICS])))


def _survey(countries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Answers (countries, 6 dimensions, 20 units) with a weak signal, and a reference (countries, 6)."""
    rng = np.random.default_rng([seed, countries, 6])
    reference = rng.normal(size=(countries, 6))
    samples = 0.3 * reference[:, :, None] + rng.normal(size=(countries, 6, 20))
    return samples, reference


def _scipy_kendall_arm(samples: np.ndarray, reference: np.ndarray, resamples: int, seed: int) -> _Arm:
    """scipy's tau-b of the resampled means, on the same resamples stats_core draws (bootstrap_indices)."""
    from scipy.stats import kendalltau

    import stats_core

    countries, dims, units = samples.shape
    peer_resamples = min(resamples, PEER_RESAMPLES)
    indices = stats_core.bootstrap_indices([units] * countries, resamples, seed)

    def call() -> _Outcome:
        taus = np.empty((dims, peer_resamples))
        for b in range(peer_resamples):
            means = np.stack([samples[c][:, indices[c][b]].mean(axis=1) for c in range(countries)])
            for k in range(dims):
                taus[k, b] = kendalltau(means[:, k], reference[:, k]).statistic
        return _Outcome(taus)

    scaled = resamples / peer_resamples
    note = f"; scipy timed on {peer_resamples} resamples, scaled x{scaled:g}" if scaled != 1 else ""
    return _Arm("scipy", "kendalltau", call, scale=scaled, note=note)
