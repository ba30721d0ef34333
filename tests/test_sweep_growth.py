"""Growing a sweep in place (issue 26, item 4): a spec that only adds cells reruns into the same run directory —
stored cells kept, only the new ones sent (the simulator's own request log shows exactly them), the manifest
keeps the spec history, the analysis sees one run; a spec that would change stored cells is refused in one line
naming what changed. Real loopback simulator, the ``hofcat`` command in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _runner_support import check_run_dir, sent_request_keys, spec_text
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset, read_manifest
from runner.sweep.plan import count_cells
from runner.sweep.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
FIRST = {"personas": ["United States", "China", "Germany"], "questions": [1, 2, 3], "seeds": [1, 2]}


def hofcat(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "hofcat", *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )


def write(path: Path, base_url: str, design: dict, endpoint: dict | None = None) -> Path:
    path.write_text(spec_text(base_url, design=design, endpoint=endpoint))
    return path


@pytest.mark.slow
def test_a_spec_that_adds_cells_grows_the_run_and_sends_only_the_new_ones(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3)) as sim:
        first = write(tmp_path / "a.toml", sim.base_url, FIRST)
        done = hofcat("run", str(first), "--out", str(run), "--log-every", "1000")
        assert done.returncode == 0, done.stderr
        before = {e.request_key for e in sim.log.entries()}
        stored_before = {r["cell_key"]: r for r in read_dataset(run, "responses").to_pylist()}
        # more seeds, one more persona, one more temperature
        grown = {**FIRST, "personas": [*FIRST["personas"], "Japan"], "seeds": [1, 2, 3], "temperature": [0.0, 1.0, 0.5]}
        second = write(tmp_path / "b.toml", sim.base_url, grown)
        mark = len(sim.log.entries())
        done = hofcat("run", str(second), "--out", str(run), "--log-every", "1000")
        assert done.returncode == 0, done.stderr
        sent_now = [e.request_key for e in sim.log.entries()[mark:]]
    spec_a, spec_b = load_spec(first), load_spec(second)
    rows = check_run_dir(run, spec_b)  # every cell of the grown plan stored once
    assert len(rows) == count_cells(spec_b) == 4 * 3 * 3 * 3 and len(stored_before) == count_cells(spec_a) == 36
    new_keys = set(rows) - set(stored_before)
    wanted = sent_request_keys(run, {k: rows[k] for k in new_keys})
    assert sorted(sent_now) == sorted(wanted.values()) and not set(sent_now) & before  # exactly the new cells
    assert all(rows[k]["session"] == 1 for k in stored_before) and all(rows[k]["session"] == 2 for k in new_keys)
    manifest = read_manifest(run)
    assert manifest["spec_hash"] == spec_b.spec_hash and manifest["plan"]["cells"] == 108
    history = manifest["spec_history"]
    assert [h["spec_hash"] for h in history] == [spec_a.spec_hash, spec_b.spec_hash]
    assert [h["from_session"] for h in history] == [1, 2] and history[1]["planned_before"] == 36
    assert history[0]["spec"] == spec_a.raw and history[1]["spec"] == spec_b.raw
    done = hofcat("analyze", str(run), "--resamples", "20", "--permutations", "9")
    assert done.returncode == 0, done.stderr
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert summary["answers"] == 108 and summary["completeness"]["missing"] == 0
    assert not any(c.startswith("incomplete") for c in summary["caveats"])


@pytest.mark.slow
def test_a_spec_that_changes_stored_cells_is_refused_naming_what_changed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3)) as sim:
        first = write(tmp_path / "a.toml", sim.base_url, FIRST)
        assert hofcat("run", str(first), "--out", str(run), "--log-every", "1000").returncode == 0
        mark = len(sim.log.entries())
        for design, endpoint, named in (
            ({**FIRST, "seeds": [1, 3]}, None, "design.seeds lost [2]"),
            (FIRST, {"model": "sim-2"}, "endpoints[sim].model: 'sim-1' → 'sim-2'"),
        ):
            changed = write(tmp_path / "c.toml", sim.base_url, design, endpoint)
            done = hofcat("run", str(changed), "--out", str(run))
            assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
            assert f"{run}: this spec (hash {load_spec(changed).spec_hash}) changes what " in done.stderr
            assert named in done.stderr and "--out NEW_DIR" in done.stderr and "hofcat analyze" in done.stderr
        assert len(sim.log.entries()) == mark  # nothing sent
    assert read_manifest(run)["spec_hash"] == load_spec(first).spec_hash and "spec_history" not in read_manifest(run)


@pytest.mark.slow
def test_a_spec_that_changes_only_how_cells_are_sent_resumes_in_place(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3)) as sim:
        first = write(tmp_path / "a.toml", sim.base_url, FIRST)
        assert hofcat("run", str(first), "--out", str(run), "--limit", "10").returncode == 0
        faster = write(tmp_path / "b.toml", sim.base_url, FIRST, {"max_concurrency": 2, "requests_per_minute": 6000})
        mark = len(sim.log.entries())
        done = hofcat("run", str(faster), "--out", str(run), "--log-every", "1000")
        assert done.returncode == 0, done.stderr
        assert len(sim.log.entries()) - mark == 26
    assert len(read_manifest(run)["spec_history"]) == 2
