"""Execution: a bounded producer per endpoint → an asyncio pool per endpoint → the run directory's writer.

Each endpoint gets a transport (``runner.sweep.transport``; aiohttp unless the caller injects another) and
an ``asyncio_pool.AioPool`` of ``max_concurrency`` workers that take cells one at a time from the endpoint's
lazy plan iterator (stored cells skipped): at most ``max_concurrency`` cells per endpoint are in hand at
once, whatever the plan's size, and no task is created per cell. A worker renders
the prompt, then runs attempts under the retry policy; each attempt holds a slot of the endpoint's
adaptive concurrency cap and a rate-limit charge. Every outcome goes to the run directory's writer: a failure
as its row, a reply as its values, one list per stored field (``Replies``: its row is built with its batch's, as
Arrow columns, in the flush thread); ``commit_batch`` (the session's) commits it. The executor knows neither
prompts' wording nor answers' meaning.

Flushing: one flusher task takes the writer's buffer as a batch (on the loop, so the rows are handed over,
never shared) every ``flush_interval_s`` or as soon as a batch is full, and commits it in a worker thread
(Parquet, fsync and the parse stage stay off the event loop; one flush at a time). A failed write is retried
with backoff (``FLUSH_RETRY_WAITS_S``) under the same part ID, so a retry rewrites the same files and never
stores a row twice; each failure is noted on the progress stream. A full disk, or a write still failing after
the last retry, stops the run with a one-line ``RunDirError``. Workers wait for the flusher only when two
batches are buffered: memory stays bounded by the batch size.

Stopping (SIGINT/SIGTERM): the first signal stops intake and cuts waits short; requests already in flight
finish or time out and are stored; cells whose retries were cut short are left unstored for the next run.
A second signal cancels the requests in flight. Either way the writer is flushed: the run resumes cleanly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import functools
import gc
import json
import random
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import cast

from asyncio_pool import AioPool

from runner.errors import ConnectionFailed, FatalRequestError, Interrupted, RateLimited, RequestError, RetryableError
from runner.rundir import Batch, Committed, RunWriter, store_error
from runner.rundir.admissions import AdmissionLog
from runner.survey.models import is_requested_model
from runner.sweep.limits import AdaptiveConcurrency, RateLimiter, Ticket
from runner.sweep.outcome import Outcome, Replies, now_us, response_row
from runner.sweep.plan import PlannedCell
from runner.sweep.progress import EndpointStats, Progress, RunStats
from runner.sweep.providers import HttpCall, Provider, Reply, no_credentials_note, provider_for
from runner.sweep.remaining import Unstored
from runner.sweep.request import PromptMemo, Rendered, api_key_for, request_for
from runner.sweep.retry import Attempt, RetryPolicy, attempting, call_with_retries
from runner.sweep.spec import EndpointConfig
from runner.sweep.transport import Transport, TransportFactory, aiohttp_transport, redact, reply_of, send

FLUSH_RETRY_WAITS_S = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # waits between attempts at one flush (~31 s in all)
# Statuses that say the endpoint itself is wrong (key, permission, model name): a streak of them stops it, as
# does a streak of attempts that reached no server (ConnectionFailed: refused, DNS, TLS, reset before a reply).
ENDPOINT_FATAL = {401: "check api_key_env and the key it names", 403: "check api_key_env and the key's permissions"}
ENDPOINT_FATAL_DEFAULT_HINT = "check the model name and base_url"  # 404
LAST_FAILURE_CHARS = 100  # of an endpoint's last failure, on the progress line
# The cyclic collector's first threshold while cells are sent (Python's default: 700). A batch of buffered rows,
# replies and aiohttp's per-request objects outlives the young generation, so at 700 the collector rescans them
# every few dozen cells: ~20 µs of CPU per cell (gc.callbacks, 10,200 cells, benches.runner_peer), a tenth of
# the run's. At 50,000 it runs once every few thousand cells; the cyclic garbage it lets pile up in between
# is bounded by the threshold, not by the run.
GC_YOUNG_THRESHOLD = 50_000


def endpoint_fatal(error: RequestError | None) -> bool:
    """Whether a failed attempt says the endpoint is wrong or down rather than the request: HTTP 401/403/404, or no
    server reached."""
    return isinstance(error, ConnectionFailed) or (
        isinstance(error, FatalRequestError) and error.status in (401, 403, 404)
    )


@dataclass
class Endpoint:
    """Everything one endpoint's requests share: config, provider mapping, transport, limits, pool, counters."""

    config: EndpointConfig
    provider: Provider
    api_key: str | None
    transport: Transport
    limiter: RateLimiter
    gate: AdaptiveConcurrency
    policy: RetryPolicy
    pool: AioPool
    stats: EndpointStats
    # Cells whose last attempt was endpoint-fatal (``endpoint_fatal``), held back unstored until the streak ends:
    # stored as their own failures when a reply breaks it, left unsent when it stops the endpoint.
    fatal_streak: list[tuple[PlannedCell, str, str, Outcome]] = field(default_factory=list)
    streak: int = 0  # consecutive endpoint-fatal attempts, in the order they ended; any reply resets it
    stopped: str | None = None  # why the endpoint was stopped; its remaining cells stay unsent
    halted: asyncio.Event = field(default_factory=asyncio.Event)  # set with ``stopped``: ends its retries' waits
    # the executor's waits and retry notes bound to this endpoint (made once, not per cell)
    sleep: Callable[[float], Awaitable[None]] | None = None
    on_retry: Callable[[RequestError, float], None] | None = None
    prompts: PromptMemo = field(default_factory=PromptMemo)  # its workers take cells in plan order


