"""``execution = "batch"`` against the simulator's OpenAI and Anthropic batch APIs on loopback.

Every cell is stored once, no online chat request is sent, only failed requests are resubmitted, a session
killed at random moments (uploading, after creating, polling, downloading) resumes without submitting any cell
twice, a crash between creating a batch and recording it is healed by finding the batch again, and
``--wait false`` submits and returns while a later run collects.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from _runner_support import make_spec, spec_text
from runner import run_sweep
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset
from runner.rundir.batches import read_journal

ROOT = Path(__file__).resolve().parent.parent
BIG = {
    "personas": ["China", "Slovakia", "Japan", "Germany"],
    "questions": list(range(1, 25)),
    "seeds": list(range(1, 15)),
    "temperature": [0.0, 0.3, 0.7, 1.0],
}  # 4 × 24 × 14 × 4 = 5,376 cells
SMALL = {
    "personas": ["China", "Slovakia"],
    "questions": [1, 2, 3, 4, 5, 6],
    "seeds": [1, 2, 3],
    "temperature": [0.0, 1.0],
}


def _batches(sim: SimServerThread, detail: bool = False) -> dict:
    with urllib.request.urlopen(sim.url + "/sim/batches" + ("?detail=1" if detail else "")) as reply:
        return json.load(reply)


def _endpoint(provider: str, **more) -> dict:
    return {"provider": provider, "execution": "batch", "batch_poll_s": 0.05, "max_retries": 4, **more}


def _base(sim: SimServerThread, provider: str) -> str:
    """The simulator's base URL for ``provider`` (Gemini's API lives under /v1beta)."""
    return sim.url + "/v1beta" if provider == "gemini" else sim.base_url


def _cell_key(custom_id: str) -> str:
    return custom_id.rpartition("_")[2]  # Anthropic ids are <tag>_<cell key>; OpenAI ids are the key


def _stored_once(run: Path, cells: int) -> None:
    keys = read_dataset(run, "responses", ["cell_key"]).column(0).to_pylist()
    assert len(keys) == len(set(keys)) == cells
    assert read_dataset(run, "failures", ["cell_key"]).num_rows == 0
    answers = read_dataset(run, "answers", ["cell_key"]).column(0).to_pylist()
    assert set(answers) == set(keys)


@pytest.mark.slow  # 2 × 5,376 cells through the batch path
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_large_sweep_is_stored_once_without_online_calls(provider, tmp_path):
    with SimServerThread(SimConfig(seed=1, batch_latency_s=0.2)) as sim:
        # the simulator answers a 2,000-request batch inside one status call, on this process's CPU: minutes
        # on a busy machine, so the attempt timeout is one only a hang reaches
        endpoint = _endpoint(provider, max_batch_requests=2_000, timeout_s=900.0)
        spec = make_spec(_base(sim, provider), endpoint=endpoint, design=BIG)
        result = run_sweep(spec, tmp_path / "run")
        assert result.stored == 5_376 and result.failed == 0 and result.pending_batches == 0
        assert sim.stats()["total"] == 0  # not one online chat-completions request
        seen = _batches(sim)
        assert seen["batches"] == 3 and seen["requests"] == 5_376 and not seen["submitted_more_than_once"]
    _stored_once(tmp_path / "run", 5_376)
    rows = read_dataset(tmp_path / "run", "responses", ["batch_id", "response_text"])
    assert None not in rows.column("batch_id").to_pylist()
    assert all(text for text in rows.column("response_text").to_pylist())


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_partial_failures_resubmit_only_the_failed_requests(provider, tmp_path):
    config = SimConfig(seed=4, batch_latency_s=0.05, batch_error_rate=0.15, batch_expire_rate=0.3)
    with SimServerThread(config) as sim:
        spec = make_spec(
            _base(sim, provider), endpoint=_endpoint(provider, max_batch_requests=25, max_retries=8), design=SMALL
        )
        result = run_sweep(spec, tmp_path / "run")
        detail = _batches(sim, detail=True)["detail"]
    assert result.stored == 72 and result.failed == 0
    failed_before: set[str] = set()
    first_round = [b for b in detail if not failed_before.intersection(map(_cell_key, b["custom_ids"]))]
    assert sum(len(b["custom_ids"]) for b in detail[:3]) == 72  # 72 cells in batches of ≤ 25: three first batches
    for batch in detail[3:]:  # every later batch holds only cells that failed in an earlier one
        failed_before |= {_cell_key(c) for b in detail[: detail.index(batch)] for c in b["failed"]}
        assert set(map(_cell_key, batch["custom_ids"])) <= failed_before, batch["id"]
    assert len(detail) > 3 and first_round  # some requests did fail and were resubmitted
    _stored_once(tmp_path / "run", 72)


@pytest.mark.slow
def test_wait_false_submits_and_a_later_run_collects(tmp_path):
    with SimServerThread(SimConfig(seed=2, batch_latency_s=1.0)) as sim:
        spec = make_spec(sim.base_url, endpoint=_endpoint("openai"), design=SMALL)
        first = run_sweep(spec, tmp_path / "run", wait=False)
        assert first.stored == 0 and first.pending_batches == 1 and not first.interrupted
        assert [e["state"] for e in read_journal(tmp_path / "run")] == ["submitted"]
        time.sleep(1.1)
        second = run_sweep(spec, tmp_path / "run")
        assert second.stored == 72 and second.pending_batches == 0
        assert _batches(sim)["batches"] == 1  # collected, not submitted again
    _stored_once(tmp_path / "run", 72)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_batch_created_but_not_recorded_is_found_again(provider, tmp_path):
    """The crash between the provider's create and the journal's update: the resume adopts, never resubmits."""
    from runner.rundir import RunWriter
    from runner.rundir.batches import BatchJournal

    with SimServerThread(SimConfig(seed=6, batch_latency_s=0.5)) as sim:
        spec = make_spec(_base(sim, provider), endpoint=_endpoint(provider), design=SMALL)
        first = run_sweep(spec, tmp_path / "run", wait=False)
        assert first.pending_batches == 1
        with RunWriter.attach(tmp_path / "run") as writer:  # forget the batch id, as if killed before saving it
            journal = BatchJournal(writer)
            (entry,) = journal.entries.values()
            journal.update(entry, state="preparing", batch_id=None, file_id=None)
        second = run_sweep(spec, tmp_path / "run")
        seen = _batches(sim)
    assert second.stored == 72 and seen["batches"] == 1 and not seen["submitted_more_than_once"]
    _stored_once(tmp_path / "run", 72)


@pytest.mark.slow  # ten kills of a subprocess and resumes
def test_sigkill_at_random_moments_loses_and_duplicates_nothing(tmp_path):
    rng = random.Random(11)
    design = {**BIG, "seeds": list(range(1, 8))}  # 2,688 cells in 54 batches of at most 50
    # a batch takes longer than several runs live (each kill comes within 2 s), so the first runs are all killed
    # mid-sweep however fast start-up is (at 3 s, a quiet machine finished the sweep by the 5th run: 4 kills);
    # the batches finish at the provider meanwhile, and the resumes adopt and download them
    with SimServerThread(SimConfig(seed=3, batch_latency_s=15.0)) as sim:
        spec = tmp_path / "spec.toml"
        spec.write_text(spec_text(sim.base_url, endpoint=_endpoint("openai", max_batch_requests=50), design=design))
        command = [sys.executable, "-m", "runner.cli", "run", str(spec), "--out", str(tmp_path / "run")]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        kills = 0
        for _ in range(10):
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            time.sleep(rng.uniform(0.6, 2.0))  # start-up is ~0.5 s: the kill lands in upload, create, poll or download
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                kills += 1
            child.wait()
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        seen = _batches(sim)
    assert kills >= 5
    assert not seen["submitted_more_than_once"], f"cells submitted twice: {len(seen['submitted_more_than_once'])}"
    assert seen["distinct_custom_ids"] == 2_688 == seen["requests"]
    _stored_once(tmp_path / "run", 2_688)


@pytest.mark.slow
def test_status_lists_the_batches_and_their_states(tmp_path):
    with SimServerThread(SimConfig(seed=8, batch_latency_s=5.0)) as sim:
        spec = make_spec(sim.base_url, endpoint=_endpoint("openai", max_batch_requests=40), design=SMALL)
        assert run_sweep(spec, tmp_path / "run", wait=False).pending_batches == 2
    out = subprocess.run(
        [sys.executable, "-m", "runner.cli", "status", str(tmp_path / "run")], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "provider batches (2):" in out.stdout and out.stdout.count(" submitted / in_progress, ") == 2
    as_json = subprocess.run(
        [sys.executable, "-m", "runner.cli", "status", str(tmp_path / "run"), "--json"], capture_output=True, text=True
    )
    assert [b["n"] for b in json.loads(as_json.stdout)["batches"]] == [40, 32]
