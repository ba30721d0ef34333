"""Per-endpoint rate limits (requests and tokens per window) and adaptive concurrency (AIMD).

Rate limits are sliding windows that hold on the server's clock, not token buckets (a bucket of capacity B
refilled at R per minute lets B + R requests through some 60-second window). The server sees a request at
some moment between our admitting it and our receiving its response; we cannot know when. So a request
counts against its window from admission until ``window_s`` after its response (or failure): if request j
is admitted, every request i the server may place within ``window_s`` of j is still counted, hence no
server-side window ever holds more than the limit, whatever the network or scheduling jitter. The price is
throughput: a limit of R per window sustains R per (window + latency).

Token windows charge the estimate while a request is in flight and the ``usage`` the server reported after.

``AdaptiveConcurrency`` caps requests in flight: it halves the cap on a 429 (at most once per
``cooldown_s``) and raises it by one after a cap's worth of successes, between 1 and ``max_concurrency``;
while the server's ``Retry-After`` runs, no new attempt starts on that endpoint.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

GUARD_S = 0.001  # clock granularity guard added to every window
POLL_S = 0.01  # when only requests in flight could make room: look again after this long


class _Window:
    """Charges in flight plus charges of finished requests kept until ``window_s`` after they finished."""

    def __init__(self, limit: float, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s + GUARD_S
        self.in_flight = 0.0
        self.finished: deque[tuple[float, float]] = deque()  # (finish time, charge), in finish order
        self.finished_total = 0.0

    def wait_s(self, now: float, charge: float) -> float:
        """Seconds until ``charge`` more fits (0 if it fits now; an over-size charge fits an empty window)."""
        cutoff = now - self.window_s
        while self.finished and self.finished[0][0] <= cutoff:
            self.finished_total -= self.finished.popleft()[1]
        excess = self.in_flight + self.finished_total + charge - self.limit
        if excess <= 1e-9 or (self.in_flight <= 0 and not self.finished):
            return 0.0
        freed = 0.0
        for end, amount in self.finished:
            freed += amount
            if freed >= excess - 1e-9:
                return end + self.window_s - now
        return POLL_S

    def finish(self, now: float, charged: float, actual: float) -> None:
        self.in_flight -= charged
        self.finished.append((now, actual))
        self.finished_total += actual


@dataclass(slots=True)
class Ticket:
    """An admitted request's charges, returned to ``RateLimiter.release`` when it finishes."""

    tokens: float


class RateLimiter:
    """Requests per window, requests per 1-second burst and tokens per window for one endpoint (None = no limit)."""

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
        self.unlimited = self.requests is None and self.burst is None and self.tokens is None
        self._lock = asyncio.Lock()  # first come, first served: one waiter at the head of the line

    async def acquire(self, tokens: float, sleep: Callable[[float], Awaitable[None]]) -> Ticket | None:
        """Wait until a request estimated at ``tokens`` fits every window and admit it.

        Every admitted request must be ``release``d when it finishes, failed or not. None when unlimited.
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
            for window, charge in self._windows(tokens):
                window.in_flight += charge
            return Ticket(tokens)

    def release(self, ticket: Ticket | None, tokens: float | None = None) -> None:
        """The admitted request finished now; ``tokens`` it used if the server said (else the estimate stays)."""
        if ticket is None:
            return
        now = self.clock()
        for window, charge in self._windows(ticket.tokens):
            actual = tokens if (window is self.tokens and tokens is not None) else charge
            window.finish(now, charge, actual)

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

    def __init__(
        self, max_concurrency: int, *, cooldown_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max = max_concurrency
        self.limit = max_concurrency
        self.in_flight = 0
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._last_cut = float("-inf")
        self._successes = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._resume_at = float("-inf")

    def try_acquire(self) -> bool:
        """Take a slot at once if one is free and no pause runs (no waiting); True if taken."""
        if self.in_flight < self.limit and not self._waiters and self._resume_at <= self.clock():
            self.in_flight += 1
            return True
        return False

    async def acquire(self, sleep: Callable[[float], Awaitable[None]]) -> None:
        """Wait out a server-requested pause, then for a free slot under the current cap (first come, first served)."""
        while (pause := self._resume_at - self.clock()) > 0:
            await sleep(pause)
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # resolved by _wake with the slot already counted
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.in_flight -= 1  # woken and cancelled at once: give the slot back
                self._wake()
            else:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        """Free a slot and hand it to the next waiter, if the cap allows."""
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def on_rate_limited(self, retry_after_s: float | None = None) -> None:
        """A 429: pause new attempts for the server's ``retry_after_s``; halve the cap unless cut < cooldown_s ago."""
        now = self.clock()
        if retry_after_s:
            self._resume_at = max(self._resume_at, now + retry_after_s)
        if now - self._last_cut >= self.cooldown_s:
            self.limit = max(1, self.limit // 2)
            self._last_cut = now
            self._successes = 0

    def on_success(self) -> None:
        """A success: after ``limit`` of them in a row, raise the cap by one (up to the maximum)."""
        if self.limit >= self.max:
            return
        self._successes += 1
        if self._successes >= self.limit:
            self._successes = 0
            self.limit += 1
            self._wake()
