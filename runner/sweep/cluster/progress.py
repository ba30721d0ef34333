"""Progress for the whole cluster: the workers report to a ``ProgressBoard`` actor, the driver shows one line."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.sweep.progress import Progress, Reading, RunStats

REPORT_S = 0.5  # how often a worker reports its counters (and learns of a stop)


class ProgressBoard:
    """A Ray actor: the workers' latest counters (one slot per attempt of each shard), their notes, the stop."""

    def __init__(self) -> None:
        self.workers: dict[int, dict[str, Any]] = {}
        self.notes: list[str] = []
        self.stopping = False

    def register(self, shard: int, pid: int, node: str) -> bool:
        """A shard's attempt started in process ``pid`` on ``node``; whether the run is stopping."""
        worker = self.workers.setdefault(shard, {"pids": [], "nodes": [], "counts": []})
        worker["pids"].append(pid)
        worker["nodes"].append(node)
        worker["counts"].append(None)
        return self.stopping

    def report(self, shard: int, counts: dict[str, Any]) -> bool:
        """The current attempt's counters; whether the run is stopping."""
        self.workers[shard]["counts"][-1] = counts
        return self.stopping

    def note(self, shard: int, message: str) -> None:
        """A worker's one-off message, for the driver to print."""
        self.notes.append(f"worker {shard}: {message}")

    def stop(self) -> None:
        """Ask every worker to stop intake (they see it at their next report)."""
        self.stopping = True

    def read(self, notes_seen: int) -> tuple[dict[int, dict[str, Any]], list[str]]:
        """Every worker's slots, and the notes after the first ``notes_seen``."""
        return self.workers, self.notes[notes_seen:]


class ShardProgress(Progress):
    """A worker's progress: no display; its counters go to the ``ProgressBoard`` every ``REPORT_S``, its notes
    too, and a stop asked there stops its executor."""

    def __init__(self, stats: RunStats, board: Any, shard: int) -> None:
        super().__init__(stats, stream=sys.stderr, live=False)
        self.board = board
        self.shard = shard
        self.stop_run: Callable[[], None] | None = None

    def note(self, message: str) -> None:
        """Keep the note and hand it to the driver."""
        self.stats.notes.append(message)
        self.board.note.remote(self.shard, message)

    async def _periodic(self) -> None:
        """Report every ``REPORT_S`` until stopped."""
        while True:
            await asyncio.sleep(REPORT_S)
            await self._report()

    async def _finish(self) -> None:
        """Send the last counters (no summary line: the driver prints the cluster's)."""
        await self._report()

    async def _report(self) -> None:
        if await self.board.report.remote(self.shard, counts(self.stats)) and self.stop_run is not None:
            self.stop_run()
            self.stop_run = None  # once: a second stop would abandon the requests in flight


def counts(stats: RunStats) -> dict[str, Any]:
    """A worker's counters as plain data (what ``ProgressBoard.report`` keeps)."""
    keys = ("done", "failed", "retries", "input_tokens", "output_tokens", "capped_waits")
    return {
        **{k: getattr(stats, k) for k in keys},
        "endpoints": {
            e.name: {
                "done": e.done,
                "failed": e.failed,
                "retries": e.retries,
                "rate_limited": e.rate_limited,
                "in_flight": e.gauge.in_flight,
                "limit": e.gauge.limit,
                "stopped": e.stopped,
            }
            for e in stats.endpoints.values()
        },
    }


@dataclass
class WorkerState:
    """One shard as the driver shows it: its cells, pids and nodes per attempt, and its summed counters."""

    shard: int
    planned: int
    pids: list[int] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    finished: int = 0
    in_flight: int = 0


@dataclass
class ClusterStats(RunStats):
    """``RunStats`` summed over the workers, with a part per worker in the progress line."""

    workers: list[WorkerState] = field(default_factory=list)

    def line(self) -> str:
        """The one summary line: the cluster's counters, each endpoint, then each worker."""
        return " | ".join([super().line(), *(worker_text(w) for w in self.workers)])


def worker_text(w: WorkerState) -> str:
    pid = f"pid {w.pids[-1]}" if w.pids else "waiting"
    retried = f", attempt {len(w.pids)}" if len(w.pids) > 1 else ""
    return f"worker {w.shard} ({pid}{retried}): {w.finished}/{w.planned} cells, {w.in_flight} in flight"


class ClusterProgress(Progress):
    """The driver's progress: the one line (or live panel) of ``ClusterStats``, with a row per worker."""

    def _render(self) -> object:
        table = super()._render()
        for w in getattr(self.stats, "workers", ()):
            table.add_row(f"  {worker_text(w)}")  # type: ignore[attr-defined]
        return table


def apply_counts(stats: ClusterStats, workers: dict[int, dict[str, Any]]) -> None:
    """Set the driver's counters from the board's slots: every attempt's counts summed, in flight the latest."""
    every = [c for w in workers.values() for c in w["counts"] if c]
    latest = [w["counts"][-1] for w in workers.values() if w["counts"][-1]]
    for name in ("done", "failed", "retries", "input_tokens", "output_tokens", "capped_waits"):
        setattr(stats, name, sum(c[name] for c in every))
    for e in stats.endpoints.values():
        for name in ("done", "failed", "retries", "rate_limited"):
            setattr(e, name, sum(c["endpoints"].get(e.name, {}).get(name, 0) for c in every))
        now = [c["endpoints"][e.name] for c in latest if e.name in c["endpoints"]]
        e.stopped = any(x["stopped"] for x in now)
        e.gauge = Reading(sum(x["in_flight"] for x in now), sum(x["limit"] for x in now))
    for w in stats.workers:
        board = workers.get(w.shard)
        if board is not None:
            w.pids, w.nodes = list(board["pids"]), list(board["nodes"])
            w.finished = sum(c["done"] + c["failed"] for c in board["counts"] if c)
            last = board["counts"][-1]
            w.in_flight = sum(x["in_flight"] for x in last["endpoints"].values()) if last else 0
