"""The run directory's crash windows, reproduced by hand: half-written temp parts, a missing answers part."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from _runner_support import check_run_dir, make_spec
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import RunWriter, read_dataset
from runner.sweep.session import build_manifest, run_sweep


def test_crash_leftovers_are_ignored_and_missing_answers_rebuilt(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimServerThread(SimConfig(seed=8, chatty_rate=0.3)) as sim:
        spec = make_spec(sim.base_url, run={"batch_rows": 10})
        run_sweep(spec, out, live=False)
    answers_before = read_dataset(out, "answers").sort_by([("cell_key", "ascending"), ("question", "ascending")])
    parts = sorted((out / "answers").glob("part-*.parquet"))
    assert len(parts) >= 4
    parts[1].unlink()  # as if killed between committing responses/part-2 and answers/part-2
    (out / ".tmp" / "responses-part-000099.parquet").write_bytes(b"PAR1 half a part")  # killed mid-write
    assert pq.read_table(out / "responses").num_rows == 48  # readers never see .tmp
    resumed = run_sweep(spec, out, live=False)  # the server is gone: every cell is stored, nothing is sent
    assert resumed.stored == 0 and resumed.already_stored == 48
    assert not list((out / ".tmp").glob("*.parquet"))
    assert parts[1].exists()
    answers_after = read_dataset(out, "answers").sort_by([("cell_key", "ascending"), ("question", "ascending")])
    assert answers_after.equals(answers_before)
    check_run_dir(out, spec)


def test_parts_without_a_manifest_are_refused(tmp_path: Path) -> None:
    from runner.errors import RunDirError

    out = tmp_path / "run"
    (out / "responses").mkdir(parents=True)
    (out / "responses" / "part-000001.parquet").write_bytes(b"x")
    spec = make_spec("http://127.0.0.1:9/v1")
    try:
        RunWriter.open_run(out, build_manifest(spec), batch_rows=10)
    except RunDirError as exc:
        assert "no manifest.json" in str(exc)
    else:
        raise AssertionError("a directory with foreign parts was accepted")