class Executor:
    """Runs planned cells against their endpoints and hands every outcome to the run directory's writer.

    ``commit_batch`` commits a batch taken from the writer (and does whatever the caller does with a committed
    part), in the flusher's worker thread; it is called every
    ``flush_interval_s`` and whenever the writer's buffer is full. ``transport_factory`` builds each
    endpoint's transport; ``handle_signals`` installs the SIGINT/SIGTERM handlers (only the owner of the
    event loop's thread should). ``wait`` and ``clock`` replace real waiting (retry backoff, rate-limit and
    concurrency pauses) and the limits' monotonic clock: tests drive the executor in virtual time with them.
    """

    def __init__(
        self,
        writer: RunWriter,
        stats: RunStats,
        progress: Progress,
        *,
        flush_interval_s: float,
        rng_seed: int,
        commit_batch: Callable[[Batch], Committed] | None = None,
        transport_factory: TransportFactory = aiohttp_transport,
        handle_signals: bool = True,
        wait: Callable[[float], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        limiters: Callable[[EndpointConfig], RateLimiter] | None = None,
    ) -> None:
        self.writer = writer
        self._replies = Replies()  # the replies this executor buffers in the writer, as columns
        writer.buffer_replies(self._replies)
        # Each endpoint's rate limiter from elsewhere (a cluster-wide one: runner.sweep.cluster), which then keeps
        # the admissions journal itself; None: a local limiter per endpoint, journaled in the run directory.
        self._limiters = limiters
        self.commit_batch = commit_batch or writer.commit_batch
        self._flush_due = asyncio.Event()  # set when the buffer holds a batch: flush now, not at the interval
        self._flush_lock = asyncio.Lock()  # one flush at a time
        self._flush_thread: concurrent.futures.ThreadPoolExecutor | None = None
        self._flush_error: BaseException | None = None  # the flusher died of it: no more flushes
        self._closing = False
        self.transport_factory = transport_factory
        self.handle_signals = handle_signals
        self._wait = wait
        self._clock = clock
        self.stats = stats
        self.progress = progress
        self.flush_interval_s = flush_interval_s
        self.rng = random.Random(rng_seed)  # jitter of retry waits (timing only, never the data)
        self._stop = asyncio.Event()
        self._endpoints: list[Endpoint] = []
        self._secrets: list[str] = []
        self._bug: BaseException | None = None
        self._cancelling: set[asyncio.Task] = set()

    def stop(self) -> None:
        """Stop intake (first call) or abandon in-flight requests (second call)."""
        if self._stop.is_set():
            self.progress.note("second interrupt: abandoning requests in flight")
            loop = asyncio.get_running_loop()
            # The loop keeps only weak references to tasks: hold these until they are done.
            for endpoint in self._endpoints:
                task = loop.create_task(endpoint.pool.cancel())
                self._cancelling.add(task)
                task.add_done_callback(self._cancelling.discard)
            return
        self._stop.set()
        self.progress.note("stopping: no new requests; waiting for those in flight (interrupt again to abandon)")

    async def run(self, work: Iterable[tuple[EndpointConfig, Iterable[PlannedCell]]]) -> bool:
        """Run each endpoint's cells (already filtered to unstored ones); True if stopped before the end."""
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM) if self.handle_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, self.stop)
        flusher = loop.create_task(self._flush_periodically())
        self.progress.start()
        endpoints = self._endpoints
        self._admissions = AdmissionLog.open(self.writer) if self._limiters is None else None
        with _fewer_collections():  # the sweep's allocations, not the collector, set its pace
            try:
                producers = []
                for config, cells in work:
                    if isinstance(cells, Unstored) and cells.known_empty:
                        continue  # known to have nothing left (a finished run): no transport, no connection pool
                    endpoint = self._open_endpoint(config)
                    endpoints.append(endpoint)
                    producers.append(self._produce(endpoint, cells))
                await asyncio.gather(*producers)
            finally:
                for sig in signals:
                    loop.remove_signal_handler(sig)
                await self._stop_flusher(flusher)
                for endpoint in endpoints:
                    await endpoint.transport.close()
                    self._settle_fatal_streak(endpoint)
                if self._admissions is not None:
                    self._admissions.close()
                    if self._admissions.error is not None:
                        self.progress.note(self._admissions.error)
                await self.progress.stop()
        if self._bug is not None:
            raise self._bug
        return self._stop.is_set()

    def _open_endpoint(self, config: EndpointConfig) -> Endpoint:
        key = api_key_for(config)
        if key:
            self._secrets.append(key)
        provider = provider_for(config)
        if not key and (note := no_credentials_note(config)):
            self.progress.note(note)
        if provider.unsupported:
            self.progress.note(
                f"endpoint {config.name!r}: the {provider.name} API takes no "
                f"{', '.join(sorted(provider.unsupported))}; requests are sent without it"
            )
        rpw = config.requests_per_minute
        limiter = (  # a cluster-wide limiter journals itself; a local one honours what earlier sessions sent
            self._limiters(config)
            if self._limiters is not None
            else RateLimiter.of(config, clock=self._clock, admissions=self._admissions)
        )
        gate = AdaptiveConcurrency(config.max_concurrency, clock=self._clock)
        stats = self.stats.endpoints.setdefault(config.name, EndpointStats(config.name, rpw, config.max_concurrency))
        stats.gauge = gate
        stats.planned = self.stats.planned.get(config.name, stats.planned)
        transport = self.transport_factory(config)
        endpoint = Endpoint(
            config,
            provider,
            key,
            transport,
            limiter,
            gate,
            RetryPolicy.of(config),
            AioPool(size=config.max_concurrency),
            stats,
        )
        endpoint.sleep = functools.partial(self._sleep, endpoint=endpoint)
        endpoint.on_retry = functools.partial(self._on_retry, endpoint)
        return endpoint

    async def _produce(self, endpoint: Endpoint, cells: Iterable[PlannedCell]) -> None:
        """Fill the endpoint's pool with ``max_concurrency`` workers (``_work``) that take cells from one lazy
        iterator.

        ``Unstored`` cells (``runner.sweep.remaining``) count the stored cells they skip: the endpoint's
        ``already_stored`` is read from them as they go (its own ETA)."""
        shared = iter(cells)  # next() never awaits: each cell goes to exactly one worker
        skips = shared if isinstance(shared, Unstored) else None  # a walk that skips stored keys as it goes
        if isinstance(cells, Unstored):  # final from the start unless it walks (then updated as it goes)
            endpoint.stats.already_stored = cells.already_stored
        for _ in range(endpoint.config.max_concurrency):
            future = await endpoint.pool.spawn(self._work(endpoint, shared, skips))
            future.add_done_callback(self._note_bug)
        await endpoint.pool.join()
        if isinstance(cells, Unstored):
            endpoint.stats.already_stored = cells.already_stored
        endpoint.stats.finished = endpoint.stopped is None and not self._stop.is_set()  # its ETA is 0 from now

    def _note_bug(self, future: asyncio.Future) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if isinstance(exc, asyncio.CancelledError):  # the pool hands a cancelled worker's state on as an error
            return
        if exc is not None and self._bug is None:  # a defect, not a request failure: stop the run, report it
            self._bug = exc
            self._stop.set()

    async def _work(self, endpoint: Endpoint, cells: Iterator[PlannedCell], skips: Unstored | None) -> None:
        """One worker of ``endpoint``'s pool: sends the cells it takes from the shared iterator until it ends or
        the run, the endpoint or a defect stops it; stores each outcome (``_replied``, ``_retried``).

        The hot path, per cell: its request rendered, a free slot of the cap taken at once, the transport
        awaited right here (no coroutine between this loop and aiohttp's), the reply decoded and buffered.
        A cell not admitted at once (a rate limit to charge, no free slot, a stop) and an attempt that fails
        go to the retry loop (``_retried``), which goes on from that attempt."""
        config, provider, transport, gate, writer = (
            endpoint.config,
            endpoint.provider,
            endpoint.transport,
            endpoint.gate,
            self.writer,
        )
        lean, stop, prompts = endpoint.limiter.unlimited, self._stop, endpoint.prompts
        backlog = 2 * writer.batch_rows  # outcomes buffered when the flusher is behind: wait for it
        for cell in cells:
            if skips is not None:
                endpoint.stats.already_stored = skips.already_stored
            if endpoint.stopped is not None:
                break
            prompt = prompts.of(cell)
            call = provider.call(config.base_url, endpoint.api_key, request_for(cell, prompt))
            started = now_us()
            first = None  # the attempt made here, when it failed: the retry loop goes on from it
            if lean and not stop.is_set() and gate.try_acquire():  # an unlimited limiter holds no ticket to charge
                t0 = time.monotonic()
                try:
                    reply = reply_of(provider, await transport.send(call), call.secret)
                except RequestError as exc:
                    first = self._settle(endpoint, Attempt(None, exc, time.monotonic() - t0))
                else:
                    latency = time.monotonic() - t0
                    gate.on_success()  # what ``_settle`` does for a reply (no ticket to release)
                    endpoint.streak = 0
                finally:
                    gate.release()
                if first is None:
                    buffered = self._replied(endpoint, cell, prompt, reply, 1, latency, started)
                else:
                    buffered = await self._retried(endpoint, cell, prompt, call, started, first)
            else:
                buffered = await self._retried(endpoint, cell, prompt, call, started, None)
            if buffered >= backlog:
                await self.flush()
            if stop.is_set() or self._bug is not None or endpoint.stopped is not None:
                break

    async def _retried(
        self,
        endpoint: Endpoint,
        cell: PlannedCell,
        prompt: Rendered,
        call: HttpCall,
        started: int,
        first: Attempt[Reply] | None,
    ) -> int:
        """Send ``call`` under the retry policy (going on from ``first``, the worker's failed attempt, if any) and
        store how it ended; or hold it in a fatal streak, or leave it unstored when a stop cut its retries short.
        ``started``: when the cell's first attempt began (µs since the epoch). What ``_replied`` or ``_store``
        returns (0: nothing buffered)."""
        s = cell.sampling
        try:
            tried = await call_with_retries(  # returns ``first`` at once unless it asks for a retry
                functools.partial(self._attempt, endpoint, call, prompt.input_estimate + s.max_tokens, s.max_tokens),
                endpoint.policy,
                sleep=endpoint.sleep,
                on_retry=endpoint.on_retry,
                rng=self.rng,
                first=first,
            )
        except Interrupted:
            return 0
        last, error = tried.last, tried.last.error
        if error is None:
            reply = cast(Reply, last.value)
            return self._replied(endpoint, cell, prompt, reply, tried.attempts, last.latency_s, started)
        if (
            (self._stop.is_set() or endpoint.stopped is not None)
            and isinstance(error, RetryableError)
            and tried.attempts <= endpoint.policy.max_retries
        ):
            return 0  # retries were cut short by the run's or the endpoint's stop: leave the cell for the next run
        error.args = (self._redact(str(error)),)
        outcome = Outcome(None, error, tried.attempts, last.latency_s, error.status, started, now_us())
        if endpoint_fatal(error):  # held until the streak ends: the endpoint's failure, maybe not the cell's
            self._hold(endpoint, (cell, prompt.prompt_hash, prompt.messages_json, outcome))
            return 0
        self.stats.failed += 1
        endpoint.stats.failed += 1
        self._settle_fatal_streak(endpoint)  # any other outcome breaks a streak: those were the cells' own
        return self._store(cell, prompt.prompt_hash, prompt.messages_json, outcome)

    def _replied(
        self,
        endpoint: Endpoint,
        cell: PlannedCell,
        prompt: Rendered,
        reply: Reply,
        attempts: int,
        latency_s: float | None,
        started: int,
    ) -> int:
        """A reply ended the cell after ``attempts``: counted and buffered for storage (``Replies``), any fatal
        streak before it settled; unless another model than the one asked for answered (``_served_as_asked``):
        then the endpoint is stopped and the cell stays unsent. The replies buffered (0: this one was not)."""
        if reply.served_model is not None and not self._served_as_asked(endpoint, reply.served_model):
            return 0
        stats = self.stats
        stats.done += 1
        endpoint.stats.done += 1
        stats.input_tokens += reply.input_tokens or 0
        stats.output_tokens += reply.output_tokens or 0
        if endpoint.fatal_streak:  # a reply breaks a streak: those were failures of their own cells
            self._settle_fatal_streak(endpoint)
        self.writer.add_prompt(prompt.prompt_hash, prompt.messages_json)
        buffered = self._replies.add(cell, prompt.prompt_hash, reply, attempts, latency_s, 200, started, now_us())
        if buffered >= self.writer.batch_rows:  # replies alone fill a batch (failures: ``_store``)
            self._flush_due.set()
        return buffered

    async def _attempt(self, endpoint: Endpoint, call: HttpCall, charge: int, reserve: int) -> Attempt[Reply]:
        """One attempt at ``call``: a slot of the endpoint's concurrency cap, a rate-limit charge of ``charge``
        tokens (``reserve`` of them for output), the request; its result. ``Interrupted`` when the run stops."""
        if self._stopping(endpoint):
            raise Interrupted("stopping: no new attempts")
        gate, limiter = endpoint.gate, endpoint.limiter
        if not gate.try_acquire():
            await gate.acquire(self._sleep)
        try:
            if self._stop.is_set():
                raise Interrupted("stopping: no new attempts")
            ticket = None if limiter.unlimited else await limiter.acquire(charge, self._sleep, output_reserve=reserve)
            result = None
            try:
                result = await attempting(send(endpoint.transport, endpoint.provider, call))
            finally:
                if result is None:  # cancelled: the admission ends without a reply
                    limiter.release(ticket)
            return self._settle(endpoint, result, ticket)
        finally:
            gate.release()

    def _stopping(self, endpoint: Endpoint) -> bool:
        """Whether the run or ``endpoint`` is stopping: no new attempts."""
        return self._stop.is_set() or endpoint.stopped is not None

    def _settle(self, endpoint: Endpoint, result: Attempt[Reply], ticket: Ticket | None = None) -> Attempt[Reply]:
        """An attempt ended: its rate-limit admission released with the reply's usage, the concurrency cap told,
        the attempt counted (``_count_attempt``); ``result`` itself."""
        reply = result.value
        if reply is None:
            endpoint.limiter.release(ticket)
        else:
            endpoint.limiter.release(ticket, reply.input_tokens, reply.output_tokens)
            endpoint.gate.on_success()
        if isinstance(result.error, RateLimited):
            endpoint.stats.rate_limited += 1
            endpoint.gate.on_rate_limited(endpoint.policy.server_wait_s(result.error.retry_after_s))
        self._count_attempt(endpoint, result.error)
        return result

    def _on_retry(self, endpoint: Endpoint, error: RequestError, wait_s: float) -> None:
        """A retry is coming: count it; note a server wait longer than ``max_retry_wait_s``."""
        endpoint.stats.retries += 1
        self.stats.retries += 1
        asked = error.retry_after_s
        if asked is not None and asked > endpoint.policy.max_retry_wait_s:
            self._note_capped_wait(endpoint, asked)

    def _store(self, cell: PlannedCell, prompt_hash: str, messages_json: str, outcome: Outcome) -> int:
        """Buffer a failed cell's row (and its prompt) in the writer; commit when the buffer is full. The outcomes
        buffered."""
        self.writer.add_prompt(prompt_hash, messages_json)
        self.writer.add(response_row(cell, prompt_hash, outcome))
        if self.writer.full:
            self._flush_due.set()
        return self.writer.buffered

    def _hold(self, endpoint: Endpoint, held: tuple[PlannedCell, str, str, Outcome]) -> None:
        """A cell whose last attempt was endpoint-fatal: held back until the endpoint's streak ends."""
        if endpoint.stopped is None:  # after the stop, the cell stays remaining like the others
            endpoint.fatal_streak.append(held)

    def _count_attempt(self, endpoint: Endpoint, error: RequestError | None) -> None:
        """Count an attempt's result in the endpoint's streak and show its failure; ``stop_after_fatal``
        endpoint-fatal attempts in a row stop the endpoint (its cells unsent), any reply resets the streak."""
        if error is not None:
            text = " ".join(self._redact(str(error)).split())
            endpoint.stats.last_failure = f"{type(error).__name__}: {text}"[:LAST_FAILURE_CHARS]
        if not endpoint_fatal(error):
            endpoint.streak = 0
            return
        endpoint.streak += 1
        if endpoint.streak < endpoint.config.stop_after_fatal or endpoint.stopped is not None:
            return
        config = endpoint.config
        where = f"base_url = {config.base_url}" + (" or its replicas" if config.base_urls else "")
        if isinstance(error, ConnectionFailed):
            what = "connection failures"
            hint = f"is a server listening there? check {where}"
        else:
            what = f"HTTP {error.status} replies"  # type: ignore[union-attr]
            hint = ENDPOINT_FATAL.get(error.status, ENDPOINT_FATAL_DEFAULT_HINT)  # type: ignore[union-attr]
            hint = f"{hint}; {where}"
        text = " ".join(self._redact(str(error)).split())
        self._stop_endpoint(endpoint, f"stopped after {endpoint.streak} consecutive {what}: {text} ({hint})")

    def _stop_endpoint(self, endpoint: Endpoint, why: str) -> None:
        """Stop ``endpoint``: no new attempts, retries cut short, held cells dropped — all left unsent for a rerun."""
        endpoint.stopped = (
            f"endpoint {endpoint.config.name!r} {why}; its remaining cells were not sent and stay to be run"
        )
        endpoint.fatal_streak.clear()  # not failed for good: a fixed endpoint and a rerun resume them
        endpoint.halted.set()
        self.stats.stopped_endpoints[endpoint.config.name] = endpoint.stopped
        endpoint.stats.stopped = True
        self.progress.note(endpoint.stopped)

    def _served_as_asked(self, endpoint: Endpoint, served: str) -> bool:
        """Whether ``served``, the model a reply names, is the one the spec asked for (``runner.survey.models``);
        counts it. Another model stops the endpoint: the model asked for is the model measured."""
        config = endpoint.config
        counts = self.stats.served_models.get(config.name)
        if counts is not None and served in counts:  # accepted before (only accepted models are counted)
            counts[served] += 1
            return True
        if is_requested_model(config.model, served, config.served_models):
            self.stats.served_models.setdefault(config.name, {})[served] = 1
            return True
        if endpoint.stopped is None:
            self._stop_endpoint(
                endpoint,
                f"stopped: asked for model {config.model!r}, the server answered as {served!r} (at {config.base_url}); "
                f"fix model, or accept it with served_models = [{json.dumps(served)}] in its [[endpoints]] table",
            )
        return False

    def _settle_fatal_streak(self, endpoint: Endpoint) -> None:
        """A streak too short to stop the endpoint: those were failures of their own cells; store them."""
        if not endpoint.fatal_streak:  # the common case, once per stored cell
            return
        streak, endpoint.fatal_streak = endpoint.fatal_streak, []
        for cell, prompt_hash, messages_json, outcome in streak:
            self.stats.failed += 1
            endpoint.stats.failed += 1
            self._store(cell, prompt_hash, messages_json, outcome)

    def _note_capped_wait(self, endpoint: Endpoint, asked_s: float) -> None:
        """A server asked for a wait above ``max_retry_wait_s``: counted, and noted once per endpoint."""
        self.stats.capped_waits += 1
        endpoint.stats.capped_waits += 1
        if endpoint.stats.capped_waits == 1:
            self.progress.note(
                f"endpoint {endpoint.config.name!r}: the server asked to wait {asked_s:g} s before retrying; "
                f"waiting max_retry_wait_s = {endpoint.policy.max_retry_wait_s:g} s instead (counted in the "
                "session record as capped_retry_waits)"
            )

    async def _sleep(self, seconds: float, endpoint: Endpoint | None = None) -> None:
        """Sleep, unless the run (or ``endpoint``) is stopping: then raise ``Interrupted`` (at once, or when the
        stop comes)."""

        def stopping() -> bool:
            return self._stop.is_set() if endpoint is None else self._stopping(endpoint)

        if stopping():
            raise Interrupted("stopping")
        if self._wait is not None:
            await self._wait(seconds)
            if stopping():
                raise Interrupted("stopping")
            return
        if endpoint is None:
            try:
                await asyncio.wait_for(self._stop.wait(), seconds)
            except TimeoutError:
                return
            raise Interrupted("stopping")
        waits = [asyncio.ensure_future(self._stop.wait()), asyncio.ensure_future(endpoint.halted.wait())]
        try:
            done, _ = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
        if done:
            raise Interrupted("stopping")

    async def _flush_periodically(self) -> None:
        """The flusher: every ``flush_interval_s``, or when a batch is full, until the run closes; a flush that
        fails for good stops the run (its error is raised by ``run``)."""
        try:
            while not self._closing:
                try:
                    await asyncio.wait_for(self._flush_due.wait(), self.flush_interval_s)
                except TimeoutError:
                    pass
                self._flush_due.clear()
                await self.flush()
                while self.writer.full and not self._closing:  # a batch piled up during that flush
                    await self.flush()
            while await self.flush():  # what the last requests left
                pass
        except Exception as exc:  # any failure stops the run: none may pass silently
            self._flush_error = exc
            if self._bug is None:
                self._bug = exc
            self._stop.set()
            self.progress.note(f"stopping: {exc}")

    async def _stop_flusher(self, flusher: asyncio.Task) -> None:
        """Let the flusher commit what is buffered and end (cancelled only if this task itself is)."""
        self._closing = True
        self._flush_due.set()
        try:
            await asyncio.shield(flusher)
        finally:
            if self._flush_thread is not None:
                self._flush_thread.shutdown(wait=True)
                self._flush_thread = None

    async def flush(self) -> bool:
        """Commit one batch of what the writer holds, in the flusher's worker thread, retrying failed writes;
        False when there was nothing to commit."""
        async with self._flush_lock:
            if self._flush_error is not None:
                return False
            batch = self.writer.take()
            if batch is None:
                return False
            committed = await self._commit_with_retries(batch)
            if committed.unstorable:
                self._count_unstorable(committed)
            return True

    async def _commit_with_retries(self, batch: Batch) -> Committed:
        """``commit_batch(batch)`` off the loop; an ``OSError`` is retried after each of ``FLUSH_RETRY_WAITS_S``
        (never on a full disk), then raised as a one-line ``RunDirError``."""
        loop = asyncio.get_running_loop()
        if self._flush_thread is None:
            self._flush_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="hofcat-flush")
        what = f"{self.writer.run_dir}: cannot commit part {batch.part}"
        for wait_s in (*FLUSH_RETRY_WAITS_S, None):
            try:
                return await loop.run_in_executor(self._flush_thread, self.commit_batch, batch)
            except OSError as exc:
                if wait_s is None or exc.errno == errno.ENOSPC:
                    raise store_error(exc, what) from None
                self.progress.note(f"{store_error(exc, what)}; retrying in {wait_s:g} s")
                await asyncio.sleep(wait_s)  # a real wait even when stopping: the rows must not be lost
        raise AssertionError("unreachable")

    def _count_unstorable(self, committed: Committed) -> None:
        """Replies the store could not hold were committed as failures: count them as such, and say so."""
        for row in committed.unstorable:
            self.stats.done -= 1
            self.stats.failed += 1
            endpoint = self.stats.endpoints.get(row.endpoint)
            if endpoint is not None:
                endpoint.done -= 1
                endpoint.failed += 1
        self.progress.note(
            f"{len(committed.unstorable)} replies of part {committed.part} could not be stored as they came "
            f"({committed.unstorable[0].error_message}); recorded as failures of class store_error"
        )

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)


_collector: list[tuple[int, int, int]] = []  # the thresholds before the first of the sweeps running now


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """The cyclic collector's young-generation threshold raised to ``GC_YOUNG_THRESHOLD`` (never lowered) while
    any sweep of this process runs (several may share one loop, ending in any order), then restored."""
    if not _collector:
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], GC_YOUNG_THRESHOLD), *thresholds[1:])
    _collector.append(_collector[0] if _collector else thresholds)
    try:
        yield
    finally:
        restore = _collector.pop()
        if not _collector:
            gc.set_threshold(*restore)
