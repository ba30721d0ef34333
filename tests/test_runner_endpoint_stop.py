"""Fatal client errors stop an endpoint; server waits are capped; reset headers never slow retries; ETAs per endpoint.

The endpoint-stop tests talk to a real loopback HTTP server; the timing tests drive the executor in virtual time.
"""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path

import pytest

from _loopback_server import LoopbackServer, chat_ok
from _runner_support import make_spec, spec_text
from runner.cli import main as cli_main
from runner.rundir import read_dataset
from runner.sweep.mock import MockTransport, VirtualTime, error_reply, openai_reply
from runner.sweep.progress import EndpointStats, RunStats
from runner.sweep.session import run_sweep
from test_sweep_executor import BASE, _run

KEY = "sk-test-0123456789abcdefghijklmnopqrstuv"  # 39 characters; no 8 of them may reach the run directory


def _unauthorized(body: object, seq: int) -> tuple[int, object, dict[str, str]]:
    message = f"Incorrect API key provided: {KEY}. You can find your API key at https://example.invalid."
    return 401, {"error": {"message": message, "type": "invalid_request_error"}}, {}


def _spec(base_url: str, **endpoint: object):
    return make_spec(base_url, endpoint={"api_key_env": "HOFCAT_TEST_KEY", "max_concurrency": 4, **endpoint})


def test_a_wrong_key_stops_the_endpoint_and_leaves_its_cells_to_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOFCAT_TEST_KEY", KEY)
    out, stream = tmp_path / "run", io.StringIO()
    with LoopbackServer(_unauthorized) as server:
        spec = _spec(server.base_url)
        result = run_sweep(spec, out, stream=stream, live=False)
        sent = len(server.arrivals)
        server.answer = lambda body, seq: chat_ok("2")  # the key fixed: the same command resumes every cell
        again = run_sweep(spec, out, stream=io.StringIO(), live=False)
    # 48 cells planned; it used to send all 48 and store "48 failed for good".
    assert 5 <= sent <= 5 + 4  # the streak of 5, plus those already in flight at 4 concurrent
    assert (result.stored, result.failed) == (0, 0) and set(result.stopped_endpoints) == {"sim"}
    message = result.stopped_endpoints["sim"]
    assert "HTTP 401" in message and "Incorrect API key provided" in message and "check api_key_env" in message
    assert KEY[:8] not in stream.getvalue() and KEY[-8:] not in message
    assert (again.stored, again.already_stored, again.stopped_endpoints) == (48, 0, {})
    assert len(read_dataset(out, "failures")) == 0  # not failed for good: nothing needed --retry-failed
    for path in (out / "manifest.json", out / "admissions.jsonl"):  # the run directory's plain-text files
        if path.exists():
            assert KEY[:8] not in path.read_text() and KEY[10:18] not in path.read_text()


def test_hofcat_run_exits_non_zero_with_one_line_for_a_stopped_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("HOFCAT_TEST_KEY", KEY)

    def not_found(body: object, seq: int) -> tuple[int, object, dict[str, str]]:
        return 404, {"error": {"message": "The model `sim-9` does not exist", "code": "model_not_found"}}, {}

    with LoopbackServer(not_found) as server:
        spec_path = tmp_path / "spec.toml"
        spec_path.write_text(
            spec_text(server.base_url, endpoint={"api_key_env": "HOFCAT_TEST_KEY", "stop_after_fatal": 3})
        )
        code = cli_main(["run", str(spec_path), "--out", str(tmp_path / "run")])
        sent = len(server.arrivals)
    err = capsys.readouterr().err
    assert code == 4 and 3 <= sent <= 3 + 8
    lines = [line for line in err.splitlines() if "stopped after 3 consecutive HTTP 404" in line]
    assert lines and "does not exist" in lines[-1] and "check the model name" in lines[-1]
    assert "Traceback" not in err
    assert cli_main(["status", str(tmp_path / "run")]) == 0
    status_out = capsys.readouterr().out
    assert "48 remaining of 48" in status_out and "stopped after 3 consecutive HTTP 404" in status_out


def test_a_broken_streak_stores_the_failures_as_the_cells_own(tmp_path: Path) -> None:
    # A few 404s among successes (a cell-specific problem, not the endpoint's): stored as failures as before.
    def script(body: dict, attempt: int):
        return error_reply(404) if body["seed"] == 2 and body["temperature"] == 1.0 else openai_reply("3")

    spec = make_spec(BASE, endpoint={"max_concurrency": 1, "stop_after_fatal": 5})
    interrupted, stats = _run(spec, tmp_path / "run", MockTransport(script), VirtualTime())
    failures = read_dataset(tmp_path / "run", "failures").to_pylist()
    assert not interrupted and not stats.stopped_endpoints
    assert len(failures) == 12 and stats.failed == 12 and stats.done == 36


