"""The simulator's request budget: sliding-window limits per minute and per second on accepted requests."""

from __future__ import annotations

from collections import deque


class SlidingWindow:
    """At most ``limit`` accepted events in any ``window_s``-second window (times in seconds, monotonic)."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._times: deque[float] = deque()

    def wait_s(self, now: float) -> float:
        """Seconds until one more event fits; 0.0 when it fits now."""
        times = self._times
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if len(times) < self.limit:
            return 0.0
        return times[len(times) - self.limit] + self.window_s - now

    def remaining(self, now: float) -> int:
        """How many more events fit now."""
        self.wait_s(now)
        return max(0, self.limit - len(self._times))

    def record(self, now: float) -> None:
        """Count one accepted event at ``now``."""
        self._times.append(now)


class RequestBudget:
    """Requests-per-minute and per-second burst limits; a rejected request does not use the budget."""

    def __init__(self, requests_per_minute: int | None, burst: int | None) -> None:
        self.minute = SlidingWindow(requests_per_minute, 60.0) if requests_per_minute else None
        self.second = SlidingWindow(burst, 1.0) if burst else None

    def try_acquire(self, now: float) -> float:
        """Accept a request at ``now`` (returns 0.0) or return the seconds to wait before retrying."""
        wait = max((w.wait_s(now) for w in (self.minute, self.second) if w is not None), default=0.0)
        if wait > 0.0:
            return wait
        for window in (self.minute, self.second):
            if window is not None:
                window.record(now)
        return 0.0

    def headers(self, now: float, wait_s: float) -> dict[str, str]:
        """OpenAI-style rate-limit headers describing the per-minute budget at ``now``."""
        if self.minute is None:
            return {}
        reset_s = max(wait_s, self.minute.wait_s(now))
        return {
            "x-ratelimit-limit-requests": str(self.minute.limit),
            "x-ratelimit-remaining-requests": str(self.minute.remaining(now)),
            "x-ratelimit-reset-requests": f"{reset_s:.3f}s",
        }
