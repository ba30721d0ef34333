"""The requests-to-width bench's logic (benches/distribution_bench.py llama-width) on the simulator.

The real-model run is a bench, not a test; what it rests on is checked here: the width at k seeds from nested
subsets of batched runs equals the width of one run with seeds 1..k, at all seeds it is the interval
``analyze_run`` writes for the report, and the requests-to-target verdict bounds rather than extrapolates.
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pytest

from benches.distribution_bench import (
    WidthPoint,
    answers_of,
    comparison,
    demo_spec,
    nested_widths,
    requests_to,
)
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec


def _sweep(base_url: str, seeds: list[int], measurement: str, out: Path) -> Path:
    """One demo-spec sweep on the simulator into ``out``."""
    result = run_sweep(parse_spec(demo_spec(base_url, "sim-1", 16, seeds, measurement)), out, stream=io.StringIO())
    assert result.failed == 0 and result.stored == 96 * len(seeds)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("measurement", ["sample", "distribution"])
def test_nested_widths_of_batches_equal_one_run_and_the_report(tmp_path: Path, measurement: str) -> None:
    with SimServerThread(SimConfig(seed=1)) as sim:
        whole = _sweep(sim.base_url, [1, 2, 3, 4], measurement, tmp_path / "whole")
        batches = [_sweep(sim.base_url, s, measurement, tmp_path / f"b{s[0]}") for s in ([1, 2], [3, 4])]
    from_batches = nested_widths(answers_of(batches), [2, 3, 4])
    from_whole = nested_widths(answers_of([whole]), [2, 3, 4])
    assert from_batches == from_whole
    assert [p.requests for p in from_whole] == [192, 288, 384]  # 4 personas x 24 items per seed
    cat = pl.read_parquet(analyze_run(whole, AnalysisOptions(seed=1)) / "cat.parquet").row(0, named=True)
    assert from_whole[-1].width == pytest.approx(cat["ci_high"] - cat["ci_low"], abs=1e-12)
    assert from_whole[-1].cat == pytest.approx(cat["cat_score"], abs=1e-12)
    # a run of seeds 1..2 analysed on its own gives the nested width at k = 2
    with SimServerThread(SimConfig(seed=1)) as sim:
        two = _sweep(sim.base_url, [1, 2], measurement, tmp_path / "two")
    assert nested_widths(answers_of([two]), [2]) == from_whole[:1]


def _points(*rows: tuple[int, int, float]) -> list[WidthPoint]:
    """WidthPoints (seeds, requests, width) centred on a CAT of 0."""
    return [WidthPoint(k, n, 0.0, -w / 2, w / 2) for k, n, w in rows]


def test_requests_to_target_and_the_verdict_bound_what_was_measured() -> None:
    dist = _points((2, 192, 1.2), (3, 288, 0.9), (4, 384, 0.9))
    sample = _points((2, 192, 2.0), (10, 960, float("nan")), (13, 1248, 0.8), (20, 1920, 1.1))
    assert requests_to(dist, 1.2) == 192 and requests_to(dist, 1.0) == 288 and requests_to(dist, 0.5) is None
    assert requests_to(sample, 1.5) == 1248  # an undefined (NaN) width reaches no target
    assert requests_to(sample, 0.9) == 1248 and requests_to(sample, 0.9, stays=True) is None  # a dip, not for good
    assert comparison(dist, sample, 1.2) == (
        "width <= 1.200: first: distribution 192, sample 1248 -> 6.5x fewer; "
        "for good: distribution 192, sample 1248 -> 6.5x fewer"
    )
    assert comparison(dist, sample, 0.9) == (
        "width <= 0.900: first: distribution 288, sample 1248 -> 4.3x fewer; "
        "for good: distribution 288, sample None -> > 6.7x fewer (sample had not, at 1920 requests)"
    )
    assert comparison(dist, sample, 0.1).endswith(
        "for good: distribution None, sample None -> distribution did not reach it"
    )
