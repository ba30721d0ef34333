"""The simulator's budgets: sliding-window limits on accepted requests (per minute, per second) and tokens.

A request that does not fit is answered 429 and uses no budget. Token weights follow OpenAI's rule: the
prompt's tokens plus ``max_tokens`` (the most the reply may use), counted when the request is accepted.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass


class SlidingWindow:
    """At most ``limit`` units (requests, tokens) accepted in any ``window_s``-second window (monotonic s)."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._events: deque[tuple[float, int]] = deque()
        self._used = 0

    def _expire(self, now: float) -> None:
        events = self._events
        while events and events[0][0] <= now - self.window_s:
            self._used -= events.popleft()[1]

    def wait_s(self, now: float, units: int = 1) -> float:
        """Seconds until ``units`` more fit (0.0: they fit now; inf: they never fit)."""
        self._expire(now)
        if units > self.limit:
            return math.inf
        excess = self._used + units - self.limit
        if excess <= 0:
            return 0.0
        for time, weight in self._events:  # oldest first: wait until enough of them have left the window
            excess -= weight
            if excess <= 0:
                return time + self.window_s - now
        return math.inf  # unreachable: the window holds at least `excess` units

    def reset_s(self, now: float) -> float:
        """Seconds until the window is empty again (everything accepted so far has left it)."""
        self._expire(now)
        return self._events[-1][0] + self.window_s - now if self._events else 0.0

    def remaining(self, now: float) -> int:
        """How many more units fit now."""
        self._expire(now)
        return max(0, self.limit - self._used)

    def record(self, now: float, units: int = 1) -> None:
        """Count ``units`` accepted at ``now``."""
        self._events.append((now, units))
        self._used += units


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request did not fit: the budget (``requests`` or ``tokens``) and the seconds to wait (inf: never)."""

    budget: str
    wait_s: float


class RequestBudget:
    """Requests per minute, requests per second (burst) and tokens per minute; None = unlimited."""

    def __init__(
        self, requests_per_minute: int | None, burst: int | None, tokens_per_minute: int | None = None
    ) -> None:
        self.minute = SlidingWindow(requests_per_minute, 60.0) if requests_per_minute else None
        self.second = SlidingWindow(burst, 1.0) if burst else None
        self.tokens = SlidingWindow(tokens_per_minute, 60.0) if tokens_per_minute else None

    def try_acquire(self, now: float, tokens: int) -> Refusal | None:
        """Accept a request of ``tokens`` tokens at ``now`` (returns None) or say which budget refuses it."""
        refusal = None
        for name, window, units in (
            ("requests", self.minute, 1),
            ("requests", self.second, 1),
            ("tokens", self.tokens, tokens),
        ):
            if window is not None:
                wait = window.wait_s(now, units)
                if wait > 0.0 and (refusal is None or wait > refusal.wait_s):
                    refusal = Refusal(name, wait)
        if refusal is not None:
            return refusal
        for window, units in ((self.minute, 1), (self.second, 1), (self.tokens, tokens)):
            if window is not None:
                window.record(now, units)
        return None

    def headers(self, now: float) -> dict[str, str]:
        """OpenAI-style x-ratelimit-* headers of the per-minute budgets at ``now`` (reset = until fully reset)."""
        out: dict[str, str] = {}
        for name, window in (("requests", self.minute), ("tokens", self.tokens)):
            if window is not None:
                out[f"x-ratelimit-limit-{name}"] = str(window.limit)
                out[f"x-ratelimit-remaining-{name}"] = str(window.remaining(now))
                out[f"x-ratelimit-reset-{name}"] = f"{window.reset_s(now):.3f}s"
        return out
