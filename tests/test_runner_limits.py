"""Rate limits and adaptive concurrency: exact on a fake clock, and measured on the simulator's clock."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import random
from pathlib import Path

import pytest

from _runner_support import check_run_dir, make_spec
from runner.endpoints.sim import SimConfig, SimServerThread, max_in_window
from runner.sweep.limits import AdaptiveConcurrency, RateLimiter
from runner.sweep.session import run_sweep


class FakeTime:
    """A clock that moves only when the limiter sleeps or a request arrives; finishes requests on schedule."""

    def __init__(self) -> None:
        self.now = 0.0
        self.finishing: list[tuple[float, int, object, RateLimiter, float | None]] = []  # heap by finish time

    def clock(self) -> float:
        return self.now

    def advance(self, to: float) -> None:
        while self.finishing and self.finishing[0][0] <= to:
            when, _, ticket, limiter, tokens = heapq.heappop(self.finishing)
            self.now = max(self.now, when)
            limiter.release(ticket, tokens)
        self.now = max(self.now, to)

    async def sleep(self, seconds: float) -> None:
        self.advance(self.now + seconds)

    def finish_later(self, ticket: object, limiter: RateLimiter, latency_s: float, tokens: float | None = None) -> None:
        heapq.heappush(
            self.finishing, (self.now + latency_s, len(self.finishing) + id(ticket) % 997, ticket, limiter, tokens)
        )


def _admissions(limiter: RateLimiter, fake: FakeTime, gaps: list[float], latencies: list[float]) -> list[float]:
    """Admission times of requests arriving after ``gaps``, each finishing its latency after admission."""

    async def go() -> list[float]:
        out = []
        for gap, latency in zip(gaps, latencies, strict=True):
            fake.advance(fake.now + gap)
            ticket = await limiter.acquire(1, fake.sleep)
            out.append(fake.now)
            fake.finish_later(ticket, limiter, latency)
        return out

    return asyncio.run(go())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_window_can_exceed_the_limits_wherever_the_server_saw_each_request(seed: int) -> None:
    rng = random.Random(seed)
    fake = FakeTime()
    limiter = RateLimiter(30, None, window_s=60.0, burst=4, clock=fake.clock)
    n = 200
    latencies = [rng.choice([0.0, 0.05, 2.0, 20.0]) for _ in range(n)]
    starts = _admissions(limiter, fake, [rng.expovariate(2.0) for _ in range(n)], latencies)
    # The server may stamp a request anywhere between its admission and its response: try both extremes and
    # random points between; no placement may put more than the limit in a window.
    for trial in range(20):
        where = [0.0, 1.0][trial] if trial < 2 else None
        seen = [
            s + lat * (where if where is not None else rng.random()) for s, lat in zip(starts, latencies, strict=True)
        ]
        assert max_in_window(seen, 60.0) <= 30
        assert max_in_window(seen, 1.0) <= 4
    assert max_in_window(starts, 60.0) == 30  # the limit is reached, not just respected


def test_a_window_reopens_one_window_after_the_responses() -> None:
    fake = FakeTime()
    limiter = RateLimiter(3, None, window_s=10.0, burst=3, clock=fake.clock)  # a burst: no pacing
    starts = _admissions(limiter, fake, [0.0] * 6, [1.0, 2.0, 5.0, 0.0, 0.0, 0.0])
    guard = 0.001
    assert starts[:3] == [0.0, 0.0, 0.0]
    assert starts[3] == pytest.approx(1.0 + 10.0 + guard)  # the first response came at 1 s
    assert starts[4] == pytest.approx(2.0 + 10.0 + guard)
    assert starts[5] == pytest.approx(5.0 + 10.0 + guard)


def _token_admissions(counting: str, reported: tuple[object, object], n: int = 6) -> list[float]:
    """Admission times of ``n`` requests charged 600 (100 prompt + 500 max_tokens) under 1,000 tokens per 10 s,
    each finishing at once and reporting ``reported`` (input, output) usage."""
    fake = FakeTime()
    limiter = RateLimiter(None, 1000, window_s=10.0, burst=100, clock=fake.clock, token_counting=counting)

    async def go() -> list[float]:
        out = []
        for _ in range(n):
            ticket = await limiter.acquire(600, fake.sleep, output_reserve=500)
            out.append(fake.now)
            limiter.release(ticket, *reported)
        return out

    return asyncio.run(go())


def test_openai_token_charge_keeps_the_max_tokens_reservation() -> None:
    # OpenAI counts prompt + max_tokens at admission: a reply using 10 tokens still costs 600 in the window,
    # so only one request fits per 10 s (two would be 1,200 > 1,000 on the server's count).
    starts = _token_admissions("reserved", (9, 1))
    assert starts == pytest.approx([0.0 + 10.001 * i for i in range(6)])
    # A low prompt estimate is raised to what the server counted: 900 prompt + 500 reserved = 1,400.
    fake = FakeTime()
    limiter = RateLimiter(None, 1000, window_s=10.0, burst=100, clock=fake.clock)
    ticket = asyncio.run(limiter.acquire(600, fake.sleep, output_reserve=500))
    assert limiter.settled_tokens(ticket, 900, 3) == 1400


def test_reported_usage_settles_the_charge_where_the_provider_counts_usage() -> None:
    # Anthropic/Gemini settle on usage: 10 tokens used leave room for the next request at once.
    starts = _token_admissions("reported", (9, 1))
    assert starts == [0.0] * 6


@pytest.mark.parametrize(
    "reported",
    [(-1_000_000, 5), (5, -7), (float("nan"), 1), (10**30, 1), (None, None), ("12", 3), (True, 1), (float("inf"), 0)],
)
@pytest.mark.parametrize("counting", ["reserved", "reported"])
def test_impossible_usage_is_unknown_and_never_switches_the_limiter_off(counting: str, reported: tuple) -> None:
    # Negative usage used to shrink the window's total below zero: 48 requests went out in 0.03 s.
    starts = _token_admissions(counting, reported)
    assert starts == pytest.approx([0.0 + 10.001 * i for i in range(6)])  # the 600 reservation stays


def test_admissions_are_paced_evenly_unless_a_burst_is_set() -> None:
    # 120 per minute: one admission every 0.5 s, not a minute's budget in the first second.
    fake = FakeTime()
    paced = _admissions(RateLimiter(120, None, clock=fake.clock), fake, [0.0] * 240, [0.05] * 240)
    assert paced[:3] == pytest.approx([0.0, 0.5, 1.0])
    assert max_in_window(paced, 1.0) <= 2 * math.ceil(120 / 60)
    assert max_in_window(paced, 60.0) <= 120
    fake = FakeTime()
    bursty = _admissions(RateLimiter(120, None, burst=120, clock=fake.clock), fake, [0.0] * 240, [0.05] * 240)
    assert max_in_window(bursty, 1.0) == 120 and max_in_window(bursty, 60.0) == 120  # what a burst allows


def test_token_admissions_are_paced_too() -> None:
    fake = FakeTime()
    limiter = RateLimiter(None, 6000, window_s=60.0, clock=fake.clock)  # 100 tokens per second

    async def go() -> list[float]:
        out = []
        for _ in range(5):
            out.append(fake.now)
            fake.finish_later(await limiter.acquire(200, fake.sleep), limiter, 0.1)
            out[-1] = fake.now
        return out

    assert asyncio.run(go()) == pytest.approx([0.0, 2.0, 4.0, 6.0, 8.0])  # 200 tokens = 2 s at 100/s


def test_restored_admissions_hold_the_window_and_the_pacing() -> None:
    fake = FakeTime()
    fake.now = 100.0
    limiter = RateLimiter(10, None, window_s=10.0, clock=fake.clock)
    # An earlier session admitted 10 between t = 95 and 99.5, each finished 0.1 s later.
    limiter.restore([(95.0 + 0.5 * i, 95.1 + 0.5 * i, 1.0, 1.0) for i in range(10)])
    starts = _admissions(limiter, fake, [0.0] * 3, [0.0] * 3)
    assert starts[0] == pytest.approx(95.1 + 10.001)  # the first restored one leaves the window
    # Paced at 10 per 10 s, continuing the earlier session's schedule (at most half a step early).
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.5 - 1e-9
    assert max_in_window([95.0 + 0.5 * i for i in range(10)] + starts, 1.0) <= 2


def test_adaptive_concurrency_halves_on_429_and_recovers() -> None:
    fake = FakeTime()
    gate = AdaptiveConcurrency(16, cooldown_s=1.0, clock=fake.clock)
    gate.on_rate_limited()
    gate.on_rate_limited()  # the same burst of 429s: one cut
    assert gate.limit == 8
    fake.now = 2.0
    gate.on_rate_limited()
    assert gate.limit == 4

    for _ in range(4 + 5 + 6):  # +1 after a cap's worth of successes: 4 → 5 → 6 → 7
        gate.on_success()
    assert gate.limit == 7
    for _ in range(1000):
        gate.on_success()
    assert gate.limit == 16


def test_adaptive_concurrency_never_exceeds_its_cap_and_serves_in_order() -> None:
    async def go() -> tuple[int, list[int]]:
        gate = AdaptiveConcurrency(3)
        peak, order = 0, []

        async def job(i: int) -> None:
            nonlocal peak
            await gate.acquire(asyncio.sleep)
            peak = max(peak, gate.in_flight)
            order.append(i)
            await asyncio.sleep(0.001 * (i % 3))
            if i == 4:
                gate.limit = 1  # a cut while others wait: no new slot until in_flight < 1
            gate.release()

        await asyncio.gather(*(job(i) for i in range(20)))
        return peak, order

    peak, order = asyncio.run(go())
    assert peak == 3 and order == list(range(20))


@pytest.mark.slow  # waits out real rate windows
def test_requests_per_window_and_burst_hold_on_the_server_clock(tmp_path: Path) -> None:
    # A scaled window (3 s instead of 60 s) so the test takes seconds: 12 per window, 5 per second.
    with SimServerThread(SimConfig(seed=4)) as sim:
        spec = make_spec(
            sim.base_url,
            endpoint={"requests_per_minute": 12, "rate_window_s": 3.0, "burst": 5, "max_concurrency": 16},
            design={"personas": ["China"], "questions": list(range(1, 16)), "seeds": [1, 2], "temperature": [0.0]},
        )
        run_sweep(spec, tmp_path / "run", live=False)
        arrivals = [e.arrival_s for e in sim.log.entries()]
    assert len(check_run_dir(tmp_path / "run", spec)) == 30 == len(arrivals)
    assert max_in_window(arrivals, 3.0) == 12
    assert max_in_window(arrivals, 1.0) <= 5
    assert max(arrivals) - min(arrivals) > 2 * 3.0  # 30 requests at 12 per 3 s need more than two windows


@pytest.mark.slow  # waits for adaptive concurrency to converge on real 429s
def test_a_misconfigured_limit_converges_through_adaptive_concurrency(tmp_path: Path) -> None:
    # The server allows 20 requests per second; the client was told nothing and starts 32 at once.
    with SimServerThread(SimConfig(seed=6, burst=20)) as sim:
        spec = make_spec(
            sim.base_url,
            endpoint={"max_concurrency": 32, "max_retries": 20},
            design={
                "personas": ["China", "Japan"],
                "questions": list(range(1, 25)),
                "seeds": [1],
                "temperature": [0.0],
            },
        )
        from runner.sweep.execute import Executor

        limits_seen: list[int] = []
        original = Executor._open_endpoint

        def spy(self, config):
            endpoint = original(self, config)
            cut = endpoint.gate.on_rate_limited

            def on_rate_limited(retry_after_s: float | None = None) -> None:
                cut(retry_after_s)
                limits_seen.append(endpoint.gate.limit)

            endpoint.gate.on_rate_limited = on_rate_limited
            return endpoint

        Executor._open_endpoint = spy
        try:
            result = run_sweep(spec, tmp_path / "run", live=False)
        finally:
            Executor._open_endpoint = original
        statuses = [e.status for e in sim.log.entries()]
    assert result.failed == 0 and len(check_run_dir(tmp_path / "run", spec)) == 48
    assert 429 in statuses and limits_seen and min(limits_seen) < 32
    assert statuses.count(429) < len(statuses) / 2  # backed off instead of hammering


def _journal_dir(tmp_path: Path):
    from _runner_support import make_spec as _make_spec
    from runner.rundir import RunWriter
    from runner.sweep.session import build_manifest

    spec = _make_spec("http://memory.invalid/v1")
    return RunWriter.open_run(tmp_path / "run", build_manifest(spec), batch_rows=10)


def test_the_admissions_journal_keeps_what_a_killed_process_admitted(tmp_path: Path) -> None:
    from runner.rundir.admissions import FILE_NAME, AdmissionLog

    clock = [1000.0]
    writer = _journal_dir(tmp_path)
    log = AdmissionLog.open(writer, now=lambda: clock[0])
    journal = log.endpoint("sim", 60.001, clock_offset_s=0.0)
    first, second, _in_flight = (journal.admitted(999.0 + i, 100.0) for i in range(3))
    journal.finished(first, 999.5, 20.0)
    journal.finished(second, 1000.0, 30.0)
    # No close: the process died here, the third in flight. Add a torn line and junk, as a crash might leave.
    with open(tmp_path / "run" / FILE_NAME, "a") as f:
        f.write('["a","sim",7,"x"]\nnot json\n["f","sim",99,1000.0,5]\n["d","sim",1e999')
    writer.close()

    clock[0] = 1003.0
    writer = _journal_dir(tmp_path)
    log = AdmissionLog.open(writer, now=lambda: clock[0])
    restored = sorted(log.restored("sim"))
    assert restored == [(999.0, 999.5, 100.0, 20.0), (1000.0, 1000.0, 100.0, 30.0), (1001.0, 1003.0, 100.0, 100.0)]
    # Compacted on open: only finished admissions that still count, each once.
    lines = (tmp_path / "run" / FILE_NAME).read_text().splitlines()
    assert lines[0] == '["w","sim",60.001]' and len(lines) == 4 and all(line.startswith('["d"') for line in lines[1:])
    # Restored into a limiter (10 per 60 s, burst: no pacing): 3 of 10 are still taken.
    limiter = RateLimiter(10, None, window_s=60.0, burst=10, clock=lambda: clock[0])
    limiter.restore(log.endpoint("sim", limiter.keep_s, 0.0).restored())
    assert limiter.requests.finished_total == 3
    log.close()
    writer.close()


def test_the_admissions_journal_stays_bounded(tmp_path: Path) -> None:
    from runner.rundir.admissions import FILE_NAME, AdmissionLog

    clock = [0.0]
    writer = _journal_dir(tmp_path)
    log = AdmissionLog.open(writer, now=lambda: clock[0])
    journal = log.endpoint("sim", 1.0, clock_offset_s=0.0)
    for i in range(5_000):  # 5,000 requests, 10 ms apart, each counting for 1 s after it finished
        clock[0] = i * 0.01
        journal.finished(journal.admitted(clock[0], 1.0), clock[0], 1.0)
    lines = (tmp_path / "run" / FILE_NAME).read_text().splitlines()
    assert len(lines) <= 3 * 200 + 260  # a window holds 100 (x2 lines); compaction past 2x what it kept
    log.close()
    assert len((tmp_path / "run" / FILE_NAME).read_text().splitlines()) <= 102
    writer.close()
