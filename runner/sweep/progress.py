"""Run counters and their display: a live rich panel on a terminal, a plain log line per minute elsewhere.

The executor only increments counters in ``RunStats``; ``Progress`` reads them on its own schedule, so the
display never slows the run. ETAs are per endpoint (its cells left / its own rate): a pooled rate says
seconds when every cell left is on a slow endpoint. The run's ETA is the largest endpoint ETA.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass, field
from typing import Protocol, TextIO


class Gauge(Protocol):
    """What the display reads of an endpoint's concurrency: requests in flight and the current cap (an
    ``AdaptiveConcurrency`` is one)."""

    @property
    def in_flight(self) -> int: ...

    @property
    def limit(self) -> int: ...


class Skipped(Protocol):
    """Counts of planned cells skipped because an outcome is stored (``runner.sweep.remaining.Remaining``)."""

    @property
    def already_stored(self) -> int: ...

    @property
    def failed_before(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Reading:
    """A gauge's values at one moment (a Ray worker's last report, or none yet)."""

    in_flight: int = 0
    limit: int = 0


@dataclass
class EndpointStats:
    """Counters of one endpoint, plus the gauge of its requests in flight and concurrency cap."""

    name: str
    requests_per_minute: int | None
    max_concurrency: int
    done: int = 0
    failed: int = 0
    retries: int = 0
    rate_limited: int = 0
    capped_waits: int = 0  # retries where the server asked to wait longer than max_retry_wait_s
    planned: int | None = None  # this endpoint's cells in the plan (None: unknown, no ETA of its own)
    already_stored: int = 0  # of planned: skipped because an earlier session stored an outcome
    stopped: bool = False  # stopped (fatal client errors, no server, another model): no ETA
    finished: bool = False  # every cell of it was sent and has its outcome: ETA 0, whatever the counts say
    last_failure: str | None = None  # the last failed attempt's error class and message, shown on the line
    started: float = field(default_factory=time.monotonic)
    gauge: Gauge = field(default_factory=Reading)  # read by the display on its own schedule

    def remaining(self) -> int | None:
        """Planned cells of this endpoint without an outcome yet (None when ``planned`` is unknown)."""
        if self.planned is None:
            return None
        return max(0, self.planned - self.already_stored - self.done - self.failed)

    def eta_s(self) -> float | None:
        """Seconds until this endpoint's cells are done at its own rate; 0 when none are left, None if unknown."""
        left = self.remaining()
        if left == 0 or self.finished:
            return 0.0
        elapsed = time.monotonic() - self.started
        finished = self.done + self.failed
        if left is None or self.stopped or finished == 0 or elapsed <= 0:
            return None
        return left * elapsed / finished


@dataclass
class RunStats:
    """Counters of one run session; ``total`` counts the cells this session has to do."""

    total: int
    already_stored: int = 0
    failed_before: int = 0  # of already_stored: cells whose stored outcome is a failure
    done: int = 0
    failed: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    endpoints: dict[str, EndpointStats] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    capped_waits: int = 0  # server-requested waits cut to max_retry_wait_s
    stopped_endpoints: dict[str, str] = field(default_factory=dict)  # name → why it was stopped
    planned: dict[str, int] = field(default_factory=dict)  # endpoint name → its cells in the plan
    served_models: dict[str, dict[str, int]] = field(default_factory=dict)  # endpoint → model the replies name → n

    def count_skipped(self, skipped: Skipped) -> None:
        """Take ``already_stored`` and ``failed_before`` from what the session's remaining cells counted."""
        self.already_stored, self.failed_before = skipped.already_stored, skipped.failed_before

    def rate(self) -> float:
        """Cells finished (stored or failed) per second since the start."""
        elapsed = time.monotonic() - self.started
        return (self.done + self.failed) / elapsed if elapsed > 0 else 0.0

    def finished(self) -> int:
        """Cells of the plan with an outcome: stored before this session, or stored/failed in it."""
        return self.already_stored + self.done + self.failed

    def eta_s(self) -> float | None:
        """Seconds left: the slowest endpoint's ETA when each knows its plan, else the pooled rate's (None: unknown)."""
        live = [e for e in self.endpoints.values() if not e.stopped and not e.finished]
        if self.endpoints and not live:  # every endpoint finished or stopped: nothing is left to wait for
            return 0.0
        if live and all(e.planned is not None for e in live):
            etas = [e.eta_s() for e in live]
            return None if None in etas else max(etas)
        rate = self.rate()
        left = self.total - self.finished()
        return left / rate if rate > 0 else None

    def line(self) -> str:
        """One plain-text summary line (used for logs)."""
        eta = self.eta_s()
        parts = [
            f"{self.finished()}/{self.total} cells",
            f"{self.failed} failed",
            f"{self.retries} retries",
            f"{self.rate():.1f} cells/s",
            f"ETA {_duration(eta)}",
            f"tokens {self.input_tokens} in / {self.output_tokens} out",
        ]
        if self.capped_waits:
            parts.append(f"{self.capped_waits} server waits capped")
        for e in self.endpoints.values():
            limit = "unlimited" if e.requests_per_minute is None else f"{e.requests_per_minute} rpm"
            failure = "" if e.last_failure is None else f", last failure: {e.last_failure}"
            parts.append(
                f"{e.name}: {e.gauge.in_flight}/{e.gauge.limit} in flight (max {e.max_concurrency}), {limit}, "
                f"{_endpoint_eta(e)}{failure}"
            )
        return " | ".join(parts)


