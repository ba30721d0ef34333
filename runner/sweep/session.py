"""One sweep session's frame: spec → manifest → open the run directory → what is left → run → record → close.

Running the same spec into the same directory again resumes: the plan minus the keys already stored (and,
unless ``retry_failed``, minus the cells that already failed for good). ``Session`` is the lifecycle both
entry points share — ``run_sweep_async`` (cells run in this process by ``runner.sweep.cellsweep``) and
``runner.sweep.cluster`` (cells run by Ray workers) — so opening, probing, counting what is left, recording and
closing are written once, with one set of defaults. Parts a crash left unparsed are parsed when a session opens
the directory.

With ``run.determinism_probe``, every OpenAI-compatible endpoint is probed (``runner.sweep.probe``) before any
cell is sent. ``blocking`` makes the blocking twin of each ``*_async`` entry point.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import threading
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TextIO, TypeVar

from runner.errors import UsageError
from runner.parse.answers import CURRENT
from runner.parse.stage import update_answers
from runner.rundir import FORMAT, RunWriter, versions
from runner.sweep.cache import ResponseCache, cache_dir
from runner.sweep.cellsweep import CellSweep
from runner.sweep.growth import check_growth
from runner.sweep.plan import Selection, count_cells, factor_counts, measurement_fallback, select, validate_plan
from runner.sweep.probe import probe_endpoints
from runner.sweep.progress import Progress, RunStats
from runner.sweep.remaining import Remaining, remaining_work
from runner.sweep.request import api_key_for, unsupported_parameters
from runner.sweep.retry import RetryPolicy
from runner.sweep.spec import Spec
from runner.sweep.transport import TransportFactory, aiohttp_transport

P = ParamSpec("P")
T = TypeVar("T")

LOG_EVERY_S = 60.0  # seconds between progress log lines off a terminal (both entry points' default)


@dataclass
class RunResult:
    """How a session ended: cells stored, failed, already stored before, and whether it was interrupted.

    ``failed_before``: planned cells skipped because an earlier session recorded a failure for them (not
    retried without ``--retry-failed``); with ``failed`` they are the planned cells still without a reply.
    ``stopped_endpoints``: endpoints stopped after ``stop_after_fatal`` consecutive 401/403/404 replies or
    connection failures, or on a reply from another model than the spec's (runner/sweep/execute.py).
    """

    stored: int
    failed: int
    already_stored: int
    interrupted: bool
    unsupported: dict[str, list[str]] = field(default_factory=dict)
    failed_before: int = 0
    stopped_endpoints: dict[str, str] = field(default_factory=dict)  # name → why (fatal 4xx); cells remain
    pending_batches: int = 0  # provider batches still open when the session ended (execution = "batch")


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


@dataclass
class Session:
    """One session's frame, whoever runs its cells: the run directory opened with the manifest, its counters
    and progress display; ``begin`` readies the directory and returns what is left, ``close`` records the
    session and releases the directory, ``result`` is what the caller gets."""

    spec: Spec
    selection: Selection
    writer: RunWriter
    stats: RunStats
    progress: Progress

    @classmethod
    def open(
        cls,
        spec: Spec,
        out: str | Path,
        selection: Selection,
        *,
        stream: TextIO | None = None,
        live: bool | None = None,
        log_every_s: float = LOG_EVERY_S,
        stats: RunStats | None = None,
        progress: Callable[..., Progress] = Progress,
    ) -> Session:
        """Open (or resume) run directory ``out`` for ``selection`` of ``spec`` (``prepare`` checked both);
        ``stats`` and ``progress`` (a ``Progress`` class) let the Ray driver count and show its own way."""
        # a run directory another spec made grows to this one when it only adds cells (runner/sweep/growth.py)
        grow = functools.partial(check_growth, spec, out)
        writer = RunWriter.open_run(out, build_manifest(spec), batch_rows=spec.run.batch_rows, grow=grow)
        stats = stats or RunStats(total=selection.cells)
        stats.planned = {e.name: selection.quota(e) for e in selection.endpoints}
        shown = progress(stats, stream=stream or sys.stderr, live=live, log_every_s=log_every_s)
        return cls(spec, selection, writer, stats, shown)

    async def begin(self, retry_failed: bool, transport_factory: TransportFactory) -> Remaining:
        """Parse what a crash left, probe the endpoints (``run.determinism_probe``); the cells still without an
        outcome, their skipped ones counted."""
        update_answers(self.writer)  # responses a crash left without their answers part
        await probe_endpoints(self.spec, self.selection, self.writer, self.progress, transport_factory)
        remaining = remaining_work(self.spec, self.writer, retry_failed, self.selection)
        self.stats.count_skipped(remaining)
        return remaining

    def close(self, record: dict[str, Any], *, spent: bool) -> None:
        """Record the session in the manifest and release the directory; ``spent``: replies were stored, so the
        token bounds are checked (a session that stored nothing changed no spending: no O(run) read)."""
        if spent:
            record["token_bounds"] = token_bounds(self.spec, self.writer, self.progress)
        self.writer.close(record)

    def result(
        self, interrupted: bool, stored: int, failed: int, stopped: dict[str, str], pending_batches: int = 0
    ) -> RunResult:
        """What the session's caller gets."""
        return RunResult(
            stored,
            failed,
            self.stats.already_stored,
            interrupted,
            {e.name: unsupported_parameters(e) for e in self.spec.endpoints},
            self.stats.failed_before,
            dict(stopped),
            pending_batches,
        )


