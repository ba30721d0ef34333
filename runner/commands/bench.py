"""``hofcat bench``: is hofcat fast on this machine? stats_core's kernels timed beside scikit-bio, scipy and vegan."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from runner.commands._args import bounded_int, positive_int, seed

if TYPE_CHECKING:
    from stats_core.benchmark import BenchmarkReport

NAME = "bench"
HELP = (
    "Measure permutation throughput on this machine: PERMANOVA (factored and full-rank), PERMDISP, pdist and "
    "bootstrap Kendall tau, each beside scikit-bio, scipy and R's vegan where installed (results checked equal "
    "first); prints a table and writes JSON or CSV."
)

MAX_OBJECTS = 100_000  # a condensed matrix of 10^5 objects is 40 GB: past that nothing fits a machine's memory


def _names(text: str) -> tuple[str, ...]:
    """An argparse ``type``: comma-separated names (stats_core.benchmark.run refuses an unknown one)."""
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError(f"{text[:200]!r} names nothing")
    return () if names == ("none",) else names


_names.__name__ = "list"


def _sizes(low: int, high: int) -> Callable[[str], tuple[int, ...]]:
    """An argparse ``type``: comma-separated integers in ``low``-``high``."""
    one = bounded_int(low, high)

    def parse(text: str) -> tuple[int, ...]:
        values = tuple(one(part.strip()) for part in text.split(",") if part.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"{text[:200]!r} names no size")
        return values

    parse.__name__ = "sizes"
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Workloads, sizes, permutations, peers, threads, output file."""
    parser.add_argument(
        "--workloads",
        type=_names,
        default=None,
        metavar="LIST",
        help="comma-separated, from permanova-factored, permanova-fullrank, permdisp, pdist, kendall-bootstrap "
        "(default all; docs/stats_core.md says what each measures)",
    )
    parser.add_argument(
        "--sizes",
        type=_sizes(10, MAX_OBJECTS),
        default=(1000, 2000),
        metavar="N,...",
        help="objects per distance matrix for PERMANOVA, PERMDISP and pdist (default 1000,2000)",
    )
    parser.add_argument(
        "--countries",
        type=_sizes(3, 10_000),
        default=(20, 60),
        metavar="N,...",
        help="countries for the bootstrap Kendall tau (6 dimensions, 20 units each; default 20,60)",
    )
    parser.add_argument("--permutations", type=bounded_int(1, 10**7), default=999, help="default 999")
    parser.add_argument("--resamples", type=bounded_int(1, 10**7), default=2000, help="bootstrap resamples (2000)")
    parser.add_argument(
        "--peers",
        type=_names,
        default=None,
        metavar="LIST",
        help="comma-separated, from scikit-bio, scipy, vegan, or none (default all; one that is not installed is "
        "skipped with a note)",
    )
    parser.add_argument("--repeat", type=bounded_int(1, 100), default=3, help="timed calls per arm; best kept (3)")
    parser.add_argument("--seed", type=seed, default=1, help="seed of the data and permutations (1)")
    parser.add_argument(
        "--backend", choices=("auto", "native", "numba", "numpy"), default="auto", help="stats_core backend (auto)"
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="worker threads for stats_core's kernels (default: every usable core)",
    )
    parser.add_argument(
        "--out",
        default="hofcat-bench.json",
        metavar="FILE",
        help="results file; .csv writes CSV, anything else JSON (default hofcat-bench.json)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the benchmark, print its table, write the results file; a mismatch with a peer exits 2."""
    from runner.errors import InputError
    from runner.rundir.guard import output_file, written_beside

    out = output_file(Path(args.out))
    if args.threads is not None:  # read by the thread pools when stats_core first loads them
        if "stats_core" in sys.modules or "numba" in sys.modules:
            raise InputError("--threads must be set before stats_core is loaded (use the command, not the API)")
        os.environ["RAYON_NUM_THREADS"] = os.environ["NUMBA_NUM_THREADS"] = str(args.threads)
    from stats_core import benchmark
    from stats_core.errors import StatsCoreError

    try:
        report = benchmark.run(
            benchmark.WORKLOADS if args.workloads is None else args.workloads,
            args.sizes,
            args.countries,
            permutations=args.permutations,
            resamples=args.resamples,
            peers=benchmark.PEERS if args.peers is None else args.peers,
            repeat=args.repeat,
            seed=args.seed,
            backend=args.backend,
            progress=_progress(),
        )
    except StatsCoreError as exc:  # a backend that is not there, a peer that disagrees or failed
        raise InputError(str(exc)) from None
    print(render_table(report))
    with written_beside(out) as temporary:  # renamed onto --out once written: never a half file, never a link
        temporary.write_text(render_csv(report) if out.suffix.lower() == ".csv" else render_json(report), "utf-8")
    print(f"results: {out}", file=sys.stderr)
    return 0


def _progress() -> Callable[[int, int, str], None]:
    """A progress bar on a terminal's stderr; elsewhere one line per step."""
    if not sys.stderr.isatty():
        return lambda done, total, label: print(f"[{done}/{total}] {label}", file=sys.stderr, flush=True)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    task = bar.add_task("bench", total=None)
    bar.start()

    def update(done: int, total: int, label: str) -> None:
        bar.update(task, completed=done, total=total, description=label)
        if done >= total:
            bar.stop()

    return update


def _rate(value: float, unit: str) -> str:
    """A rate with an SI prefix: 2.5e10 pair-updates → '25.0 G pair-updates/s'."""
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.1f} {prefix} {unit}/s"
    return f"{value:.1f} {unit}/s"


