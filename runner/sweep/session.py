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
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from runner.errors import ProbeError, UsageError
from runner.parse.answers import CURRENT
from runner.parse.stage import parse_part, update_answers
from runner.rundir import FORMAT, RunWriter, stored_keys, versions
from runner.sweep.execute import Executor, RunResult, api_key_for, unsupported_parameters
from runner.sweep.plan import PlannedCell, count_cells, factor_counts, iter_cells, validate_plan
from runner.sweep.probe import DeterminismProbe, probe_determinism
from runner.sweep.progress import Progress, RunStats
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
            "retry": {e.name: RetryPolicy(e.max_retries).describe() for e in spec.endpoints},
            "limits": {
                e.name: {
                    "requests_per_minute": e.requests_per_minute,
                    "tokens_per_minute": e.tokens_per_minute,
                    "burst_per_s": e.burst,
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
) -> RunResult:
    """Run (or resume) ``spec`` into run directory ``out``; progress goes to ``stream`` (stderr).

    Owns an event loop for the sweep; inside a running loop (a notebook) ``await run_sweep_async(...)``.
    """
    _check_no_running_loop("run_sweep", "run_sweep_async")
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
) -> RunResult:
    """``run_sweep`` as a coroutine, on the caller's event loop; installs no signal handlers unless asked."""
    validate_plan(spec)
    for endpoint in spec.endpoints:
        api_key_for(endpoint, spec.source)  # fail before touching the directory when a key is missing
    stream = stream or sys.stderr
    writer = RunWriter.open_run(out, build_manifest(spec), batch_rows=spec.run.batch_rows)
    stats = RunStats(total=count_cells(spec))
    progress = Progress(stats, stream=stream, live=live, log_every_s=log_every_s)

    def commit() -> None:
        committed = writer.flush()  # the responses part just written, handed on without reading it back
        if committed is not None:
            parse_part(writer, *committed)

    executor = Executor(
        writer,
        stats,
        progress,
        flush_interval_s=spec.run.flush_interval_s,
        rng_seed=spec.run.seed,
        commit=commit,
        transport_factory=transport_factory,
        handle_signals=handle_signals,
    )
    interrupted = True
    try:
        update_answers(writer)  # responses a crash left without their answers part
        if spec.run.determinism_probe:
            await _probe_endpoints(spec, writer, stream, transport_factory)
        done, failed = stored_keys(writer.layout)
        if retry_failed:
            failed = set()
        work = [(e, _unstored(iter_cells(spec, e), done, failed, stats)) for e in spec.endpoints]
        interrupted = await executor.run(work)
    finally:
        try:
            commit()
        finally:
            writer.close(
                {
                    "outcome": "interrupted" if interrupted else "complete",
                    "stored": stats.done,
                    "failed": stats.failed,
                    "already_stored": stats.already_stored,
                    "failed_before": stats.failed_before,
                    "retry_failed": retry_failed,
                }
            )
    return RunResult(
        stats.done,
        stats.failed,
        stats.already_stored,
        interrupted,
        {e.name: unsupported_parameters(e) for e in spec.endpoints},
        stats.failed_before,
    )


PROBE_REPEATS = 4  # small: 5 × 4 requests per endpoint before the sweep
PROBE_MAX_TOKENS = 8


def _check_no_running_loop(name: str, async_name: str) -> None:
    """``UsageError`` when called from inside a running event loop, where ``asyncio.run`` cannot work."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(f"{name}: called inside a running event loop (a notebook?); use `await {async_name}(...)`")


async def _probe_endpoints(spec: Spec, writer: RunWriter, stream: TextIO, transport_factory: TransportFactory) -> None:
    """Probe each OpenAI-compatible endpoint not yet probed in this run; record results (or errors) in the manifest."""
    for endpoint in spec.endpoints:
        if endpoint.provider != "openai" or writer.probe_result(endpoint.name) is not None:
            continue
        try:
            result = (await _probe(endpoint, transport_factory)).to_dict()
            print(
                f"hofcat: endpoint {endpoint.name!r}: determinism probe: seed {result['seed']}, greedy identical "
                f"share {result['greedy_identical_share']:.2f}",
                file=stream,
            )
        except ProbeError as exc:  # an unreachable endpoint: the sweep's own retries and errors will tell more
            result = {"error": str(exc)}
            print(f"hofcat: endpoint {endpoint.name!r}: determinism probe failed: {exc}", file=stream)
        writer.record_probe(endpoint.name, result)


async def _probe(endpoint: EndpointConfig, transport_factory: TransportFactory) -> DeterminismProbe:
    """The small determinism probe of one endpoint, over a transport of its own."""
    transport = transport_factory(endpoint)
    try:
        return await probe_determinism(
            endpoint.base_url,
            endpoint.model,
            repeats=PROBE_REPEATS,
            max_tokens=PROBE_MAX_TOKENS,
            api_key_env=endpoint.api_key_env,
            transport=transport,
        )
    finally:
        await transport.close()


def _unstored(cells: Iterable[PlannedCell], done: set[str], failed: set[str], stats: RunStats) -> Iterator[PlannedCell]:
    """The cells without an outcome yet; counts the skipped ones (and, of those, the earlier failures)."""
    for cell in cells:
        if cell.key in done:
            stats.already_stored += 1
        elif cell.key in failed:
            stats.already_stored += 1
            stats.failed_before += 1
        else:
            yield cell
