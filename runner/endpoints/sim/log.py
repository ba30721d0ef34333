"""The server-side request log: what arrived when, what status was sent and the exact reply.

Tests use it to check rate adherence on the server's own clock and that stored answers equal what the server
sent. The last ``limit`` entries stay in memory (bounded, so long benches do not grow the server); with a path,
every entry is also appended to a JSON Lines file as it happens.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO


@dataclass(slots=True)  # not frozen: frozen __init__ is several times slower, and one is made per request
class LogEntry:
    """One request as the server saw and answered it."""

    seq: int  # arrival number, from 0
    arrival_s: float  # seconds since the server started (monotonic clock)
    arrival_unix: float  # wall-clock arrival time, seconds since the epoch
    status: int  # HTTP status sent (0 when the client went away before an answer)
    # ok | chatty | refusal | rate_limited | server_error | malformed | hang | bad_request | unknown_prompt | cancelled
    outcome: str
    request_key: str  # runner.endpoints.sim.seeding.request_key of the body ("" when the body was unreadable)
    attempt: int  # how many times this request_key had arrived before (0 = first)
    seed: int | None
    temperature: float | None
    top_p: float | None
    language: str | None
    mode: str | None
    questions: tuple[int, ...]
    country: str | None  # the respondent country the answers were drawn for (None: neutral profile)
    persona: bool  # True when the country came from a persona/identity in the prompt
    option_order: tuple[int, ...]
    reply_format: str | None
    answers: tuple[int | None, ...]  # chosen option IDs, aligned with questions (None: not answered)
    reply: str  # the assistant content sent, or the raw body for malformed replies and errors
    finish_reason: str | None  # "stop" | "length" (max_tokens cut the reply: it may show only some answers)
    service_ms: float  # time from arrival to the answer being handed to the transport

    def as_json(self) -> dict[str, object]:
        """A JSON-ready dict of every field."""
        return asdict(self)


class RequestLog:
    """Bounded in-memory log plus an optional JSONL file that receives every entry."""

    def __init__(self, limit: int = 100_000, path: Path | None = None) -> None:
        self._entries: deque[LogEntry] = deque(maxlen=limit)
        self._file: IO[str] | None = open(path, "a", encoding="utf-8", buffering=1) if path else None  # noqa: SIM115
        self.path = path
        self.total = 0
        self.by_outcome: Counter[str] = Counter()
        self.by_status: Counter[int] = Counter()

    def append(self, entry: LogEntry) -> None:
        """Record one answered request."""
        self._entries.append(entry)
        self.total += 1
        self.by_outcome[entry.outcome] += 1
        self.by_status[entry.status] += 1
        if self._file is not None:
            self._file.write(json.dumps(entry.as_json(), ensure_ascii=False) + "\n")

    def entries(self) -> list[LogEntry]:
        """The entries kept in memory, oldest first."""
        return list(self._entries)

    def __iter__(self) -> Iterator[LogEntry]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        """Close the JSONL file, if any."""
        if self._file is not None:
            self._file.close()
            self._file = None


def max_in_window(times: Iterable[float], window_s: float) -> int:
    """The most events (times in seconds) falling in any half-open window [t, t + window_s)."""
    ordered = sorted(times)
    best = 0
    for i, start in enumerate(ordered):
        best = max(best, bisect.bisect_left(ordered, start + window_s, lo=i) - i)
    return best
