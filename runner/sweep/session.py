"""One sweep session: spec → manifest → open the run directory → execute the unstored cells → parse → close.

Running the same spec into the same directory again resumes: the plan minus the keys already stored (and,
unless ``retry_failed``, minus the cells that already failed for good). Each committed responses part is
handed to the parse stage (``runner.parse.stage``) right after its commit, so a parser defect can never
lose a stored reply; parts a crash left unparsed are parsed when the next session opens the directory.

With ``run.determinism_probe``, every OpenAI-compatible endpoint is probed (``runner.sweep.probe``, 4 repeats,
8 tokens) before any cell is sent, and the result goes into the manifest under
``determinism_probe.<endpoint>``. A resumed session keeps the result an earlier session recorded: the probe
describes the endpoint the run started against, and re-probing would silently replace it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import sys
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from runner.errors import ProbeError, RunDirError, UsageError
from runner.parse.answers import CURRENT
from runner.parse.stage import parse_part, update_answers
from runner.rundir import FORMAT, Batch, Committed, RunWriter, store_error, versions
from runner.sweep.batch_run import BatchRunner
from runner.sweep.cache import CachingFactory, ResponseCache, cache_dir
from runner.sweep.execute import Executor, RunResult
from runner.sweep.plan import (
    PlannedCell,
    Selection,
    count_cells,
    factor_counts,
    measurement_fallback,
    select,
    validate_plan,
)
from runner.sweep.probe import DeterminismProbe, probe_endpoint
from runner.sweep.progress import Progress, RunStats
from runner.sweep.remaining import remaining_work
from runner.sweep.replicas import ReplicaFactory, executor_view, replica_probe_summary
from runner.sweep.request import api_key_for, unsupported_parameters
from runner.sweep.retry import RetryPolicy
from runner.sweep.spec import EndpointConfig, Spec
from runner.sweep.transport import TransportFactory, aiohttp_transport


def build_manifest(spec: Spec) -> dict[str, Any]:
    """The manifest of a run of ``spec``: spec and hash, versions, parser version, policies, seeds, plan size.

    Holds no secrets: endpoints name the environment variable of their key, never the key.
    """
    d = spec.design
    return {
        "format": FORMAT,
        "run_name": spec.run.name,
        "run_id": uuid.uuid4().hex,  # kept from the first session: a resume reads the manifest it wrote
        "spec_hash": spec.spec_hash,
        "spec": spec.raw,
        "spec_source": spec.source,
        "versions": versions(),
        "parser_version": CURRENT.version,
        "reference": spec.run.reference,
        "seeds": {
            "master": spec.run.seed,
            "sampling": list(d.seeds),
            "option_order": (
                "per cell: shuffle_seed = derive_seed(master, 'option_order', language, framing kind, "
                "country, age, gender, questions, sampling seed); order = shuffled_order(shuffle_seed); "
                "stored in column shuffle_seed"
            )
            if d.shuffle_options
            else "canonical order 1-5",
        },
        "policies": {
            "retry": {e.name: RetryPolicy.of(e).describe() for e in spec.endpoints},
            "limits": {
                e.name: {
                    "requests_per_minute": e.requests_per_minute,
                    "tokens_per_minute": e.tokens_per_minute,
                    "burst_per_s": e.burst,
                    "paced": "admissions spread evenly over the window" if e.burst is None else "no (burst set)",
                    "stop_after_fatal": e.stop_after_fatal,
                    "window_s": e.rate_window_s,
                    "window_counts": "from admission until window_s after the response",
                    "max_concurrency": e.max_concurrency,
                    "timeout_s": e.timeout_s,
                    "adaptive_concurrency": "halve on 429, +1 per cap successes",
                }
                for e in spec.endpoints
            },
            "failed_cells": "stored in failures/; retried only with --retry-failed",
        },
        "unsupported_parameters": {e.name: unsupported_parameters(e) for e in spec.endpoints},
        "plan": {"cells": count_cells(spec), "factors": factor_counts(spec)},
        "measurement_fallback": measurement_fallback(spec),  # endpoints whose distribution cells are K samples
    }


def run_sweep(
    spec: Spec,
    out: str | Path,
    *,
    retry_failed: bool = False,
    stream: TextIO | None = None,
    live: bool | None = None,
    log_every_s: float = 60.0,
    transport_factory: TransportFactory = aiohttp_transport,
    selection: Selection | None = None,
    wait: bool = True,
) -> RunResult:
    """Run (or resume) ``spec`` into run directory ``out``; progress goes to ``stream`` (stderr).

    ``selection`` (``runner.sweep.plan.select``: ``--limit``, ``--endpoint``) sends only part of the plan; the
    manifest still records the whole plan, and a later session without it resumes the rest.

    Owns an event loop for the sweep; inside a running loop (a notebook) ``await run_sweep_async(...)``.
    """
    check_no_running_loop("run_sweep", "run_sweep_async")
    handle_signals = threading.current_thread() is threading.main_thread()
    return asyncio.run(
        run_sweep_async(
            spec,
            out,
            retry_failed=retry_failed,
            stream=stream,
            live=live,
            log_every_s=log_every_s,
            transport_factory=transport_factory,
            handle_signals=handle_signals,
            selection=selection,
            wait=wait,
        )
    )


async def run_sweep_async(
    spec: Spec,
    out: str | Path,
    *,
    retry_failed: bool = False,
    stream: TextIO | None = None,
    live: bool | None = None,
    log_every_s: float = 60.0,
    transport_factory: TransportFactory = aiohttp_transport,
    handle_signals: bool = False,
    selection: Selection | None = None,
    wait: bool = True,
) -> RunResult:
    """``run_sweep`` as a coroutine, on the caller's event loop; installs no signal handlers unless asked.

    ``wait=False``: batch endpoints submit their batches and return; a later session collects them."""
    selection, response_cache = prepare(spec, selection)
    stream = stream or sys.stderr
    writer = RunWriter.open_run(out, build_manifest(spec), batch_rows=spec.run.batch_rows)
    stats = RunStats(total=selection.cells)
    stats.planned = {e.name: selection.quota(e) for e in selection.endpoints}
    progress = Progress(stats, stream=stream, live=live, log_every_s=log_every_s)
    sweep = CellSweep(
        spec,
        writer,
        stats,
        progress,
        transport_factory=transport_factory,
        response_cache=response_cache,
        handle_signals=handle_signals,
    )
    interrupted = True
    failure: BaseException | None = None
    work = None
    try:
        update_answers(writer)  # responses a crash left without their answers part
        await probe_endpoints(spec, selection, writer, stream, transport_factory)
        work = remaining_work(spec, writer, retry_failed, selection)
        stats.count_skipped(work)
        interrupted = await sweep.run(work.work, wait=wait)
    except BaseException as exc:
        failure = exc
        raise
    finally:
        if work is not None:
            stats.count_skipped(work)  # a walk counts the cells it skips as it goes: the final counts
        record, error, last = sweep.end(interrupted, failure, retry_failed)
        if error is None and stats.done:  # a session that stored nothing changed no spending: no O(run) read
            record["token_bounds"] = token_bounds(spec, writer, progress)
        writer.close({**record, "error": str(error)} if error else record)
        if last is not None and failure is None:
            raise last
    return RunResult(
        stats.done,
        stats.failed,
        stats.already_stored,
        interrupted,
        {e.name: unsupported_parameters(e) for e in spec.endpoints},
        stats.failed_before,
        dict(stats.stopped_endpoints),
        sum(o.open for o in sweep.batch_outcomes.values()),
    )


def prepare(spec: Spec, selection: Selection | None) -> tuple[Selection, ResponseCache | None]:
    """Checks before a session touches its directory: the plan, the selected endpoints' keys, the response
    cache; returns the selection (the whole plan when None) and the cache (None without one)."""
    validate_plan(spec)
    selection = selection or select(spec)
    for endpoint in selection.endpoints:
        api_key_for(endpoint, spec.source)  # fail before touching the directory when a key is missing
    cache_root = cache_dir(spec)  # [run] cache or HOFCAT_CACHE
    return selection, None if cache_root is None else ResponseCache(cache_root)


class CellSweep:
    """Runs cells into an open run directory: transports, the executor, commits and the parse of each part.

    What a session (``run_sweep_async``) and a Ray shard (``runner.sweep.cluster``) share: build it on a writer,
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
        }
        if self.batch_outcomes:
            record["batches"] = {name: dataclasses.asdict(o) for name, o in self.batch_outcomes.items()}
        record.update(_transport_record(self.transports))
        return record, error, last


