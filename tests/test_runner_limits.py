"""Rate limits and adaptive concurrency: exact on a fake clock, and measured on the simulator's clock."""

from __future__ import annotations

import asyncio
import heapq
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
    limiter = RateLimiter(3, None, window_s=10.0, clock=fake.clock)
    starts = _admissions(limiter, fake, [0.0] * 6, [1.0, 2.0, 5.0, 0.0, 0.0, 0.0])
    guard = 0.001
    assert starts[:3] == [0.0, 0.0, 0.0]
    assert starts[3] == pytest.approx(1.0 + 10.0 + guard)  # the first response came at 1 s
    assert starts[4] == pytest.approx(2.0 + 10.0 + guard)
    assert starts[5] == pytest.approx(5.0 + 10.0 + guard)


def test_token_window_charges_estimates_then_the_reported_usage() -> None:
    fake = FakeTime()
    limiter = RateLimiter(None, 1000, window_s=10.0, clock=fake.clock)

    async def go() -> list[float]:
        first = await limiter.acquire(600, fake.sleep)
        fake.finish_later(first, limiter, 1.0, tokens=100)  # the server reported far fewer tokens than estimated
        second = await limiter.acquire(600, fake.sleep)  # 600 in flight + 600 > 1000: waits for the first's usage
        t_second = fake.now
        fake.finish_later(second, limiter, 0.0, tokens=600)
        await limiter.acquire(600, fake.sleep)  # 100 + 600 + 600 > 1000: waits until the first leaves the window
        return [t_second, fake.now]

    t_second, t_third = asyncio.run(go())
    assert t_second == pytest.approx(1.0) and t_third == pytest.approx(1.0 + 10.001)


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
