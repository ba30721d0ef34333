"""The executor driven through the in-memory transport in virtual time: ordering, retries, limits, stops.

These run in milliseconds and need no sockets; the live-server tests (test_runner_*) keep covering the
real aiohttp path.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from _runner_support import make_spec
from runner.errors import TransportError
from runner.rundir import RunWriter, read_dataset
from runner.sweep.execute import Executor
from runner.sweep.mock import MockTransport, VirtualTime, error_reply, openai_reply
from runner.sweep.plan import count_cells, iter_cells
from runner.sweep.progress import Progress, RunStats
from runner.sweep.session import build_manifest, run_sweep
from runner.sweep.spec import Spec

BASE = "http://memory.invalid/v1"  # never resolved: every request goes through the scripted transport


def _run(
    spec: Spec,
    out: Path,
    transport: MockTransport,
    time: VirtualTime,
    *,
    stop_after: int | None = None,
    skip: set[str] = frozenset(),
) -> tuple[bool, RunStats]:
    """One executor session over the spec's cells not in ``skip``; (interrupted, stats)."""
    writer = RunWriter.open_run(out, build_manifest(spec), batch_rows=spec.run.batch_rows)
    stats = RunStats(total=count_cells(spec))
    executor = Executor(
        writer,
        stats,
        Progress(stats, stream=io.StringIO(), live=False),
        flush_interval_s=3600,
        rng_seed=5,
        transport_factory=lambda endpoint: transport,
        handle_signals=False,
        wait=time.wait,
        clock=time.clock,
    )
    if stop_after is not None:
        transport.on_send = lambda sent: executor.stop() if sent == stop_after else None
    work = [(e, (c for c in iter_cells(spec, e) if c.key not in skip)) for e in spec.endpoints]
    try:
        interrupted = asyncio.run(executor.run(work))
    finally:
        writer.close({})
    return interrupted, stats


def _rows(out: Path, dataset: str) -> list[dict]:
    return read_dataset(out, dataset).to_pylist()


def test_every_planned_cell_is_sent_once_and_stored_once(tmp_path: Path) -> None:
    spec = make_spec(BASE, endpoint={"max_concurrency": 8})
    transport = MockTransport(lambda body, attempt: openai_reply("3"), VirtualTime())
    interrupted, stats = _run(spec, tmp_path / "run", transport, VirtualTime())
    responses = _rows(tmp_path / "run", "responses")
    planned = [c.key for c in iter_cells(spec)]
    assert not interrupted and stats.done == len(planned) == 48
    assert sorted(r["cell_key"] for r in responses) == sorted(planned)
    assert len(transport.sent) == 48 and max(transport.attempts.values()) == 1
    assert 1 < transport.max_in_flight <= 8
    assert transport.closed == 1
    assert {r["response_text"] for r in responses} == {"3"} and {r["attempts"] for r in responses} == {1}
    assert {r["input_tokens"] for r in responses} == {20}
    prompts = {p["prompt_hash"] for p in _rows(tmp_path / "run", "prompts")}
    assert {r["prompt_hash"] for r in responses} <= prompts
    assert not _rows(tmp_path / "run", "answers")  # parsing is the session's job, not the executor's


def test_retryable_statuses_are_retried_with_backoff_and_fatal_ones_fail_at_once(tmp_path: Path) -> None:
    def script(body: dict, attempt: int):
        if body["seed"] == 1 and body["temperature"] == 0.0 and attempt <= 2:
            return error_reply(503)
        if body["seed"] == 2 and body["temperature"] == 1.0:
            return error_reply(400)
        return openai_reply("2")

    time = VirtualTime()
    spec = make_spec(BASE, endpoint={"max_retries": 3})
    interrupted, stats = _run(spec, tmp_path / "run", MockTransport(script), time)
    responses, failures = _rows(tmp_path / "run", "responses"), _rows(tmp_path / "run", "failures")
    assert not interrupted
    assert len(failures) == 12 and {(f["error_class"], f["http_status"], f["attempts"]) for f in failures} == {
        ("FatalRequestError", 400, 1)
    }
    assert all(f["seed"] == 2 and f["temperature"] == 1.0 for f in failures)
    retried = [r for r in responses if r["seed"] == 1 and r["temperature"] == 0.0]
    assert len(retried) == 12 and {r["attempts"] for r in retried} == {3}
    assert {r["attempts"] for r in responses if r not in retried} == {1}
    assert stats.retries == 24 and len(responses) + len(failures) == 48
    # Full-jitter exponential backoff: the first retry waits at most 0.5 s, the second at most 1 s.
    assert len(time.waits) == 24 and all(0 <= w <= 1.0 for w in time.waits)