def token_bounds(spec: Spec, writer: RunWriter, progress: Progress) -> dict[str, dict[str, Any]]:
    """Per endpoint: the input tokens its stored replies report against the plan's bound, and whether it held.

    The plan promises the bound (``runner.sweep.accounting.input_bound``); a reply past it (a tokenizer the bound does
    not cover) is noted, so a cost preview is never silently wrong.
    """
    from runner.rundir.reader import read_dataset
    from runner.sweep.accounting import endpoint_usage, estimate

    used = read_dataset(writer.layout, "responses", ["endpoint", "input_tokens", "output_tokens"])
    out = {}
    for endpoint in spec.endpoints:
        bound = estimate(spec, endpoint).input_bound
        spent = endpoint_usage(used, endpoint.name)[1]
        out[endpoint.name] = {"input_tokens": spent, "input_tokens_max": bound, "held": spent <= bound}
        if spent > bound:
            progress.note(
                f"{endpoint.name}: {spent} input tokens reported, more than the plan's bound of {bound} (its "
                "tokenizer is one the bound does not cover: hofcat plan's cost preview understated it)"
            )
    return out


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


PROBE_REPEATS = 4  # small: 5 × 4 requests per endpoint before the sweep
PROBE_MAX_TOKENS = 8


def check_no_running_loop(name: str, async_name: str) -> None:
    """``UsageError`` when called from inside a running event loop, where ``asyncio.run`` cannot work."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(f"{name}: called inside a running event loop (a notebook?); use `await {async_name}(...)`")


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


async def probe_endpoints(
    spec: Spec, selection: Selection, writer: RunWriter, stream: TextIO, transport_factory: TransportFactory
) -> None:
    """With ``run.determinism_probe``: probe each selected OpenAI-compatible endpoint not yet probed in this run
    (each replica of one with ``base_urls``); record results (or errors) in the manifest."""
    if not spec.run.determinism_probe:
        return
    for endpoint in selection.endpoints:
        if endpoint.provider != "openai" or writer.probe_result(endpoint.name) is not None:
            continue
        if endpoint.base_urls:
            replicas = [dataclasses.replace(endpoint, base_url=url, base_urls=()) for url in endpoint.base_urls]
            results = {
                r.base_url: await _probe_record(r, transport_factory, stream, f" at {r.base_url}") for r in replicas
            }
            result = replica_probe_summary(results)
        else:
            result = await _probe_record(endpoint, transport_factory, stream)
        writer.record_probe(endpoint.name, result)


async def _probe_record(
    endpoint: EndpointConfig, transport_factory: TransportFactory, stream: TextIO, at: str = ""
) -> dict[str, Any]:
    """The probe of one server as the manifest records it (``{"error": ...}`` when it failed), reported."""
    where = f"endpoint {endpoint.name!r}{at}"
    try:
        result = (await _probe(endpoint, transport_factory)).to_dict()
        print(
            f"hofcat: {where}: determinism probe: seed {result['seed']}, greedy identical "
            f"share {result['greedy_identical_share']:.2f}",
            file=stream,
        )
    except ProbeError as exc:  # an unreachable endpoint: the sweep's own retries and errors will tell more
        result = {"error": str(exc)}
        print(f"hofcat: {where}: determinism probe failed: {exc}", file=stream)
    return result


async def _probe(endpoint: EndpointConfig, transport_factory: TransportFactory) -> DeterminismProbe:
    """The small determinism probe of one endpoint, over a transport of its own."""
    transport = transport_factory(endpoint)
    try:
        # built as the sweep builds its requests: max-tokens field, extra headers and body, the key lookup
        return await probe_endpoint(endpoint, transport, repeats=PROBE_REPEATS, max_tokens=PROBE_MAX_TOKENS)
    finally:
        await transport.close()
