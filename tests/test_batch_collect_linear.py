"""Collecting batches is one pass over the plan, not one walk per batch.

Counted, not timed: every cell the plan makes goes through ``plan._endpoint_cells`` (the walk and ``cells_at``
alike). When each collected batch walked the endpoint's plan, a sweep of N cells in B batches made N·(B - 1)
more cells than the same sweep in one batch; now both make the same number (each batch's cells by position).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _runner_support import make_spec
from runner import run_sweep
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset
from runner.sweep import plan
from test_batch_execution import SMALL, _base, _endpoint


def _cells_made(run: Path, provider: str, batch: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Cells the plan made during a fresh batch sweep of SMALL (72 cells) in batches of ``batch``."""
    made = {"cells": 0}
    real = plan._endpoint_cells

    def counting(spec, ep, ordinals=None, *, keys_only=False):
        for item in real(spec, ep, ordinals, keys_only=keys_only):
            made["cells"] += not keys_only
            yield item

    with SimServerThread(SimConfig(seed=5, batch_latency_s=0.05)) as sim:
        spec = make_spec(_base(sim, provider), endpoint=_endpoint(provider, max_batch_requests=batch), design=SMALL)
        with monkeypatch.context() as patch:
            patch.setattr(plan, "_endpoint_cells", counting)
            result = run_sweep(spec, run)
    assert result.stored == 72 and result.failed == 0 and result.pending_batches == 0
    keys = read_dataset(run, "responses", ["cell_key"]).column(0).to_pylist()
    assert sorted(keys) == sorted(c.key for c in plan.iter_cells(spec))
    return made["cells"]


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_twelve_batches_make_no_more_cells_than_one(provider, tmp_path, monkeypatch):
    one = _cells_made(tmp_path / "one", provider, 72, monkeypatch)
    twelve = _cells_made(tmp_path / "twelve", provider, 6, monkeypatch)
    assert one >= 2 * 72  # the cells to submit, then the batch's cells to store
    assert twelve == one, (one, twelve)  # a walk of the plan per batch made 11 × 72 more
