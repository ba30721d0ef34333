"""Per-endpoint rate limits (requests and tokens per window, paced), and adaptive concurrency (AIMD).

Rate limits are sliding windows that hold on the server's clock, not token buckets (a bucket of capacity B
refilled at R per minute lets B + R requests through some 60-second window). The server sees a request at
some moment between our admitting it and our receiving its response; we cannot know when. So a request
counts against its window from admission until ``window_s`` after its response (or failure): if request j
is admitted, every request i the server may place within ``window_s`` of j is still counted, hence no
server-side window ever holds more than the limit, whatever the network or scheduling jitter. The price is
throughput: a limit of R per window sustains R per (window + latency).

Pacing: unless the endpoint sets a ``burst``, admissions are also spread evenly: request k + 1 is admitted
no sooner than ``window_s / R`` after request k (and a request charging c tokens moves the next token
admission ``c * window_s / TPM`` later), so a minute's budget does not leave in the first second. An
admission happens at most half a step after its scheduled time, so any 1 s holds at most
``1 + floor(R / 60 + 1/2)`` admissions (<= ``2 * ceil(R / 60)``). With ``burst = B`` there is no pacing and
at most B requests are admitted in any 1 s (B up front, then the window limits).

Tokens (what each provider counts toward its token limit; ``TOKEN_COUNTING``): a request is charged its
input estimate plus ``max_tokens`` at admission. OpenAI counts prompt + ``max_tokens`` at admission and
never gives the unused part back, so its charge stays the reservation (raised to the reported prompt +
``max_tokens`` when the estimate was low). Anthropic and Gemini settle on the tokens used, so the charge
becomes the reported input + output. Usage that is missing, negative, NaN or absurd (> 10^8) is unknown:
the reservation stays. Nothing a server reports can switch a limiter off.

Restarts: a ``journal`` (``runner.rundir.admissions``) is told of every admission and finish, and
``restore`` seeds the windows and pacers with the previous session's, so a resume right after a kill
keeps every window within its limit.

``AdaptiveConcurrency`` caps requests in flight: it halves the cap on a 429 (at most once per
``cooldown_s``) and raises it by one after a cap's worth of successes, between 1 and ``max_concurrency``;
while the server's ``Retry-After`` runs, no new attempt starts on that endpoint.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from runner.sweep.spec import EndpointConfig

GUARD_S = 0.001  # clock granularity guard added to every window
POLL_S = 0.01  # when only requests in flight could make room: look again after this long
MAX_PLAUSIBLE_TOKENS = 10**8  # more than any one request can use: a reported count above it is junk

# Per provider: "reserved" = the charge at admission (input estimate + max_tokens) stays in the window;
# "reported" = the charge becomes the reported input + output once the reply says.
TOKEN_COUNTING = {"openai": "reserved", "anthropic": "reported", "gemini": "reported"}


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


class _Pacer:
    """Even spacing: an admission charging c moves the next one c / ``rate`` seconds later (no bursts).

    The schedule, not the moment of admission, moves on: an admission up to half a step late (the event
    loop woke late) does not delay the ones after it, or scheduling delays would add up and cost throughput
    (30 % on a loaded machine). Later than that (the endpoint was idle), the schedule restarts from now.
    """

    def __init__(self, limit: float, window_s: float) -> None:
        self.rate = limit / window_s  # units per second
        self.next_at = -math.inf

    def wait_s(self, now: float, charge: float) -> float:
        return max(0.0, self.next_at - now)

    def admit(self, now: float, charge: float) -> None:
        step = charge / self.rate
        self.next_at = (self.next_at if now - self.next_at <= 0.5 * step else now) + step


class Journal(Protocol):
    """Where a limiter reports admissions and finishes (limiter clock), to be restored after a restart."""

    def admitted(self, now: float, tokens: float) -> int:
        """An admission charging ``tokens``; returns an id for ``finished``."""
        ...

    def finished(self, ident: int, now: float, tokens: float) -> None:
        """Admission ``ident`` finished, leaving ``tokens`` charged in the token window."""
        ...


class RestoringJournal(Journal, Protocol):
    """A journal that also gives back the admissions of earlier sessions still inside a window."""

    def restored(self) -> list[tuple[float, float, float, float]]:
        """Earlier sessions' admissions still counting: (admitted, finished, charged, settled), limiter clock."""
        ...


class Admissions(Protocol):
    """The run's admissions log (``runner.rundir.admissions.AdmissionLog``), as a limiter opens its journal."""

    def endpoint(self, name: str, keep_s: float, clock_offset_s: float) -> RestoringJournal:
        """Endpoint ``name``'s journal; ``clock_offset_s`` = Unix time minus the limiter's clock."""
        ...


@dataclass(slots=True)
class Ticket:
    """An admitted request's charges, returned to ``RateLimiter.release`` when it finishes."""

    tokens: float
    output_reserve: float = 0.0  # the max_tokens part of ``tokens``
    ident: int = -1  # the journal's id of this admission


