"""Per-endpoint rate limits (requests and tokens per window) and adaptive concurrency (AIMD).

Rate limits are exact sliding windows, not token buckets: a bucket of capacity B refilled at R per minute
lets B + R requests through some 60-second window, a sliding log never more than R. A request may start
when fewer than ``requests_per_window`` requests started in the last ``window_s``, fewer than ``burst``
in the last second, and the tokens charged in the last ``window_s`` plus its estimate fit
``tokens_per_window``. Its charge is corrected to the ``usage`` the server reports. Windows are widened by
``MARGIN`` so that scheduling jitter between our clock and the server's does not push a window over.

``AdaptiveConcurrency`` caps requests in flight: it halves the cap on a 429 (at most once per
``cooldown_s``) and raises it by one after a cap's worth of successes, between 1 and ``max_concurrency``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable

MARGIN = 0.02  # windows are widened by 2 %, and at least 10 ms, against clock and scheduling jitter
MIN_MARGIN_S = 0.01


class _Window:
    """A sliding log of (start time, charge) with the running total of charges inside the window."""

    def __init__(self, limit: float, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s * (1 + MARGIN) + MIN_MARGIN_S
        self.entries: deque[list[float]] = deque()  # [time, charge, live]: lists so charges can be corrected
        self.total = 0.0

    def _expire(self, now: float) -> None:
        cutoff = now - self.window_s
        while self.entries and self.entries[0][0] <= cutoff:
            entry = self.entries.popleft()
            self.total -= entry[1]
            entry[2] = 0.0

    def wait_s(self, now: float, charge: float) -> float:
        """Seconds until ``charge`` more fits (0 if it fits now)."""
        self._expire(now)
        excess = self.total + charge - self.limit
        if excess <= 1e-9 or not self.entries:
            return 0.0  # an over-size charge goes alone into an empty window rather than never
        freed = 0.0
        for start, amount, _ in self.entries:
            freed += amount
            if freed >= excess - 1e-9:
                return start + self.window_s - now
        return self.entries[-1][0] + self.window_s - now

    def add(self, now: float, charge: float) -> list[float]:
        entry = [now, charge, 1.0]
        self.entries.append(entry)
        self.total += charge
        return entry

    def correct(self, entry: list[float], charge: float) -> None:
        if entry[2]:  # still inside the window: its charge counts in the total
            self.total += charge - entry[1]
        entry[1] = charge


class RateLimiter:
    """Requests per window, a 1-second burst cap and tokens per window for one endpoint (None = unlimited)."""

    def __init__(
        self,
        requests_per_window: int | None,
        tokens_per_window: int | None = None,
        *,
        window_s: float = 60.0,
        burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.requests = None if requests_per_window is None else _Window(requests_per_window, window_s)
        self.burst = None if burst is None else _Window(burst, 1.0)
        self.tokens = None if tokens_per_window is None else _Window(tokens_per_window, window_s)
        self.clock = clock
        self._lock = asyncio.Lock()  # first come, first served: one waiter at the head of the line

    @property
    def unlimited(self) -> bool:
        """True when no limit is configured (acquire never waits)."""
        return self.requests is None and self.burst is None and self.tokens is None

    async def acquire(self, tokens: float, sleep: Callable[[float], Awaitable[None]]) -> list[float] | None:
        """Wait until a request estimated at ``tokens`` fits every window, then charge it.

        Returns the token charge's handle for ``correct`` (None without a token limit).
        """
        if self.unlimited:
            return None
        async with self._lock:
            while True:
                now = self.clock()
                wait = max(w.wait_s(now, c) for w, c in self._windows(tokens))
                if wait <= 0:
                    break
                await sleep(wait)
            if self.requests is not None:
                self.requests.add(now, 1)
            if self.burst is not None:
                self.burst.add(now, 1)
            return None if self.tokens is None else self.tokens.add(now, tokens)

    def correct(self, handle: list[float] | None, tokens: float) -> None:
        """Replace the estimated token charge of an acquired request by the ``tokens`` actually used."""
        if handle is not None and self.tokens is not None:
            self.tokens.correct(handle, tokens)

    def _windows(self, tokens: float) -> list[tuple[_Window, float]]:
        out = []
        if self.requests is not None:
            out.append((self.requests, 1.0))
        if self.burst is not None:
            out.append((self.burst, 1.0))
        if self.tokens is not None:
            out.append((self.tokens, tokens))
        return out


class AdaptiveConcurrency:
    """A concurrency cap that halves on 429s and creeps back up by one per cap's worth of successes."""

    def __init__(self, max_concurrency: int, *, cooldown_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max = max_concurrency
        self.limit = max_concurrency
        self.in_flight = 0
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._last_cut = float("-inf")
        self._successes = 0
        self._changed = asyncio.Condition()

    async def acquire(self) -> None:
        """Wait for a free slot under the current cap."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1

    async def release(self) -> None:
        """Free a slot."""
        async with self._changed:
            self.in_flight -= 1
            self._changed.notify()

    def on_rate_limited(self) -> None:
        """A 429: halve the cap, unless it was cut less than ``cooldown_s`` ago (the same burst of 429s)."""
        now = self.clock()
        if now - self._last_cut >= self.cooldown_s:
            self.limit = max(1, self.limit // 2)
            self._last_cut = now
            self._successes = 0

    async def on_success(self) -> None:
        """A success: after ``limit`` of them in a row, raise the cap by one (up to the maximum)."""
        if self.limit >= self.max:
            return
        self._successes += 1
        if self._successes >= self.limit:
            self._successes = 0
            self.limit += 1
            async with self._changed:
                self._changed.notify()
