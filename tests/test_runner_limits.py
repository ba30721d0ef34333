"""Rate limits and adaptive concurrency: exact on a fake clock, and measured on the simulator's clock."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from _runner_support import check_run_dir, make_spec

from runner.limits import AdaptiveConcurrency, RateLimiter
from runner.sim import SimConfig, SimServerThread, max_in_window
from runner.sweep import run_sweep


class FakeTime:
    """A clock that only moves when the limiter sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _starts(limiter: RateLimiter, fake: FakeTime, charges: list[int], gaps: list[float]) -> list[float]:
    async def go() -> list[float]:
        out = []
        for charge, gap in zip(charges, gaps, strict=True):
            fake.now += gap
            await limiter.acquire(charge, fake.sleep)
            out.append(fake.now)
        return out

    return asyncio.run(go())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sliding_windows_never_exceed_the_limits(seed: int) -> None:
    rng = random.Random(seed)
    fake = FakeTime()
    limiter = RateLimiter(30, None, window_s=60.0, burst=4, clock=fake.clock)
    times = _starts(limiter, fake, [1] * 200, [rng.expovariate(2.0) for _ in range(200)])
    assert max_in_window(times, 60.0) == 30  # the limit is reached, never passed
    assert max_in_window(times, 1.0) == 4
    # Not slower than it must be: the 31st request starts as soon as the first leaves the (widened) window.
    assert times[30] - times[0] == pytest.approx(60.0 * 1.02 + 0.01, abs=1e-6)


def test_token_window_charges_estimates_then_the_reported_usage() -> None:
    fake = FakeTime()
    limiter = RateLimiter(None, 1000, window_s=10.0, clock=fake.clock)

    async def go() -> list[float]:
        first = await limiter.acquire(600, fake.sleep)
        limiter.correct(first, 100)  # the server reported far fewer tokens than estimated
        await limiter.acquire(600, fake.sleep)  # 100 + 600 fits: no wait
        t_second = fake.now
        await limiter.acquire(600, fake.sleep)  # 700 + 600 does not: waits for the first to leave
        return [t_second, fake.now]

    t_second, t_third = asyncio.run(go())
    assert t_second == 0.0 and t_third == pytest.approx(10.0 * 1.02 + 0.01)


def test_adaptive_concurrency_halves_on_429_and_recovers() -> None:
    fake = FakeTime()
    gate = AdaptiveConcurrency(16, cooldown_s=1.0, clock=fake.clock)
    gate.on_rate_limited()
    gate.on_rate_limited()  # the same burst of 429s: one cut
    assert gate.limit == 8
    fake.now = 2.0
    gate.on_rate_limited()
    assert gate.limit == 4

    async def successes(n: int) -> None:
        for _ in range(n):
            await gate.on_success()

    asyncio.run(successes(4 + 5 + 6))  # +1 after a cap's worth of successes: 4 → 5 → 6 → 7
    assert gate.limit == 7
    asyncio.run(successes(1000))
    assert gate.limit == 16


def test_requests_per_window_and_burst_hold_on_the_server_clock(tmp_path: Path) -> None:
    # A scaled window (3 s instead of 60 s) so the test takes seconds: 12 per window, 5 per second.
    with SimServerThread(SimConfig(seed=4)) as sim:
        spec = make_spec(sim.base_url, endpoint={"requests_per_minute": 12, "rate_window_s": 3.0, "burst": 5,
                                                 "max_concurrency": 16},
                         design={"personas": ["China"], "questions": list(range(1, 16)), "seeds": [1, 2],
                                 "temperature": [0.0]})
        run_sweep(spec, tmp_path / "run", live=False)
        arrivals = [e.arrival_s for e in sim.log.entries()]
    assert len(check_run_dir(tmp_path / "run", spec)) == 30 == len(arrivals)
    assert max_in_window(arrivals, 3.0) == 12
    assert max_in_window(arrivals, 1.0) <= 5
    assert max(arrivals) - min(arrivals) > 2 * 3.0  # 30 requests at 12 per 3 s need more than two windows


def test_a_misconfigured_limit_converges_through_adaptive_concurrency(tmp_path: Path) -> None:
    # The server allows 20 requests per second; the client was told nothing and starts 32 at once.
    with SimServerThread(SimConfig(seed=6, burst=20)) as sim:
        spec = make_spec(sim.base_url, endpoint={"max_concurrency": 32, "max_retries": 20},
                         design={"personas": ["China", "Japan"], "questions": list(range(1, 25)), "seeds": [1],
                                 "temperature": [0.0]})
        from runner.execute import Executor

        limits_seen: list[int] = []
        original = Executor._open_endpoint

        def spy(self, config):
            endpoint = original(self, config)
            cut = endpoint.gate.on_rate_limited

            def on_rate_limited() -> None:
                cut()
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
