"""Cells into an open run directory, in this process: transports, the executor, batch runners, commits, parse.

What a session (``runner.sweep.session``) and a Ray shard (``runner.sweep.cluster.worker``) share: build a
``CellSweep`` on a writer, ``run`` the remaining cells, then ``end`` (always) commits what is left and gives the
session record's entries. Each committed responses part is handed to the parse stage right after its commit, so
a parser defect can never lose a stored reply.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import Any

from runner.errors import RunDirError
from runner.parse.stage import parse_part
from runner.rundir import Batch, Committed, RunWriter, store_error
from runner.sweep.batch_run import BatchRunner
from runner.sweep.cache import CachingFactory, ResponseCache
from runner.sweep.execute import Executor
from runner.sweep.plan import PlannedCell
from runner.sweep.progress import Progress, RunStats
from runner.sweep.replicas import ReplicaFactory, executor_view
from runner.sweep.request import api_key_for
from runner.sweep.spec import EndpointConfig, Spec
from runner.sweep.transport import TransportFactory, aiohttp_transport

__all__ = ["CellSweep"]


class CellSweep:
    """Runs cells into an open run directory: transports, the executor, commits and the parse of each part.

    ``run`` the work, then ``end`` (always) commits what is left and gives the session record's entries.
    ``limiters`` (the executor's) replaces the local rate limiters, e.g. by a cluster-wide one.
    """

    def __init__(
        self,
        spec: Spec,
        writer: RunWriter,
        stats: RunStats,
        progress: Progress,
        *,
        transport_factory: TransportFactory = aiohttp_transport,
        response_cache: ResponseCache | None = None,
        handle_signals: bool = False,
        limiters: Callable[[EndpointConfig], Any] | None = None,
    ) -> None:
        self.spec = spec
        self.writer = writer
        self.stats = stats
        self.progress = progress
        self.transports = _sweep_transports(spec, writer, transport_factory, response_cache)
        self.executor = Executor(
            writer,
            stats,
            progress,
            flush_interval_s=spec.run.flush_interval_s,
            rng_seed=spec.run.seed,
            commit_batch=self.commit_batch,
            transport_factory=self.transports[-1],  # replicas, then the response cache over them
            handle_signals=handle_signals,
            limiters=limiters,
        )
        self.batch_outcomes: dict[str, Any] = {}

    def commit_batch(self, batch: Batch) -> Committed:
        """Commit a batch and parse its responses part (run in the executor's flush thread)."""
        committed = self.writer.commit_batch(batch)
        if committed.responses is not None:  # the part just written, handed on without reading it back
            parse_part(self.writer, committed.part, committed.responses)
        return committed

    async def run(
        self,
        work: list[tuple[EndpointConfig, Iterable[PlannedCell]]],
        *,
        wait: bool = True,
        view: Callable[[EndpointConfig], EndpointConfig] = executor_view,
    ) -> bool:
        """Run each endpoint's unstored cells (``view``: the endpoint as the executor limits it); True if stopped."""
        batched = _batch_runners(self.spec, self.writer, self.stats, self.progress, self.commit_batch, work)
        try:  # batches first (submitting is quick), the online sweep, then polling the batches to the end
            for runner, cells in batched:
                await runner.submit(cells)
            interrupted = await self.executor.run([(view(e), c) for e, c in work if e.execution != "batch"])
            for runner, _ in batched:
                self.batch_outcomes[runner.endpoint.name] = outcome = await runner.finish(wait=wait)
                interrupted = interrupted or (wait and outcome.open > 0)
        finally:
            for runner, _ in batched:
                await runner.close()
        return interrupted

    def end(
        self, interrupted: bool, failure: BaseException | None, retry_failed: bool
    ) -> tuple[dict[str, Any], RunDirError | None, RunDirError | None]:
        """Commit what the writer still holds; the session record, the error it records (None: none), and the
        last commit's own error (to raise when nothing else failed)."""
        last = _commit_rest(self.writer, self.commit_batch)
        error = failure if isinstance(failure, RunDirError) else last
        stats = self.stats
        record = {
            "outcome": "store_error" if error else "interrupted" if interrupted else "complete",
            "stored": stats.done,
            "failed": stats.failed,
            "already_stored": stats.already_stored,
            "failed_before": stats.failed_before,
            "retry_failed": retry_failed,
            "capped_retry_waits": stats.capped_waits,
            "stopped_endpoints": dict(stats.stopped_endpoints),
            "served_models": {name: dict(counts) for name, counts in stats.served_models.items()},
        }
        if self.batch_outcomes:
            record["batches"] = {name: dataclasses.asdict(o) for name, o in self.batch_outcomes.items()}
        record.update(_transport_record(self.transports))
        return record, error, last


def _batch_runners(
    spec: Spec,
    writer: RunWriter,
    stats: RunStats,
    progress: Progress,
    commit_batch: Callable[[Batch], Committed],
    work: list[tuple[EndpointConfig, Iterable[PlannedCell]]],
) -> list[tuple[BatchRunner, Iterable[PlannedCell]]]:
    """A ``BatchRunner`` per endpoint with ``execution = "batch"``, with its unstored cells."""

    commit = functools.partial(_commit_buffered, writer, commit_batch)
    return [
        (BatchRunner(spec, e, writer, stats, progress, commit, api_key_for(e, spec.source)), cells)
        for e, cells in work
        if e.execution == "batch"
    ]


def _commit_rest(writer: RunWriter, commit_batch: Callable[[Batch], Committed]) -> RunDirError | None:
    """Commit what the writer still holds after the executor ended; the error instead of raising it."""
    try:
        _commit_buffered(writer, commit_batch)
    except OSError as exc:
        return store_error(exc, f"{writer.run_dir}: cannot commit the last rows")
    return None


def _commit_buffered(writer: RunWriter, commit_batch: Callable[[Batch], Committed]) -> None:
    """Commit everything the writer buffers, in parts of at most ``batch_rows``."""
    while (batch := writer.take()) is not None:
        commit_batch(batch)


def _sweep_transports(
    spec: Spec, writer: RunWriter, transport_factory: TransportFactory, cache: ResponseCache | None
) -> tuple[ReplicaFactory] | tuple[ReplicaFactory, CachingFactory]:
    """The factories the executor's transports come from: replicas (``base_urls``) over ``transport_factory``,
    and the response cache over them when the run has one (the last is the executor's)."""
    replicas = ReplicaFactory(transport_factory, spec.endpoints)
    if cache is None:
        return (replicas,)
    manifest = writer.manifest or {}
    origin = {"run_id": manifest.get("run_id"), "run_name": manifest.get("run_name"), "session": writer.token}

    def seed_honoured(name: str) -> bool:  # read when the endpoint opens: after this session's probe
        return bool((writer.probe_result(name) or {}).get("seed_honoured"))

    return replicas, CachingFactory(replicas, cache, seed_honoured, origin, spec.run.cache_force)


def _transport_record(factories: tuple[ReplicaFactory] | tuple[ReplicaFactory, CachingFactory]) -> dict[str, Any]:
    """The session's manifest entries for its replicas and its response cache (only those it has)."""
    out: dict[str, Any] = {}
    if replicas := factories[0].record():
        out["replicas"] = replicas
    if len(factories) > 1:
        out["cache"] = factories[1].record()
    return out
