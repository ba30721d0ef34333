"""The retry policy: which failures are retried, how long it waits, and what it tells the caller."""

from __future__ import annotations

import asyncio
import math
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
from runner.sweep.retry import Attempt, RetryPolicy, backoff_s, call_with_retries, retry_after_s, should_retry

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
        # Reset headers say when a window fully resets (sent on every reply): never a wait.
        ({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}, None),
        ({"x-ratelimit-reset-tokens": "1h2m3.5s"}, None),
        ({"anthropic-ratelimit-requests-reset": "2015-10-21T07:28:05Z"}, None),
        ({"Retry-After": "2", "x-ratelimit-reset-requests": "6m0s"}, 2.0),
        # Unparseable, negative or NaN: no server wait (the policy's backoff applies), never an exception.
        ({"Retry-After": "soon-ish"}, None),
        ({"Retry-After": "Wed, 31 Feb 2015 07:28:00 GMT"}, None),
        ({"Retry-After": "Wed, 21 Oct 99999 07:28:00 GMT"}, None),
        ({"Retry-After": "-5"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": ""}, None),
        ({"retry-after-ms": "soon"}, None),
        ({"retry-after-ms": "-1"}, None),
        # Huge and infinite asks are kept as asked: the policy caps them (below).
        ({"Retry-After": "86400"}, 86400.0),
        ({"Retry-After": "inf"}, float("inf")),
        ({"retry-after-ms": "1e400"}, float("inf")),
        ({"Content-Type": "application/json"}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    got = retry_after_s(headers, now=NOW)
    if expected is None or math.isinf(expected):
        assert got == expected
    else:
        assert got == pytest.approx(expected)


@pytest.mark.parametrize("asked", [86400.0, float("inf"), 1e300])
def test_huge_server_waits_are_capped_at_max_retry_wait_s(asked: float) -> None:
    policy = RetryPolicy(max_retries=3, max_retry_wait_s=300.0)
    assert backoff_s(1, policy, asked, random.Random(1)) == 300.0
    assert backoff_s(60, policy, None, random.Random(1)) <= policy.max_wait_s  # no overflow deep into retries
    result, attempts, waits, _ = _run([ServerError("503", retry_after_s=asked), "3"], policy)
    assert (result, attempts, waits) == ("3", 2, [300.0])


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

    async def attempt() -> Attempt[str]:
        outcome = next(calls)
        return Attempt(error=outcome) if isinstance(outcome, BaseException) else Attempt(outcome)

    async def sleep(s: float) -> None:
        waits.append(s)

    async def go():
        tried = await call_with_retries(
            attempt,
            policy,
            sleep=sleep,
            rng=random.Random(0),
            on_retry=lambda exc, w: seen.append(type(exc).__name__),
        )
        return tried.last.error or tried.last.value, tried.attempts

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