def test_status_groups_failures_by_class_and_message(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    def script(body: dict, attempt: int):
        if body["seed"] == 2:
            return error_reply(400)
        if body["temperature"] == 1.0:
            return error_reply(503)
        return openai_reply("3")

    spec = make_spec(BASE, endpoint={"max_retries": 1})
    _run(spec, tmp_path / "run", MockTransport(script), VirtualTime())
    assert cli_main(["status", str(tmp_path / "run"), "--json"]) == 0
    groups = json.loads(capsys.readouterr().out)["failure_groups"]
    assert [(g["count"], g["error_class"], g["http_status"]) for g in groups] == [
        (24, "FatalRequestError", 400),
        (12, "ServerError", 503),
    ]
    assert "status 400" in groups[0]["message"] and groups[0]["endpoints"] == ["sim"]
    assert cli_main(["status", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert "failures by class and message (2 groups)" in text and "24 × FatalRequestError HTTP 400" in text


RESET_HEADERS = {
    "x-ratelimit-limit-requests": "5000",
    "x-ratelimit-remaining-requests": "4999",
    "x-ratelimit-reset-requests": "6m0s",
    "x-ratelimit-reset-tokens": "1s",
    "anthropic-ratelimit-requests-reset": "2099-01-01T00:00:00Z",
}


def _virtual_run_time(tmp_path: Path, headers: dict[str, str]) -> tuple[float, VirtualTime, int]:
    """Virtual seconds a 192-cell run takes when ~3 % of first attempts get a 503, every reply with ``headers``."""

    def script(body: dict, attempt: int):
        flaky = zlib.crc32(json.dumps(body, sort_keys=True).encode()) % 33 == 0
        return error_reply(503, headers) if flaky and attempt == 1 else openai_reply("3", headers=headers)

    time = VirtualTime()
    start = time.now_s
    spec = make_spec(BASE, design={"questions": list(range(1, 25))})
    _, stats = _run(spec, tmp_path, MockTransport(script, time), time)
    assert stats.done == 192
    return time.now_s - start, time, stats.retries


def test_reset_headers_on_every_reply_do_not_slow_retries_of_5xx(tmp_path: Path) -> None:
    with_headers, timed, retries = _virtual_run_time(tmp_path / "with", RESET_HEADERS)
    without, _, retries_without = _virtual_run_time(tmp_path / "without", {})
    assert retries == retries_without >= 3  # ~3 % of 192
    # They used to be waited out: 360 s per retry (a 4.8 s run took 66.7 s). Now only the backoff waits.
    assert max(timed.waits) <= 0.5
    assert with_headers <= 1.5 * without + 1e-6


def test_a_huge_retry_after_is_capped_and_noted(tmp_path: Path) -> None:
    def script(body: dict, attempt: int):
        if body["seed"] == 1 and body["temperature"] == 0.0 and attempt == 1:
            return error_reply(429, {"Retry-After": "86400"})
        return openai_reply("3")

    time = VirtualTime()
    spec = make_spec(BASE, endpoint={"max_retry_wait_s": 7.5})
    _, stats = _run(spec, tmp_path / "run", MockTransport(script, time), time)
    assert stats.done == 48 and stats.capped_waits == 12 and stats.endpoints["sim"].capped_waits == 12
    assert max(time.waits) == 7.5 and 86400 not in time.waits
    assert any("waiting max_retry_wait_s = 7.5 s" in note for note in stats.notes)


def test_the_run_eta_is_the_slowest_endpoints() -> None:
    stats = RunStats(total=200)
    fast, slow = EndpointStats("fast", None, 8, planned=100), EndpointStats("slow", None, 8, planned=100)
    stats.endpoints = {"fast": fast, "slow": slow}
    fast.started = slow.started = stats.started = stats.started - 10.0  # 10 s in
    fast.done, slow.done = 100, 10  # fast is finished; slow does 1 cell/s with 90 left
    stats.done = 110
    assert fast.eta_s() == 0.0
    assert slow.eta_s() == pytest.approx(90.0, rel=0.01)
    assert stats.eta_s() == pytest.approx(90.0, rel=0.01)  # the pooled rate said 90 / 11 per s ≈ 8 s
    slow_part = next(p for p in stats.line().split(" | ") if p.startswith("slow: "))
    assert slow_part.endswith(("ETA 01:29", "ETA 01:30"))
