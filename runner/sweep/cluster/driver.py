"""The driver of a sweep on Ray: connect, open the run directory, deal the shards, wait for them, record."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from runner.errors import HofcatError, RunDirError, RunnerError, UsageError
from runner.parse.stage import update_answers
from runner.rundir import RunWriter, read_dataset
from runner.sweep.cluster.limiter import close_host, limited, one_line, start_host
from runner.sweep.cluster.progress import ClusterProgress, ClusterStats, ProgressBoard, WorkerState, apply_counts
from runner.sweep.cluster.shards import deal, shares
from runner.sweep.cluster.worker import ShardJob, run_shard
from runner.sweep.plan import Selection
from runner.sweep.progress import EndpointStats, Progress
from runner.sweep.replicas import executor_view
from runner.sweep.session import LOG_EVERY_S, RunResult, Session, blocking, prepare
from runner.sweep.spec import Spec
from runner.sweep.transport import aiohttp_transport
from stats_core.distributed import ray_init

INSTALL = "pip install 'hofcat[ray]'"
SHARD_RETRIES = 3  # Ray reruns a shard whose worker process or node died this many times
POLL_S = 0.25  # how often the driver looks at its shards
CONNECT_TIMEOUT_S = 10.0  # to reach the head's port before handing the address to Ray


def ray_module() -> ModuleType:
    """The ``ray`` package, or a one-line ``UsageError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray: Ray is not installed; install it with {INSTALL}") from None
    return ray


async def run_sweep_on_ray_async(
    spec: Spec,
    out: str | Path,
    *,
    address: str | None = "auto",
    workers: int | None = None,
    retry_failed: bool = False,
    stream: TextIO | None = None,
    live: bool | None = None,
    log_every_s: float = LOG_EVERY_S,
    selection: Selection | None = None,
    handle_signals: bool = False,
) -> RunResult:
    """Run (or resume) ``spec`` into ``out`` on the Ray cluster at ``address`` (``"auto"``, ``"HOST:PORT"``,
    ``"ray://HOST:10001"``; None: Ray's default) with ``workers`` shards (default: the cluster's CPUs, at most
    the largest ``max_concurrency`` of the selected endpoints), on the caller's loop (signal handlers only if
    asked).

    ``out`` must be reachable at the same path from every node. Connects (and disconnects at the end) unless
    ``ray.init`` was called already. Raises ``UsageError`` without Ray, ``RunnerError`` when a shard fails.
    """
    ray = ray_module()
    selection, _ = prepare(spec, selection)
    check_for_ray(spec, selection)
    stream = stream or sys.stderr
    opened = not ray.is_initialized()
    if opened:
        _check_reachable(address)
        try:
            ray_init(ray, address, include_dashboard=False, configure_logging=False, log_to_driver=False)
        except Exception as exc:  # Ray's own errors (no cluster there, version mismatch): one line
            raise UsageError(f"--ray {address}: cannot connect to the Ray cluster: {one_line(exc)}") from None
    try:
        # default: one per CPU, but no more than an endpoint has request slots to share out (each at least one)
        slots = max((executor_view(e).max_concurrency for e in selection.endpoints), default=1)
        shards = workers or max(1, min(int(ray.cluster_resources().get("CPU", 1)), slots))
        print(f"hofcat: Ray cluster: {shards} workers (shards of the plan by cell key), one CPU each", file=stream)
        return await _drive(ray, spec, out, selection, shards, retry_failed, stream, live, log_every_s, handle_signals)
    finally:
        if opened:
            ray.shutdown()


def _check_reachable(address: str | None) -> None:
    """``UsageError`` at once when ``HOST:PORT`` takes no connection (Ray itself retries for minutes)."""
    host, _, port = (address or "").rpartition(":")
    if "://" in (address or "") or not host or not port.isdigit():
        return  # "auto", None, ray://: Ray's own checks answer quickly
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise UsageError(
            f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc}); start one with `ray start "
            "--head` or give the head's address"
        ) from None


def check_for_ray(spec: Spec, selection: Selection) -> None:
    """``UsageError`` for what a sweep on Ray does not run: batch endpoints, and per-replica rate limits."""
    for e in selection.endpoints:
        if e.execution == "batch":
            raise UsageError(f"--ray: endpoint {e.name!r} has execution = 'batch'; run batch endpoints without --ray")
        if e.base_urls and e.replica_limits == "replica" and e.rate_limited:
            raise UsageError(
                f"--ray: endpoint {e.name!r} has per-replica rate limits (replica_limits = 'replica'), which "
                "each worker would apply on its own; use replica_limits = 'endpoint' or run without --ray"
            )


