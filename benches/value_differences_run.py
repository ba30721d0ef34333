"""The value-differences study end to end at full size: 54 identities × 10 seeds × 24 questions × 2 languages × 2
model sizes (103,680 requests) against two simulators, analysed with the paper's choices, reported.

Run: python -m benches.value_differences_run [RUN_DIR]. The spec is runner/data/examples/value_differences.toml
(its seeds 1–10); the "small" simulator expresses national differences with signal 0.25, the "large" one with 3.0
(the same two as tests/test_value_differences_run.py, which runs 2 seeds). Prints the sweep and analysis times and
the tables the paper reports: PERMANOVA/PERMDISP per factor, SS_h with its null and p per set pair (including the
model × language pairs of its Figure 2d), Table 5's identity-context correlations.
"""

from __future__ import annotations

import contextlib
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from runner.analyze.run import AnalysisOptions, analyze_run
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.report.html import render_report
from runner.sweep.session import run_sweep
from runner.sweep.spec import Spec, parse_spec

EXAMPLE = Path(__file__).resolve().parent.parent / "runner" / "data" / "examples" / "value_differences.toml"


@contextlib.contextmanager
def two_model_sizes(seeds: int | None = None) -> Iterator[Spec]:
    """The example spec against two started simulators: "small" (signal 0.25) and "large" (signal 3.0); ``seeds``
    replaces its seeds with 1 … ``seeds`` (None: the example's 1–10). The simulators stop when the block ends."""
    with (
        SimServerThread(SimConfig(seed=1, signal=0.25, model="sim-small")) as small,
        SimServerThread(SimConfig(seed=2, signal=3.0, model="sim-large")) as large,
    ):
        text = EXAMPLE.read_text(encoding="utf-8")
        text = text.replace("http://127.0.0.1:8011/v1", small.base_url).replace(
            "http://127.0.0.1:8012/v1", large.base_url
        )
        if seeds is not None:
            text = re.sub(r"(?m)^seeds = .*$", f"seeds = {list(range(1, seeds + 1))}", text)
        yield parse_spec(text, source=str(EXAMPLE))


def main() -> None:
    run = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "run"
    with two_model_sizes() as spec:
        started = time.perf_counter()
        run_sweep(spec, run, live=False)
        sweep_s = time.perf_counter() - started
    started = time.perf_counter()
    out = analyze_run(run, AnalysisOptions.value_differences())
    analysis_s = time.perf_counter() - started
    page = render_report(run)
    print(f"sweep {sweep_s:.1f} s, analysis {analysis_s:.1f} s (999 permutations, 1000 resamples); report {page}")
    pl.Config.set_tbl_cols(20)
    pl.Config.set_tbl_width_chars(200)
    pl.Config.set_tbl_rows(40)
    tests = pl.read_parquet(out / "factor_tests.parquet").drop("levels", "permutations", "seed")
    print(tests)
    print(pl.read_parquet(out / "set_separation.parquet").drop("n_a", "n_b"))
    print(pl.read_parquet(out / "identity_correlations.parquet").group_by("context").agg(pl.col("mean_r").mean()))


if __name__ == "__main__":
    main()
