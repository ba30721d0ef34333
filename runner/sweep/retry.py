"""The one retry policy: which failures to retry, how long to wait, and the tenacity loop that does it.

Retried: HTTP 429, 408 and 5xx, connection errors, timeouts and unreadable bodies (``RetryableError``).
Waits are full-jitter exponential (``initial_s * 2**n`` capped at ``max_wait_s``, uniformly drawn from 0 to
that) but never shorter than what the server asked for in ``Retry-After`` (seconds or HTTP date) or
``retry-after-ms``, itself capped at ``max_retry_wait_s`` (a server asking for a day, or for ``inf``, gets the
cap and a note). A value that does not parse (``soon-ish``, an impossible date, a negative number, NaN) is no
wait at all: the policy's own backoff applies. The ``x-ratelimit-reset-*`` (OpenAI) and
``anthropic-ratelimit-*-reset`` headers are NOT waits: they say when a window fully resets, arrive on every
reply, and would stall every retry of a 5xx for minutes. Nothing else in hofcat sleeps to retry.

Outcomes are values: an attempt returns an ``Attempt`` (its value, or the ``RequestError`` it failed with),
and ``call_with_retries`` returns a ``Tried`` (the last attempt and how many were made), never an exception
with attributes set on it.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING, Generic, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt

from runner.errors import RequestError, RetryableError

if TYPE_CHECKING:
    from runner.sweep.spec import EndpointConfig

T = TypeVar("T")

MAX_RETRY_WAIT_S = 300.0  # default cap on a server-requested wait


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts and backoff of the retry loop (seconds)."""

    max_retries: int = 6  # attempts after the first
    initial_s: float = 0.5
    max_wait_s: float = 60.0  # cap of the policy's own backoff
    max_retry_wait_s: float = MAX_RETRY_WAIT_S  # cap of a wait the server asks for (Retry-After)

    @classmethod
    def of(cls, endpoint: EndpointConfig) -> RetryPolicy:
        """The policy of one spec endpoint (its ``max_retries`` and ``max_retry_wait_s``)."""
        return cls(endpoint.max_retries, max_retry_wait_s=endpoint.max_retry_wait_s)

    def server_wait_s(self, server_s: float | None) -> float | None:
        """The server's requested wait (seconds) capped at ``max_retry_wait_s``; None when it asked none."""
        return None if server_s is None else min(server_s, self.max_retry_wait_s)

    def describe(self) -> dict[str, object]:
        """The policy as plain data, for the run manifest."""
        return {
            "max_retries": self.max_retries,
            "initial_s": self.initial_s,
            "max_wait_s": self.max_wait_s,
            "max_retry_wait_s": self.max_retry_wait_s,
            "backoff": "full-jitter exponential, at least the server's Retry-After (capped at max_retry_wait_s)",
            "waits_from": ["Retry-After", "retry-after-ms"],
            "retried": ["429", "408", "5xx", "connection errors", "timeouts", "unreadable bodies"],
        }


def should_retry(exc: BaseException) -> bool:
    """True for failures another attempt may cure (429, 408, 5xx, transport errors, unreadable bodies)."""
    return isinstance(exc, RetryableError)


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms``, else ``Retry-After``); None if it asks nothing usable.

    ``now`` is the Unix time used for HTTP dates (defaults to the current time). Unparseable, negative and
    NaN values are None (the caller's backoff applies); a date in the past is 0; ``inf`` stays ``inf`` (the
    policy caps it). Reset headers (``x-ratelimit-reset-*``, ``anthropic-ratelimit-*-reset``) are ignored.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lower:
        return _nonneg(_float(lower["retry-after-ms"]), 0.001)
    if "retry-after" not in lower:
        return None
    value = lower["retry-after"].strip()
    seconds = _float(value)
    if seconds is not None:
        return _nonneg(seconds)
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):  # 'soon-ish', 'Feb 30', a year past 9999
        return None
    if parsed.tzinfo is None:  # "-0000": UTC, of unknown local offset
        parsed = parsed.replace(tzinfo=UTC)
    return max(0.0, parsed.timestamp() - (now if now is not None else time.time()))


