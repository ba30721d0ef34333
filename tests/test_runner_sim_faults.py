"""End to end against the simulated endpoint on 127.0.0.1 with every fault injected (real server, client)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from _runner_support import check_run_dir, make_spec, sent_request_keys
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset, read_manifest
from runner.sweep.accounting import run_status
from runner.sweep.session import run_sweep

ANSWERED = ("ok", "refusal", "chatty")  # outcomes whose reply is a chat completion


@pytest.fixture
def faulty_sim():
    config = SimConfig(
        seed=11,
        error_rate=0.12,
        malformed_rate=0.08,
        hang_rate=0.02,
        hang_s=30.0,
        refusal_rate=0.05,
        chatty_rate=0.15,
        requests_per_minute=1200,
        burst=25,
    )
    with SimServerThread(config) as sim:
        yield sim


@pytest.mark.slow  # about a minute: hung requests wait out their timeouts
def test_every_cell_stored_once_with_what_the_server_sent(faulty_sim, tmp_path: Path) -> None:
    spec = make_spec(faulty_sim.base_url, endpoint={"timeout_s": 0.5, "max_retries": 12})
    result = run_sweep(spec, tmp_path / "run", live=False)
    assert not result.interrupted and result.failed == 0 and result.stored == 48
    rows = check_run_dir(tmp_path / "run", spec)
    log = faulty_sim.log.entries()
    outcomes = {e.outcome for e in log}
    assert {"server_error", "malformed", "hang", "rate_limited", "refusal", "chatty", "ok"} <= outcomes
    # The reply the server sent to the one answered attempt of each request is the stored text.
    answered: dict[str, list] = {}
    for entry in log:
        if entry.outcome in ANSWERED and entry.status == 200:
            answered.setdefault(entry.request_key, []).append(entry)
    arrivals = Counter(e.request_key for e in log)  # every attempt: answered, refused with 429/5xx, timed out
    sent = sent_request_keys(tmp_path / "run", rows)
    for key, row in rows.items():
        (entry,) = answered[sent[key]]
        assert entry.reply == row["response_text"]
        assert arrivals[sent[key]] == row["attempts"]
    assert max(r["attempts"] for r in rows.values()) > 1
    # answers: one per cell (item mode), parsed from the stored text; refusals are recognised as such.
    answers = read_dataset(tmp_path / "run", "answers").to_pylist()
    assert sorted(a["cell_key"] for a in answers) == sorted(rows)
    refused = {e.request_key for e in log if e.outcome == "refusal"}
    by_cell = {a["cell_key"]: a for a in answers}
    assert all(by_cell[k]["status"] == "refusal" for k in rows if sent[k] in refused)
    truth = {e.request_key: e.answers[0] for e in log if e.outcome in ("ok", "chatty")}
    matched = [by_cell[k]["option_id"] == truth[sent[k]] for k in rows if sent[k] in truth]
    assert matched and all(matched)


@pytest.mark.slow
def test_exhausted_retries_are_stored_as_failures_and_retried_on_request(tmp_path: Path) -> None:
    with SimServerThread(SimConfig(seed=5, error_rate=0.5)) as sim:
        spec = make_spec(sim.base_url, endpoint={"max_retries": 0})
        first = run_sweep(spec, tmp_path / "run", live=False)
        assert first.failed > 5 and first.stored + first.failed == 48
        failures = read_dataset(tmp_path / "run", "failures").to_pylist()
        assert {f["error_class"] for f in failures} == {"ServerError"}
        assert all(f["http_status"] in (500, 502, 503) and f["response_text"] is None for f in failures)
        status = run_status(tmp_path / "run")
        assert (status["done"], status["failed"], status["remaining"]) == (first.stored, first.failed, 0)
        again = run_sweep(spec, tmp_path / "run", live=False)  # plain resume: failures stay failed
        assert (again.stored, again.failed, again.already_stored) == (0, 0, 48)
        for _ in range(20):  # each retry round cures about half of what is left
            if run_status(tmp_path / "run")["failed"] == 0:
                break
            run_sweep(spec, tmp_path / "run", retry_failed=True, live=False)
        rows = check_run_dir(tmp_path / "run", spec)
        assert len(rows) == 48 and run_status(tmp_path / "run")["failed"] == 0
        assert [s["retry_failed"] for s in read_manifest(tmp_path / "run")["sessions"][:3]] == [False, False, True]