async def _drive(
    ray: ModuleType,
    spec: Spec,
    out: str | Path,
    selection: Selection,
    shards: int,
    retry_failed: bool,
    stream: TextIO,
    live: bool | None,
    log_every_s: float,
    handle_signals: bool,
) -> RunResult:
    """The driver's session: open the directory, deal the shards, run them to the end, record the session."""
    stats = ClusterStats(total=selection.cells)
    session = Session.open(
        spec, out, selection, stream=stream, live=live, log_every_s=log_every_s, stats=stats, progress=ClusterProgress
    )
    writer, progress = session.writer, session.progress
    for e in selection.endpoints:
        stats.endpoints[e.name] = EndpointStats(e.name, e.requests_per_minute, e.max_concurrency)
        stats.endpoints[e.name].planned = stats.planned[e.name]
    hosts: dict[str, Any] = {}
    results: dict[int, dict[str, Any]] = {}
    failure: BaseException | None = None
    interrupted = True
    try:
        remaining = await session.begin(retry_failed, aiohttp_transport)
        planned = deal(remaining.work, shards)  # every cell taken: the counts of the skipped ones are final
        stats.count_skipped(remaining)
        for e in selection.endpoints:
            stats.endpoints[e.name].already_stored = stats.planned[e.name] - sum(p.get(e.name, 0) for p in planned)
        stats.workers = [WorkerState(i, sum(p.values())) for i, p in enumerate(planned) if p]
        hosts = {e.name: start_host(ray, e, writer.run_dir) for e in selection.endpoints if limited(e)}
        board = ray.remote(num_cpus=0)(ProgressBoard).remote()
        task = ray.remote(run_shard).options(num_cpus=1, max_retries=SHARD_RETRIES, retry_exceptions=False)
        shares_of = {e.name: shares(executor_view(e).max_concurrency, shards) for e in selection.endpoints}
        refs = {
            task.remote(
                ShardJob(
                    spec,
                    selection,
                    str(Path(writer.run_dir).resolve()),
                    writer.session,
                    i,
                    shards,
                    retry_failed,
                    planned[i],
                    {name: s[i] for name, s in shares_of.items()},
                    hosts,
                    board,
                )
            ): i
            for i in range(shards)
            if planned[i]
        }
        results, stopped = await _wait_for(ray, refs, board, stats, progress, handle_signals)
        interrupted = stopped or any(r.get("interrupted") for r in results.values())
    except BaseException as exc:
        failure = exc
        raise
    finally:
        for host in hosts.values():
            close_host(ray, host, progress)
        record = _record(writer, stats, results, shards, retry_failed, interrupted, failure)
        spent = failure is None and record["stored"] > 0
        if spent:
            update_answers(writer)  # parts a killed worker committed without parsing them
        session.close(record, spent=spent)
    return session.result(interrupted, record["stored"], record["failed"], record["stopped_endpoints"])


async def _wait_for(
    ray: ModuleType,
    refs: dict[Any, int],
    board: Any,
    stats: ClusterStats,
    progress: Progress,
    handle_signals: bool,
) -> tuple[dict[int, dict[str, Any]], bool]:
    """Show progress until every shard ended; each shard's session entries, and whether a stop was asked.

    The first SIGINT/SIGTERM asks the workers to stop intake (they store what is in flight); a second cancels
    their tasks. A shard that failed for good raises its error (a ``HofcatError`` as it was raised)."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM) if handle_signals else ()
    stops = 0

    def stop() -> None:
        nonlocal stops
        stops += 1
        if stops == 1:
            board.stop.remote()
            progress.note("stopping: no new requests on any worker; waiting for those in flight (again to abandon)")
        else:
            progress.note("second interrupt: cancelling the workers' tasks")
            for ref in pending:
                ray.cancel(ref, force=True, recursive=True)

    for sig in signals:
        loop.add_signal_handler(sig, stop)
    pending = list(refs)
    notes_seen = 0
    progress.start()
    try:
        while True:
            workers, notes = await board.read.remote(notes_seen)
            notes_seen += len(notes)
            for note in notes:
                progress.note(note)
            apply_counts(stats, workers)
            if not pending:
                break
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            if pending:
                await asyncio.sleep(POLL_S)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await progress.stop()
    results: dict[int, dict[str, Any]] = {}
    error: BaseException | None = None
    for ref, shard in refs.items():
        try:
            results[shard] = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            results[shard] = {"interrupted": True}
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            error = error or (
                cause
                if isinstance(cause, HofcatError)
                else RunnerError(f"--ray: worker {shard}: {one_line(cause or exc)}")
            )
        except ray.exceptions.RayError as exc:
            error = error or RunnerError(f"--ray: worker {shard} failed {SHARD_RETRIES + 1} times: {one_line(exc)}")
    if error is not None:
        raise error
    return results, stops > 0


def _record(
    writer: RunWriter,
    stats: ClusterStats,
    results: dict[int, dict[str, Any]],
    shards: int,
    retry_failed: bool,
    interrupted: bool,
    failure: BaseException | None,
) -> dict[str, Any]:
    """The driver's session entry: outcomes counted from what this session committed (exact after a worker was
    killed and retried), the workers' entries, and how the cluster ran it."""
    stored, failed = _committed_by(writer)
    stopped: dict[str, str] = {}
    for r in results.values():
        stopped.update(r.get("stopped_endpoints") or {})
    outcome = "interrupted" if interrupted or failure is not None else "complete"
    if isinstance(failure, RunDirError):
        outcome = "store_error"
    record: dict[str, Any] = {
        "outcome": outcome,
        "stored": stored,
        "failed": failed,
        "already_stored": stats.already_stored,
        "failed_before": stats.failed_before,
        "retry_failed": retry_failed,
        "capped_retry_waits": sum(r.get("capped_retry_waits", 0) for r in results.values()),
        "stopped_endpoints": stopped,
        "ray": {
            "workers": shards,
            "shards": [
                {
                    "shard": w.shard,
                    "cells": w.planned,
                    "pids": w.pids,
                    "nodes": w.nodes,
                    **{k: v for k, v in results.get(w.shard, {}).items() if k in ("replicas", "cache")},
                }
                for w in stats.workers
            ],
        },
    }
    if failure is not None:
        record["error"] = one_line(failure)
    return record


def _committed_by(writer: RunWriter) -> tuple[int, int]:
    """Responses and failures committed under this session's number (by any worker and any attempt)."""
    import pyarrow.compute as pc

    def count(dataset: str) -> int:
        sessions = read_dataset(writer.layout, dataset, ["session"]).column(0)
        return int(pc.sum(pc.equal(sessions, writer.session)).as_py() or 0)

    return count("responses"), count("failures")


run_sweep_on_ray = blocking(run_sweep_on_ray_async)
