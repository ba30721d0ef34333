"""One shard's Ray task: its cells still without an outcome, through the same ``CellSweep`` as a session."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
from dataclasses import dataclass
from typing import Any

from runner.sweep.cache import ResponseCache, cache_dir
from runner.sweep.cellsweep import CellSweep
from runner.sweep.cluster.limiter import RemoteLimiter
from runner.sweep.cluster.progress import ShardProgress
from runner.sweep.cluster.shards import of_shard
from runner.sweep.cluster.writer import ShardWriter
from runner.sweep.limits import RateLimiter
from runner.sweep.plan import Selection
from runner.sweep.progress import RunStats
from runner.sweep.remaining import remaining_work
from runner.sweep.replicas import executor_view
from runner.sweep.spec import EndpointConfig, Spec


@dataclass(frozen=True)
class ShardJob:
    """What one shard's task gets: the spec as data, which cells are its own, where to write, whom to ask."""

    spec: Spec
    selection: Selection
    run_dir: str
    session: int | None
    shard: int
    shards: int
    retry_failed: bool
    planned: dict[str, int]  # endpoint → this shard's cells without an outcome when the driver looked
    concurrency: dict[str, int]  # endpoint → this worker's share of its max_concurrency
    limiters: dict[str, Any]  # endpoint → its LimiterHost actor (rate-limited endpoints only)
    board: Any  # the ProgressBoard actor


def run_shard(job: ShardJob) -> dict[str, Any]:
    """The body of one shard's Ray task: run the shard's cells still without an outcome; its session entries."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    ray.get(job.board.register.remote(job.shard, os.getpid(), node))
    return asyncio.run(_run_shard(job))


async def _run_shard(job: ShardJob) -> dict[str, Any]:
    """A shard's session on this worker: its cells still without an outcome, through ``CellSweep``."""
    spec = job.spec
    writer = ShardWriter.secondary(job.run_dir, batch_rows=spec.run.batch_rows, session=job.session)
    cache_root = cache_dir(spec)
    stats = RunStats(total=sum(job.planned.values()))
    stats.planned = dict(job.planned)
    progress = ShardProgress(stats, job.board, job.shard)
    sweep = CellSweep(
        spec,
        writer,
        stats,
        progress,
        response_cache=None if cache_root is None else ResponseCache(cache_root),
        limiters=functools.partial(_limiter, job.limiters),
    )
    progress.stop_run = sweep.executor.stop
    interrupted, failure = True, None
    try:
        work = [
            (e, of_shard(cells, job.shard, job.shards))
            for e, cells in remaining_work(spec, writer, job.retry_failed, job.selection)
        ]
        interrupted = await sweep.run(work, view=functools.partial(_worker_view, job.concurrency))
    except BaseException as exc:
        failure = exc
        raise
    finally:
        record, _, last = sweep.end(interrupted, failure, job.retry_failed)
        if last is not None and failure is None:
            raise last
    return {**record, "interrupted": interrupted}


def _limiter(hosts: dict[str, Any], endpoint: EndpointConfig) -> RemoteLimiter | RateLimiter:
    """The endpoint's cluster-wide limiter; an unlimited local one when it has no limits."""
    host = hosts.get(endpoint.name)
    return RateLimiter(None) if host is None else RemoteLimiter(host)


def _worker_view(concurrency: dict[str, int], endpoint: EndpointConfig) -> EndpointConfig:
    """The endpoint as this worker's executor limits it: its share of ``max_concurrency``."""
    view = executor_view(endpoint)
    return dataclasses.replace(view, max_concurrency=concurrency.get(endpoint.name, view.max_concurrency))
