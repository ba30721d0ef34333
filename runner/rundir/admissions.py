"""The rate limiters' memory across sessions: ``RUN_DIR/admissions.jsonl``, the last window's admissions.

A rate limit holds on the server's clock, which does not restart with hofcat: after a kill (or Ctrl-C) and
an immediate resume, the new session must count what the old one sent in the last window. Every admission
and every finish of a rate-limited endpoint is appended to the journal as one JSON line, written with one
``write`` to a file opened ``O_APPEND`` (no fsync: a SIGKILL loses nothing the kernel has; a power cut
takes longer than a rate window to recover from), so even requests admitted a moment before a SIGKILL are
known. The journal is compacted (rewritten atomically through the writer's temp-and-rename, keeping only
what still counts in some window) when it opens, whenever the lines appended since pass twice what the last
compaction kept (at least ``MIN_COMPACT_LINES``), and when it closes; so its size stays bounded by a small
multiple of one window's admissions.

Lines (times are Unix seconds, tokens the limiter's charges)::

    ["w", endpoint, keep_s]                                  finished requests count this long after finishing
    ["a", endpoint, id, admitted, tokens]                    admitted, in flight
    ["f", endpoint, id, finished, settled]                   admission ``id`` finished; ``settled`` tokens stay
    ["d", endpoint, admitted, finished, tokens, settled]     a finished admission (written by compaction)

On reading, an admission without its finish (in flight when the process died) is taken as finished at the
moment of reading: the server may have seen it as late as that. Lines that do not parse are skipped; times
in the future (a clock set back) are taken as now.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from runner.errors import RunDirError
from runner.rundir.guard import open_read

if TYPE_CHECKING:
    from runner.rundir.writer import RunWriter

__all__ = ["FILE_NAME", "Admission", "AdmissionLog", "EndpointJournal"]

FILE_NAME = "admissions.jsonl"
MAX_READ_BYTES = 64 * 1024 * 1024  # a journal larger than this was not written by hofcat: ignore it
MIN_COMPACT_LINES = 256  # never compact more often than every this many appended lines

# (admitted, finished, tokens charged at admission, tokens settled) in Unix seconds.
Admission = tuple[float, float, float, float]


class AdmissionLog:
    """The journal of one run directory; open with ``open``, hand each limiter an ``endpoint`` journal, ``close``."""

    def __init__(self, writer: RunWriter, now: Callable[[], float] = time.time) -> None:
        self.writer = writer
        self.path = writer.layout.root / FILE_NAME
        self.now = now
        self.error: str | None = None  # why journaling stopped (disk full, read-only...), None while it works
        self._keep_s: dict[str, float] = {}
        self._done: dict[str, deque[Admission]] = {}
        self._in_flight: dict[tuple[str, int], tuple[float, float]] = {}
        self._next_id = 0
        self._appended = 0
        self._compacted = 0  # lines the last compaction kept
        self._fd: int | None = None

    @classmethod
    def open(cls, writer: RunWriter, now: Callable[[], float] = time.time) -> AdmissionLog:
        """Read the directory's journal (if any), compact it and open it for appending."""
        log = cls(writer, now)
        log._read()
        log.compact()
        return log

    def restored(self, endpoint: str) -> list[Admission]:
        """The earlier sessions' admissions of ``endpoint`` that may still count in its windows."""
        return list(self._done.get(endpoint, ()))

    def endpoint(self, name: str, keep_s: float, clock_offset_s: float) -> EndpointJournal:
        """A limiter's journal for endpoint ``name``; ``clock_offset_s`` = Unix time minus the limiter's clock."""
        self._keep_s[name] = keep_s
        if self._fd is None:
            self.compact()  # creates the file: a run without limits never writes one
        else:
            self._append(["w", name, keep_s])
        return EndpointJournal(self, name, clock_offset_s)

    def admitted(self, endpoint: str, at: float, tokens: float) -> int:
        """Record an admission at Unix time ``at`` charging ``tokens``; returns its id."""
        ident = self._next_id
        self._next_id += 1
        self._in_flight[(endpoint, ident)] = (at, tokens)
        self._append(["a", endpoint, ident, at, tokens])
        return ident

    def finished(self, endpoint: str, ident: int, at: float, settled: float) -> None:
        """Record that admission ``ident`` finished at Unix time ``at``, ``settled`` tokens charged."""
        admitted, tokens = self._in_flight.pop((endpoint, ident), (at, settled))
        self._done.setdefault(endpoint, deque()).append((admitted, at, tokens, settled))
        self._append(["f", endpoint, ident, at, settled])

    def compact(self) -> None:
        """Rewrite the journal atomically with only what still counts, and reopen it for appending."""
        if self.error is not None:
            return
        now = self.now()
        lines = []
        for name in dict.fromkeys([*self._keep_s, *self._done]):
            done = self._done.setdefault(name, deque())
            keep_s = self._keep_s.get(name, 0.0)
            while done and done[0][1] < now - keep_s:
                done.popleft()
            if done or name in self._keep_s:
                lines.append(["w", name, keep_s])
            lines.extend(["d", name, *a] for a in done)
        lines.extend(["a", name, ident, *entry] for (name, ident), entry in self._in_flight.items())
        text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
        self._close_fd()
        if not lines and not self.path.exists():
            return
        try:
            with self.writer._atomic(self.path) as tmp:  # the run directory's one temp-fsync-rename
                tmp.write_text(text, encoding="utf-8")
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        except OSError as exc:
            self._fail(exc)
        self._appended = 0
        self._compacted = len(lines)

    def close(self) -> None:
        """Compact a last time and close the file."""
        self.compact()
        self._close_fd()

    def _append(self, line: list) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())
        except OSError as exc:
            self._fail(exc)
            return
        self._appended += 1
        if self._appended > max(MIN_COMPACT_LINES, 2 * self._compacted):  # the file is past 3x what it keeps
            self.compact()

    def _fail(self, exc: OSError) -> None:
        """Journaling stops (the limits still hold in this session); the reason is kept for a note."""
        self.error = (
            f"{self.path}: cannot write the admissions journal ({exc.strerror or exc}); "
            "a resume right after this session may exceed the rate limits"
        )
        self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _read(self) -> None:
        """Load the journal into memory: finished admissions per endpoint, the in-flight ones finished now."""
        try:
            with open_read(self.writer.layout.root, self.path) as fh:  # no link followed
                raw = fh.read(MAX_READ_BYTES + 1)
            if len(raw) > MAX_READ_BYTES:
                return
            text = raw.decode("utf-8", errors="replace")
        except (OSError, RunDirError):  # missing (a new run), unreadable or foreign: nothing to honour
            return
        now = self.now()
        in_flight: dict[tuple[str, int], tuple[float, float]] = {}
        done: list[tuple[str, Admission]] = []
        for raw in text.splitlines():
            try:
                line = json.loads(raw)
                kind, name = line[0], line[1]
                if not isinstance(name, str):
                    continue
                if kind == "w":
                    self._keep_s[name] = max(self._keep_s.get(name, 0.0), _time(line[2], math.inf))
                elif kind == "a":
                    in_flight[(name, int(line[2]))] = (_time(line[3], now), _tokens(line[4]))
                elif kind == "f":
                    admitted, tokens = in_flight.pop((name, int(line[2])), (None, None))
                    if admitted is not None:
                        done.append((name, (admitted, _time(line[3], now), tokens, _tokens(line[4]))))
                elif kind == "d":
                    done.append((name, (_time(line[2], now), _time(line[3], now), *map(_tokens, line[4:6]))))
            except (ValueError, TypeError, IndexError, KeyError, OverflowError):  # a torn or junk line
                continue
        # Still in flight when the process died: the server may have seen them until now.
        done.extend((name, (admitted, now, tokens, tokens)) for (name, _), (admitted, tokens) in in_flight.items())
        for name, admission in sorted(done, key=lambda d: d[1][1]):
            self._done.setdefault(name, deque()).append(admission)


class EndpointJournal:
    """One limiter's view of the journal: converts its clock to Unix time (``runner.sweep.limits.Journal``)."""

    def __init__(self, log: AdmissionLog, name: str, clock_offset_s: float) -> None:
        self.log = log
        self.name = name
        self.offset = clock_offset_s

    def admitted(self, now: float, tokens: float) -> int:
        """An admission at limiter time ``now`` charging ``tokens``; returns its id."""
        return self.log.admitted(self.name, now + self.offset, tokens)

    def finished(self, ident: int, now: float, tokens: float) -> None:
        """Admission ``ident`` finished at limiter time ``now`` with ``tokens`` settled."""
        self.log.finished(self.name, ident, now + self.offset, tokens)

    def restored(self) -> list[Admission]:
        """Earlier sessions' admissions of this endpoint, in the limiter's clock."""
        return [(a - self.offset, f - self.offset, t, s) for a, f, t, s in self.log.restored(self.name)]


def _time(value: object, ceiling: float) -> float:
    """A finite number from the journal, at most ``ceiling`` (a future time is taken as now)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(value)
    return min(float(value), ceiling)


def _tokens(value: object) -> float:
    return max(0.0, _time(value, math.inf))