async def run_sweep_async(
    spec: Spec,
    out: str | Path,
    *,
    retry_failed: bool = False,
    stream: TextIO | None = None,
    live: bool | None = None,
    log_every_s: float = LOG_EVERY_S,
    transport_factory: TransportFactory = aiohttp_transport,
    handle_signals: bool = False,
    selection: Selection | None = None,
    wait: bool = True,
) -> RunResult:
    """Run (or resume) ``spec`` into run directory ``out`` on the caller's event loop; progress goes to
    ``stream`` (stderr). Installs no signal handlers unless asked.

    ``selection`` (``runner.sweep.plan.select``: ``--limit``, ``--endpoint``) sends only part of the plan; the
    manifest still records the whole plan, and a later session without it resumes the rest. ``wait=False``:
    batch endpoints submit their batches and return; a later session collects them.
    """
    selection, response_cache = prepare(spec, selection)
    session = Session.open(spec, out, selection, stream=stream, live=live, log_every_s=log_every_s)
    stats = session.stats
    sweep = CellSweep(
        spec,
        session.writer,
        stats,
        session.progress,
        transport_factory=transport_factory,
        response_cache=response_cache,
        handle_signals=handle_signals,
    )
    interrupted, failure, remaining = True, None, None
    try:
        remaining = await session.begin(retry_failed, transport_factory)
        interrupted = await sweep.run(remaining.work, wait=wait)
    except BaseException as exc:
        failure = exc
        raise
    finally:
        if remaining is not None:
            stats.count_skipped(remaining)  # a walk counts the cells it skips as it goes: the final counts
        record, error, last = sweep.end(interrupted, failure, retry_failed)
        session.close({**record, "error": str(error)} if error else record, spent=error is None and stats.done > 0)
        if last is not None and failure is None:
            raise last
    pending = sum(o.open for o in sweep.batch_outcomes.values())
    return session.result(interrupted, stats.done, stats.failed, stats.stopped_endpoints, pending)


def prepare(spec: Spec, selection: Selection | None) -> tuple[Selection, ResponseCache | None]:
    """Checks before a session touches its directory: the plan, the selected endpoints' keys, the response
    cache; returns the selection (the whole plan when None) and the cache (None without one)."""
    validate_plan(spec)
    selection = selection or select(spec)
    for endpoint in selection.endpoints:
        api_key_for(endpoint, spec.source)  # fail before touching the directory when a key is missing
    cache_root = cache_dir(spec)  # [run] cache or HOFCAT_CACHE
    return selection, None if cache_root is None else ResponseCache(cache_root)


def token_bounds(spec: Spec, writer: RunWriter, progress: Progress) -> dict[str, dict[str, Any]]:
    """Per endpoint: the input tokens its stored replies report against the plan's bound, and whether it held.

    The plan promises the bound (``runner.sweep.accounting.input_bound``); a reply past it (a tokenizer the bound does
    not cover) is noted, so a cost preview is never silently wrong.
    """
    from runner.sweep.accounting import estimate, stored_usage

    used = stored_usage(writer.layout, [e.name for e in spec.endpoints])  # part by part: bounded by a batch
    out = {}
    for endpoint in spec.endpoints:
        bound = estimate(spec, endpoint).input_bound
        spent = used[endpoint.name][1]
        out[endpoint.name] = {"input_tokens": spent, "input_tokens_max": bound, "held": spent <= bound}
        if spent > bound:
            progress.note(
                f"{endpoint.name}: {spent} input tokens reported, more than the plan's bound of {bound} (its "
                "tokenizer is one the bound does not cover: hofcat plan's cost preview understated it)"
            )
    return out


def check_no_running_loop(name: str, async_name: str) -> None:
    """``UsageError`` when called from inside a running event loop, where ``asyncio.run`` cannot work."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UsageError(f"{name}: called inside a running event loop (a notebook?); use `await {async_name}(...)`")


def blocking(function: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The blocking twin of coroutine function ``NAME_async``, called ``NAME``: it owns an event loop
    (``UsageError`` naming the awaitable inside a running one) and, when ``function`` takes ``handle_signals``
    and the caller gives none, installs SIGINT/SIGTERM handlers on the main thread."""
    name = function.__name__.removesuffix("_async")
    takes_signals = "handle_signals" in inspect.signature(function).parameters

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        check_no_running_loop(name, function.__name__)
        if takes_signals:
            kwargs.setdefault("handle_signals", threading.current_thread() is threading.main_thread())
        return asyncio.run(function(*args, **kwargs))

    run.__name__, run.__qualname__ = name, function.__qualname__.removesuffix("_async")
    run.__doc__ = f"Blocking ``{function.__name__}`` (owns an event loop; inside a running one, await that).\n\n" + (
        inspect.getdoc(function) or ""
    )
    return run


run_sweep = blocking(run_sweep_async)
