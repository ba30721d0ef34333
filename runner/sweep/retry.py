"""The one retry policy: which failures to retry, how long to wait, and the tenacity loop that does it.

Retried: HTTP 429, 408 and 5xx, connection errors, timeouts and unreadable bodies (``RetryableError``).
Waits are full-jitter exponential (``initial_s * 2**n`` capped at ``max_wait_s``, uniformly drawn from 0 to
that) but never shorter than what the server asked for in ``Retry-After`` (seconds or HTTP date),
``retry-after-ms`` or the ``x-ratelimit-reset-*`` / ``anthropic-ratelimit-*-reset`` headers. Nothing else in
hofcat sleeps to retry.
"""

from __future__ import annotations

import email.utils
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from runner.errors import RetryableError

T = TypeVar("T")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts and backoff of the retry loop (seconds)."""

    max_retries: int = 6  # attempts after the first
    initial_s: float = 0.5
    max_wait_s: float = 60.0

    def describe(self) -> dict[str, object]:
        """The policy as plain data, for the run manifest."""
        return {
            "max_retries": self.max_retries,
            "initial_s": self.initial_s,
            "max_wait_s": self.max_wait_s,
            "backoff": "full-jitter exponential, at least the server's Retry-After",
            "retried": ["429", "408", "5xx", "connection errors", "timeouts", "unreadable bodies"],
        }


def should_retry(exc: BaseException) -> bool:
    """True for failures another attempt may cure (429, 408, 5xx, transport errors, unreadable bodies)."""
    return isinstance(exc, RetryableError)


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks us to wait, from the first of its rate-limit headers present; None if none.

    ``now`` is the Unix time used for absolute dates (defaults to the current time).
    """
    lower = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lower:
        return _nonneg(_float(lower["retry-after-ms"]), 0.001)
    if "retry-after" in lower:
        value = lower["retry-after"].strip()
        seconds = _float(value)
        if seconds is None:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            seconds = None if parsed is None else parsed.timestamp() - (now if now is not None else time.time())
        return _nonneg(seconds)
    resets = [_duration(v) for k, v in lower.items() if k.startswith("x-ratelimit-reset")]
    resets += [_until(v, now) for k, v in lower.items() if k.startswith("anthropic-ratelimit") and k.endswith("-reset")]
    found = [r for r in resets if r is not None]
    return max(found) if found else None


def backoff_s(attempt: int, policy: RetryPolicy, server_s: float | None, rng: random.Random) -> float:
    """Wait before attempt ``attempt + 1`` (attempt counts from 1): jittered exponential, at least ``server_s``."""
    cap = min(policy.max_wait_s, policy.initial_s * 2 ** (attempt - 1))
    return max(rng.uniform(0.0, cap), server_s or 0.0)


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]],
    on_retry: Callable[[BaseException, float], None] = lambda exc, wait_s: None,
    rng: random.Random | None = None,
) -> tuple[T, int]:
    """Run ``attempt`` until it succeeds or fails for good; returns (result, attempts made).

    A final failure re-raises the last exception with ``attempts`` set on it. ``sleep`` does the waiting
    (the executor's sleep stops early on Ctrl-C); ``on_retry(exc, wait_s)`` is told of every retry.
    """
    rng = rng or random.Random()
    try:  # most calls succeed at once: the first attempt needs no retry machinery
        return await attempt(), 1
    except BaseException as exc:
        if not should_retry(exc) or policy.max_retries == 0:
            exc.attempts = 1  # type: ignore[attr-defined]
            raise
        first = exc
    wait_s = backoff_s(1, policy, first.retry_after_s, rng)  # type: ignore[attr-defined]
    on_retry(first, wait_s)
    await sleep(wait_s)

    def wait(state: RetryCallState) -> float:  # tenacity numbers from 1; this loop starts at attempt 2
        exc = state.outcome.exception()
        return backoff_s(state.attempt_number + 1, policy, getattr(exc, "retry_after_s", None), rng)

    def before_sleep(state: RetryCallState) -> None:
        on_retry(state.outcome.exception(), state.upcoming_sleep)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_retries),
        wait=wait,
        retry=retry_if_exception(should_retry),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )
    attempts = 1
    try:
        async for trial in retrying:
            with trial:
                attempts = trial.retry_state.attempt_number + 1
                result = await attempt()
        return result, attempts
    except BaseException as exc:
        exc.attempts = attempts  # type: ignore[attr-defined]
        raise


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _nonneg(value: float | None, scale: float = 1.0) -> float | None:
    return None if value is None else max(0.0, value * scale)


def _duration(text: str) -> float | None:
    """OpenAI-style reset durations: '1s', '6m0s', '20ms', '1h2m3.5s', or bare seconds."""
    text = text.strip()
    plain = _float(text)
    if plain is not None:
        return max(0.0, plain)
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _until(text: str, now: float | None) -> float | None:
    """Seconds until an RFC 3339 timestamp (Anthropic's reset headers)."""
    try:
        moment = datetime.fromisoformat(text.strip())  # Python 3.11 reads a trailing "Z" as UTC
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (now if now is not None else time.time()))