class Progress:
    """Shows ``RunStats`` until stopped: rich live display on a TTY, else a log line every ``log_every_s``."""

    def __init__(
        self, stats: RunStats, *, stream: TextIO | None = None, log_every_s: float = 60.0, live: bool | None = None
    ) -> None:
        from runner.escape import terminal_stream

        self.stats = stats
        self.stream = terminal_stream(stream or sys.stderr)  # names and server messages shown, never obeyed
        self.log_every_s = log_every_s
        self.live = self.stream.isatty() if live is None else live
        self._task: asyncio.Task | None = None

    def note(self, message: str) -> None:
        """A one-off message (unsupported parameter, stopping, ...), printed once."""
        self.stats.notes.append(message)
        print(f"hofcat: {message}", file=self.stream, flush=True)

    def start(self) -> None:
        """Begin displaying, from the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._periodic())

    async def stop(self) -> None:
        """Stop displaying and print the final summary line."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self._finish()

    async def _periodic(self) -> None:
        """What runs until ``stop``: the live panel or the periodic log line."""
        await (self._live() if self.live else self._log())

    async def _finish(self) -> None:
        """What ``stop`` does last: the final summary line."""
        print(f"hofcat: {self.stats.line()}", file=self.stream, flush=True)

    async def _log(self) -> None:
        while True:
            await asyncio.sleep(self.log_every_s)
            print(f"hofcat: {self.stats.line()}", file=self.stream, flush=True)

    async def _live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        from runner.escape import unwrapped

        console = Console(file=unwrapped(self.stream))  # rich's own cursor sequences; its cells are escaped
        with Live(self._render(), console=console, refresh_per_second=4, transient=True) as live:
            while True:
                await asyncio.sleep(0.25)
                live.update(self._render())

    def _render(self) -> object:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        from runner.escape import terminal

        def row(*cells: object) -> None:
            """A row of literal text: no rich markup (``[/]`` in a name), no control character (ESC) obeyed."""
            table.add_row(*(c if isinstance(c, ProgressBar) else Text(terminal(str(c))) for c in cells))

        s = self.stats
        finished = s.finished()
        table = Table.grid(padding=(0, 2))
        row(
            ProgressBar(total=max(s.total, 1), completed=finished, width=40),
            f"{finished}/{s.total}",
            f"{s.rate():.1f} cells/s",
            f"ETA {_duration(s.eta_s())}",
        )
        row(
            f"retries {s.retries}",
            f"failed {s.failed}",
            f"tokens {s.input_tokens} in / {s.output_tokens} out",
            f"already stored {s.already_stored}",
        )
        for e in s.endpoints.values():
            limit = "no rpm limit" if e.requests_per_minute is None else f"{e.requests_per_minute} rpm"
            row(
                f"  {e.name}",
                f"in flight {e.gauge.in_flight}/{e.gauge.limit} (max {e.max_concurrency})",
                limit,
                f"done {e.done} failed {e.failed} 429s {e.rate_limited} {_endpoint_eta(e)}",
            )
            if e.last_failure is not None:
                row("", f"last failure: {e.last_failure}", "", "")
        return table


def _endpoint_eta(e: EndpointStats) -> str:
    return "stopped" if e.stopped else "done" if e.finished else f"ETA {_duration(e.eta_s())}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"
