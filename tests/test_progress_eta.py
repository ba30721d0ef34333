"""A finished endpoint's ETA stops (issue 26): after a pilot and a resume, the endpoint that finished first shows
``done`` from then on, and the run's last line reads ETA 00:00 (it read 'ETA 00:02' and growing, the finished
endpoint's ETA computed from cells it never had to send). Two real simulators, one fast, one slow."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from _runner_support import spec_text
from runner.endpoints.sim import Latency, SimConfig, SimServerThread
from runner.sweep.plan import select
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec


@pytest.mark.slow
def test_a_finished_endpoint_shows_done_and_the_last_line_has_no_eta_left(tmp_path: Path) -> None:
    design = {"personas": ["China", "Germany"], "questions": [1, 2, 3, 4, 5, 6], "seeds": [1, 2]}
    fast_config, slow_config = (
        SimConfig(latency=Latency.parse("fixed:5")),
        SimConfig(latency=Latency.parse("fixed:100")),
    )
    with SimServerThread(fast_config) as fast, SimServerThread(slow_config) as slow:
        text = spec_text(fast.base_url, endpoint={"name": "a"}, design=design)
        text += f'[[endpoints]]\nname = "b"\nprovider = "openai"\nbase_url = "{slow.base_url}"\nmodel = "sim-1"\n'
        spec = parse_spec(text + "max_concurrency = 2\n")
        run_sweep(spec, tmp_path / "run", stream=io.StringIO(), selection=select(spec, limit=60))  # a pilot first
        shown = io.StringIO()
        result = run_sweep(spec, tmp_path / "run", stream=shown, log_every_s=0.2)
    assert result.stored == 36 and result.already_stored == 60
    lines = [line for line in shown.getvalue().splitlines() if " cells | " in line]
    assert lines[-1].startswith("hofcat: 96/96 cells") and "| ETA 00:00 |" in lines[-1], lines[-1]
    assert " a: 0/8 in flight (max 8), unlimited, done" in lines[-1] and "unlimited, done" in lines[-1].split(" b: ")[1]
    # once a is done it stays done, while b still has cells
    done_at = next(i for i, line in enumerate(lines) if "unlimited, done | b:" in line)
    assert all("unlimited, done | b:" in line for line in lines[done_at:])
