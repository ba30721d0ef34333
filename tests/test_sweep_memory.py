"""A sweep session's memory follows its batch, not its run (issue 28): a first session made and held the whole
plan's keys (~40 bytes a cell, ~100 at their making) and its close read every stored key and token count at once
(~140 bytes a cell), so the session's peak grew with the number of cells."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.rundir import read_manifest

ROOT = Path(__file__).resolve().parent.parent
BATCH_ROWS = 200

# In a child process of its own, so that the Arrow pool's peak (``max_memory``, bytes; never reset) is the session's:
# what it buffers, commits, parses and reads back, at its open and at its close.
CHILD = """
import io, json, sys
import pyarrow as pa
from benches.runner_peer import spec_text
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec

base, cells, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
text = spec_text(base, cells, 16).replace("batch_rows = 5000", f"batch_rows = {batch}")
result = run_sweep(parse_spec(text), out, live=False, stream=io.StringIO())
print(json.dumps({"stored": result.stored, "arrow_peak": pa.default_memory_pool().max_memory()}))
"""


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The benchmarks' canned OpenAI-compatible server on a loopback port."""
    command = [sys.executable, "-m", "benches.runner_peer", "serve", "--port", "0"]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            yield f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
        finally:
            server.kill()


def session_peak(base_url: str, cells: int, out: Path) -> tuple[int, int]:
    """(cells stored, the Arrow pool's peak bytes) of a first ``run_sweep`` session of about ``cells`` cells."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, base_url, str(cells), str(BATCH_ROWS), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["stored"], result["arrow_peak"]


def test_a_sessions_arrow_peak_does_not_grow_with_the_run(base_url: str, tmp_path: Path) -> None:
    small_cells, small_peak = session_peak(base_url, 408, tmp_path / "small")  # 3 parts of 200 rows
    big_cells, big_peak = session_peak(base_url, 408 * 40, tmp_path / "big")  # 82 parts: 40x the cells
    assert (small_cells, big_cells) == (408, 16320)
    # the close's spending check still sums every stored reply (the canned server reports 20 prompt tokens each)
    for cells, out in ((small_cells, tmp_path / "small"), (big_cells, tmp_path / "big")):
        bound = read_manifest(out)["sessions"][-1]["token_bounds"]["sim"]
        assert bound["input_tokens"] == 20 * cells and bound["held"]
    # Bounded by the batch: the same peak give or take allocator noise (~0.5 MB at both sizes). The plan's keys or
    # a close reading every part at once each made it ~1.8-2.3 MB at 16,320 cells (~100-140 bytes a cell).
    per_cell = (big_peak - small_peak) / (big_cells - small_cells)
    assert per_cell < 10, f"Arrow peak {small_peak} B at {small_cells} cells, {big_peak} B at {big_cells}"
