"""A sweep session's close follows a batch, not the run: the spending check it records (``token_bounds``) reads
the stored parts one at a time (issue 28: it once read every stored key and token count at once, and hashed every
key, so the close set the session's peak memory, growing ~200 bytes a cell)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benches.runner_peer import spec_text
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec

ROOT = Path(__file__).resolve().parent.parent
BATCH_ROWS = 200

# In a child process of its own, so that the Arrow pool's peak (``max_memory``, bytes; never reset) is the close's.
CHILD = """
import io, json, sys
import pyarrow as pa
from runner.rundir import RunWriter
from runner.sweep.progress import Progress, RunStats
from runner.sweep.session import token_bounds
from runner.sweep.spec import parse_spec

spec = parse_spec(sys.stdin.read())
with RunWriter.attach(sys.argv[1]) as writer:
    bounds = token_bounds(spec, writer, Progress(RunStats(total=0), stream=io.StringIO(), live=False))
print(json.dumps({"bounds": bounds, "arrow_peak": pa.default_memory_pool().max_memory()}))
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


def closing_peak(base_url: str, cells: int, out: Path) -> tuple[int, dict, int]:
    """(cells stored, the close's token bounds, the Arrow peak bytes of computing them) of a run of ~``cells``."""
    text = spec_text(base_url, cells, 16).replace("batch_rows = 5000", f"batch_rows = {BATCH_ROWS}")
    stored = run_sweep(parse_spec(text), out, live=False, stream=io.StringIO()).stored
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(out)], input=text, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return stored, result["bounds"], result["arrow_peak"]


def test_the_closing_token_check_holds_one_part_at_a_time(base_url: str, tmp_path: Path) -> None:
    small_cells, small_bounds, small_peak = closing_peak(base_url, 408, tmp_path / "small")  # 3 parts of 200 rows
    big_cells, big_bounds, big_peak = closing_peak(base_url, 408 * 40, tmp_path / "big")  # 82 parts: 40x the cells
    assert (small_cells, big_cells) == (408, 16320)
    # the canned server reports 20 prompt tokens a reply: the sums are every stored reply's, within the plan's bound
    assert [small_bounds["sim"]["input_tokens"], big_bounds["sim"]["input_tokens"]] == [20 * 408, 20 * 16320]
    assert small_bounds["sim"]["held"] and big_bounds["sim"]["held"]
    # Bounded by a part: the same peak give or take allocator noise. Reading every part at once (keys, endpoint and
    # token columns, then a hash of every key) grew it ~140 bytes a cell: 0.1 MB at 408 cells, 2.3 MB at 16,320.
    per_cell = (big_peak - small_peak) / (big_cells - small_cells)
    assert per_cell < 10, f"Arrow peak {small_peak} B at {small_cells} cells, {big_peak} B at {big_cells}"
