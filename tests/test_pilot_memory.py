"""A pilot's memory is bounded by the pilot (issue 26, item 5): ``hofcat run --limit 3`` of a ~10^9-cell plan
takes about the memory of ``hofcat plan`` of the same spec — neither the sampling grid (seeds × temperature ×
top_p) nor the plan's keys are materialised — and a later resume without ``--limit`` still sends the rest.

Peak resident memory is measured in each child process itself (``ru_maxrss``); the spec's 10^5 seeds make a
grid of 10^7 samplings (gigabytes when built at once) and a plan of 9.6·10^8 cells.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _runner_support import spec_text
from runner.endpoints.sim import SimServerThread
from runner.rundir import read_dataset, read_manifest

ROOT = Path(__file__).resolve().parent.parent
MEASURED = (
    "import resource, sys\n"
    "from hofcat.cli import main\n"
    "status = main(sys.argv[1:])\n"
    "print('maxrss_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(status)\n"
)


def measured(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """``hofcat ARGS`` in a child; its result and peak resident memory in KiB."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, *args], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("maxrss_kib ")]
    assert lines, done.stderr
    return done, int(lines[-1].split()[1])


@pytest.mark.slow
def test_a_three_cell_pilot_of_a_billion_cell_plan_takes_the_memory_of_plan(tmp_path: Path) -> None:
    design = {
        "personas": ["United States", "China", "Germany", "Japan"],
        "questions": list(range(1, 25)),
        "seeds": list(range(100_000)),
        "temperature": [round(0.1 * i, 1) for i in range(10)],
        "top_p": [round(0.1 * i + 0.1, 1) for i in range(10)],
    }
    with SimServerThread() as sim:
        spec = tmp_path / "huge.toml"
        spec.write_text(spec_text(sim.base_url, design=design, run={"determinism_probe": False}))
        plan, plan_kib = measured("plan", str(spec))
        assert plan.returncode == 0, plan.stderr
        assert "960000000 cells" in plan.stdout
        run, run_kib = measured("run", str(spec), "--out", str(tmp_path / "run"), "--limit", "3")
        assert run.returncode == 0, run.stderr
        assert len(sim.log.entries()) == 3
    assert len(read_dataset(tmp_path / "run", "responses")) == 3
    assert read_manifest(tmp_path / "run")["plan"]["cells"] == 960_000_000
    assert not list((tmp_path / "run" / "plan-keys").glob("*.parquet"))  # no file of the whole plan's keys
    assert run_kib < 1.5 * plan_kib + 100 * 1024, (run_kib, plan_kib)


def test_a_lazy_sampling_grid_is_the_materialised_one() -> None:
    """The grid a huge design indexes lazily (``SamplingGrid``) holds the samplings and key tails, in order, that
    a small design's tuple holds — sampled, distribution and K-sample fallback cells alike."""
    import itertools

    from runner.sweep.plan import SAMPLINGS_HELD, SamplingGrid, _samplings
    from runner.sweep.spec import parse_spec

    for provider, measurement in itertools.product(("openai", "anthropic"), (["sample"], ["sample", "distribution"])):
        top_p = [1.0, 0.5] if provider == "openai" else [1.0]  # anthropic: temperature or top_p, not both
        design = {"seeds": [3, 1, 2], "temperature": [0.0, 1.0], "top_p": top_p, "max_tokens": [8, 64]}
        design |= {"measurement": measurement, "samples_per_cell": 3}
        endpoint = {"provider": provider, "base_url": "http://127.0.0.1:9" + ("/v1" if provider == "openai" else "")}
        spec = parse_spec(spec_text("http://127.0.0.1:9/v1", endpoint=endpoint, design=design))
        d, e = spec.design, spec.endpoints[0]
        held = _samplings(d, e.provider)
        lazy = SamplingGrid(d, e.provider)
        assert isinstance(held, tuple) and len(held) <= SAMPLINGS_HELD
        assert len(lazy) == len(held) and [lazy[i] for i in range(len(lazy))] == list(held)
