"""Rate limits across a kill and an immediate resume, on a real loopback server's clock (`hofcat run` subprocesses).

The server counts every arrival against R per window (a scaled 6-s window so the tests take seconds) and
answers 429 beyond it. No window of the server's arrivals — including those spanning the kill — may hold more
than R, and, paced (no ``burst``), no window of window/60 seconds more than 2 * ceil(R / 60) per "minute".
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _loopback_server import LoopbackServer, chat_ok
from _runner_support import check_run_dir, spec_text
from runner.endpoints.sim.limits import SlidingWindow
from runner.endpoints.sim.log import max_in_window
from runner.rundir.admissions import FILE_NAME
from runner.sweep.spec import parse_spec

WINDOW_S = 6.0
DESIGN = {"personas": ["China"], "questions": list(range(1, 25)), "seeds": [1], "temperature": [0.0, 1.0]}  # 48


def _limited_server(limit: int) -> LoopbackServer:
    window = SlidingWindow(limit, WINDOW_S)

    def answer(body: object, seq: int) -> tuple[int, object, dict[str, str]]:
        now = time.monotonic()
        if window.wait_s(now) > 0:
            return 429, {"error": {"message": "rate limit"}}, {"Retry-After": "1"}
        window.record(now)
        return chat_ok("3")

    return LoopbackServer(answer)


def _hofcat_run(spec_path: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "run", str(spec_path), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_after(
    process: subprocess.Popen, server: LoopbackServer, arrivals: int, out: Path, sig: signal.Signals
) -> None:
    """Send ``sig`` once the server saw ``arrivals`` requests and the run committed a responses part."""
    deadline = time.monotonic() + 30.0
    while len(server.arrivals) < arrivals or not list(out.glob("responses/part-*.parquet")):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run sent too little in time"
        time.sleep(0.005)
    process.send_signal(sig)
    process.communicate(timeout=30)


def _run_killed_and_resumed(
    tmp_path: Path, server: LoopbackServer, endpoint: dict, kill_at: int, sig: signal.Signals
) -> list[float]:
    text = spec_text(
        server.base_url,
        run={"batch_rows": 10, "flush_interval_s": 0.2},
        endpoint={"rate_window_s": WINDOW_S, "max_concurrency": 16, **endpoint},
        design=DESIGN,
    )
    spec_path, out = tmp_path / "spec.toml", tmp_path / "run"
    spec_path.write_text(text)
    _kill_after(_hofcat_run(spec_path, out), server, kill_at, out, sig)
    resumed = _hofcat_run(spec_path, out)  # at once: the server's window still holds the first session's
    _, stderr = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, stderr
    assert len(check_run_dir(out, parse_spec(text))) == 48
    assert (out / FILE_NAME).stat().st_size < 64 * 1024  # bounded: one window's admissions
    return list(server.arrivals)


@pytest.mark.slow  # two sweep subprocesses waiting out real (scaled) rate windows, ~10 s
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_window_spanning_a_kill_and_an_immediate_resume_holds_the_limit(tmp_path: Path, sig: signal.Signals) -> None:
    # burst = R: the first session sends the whole window's budget at once, then is killed while it waits.
    # Without the admissions journal the resumed session sent its 18 at once: 48 in one 6-s window.
    limit = 30
    with _limited_server(limit) as server:
        arrivals = _run_killed_and_resumed(tmp_path, server, {"requests_per_minute": limit, "burst": limit}, limit, sig)
        statuses = list(server.statuses)
    # (a kill loses the replies not yet committed: those cells are sent again; a Ctrl-C stores them)
    assert 48 <= len(arrivals) < 2 * 48 and 429 not in statuses
    assert max_in_window(arrivals, WINDOW_S) == limit


@pytest.mark.slow  # two sweep subprocesses paced over real (scaled) rate windows, ~12 s
def test_paced_admissions_hold_sub_windows_across_a_kill(tmp_path: Path) -> None:
    limit = 30  # per 6 s: one admission every 0.2 s
    with _limited_server(limit) as server:
        arrivals = _run_killed_and_resumed(tmp_path, server, {"requests_per_minute": limit}, 12, signal.SIGKILL)
        statuses = list(server.statuses)
    assert len(arrivals) >= 48 and 429 not in statuses
    assert max_in_window(arrivals, WINDOW_S) <= limit
    # The 1-second rule scaled to the window: a 60th of the window holds at most 2 * ceil(R / 60) of R.
    assert max_in_window(arrivals, WINDOW_S / 60) <= 2 * math.ceil(limit / 60)
    per_minute = limit * 60 / WINDOW_S  # and literally: 1 s at the equivalent per-minute rate
    assert max_in_window(arrivals, 1.0) <= 2 * math.ceil(per_minute / 60)