def test_retry_after_is_honoured_and_exhausted_retries_are_recorded(tmp_path: Path) -> None:
    def script(body: dict, attempt: int):
        if body["seed"] == 1:
            return error_reply(429, {"Retry-After": "7"}) if attempt == 1 else openai_reply("4")
        if body["temperature"] == 1.0:
            raise TransportError("connection refused")
        return openai_reply("4")

    time = VirtualTime()
    spec = make_spec(BASE, endpoint={"max_retries": 2, "max_concurrency": 4})
    interrupted, stats = _run(spec, tmp_path / "run", MockTransport(script), time)
    responses, failures = _rows(tmp_path / "run", "responses"), _rows(tmp_path / "run", "failures")
    assert not interrupted
    assert len([w for w in time.waits if w >= 7.0]) >= 24  # every 429 was waited out for its Retry-After
    assert {r["attempts"] for r in responses if r["seed"] == 1} == {2}
    assert len(failures) == 12 and {(f["error_class"], f["attempts"], f["http_status"]) for f in failures} == {
        ("TransportError", 3, None)
    }
    assert stats.endpoints["sim"].rate_limited == 24


def test_requests_per_window_hold_in_virtual_time(tmp_path: Path) -> None:
    time = VirtualTime()
    transport = MockTransport(lambda body, attempt: openai_reply("5"), time)
    spec = make_spec(BASE, endpoint={"requests_per_minute": 10, "max_concurrency": 4})
    interrupted, _ = _run(spec, tmp_path / "run", transport, time)
    assert not interrupted and len(_rows(tmp_path / "run", "responses")) == 48
    starts = sorted(transport.admitted_at)
    for i, t in enumerate(starts):  # no 60-second window ever admits more than 10 requests
        assert sum(1 for u in starts[i:] if u < t + 60.0) <= 10
    assert starts[-1] - starts[0] >= 4 * 60.0  # 48 requests at 10 per minute need at least 4 more windows


def test_a_stop_finishes_requests_in_flight_and_a_second_session_sends_only_the_rest(tmp_path: Path) -> None:
    spec = make_spec(BASE, endpoint={"max_concurrency": 4})
    out = tmp_path / "run"
    transport = MockTransport(lambda body, attempt: openai_reply("1"))
    interrupted, first = _run(spec, out, transport, VirtualTime(), stop_after=10)
    stored = {r["cell_key"] for r in _rows(out, "responses")}
    assert interrupted
    assert len(stored) == len(transport.sent) == first.done  # nothing sent was lost
    assert 10 <= len(stored) < 48
    rest = MockTransport(lambda body, attempt: openai_reply("1"))
    interrupted, second = _run(spec, out, rest, VirtualTime(), skip=stored)
    assert not interrupted and second.done == 48 - len(stored)
    keys = [r["cell_key"] for r in _rows(out, "responses")]
    assert len(keys) == len(set(keys)) == 48
    assert len(transport.sent) + len(rest.sent) == 48  # exactly once across the two sessions


def test_a_whole_sweep_session_runs_on_an_injected_transport(tmp_path: Path) -> None:
    transport = MockTransport(lambda body, attempt: openai_reply("The answer is 2."))
    spec = make_spec(BASE)
    result = run_sweep(
        spec, tmp_path / "run", stream=io.StringIO(), live=False, transport_factory=lambda endpoint: transport
    )
    assert (result.stored, result.failed, result.interrupted) == (48, 0, False)
    answers = _rows(tmp_path / "run", "answers")  # the session handed every committed part to the parse stage
    assert len(answers) == 48 and {(a["option_id"], a["status"]) for a in answers} == {(2, "ok")}
    again = run_sweep(
        spec, tmp_path / "run", stream=io.StringIO(), live=False, transport_factory=lambda endpoint: transport
    )
    assert (again.stored, again.already_stored) == (0, 48) and len(transport.sent) == 48
