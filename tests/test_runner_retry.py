"""The retry policy: which failures are retried, how long it waits, and what it tells the caller."""

from __future__ import annotations

import asyncio
import random

import pytest

from runner.errors import (
    FatalRequestError,
    Interrupted,
    RateLimited,
    ServerError,
    TransportError,
    UnreadableBody,
)
from runner.sweep.retry import RetryPolicy, backoff_s, call_with_retries, retry_after_s, should_retry

NOW = 1445412470.0  # 2015-10-21 07:27:50 UTC


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 10.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),  # a date in the past: no wait
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),  # the precise header wins
        ({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}, 360.0),
        ({"x-ratelimit-reset-tokens": "1h2m3.5s"}, 3723.5),
        ({"x-ratelimit-reset-requests": "2"}, 2.0),
        ({"anthropic-ratelimit-requests-reset": "2015-10-21T07:28:05Z"}, 15.0),
        ({"x-ratelimit-reset-requests": "soon"}, None),
        ({"Content-Type": "application/json"}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_s(headers, now=NOW) == (None if expected is None else pytest.approx(expected))


def test_only_transient_failures_are_retried() -> None:
    for exc in (RateLimited("x"), ServerError("x"), TransportError("x"), UnreadableBody("x")):
        assert should_retry(exc)
    for exc in (FatalRequestError("x"), Interrupted("x"), ValueError("x")):
        assert not should_retry(exc)


def test_backoff_is_full_jitter_exponential_capped_and_never_below_the_servers_wait() -> None:
    policy = RetryPolicy(max_retries=10, initial_s=0.5, max_wait_s=4.0)
    rng = random.Random(1)
    for attempt, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)]:
        waits = [backoff_s(attempt, policy, None, rng) for _ in range(2000)]
        assert min(waits) >= 0 and max(waits) <= cap
        assert sum(waits) / len(waits) == pytest.approx(cap / 2, rel=0.08)  # uniform on [0, cap]
    assert min(backoff_s(1, policy, 7.0, rng) for _ in range(200)) == 7.0


def _run(outcomes: list[BaseException | str], policy: RetryPolicy):
    """Feed ``outcomes`` to call_with_retries; returns (result or exception, attempts, waits, retries seen)."""
    waits: list[float] = []
    seen: list[str] = []
    calls = iter(outcomes)

    async def attempt() -> str:
        outcome = next(calls)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def sleep(s: float) -> None:
        waits.append(s)

    async def go():
        try:
            return await call_with_retries(
                attempt,
                policy,
                sleep=sleep,
                rng=random.Random(0),
                on_retry=lambda exc, w: seen.append(type(exc).__name__),
            )
        except BaseException as exc:
            return exc, getattr(exc, "attempts", None)

    result, attempts = asyncio.run(go())
    return result, attempts, waits, seen


def test_retries_until_success_and_counts_attempts() -> None:
    outcomes = [RateLimited("429", retry_after_s=2.0), ServerError("503"), TransportError("reset"), "3"]
    result, attempts, waits, seen = _run(outcomes, RetryPolicy(max_retries=5))
    assert (result, attempts) == ("3", 4)
    assert seen == ["RateLimited", "ServerError", "TransportError"]
    assert waits[0] >= 2.0 and len(waits) == 3


def test_gives_up_after_max_retries_with_the_last_error() -> None:
    result, attempts, waits, _ = _run([ServerError("500")] * 3 + [UnreadableBody("<html>")], RetryPolicy(max_retries=3))
    assert isinstance(result, UnreadableBody) and attempts == 4 and len(waits) == 3


def test_fatal_errors_are_not_retried() -> None:
    result, attempts, waits, _ = _run([ServerError("500"), FatalRequestError("401")], RetryPolicy(max_retries=5))
    assert isinstance(result, FatalRequestError) and attempts == 2 and len(waits) == 1
    result, attempts, waits, _ = _run([FatalRequestError("404")], RetryPolicy(max_retries=5))
    assert isinstance(result, FatalRequestError) and attempts == 1 and waits == []


def test_no_retries_policy_makes_one_attempt() -> None:
    result, attempts, waits, _ = _run([ServerError("500")], RetryPolicy(max_retries=0))
    assert isinstance(result, ServerError) and attempts == 1 and waits == []