def render_table(report: BenchmarkReport) -> str:
    """The measurements as a Markdown table, with the conditions and skipped peers underneath."""
    header = "| workload | size | implementation | engine | threads | s | CPU s | rate | speed-up wall/CPU | check |"
    lines = [
        header,
        "|---|---:|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for m in report.measurements:
        speedup = "—" if m.implementation == "stats_core" else f"{m.speedup:.1f}x / {m.cpu_speedup:.1f}x"
        lines.append(
            f"| {m.workload} | {m.size} | {m.implementation} | {m.engine} | {m.threads or '—'} | {m.seconds:.4f} | "
            f"{m.cpu_seconds:.4f} | {_rate(m.rate, m.work_unit)} | {speedup} | {m.check} |"
        )
    lines.append(
        f"\nstats_core backend {report.backend}, {report.threads} threads; {report.permutations} permutations, "
        f"{report.resamples} resamples; load average {report.load_average:.1f} on {report.cores} cores "
        "(a busy machine slows every arm: compare the CPU columns)"
    )
    lines += [f"skipped {s.implementation} for {s.workload}: {s.reason}" for s in report.skipped]
    return "\n".join(lines)


def _plain(value: object) -> object:
    """JSON-safe: NaN and infinity become null (JSON has neither)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def render_json(report: BenchmarkReport) -> str:
    """The whole report as one JSON object (measurements and skips as lists of objects)."""
    from runner import __version__

    body = {key: _plain(value) for key, value in dataclasses.asdict(report).items()}
    body["measurements"] = [{k: _plain(v) for k, v in dataclasses.asdict(m).items()} for m in report.measurements]
    body["hofcat"] = __version__
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


def render_csv(report: BenchmarkReport) -> str:
    """One CSV row per measurement, the run's conditions repeated on each row (every value is hofcat's own)."""
    fields = [f.name for f in dataclasses.fields(report.measurements[0])] if report.measurements else []
    conditions = {"backend": report.backend, "load_average": report.load_average, "cores": report.cores}
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields + list(conditions), lineterminator="\n")
    writer.writeheader()
    for m in report.measurements:
        writer.writerow({**{k: _plain(v) for k, v in dataclasses.asdict(m).items()}, **conditions})
    return buffer.getvalue()