class RateLimiter:
    """Requests and tokens per window for one endpoint, paced evenly unless a 1-s ``burst`` is set (None = no limit)."""

    def __init__(
        self,
        requests_per_window: int | None,
        tokens_per_window: int | None = None,
        *,
        window_s: float = 60.0,
        burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        token_counting: str = "reserved",
        journal: Journal | None = None,
    ) -> None:
        self.requests = None if requests_per_window is None else _Window(requests_per_window, window_s)
        self.burst = None if burst is None else _Window(burst, 1.0)
        self.tokens = None if tokens_per_window is None else _Window(tokens_per_window, window_s)
        paced = burst is None
        self.request_pacer = _Pacer(requests_per_window, window_s) if paced and requests_per_window else None
        self.token_pacer = _Pacer(tokens_per_window, window_s) if paced and tokens_per_window else None
        if token_counting not in ("reserved", "reported"):
            raise ValueError(f"token_counting = {token_counting!r}: must be 'reserved' or 'reported'")
        self.token_counting = token_counting
        self.journal = journal
        self.clock = clock
        self.unlimited = self.requests is None and self.burst is None and self.tokens is None
        self._lock = asyncio.Lock()  # first come, first served: one waiter at the head of the line

    @classmethod
    def of(
        cls,
        endpoint: EndpointConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        admissions: Admissions | None = None,
    ) -> RateLimiter:
        """``endpoint``'s limits (per window, burst, its provider's token counting); with ``admissions`` (the run's
        ``runner.rundir.admissions.AdmissionLog``) it honours what earlier sessions admitted and journals its own."""
        limiter = cls(
            endpoint.requests_per_minute,
            endpoint.tokens_per_minute,
            window_s=endpoint.rate_window_s,
            burst=endpoint.burst,
            clock=clock,
            token_counting=TOKEN_COUNTING.get(endpoint.provider, "reserved"),
        )
        if admissions is not None and not limiter.unlimited:
            limiter.attach(admissions.endpoint(endpoint.name, limiter.keep_s, time.time() - clock()))
        return limiter

    def attach(self, journal: RestoringJournal) -> None:
        """Seed the windows with what ``journal`` restored from earlier sessions; record every admission to it."""
        self.restore(journal.restored())
        self.journal = journal

    @property
    def keep_s(self) -> float:
        """How long a finished request still counts in some window (seconds): what a journal must keep."""
        return max((w.window_s for w, _ in self._windows(0.0)), default=0.0)

    async def acquire(
        self, tokens: float, sleep: Callable[[float], Awaitable[None]], *, output_reserve: float = 0.0
    ) -> Ticket | None:
        """Wait until a request charging ``tokens`` (of which ``output_reserve`` is max_tokens) fits; admit it.

        Every admitted request must be ``release``d when it finishes, failed or not. None when unlimited.
        """
        if self.unlimited:
            return None
        async with self._lock:
            while True:
                now = self.clock()
                wait = max(w.wait_s(now, c) for w, c in self._gates(tokens))
                if wait <= 0:
                    break
                await sleep(wait)
            for window, charge in self._windows(tokens):
                window.in_flight += charge
            for pacer, charge in self._pacers(tokens):
                pacer.admit(now, charge)
            ident = -1 if self.journal is None else self.journal.admitted(now, tokens)
            return Ticket(tokens, output_reserve, ident)

    def release(self, ticket: Ticket | None, input_tokens: object = None, output_tokens: object = None) -> None:
        """The admitted request finished now, with the usage its reply reported (None: no reply, or not said)."""
        if ticket is None:
            return
        now = self.clock()
        settled = self.settled_tokens(ticket, input_tokens, output_tokens)
        for window, charge in self._windows(ticket.tokens):
            window.finish(now, charge, settled if window is self.tokens else charge)
        if self.journal is not None:
            self.journal.finished(ticket.ident, now, settled)

    def settled_tokens(self, ticket: Ticket, input_tokens: object, output_tokens: object) -> float:
        """What the provider counts for a finished request (``TOKEN_COUNTING``); the reservation when unsure."""
        used_in = input_tokens if _plausible(input_tokens) else None
        used_out = output_tokens if _plausible(output_tokens) else None
        if self.token_counting == "reserved":
            return ticket.tokens if used_in is None else max(ticket.tokens, used_in + ticket.output_reserve)
        if used_in is None or used_out is None:
            return ticket.tokens
        return float(used_in + used_out)

    def restore(self, admissions: Iterable[tuple[float, float, float, float]]) -> None:
        """Seed windows and pacers with a previous session's (admitted, finished, charged, settled), limiter clock."""
        rows = sorted(admissions, key=lambda a: a[1])  # windows keep finishes in order
        for _admitted, finished, tokens, settled in rows:
            for window, charge in self._windows(tokens):
                window.finished.append((finished, settled if window is self.tokens else charge))
                window.finished_total += settled if window is self.tokens else charge
        for admitted, _finished, tokens, _settled in sorted(rows):
            for pacer, charge in self._pacers(tokens):
                pacer.admit(admitted, charge)

    def _windows(self, tokens: float) -> list[tuple[_Window, float]]:
        out = []
        if self.requests is not None:
            out.append((self.requests, 1.0))
        if self.burst is not None:
            out.append((self.burst, 1.0))
        if self.tokens is not None:
            out.append((self.tokens, tokens))
        return out

    def _pacers(self, tokens: float) -> list[tuple[_Pacer, float]]:
        out = []
        if self.request_pacer is not None:
            out.append((self.request_pacer, 1.0))
        if self.token_pacer is not None:
            out.append((self.token_pacer, tokens))
        return out

    def _gates(self, tokens: float) -> list[tuple[_Window | _Pacer, float]]:
        return [*self._windows(tokens), *self._pacers(tokens)]


def _plausible(count: object) -> bool:
    """A token count a server could really report: a finite number in [0, MAX_PLAUSIBLE_TOKENS]."""
    return (
        isinstance(count, int | float)
        and not isinstance(count, bool)
        and math.isfinite(count)
        and 0 <= count <= MAX_PLAUSIBLE_TOKENS
    )


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
        if self._waiters:  # (once per request: no call when nobody waits)
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
        if retry_after_s and math.isfinite(retry_after_s):
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