def backoff_s(attempt: int, policy: RetryPolicy, server_s: float | None, rng: random.Random) -> float:
    """Wait before attempt ``attempt + 1`` (attempt counts from 1): jittered exponential, at least ``server_s``."""
    cap = min(policy.max_wait_s, policy.initial_s * 2 ** min(attempt - 1, 64))
    return max(rng.uniform(0.0, cap), policy.server_wait_s(server_s) or 0.0)


@dataclass(slots=True)  # not frozen: one is made per attempt, and a frozen __init__ costs ~5× a plain one
class Attempt(Generic[T]):
    """One attempt's result: its value, or the request error it failed with; seconds its request took (None:
    never sent)."""

    value: T | None = None
    error: RequestError | None = None
    latency_s: float | None = None

    @property
    def retryable(self) -> bool:
        """True when the attempt failed in a way another attempt may cure (``should_retry``)."""
        return self.error is not None and should_retry(self.error)


@dataclass(slots=True)  # not frozen, as Attempt: one per cell
class Tried(Generic[T]):
    """How a call under the retry policy ended: its last attempt, and how many attempts were made (from 1)."""

    last: Attempt[T]
    attempts: int


async def attempting(request: Awaitable[T], clock: Callable[[], float] = time.monotonic) -> Attempt[T]:
    """Await ``request``; its value, or the ``RequestError`` it raised, as an ``Attempt`` with its duration."""
    t0 = clock()
    try:
        value = await request
    except RequestError as exc:
        return Attempt(None, exc, clock() - t0)
    return Attempt(value, None, clock() - t0)


async def call_with_retries(
    attempt: Callable[[], Awaitable[Attempt[T]]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]],
    on_retry: Callable[[RequestError, float], None] = lambda error, wait_s: None,
    rng: random.Random | None = None,
    first: Attempt[T] | None = None,
) -> Tried[T]:
    """Run ``attempt`` until it succeeds or fails for good; how it ended (a value, never an exception).

    ``attempt`` returns each try's result as an ``Attempt``; one that failed ``retryable`` is tried again under
    ``policy``. Anything ``attempt`` raises (a stop, a defect) passes through. ``sleep`` does the waiting (the
    executor's sleep stops early on Ctrl-C); ``on_retry(error, wait_s)`` is told of every retry. ``first``: the
    first attempt, when the caller made it already (the executor's lean path); the loop goes on from it.
    """
    rng = rng or random.Random()
    if first is None:
        first = await attempt()  # most calls succeed at once: the first attempt needs no retry machinery
    if not first.retryable or policy.max_retries == 0:
        return Tried(first, 1)
    wait_s = backoff_s(1, policy, first.error.retry_after_s, rng)  # type: ignore[union-attr]
    on_retry(first.error, wait_s)  # type: ignore[arg-type]
    await sleep(wait_s)
    attempts = 1

    async def counted() -> Attempt[T]:
        nonlocal attempts
        attempts += 1
        return await attempt()

    def wait(state: RetryCallState) -> float:  # tenacity numbers from 1; this loop starts at attempt 2
        error = state.outcome.result().error
        return backoff_s(state.attempt_number + 1, policy, error.retry_after_s, rng)

    def before_sleep(state: RetryCallState) -> None:
        on_retry(state.outcome.result().error, state.upcoming_sleep)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_retries),
        wait=wait,
        retry=retry_if_result(lambda result: result.retryable),
        before_sleep=before_sleep,
        sleep=sleep,
        retry_error_callback=lambda state: state.outcome.result(),  # out of retries: the last attempt, as a value
    )
    return Tried(await retrying(counted), attempts)


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _nonneg(value: float | None, scale: float = 1.0) -> float | None:
    """``value * scale`` when it is a wait (>= 0, not NaN; inf kept for the cap), else None."""
    if value is None or math.isnan(value) or value < 0:
        return None
    return value * scale
