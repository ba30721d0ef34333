"""Execution: a bounded producer per endpoint → an asyncio pool per endpoint → the run directory's writer.

Each endpoint gets a transport (``runner.sweep.transport``; aiohttp unless the caller injects another) and
an ``asyncio_pool.AioPool`` of ``max_concurrency`` workers that take cells one at a time from the endpoint's
lazy plan iterator (stored cells skipped): at most ``max_concurrency`` cells per endpoint are in hand at
once, whatever the plan's size, and no task is created per cell. A worker renders
the prompt, then runs attempts under the retry policy; each attempt holds a slot of the endpoint's
adaptive concurrency cap and a rate-limit charge. Every outcome becomes a row in the run directory's writer;
``commit`` (the session's) flushes it. The executor knows neither prompts' wording nor answers' meaning.

Stopping (SIGINT/SIGTERM): the first signal stops intake and cuts waits short; requests already in flight
finish or time out and are stored; cells whose retries were cut short are left unstored for the next run.
A second signal cancels the requests in flight. Either way the writer is flushed: the run resumes cleanly.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from asyncio_pool import AioPool

from runner.errors import Interrupted, RateLimited, RequestError, RetryableError, SpecError
from runner.rundir import RunWriter
from runner.survey.cell import PromptCell
from runner.sweep.limits import AdaptiveConcurrency, RateLimiter
from runner.sweep.outcome import Outcome, now_us, response_row
from runner.sweep.plan import PlannedCell
from runner.sweep.progress import EndpointStats, Progress, RunStats
from runner.sweep.providers import ChatRequest, Provider, get_provider
from runner.sweep.retry import RetryPolicy, call_with_retries
from runner.sweep.spec import EndpointConfig
from runner.sweep.transport import Transport, TransportFactory, aiohttp_transport, send

CHARS_PER_TOKEN = 4  # input-token estimate before the server reports usage


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


@dataclass
class RunResult:
    """How a session ended: cells stored, failed, already stored before, and whether it was interrupted.

    ``failed_before``: planned cells skipped because an earlier session recorded a failure for them (not
    retried without ``--retry-failed``); with ``failed`` they are the planned cells still without a reply.
    """

    stored: int
    failed: int
    already_stored: int
    interrupted: bool
    unsupported: dict[str, list[str]] = field(default_factory=dict)
    failed_before: int = 0


def api_key_for(endpoint: EndpointConfig, source: str = "spec") -> str | None:
    """The endpoint's API key from its ``api_key_env`` variable; ``SpecError`` when that variable is unset."""
    if endpoint.api_key_env is None:
        return None
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise SpecError(
            f"{source}: endpoints.{endpoint.name}.api_key_env = {endpoint.api_key_env!r}: "
            "must name a set, non-empty environment variable"
        )
    return key


def unsupported_parameters(endpoint: EndpointConfig) -> list[str]:
    """Sampling parameters of the plan that this endpoint's provider cannot pass on."""
    return sorted(get_provider(endpoint.provider).unsupported)


class Executor:
    """Runs planned cells against their endpoints and hands every outcome to the run directory's writer.

    ``commit`` flushes the writer (and whatever the caller does with a committed part); it is called every
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
        commit: Callable[[], object] | None = None,
        transport_factory: TransportFactory = aiohttp_transport,
        handle_signals: bool = True,
        wait: Callable[[float], Awaitable[None]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self.commit = commit or writer.flush
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
        try:
            producers = []
            for config, cells in work:
                endpoint = self._open_endpoint(config)
                endpoints.append(endpoint)
                producers.append(self._produce(endpoint, cells))
            await asyncio.gather(*producers)
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            flusher.cancel()
            await asyncio.gather(flusher, return_exceptions=True)
            for endpoint in endpoints:
                await endpoint.transport.close()
            await self.progress.stop()
        if self._bug is not None:
            raise self._bug
        return self._stop.is_set()

    def _open_endpoint(self, config: EndpointConfig) -> Endpoint:
        key = api_key_for(config)
        if key:
            self._secrets.append(key)
        provider = get_provider(config.provider)
        if provider.unsupported:
            self.progress.note(
                f"endpoint {config.name!r}: the {provider.name} API takes no "
                f"{', '.join(sorted(provider.unsupported))}; requests are sent without it"
            )
        rpw = config.requests_per_minute
        limiter = RateLimiter(
            rpw, config.tokens_per_minute, window_s=config.rate_window_s, burst=config.burst, clock=self._clock
        )
        gate = AdaptiveConcurrency(config.max_concurrency, clock=self._clock)
        stats = self.stats.endpoints.setdefault(config.name, EndpointStats(config.name, rpw, config.max_concurrency))
        stats.in_flight = lambda: gate.in_flight
        stats.concurrency_limit = lambda: gate.limit
        transport = self.transport_factory(config)
        return Endpoint(
            config,
            provider,
            key,
            transport,
            limiter,
            gate,
            RetryPolicy(config.max_retries),
            AioPool(size=config.max_concurrency),
            stats,
        )

    async def _produce(self, endpoint: Endpoint, cells: Iterable[PlannedCell]) -> None:
        """Fill the endpoint's pool with ``max_concurrency`` workers that take cells from one lazy iterator."""
        shared = iter(cells)  # next() never awaits, so each cell goes to exactly one worker

        async def worker() -> None:
            for cell in shared:
                await self._do_cell(endpoint, cell)
                if self._stop.is_set() or self._bug is not None:
                    break

        for _ in range(endpoint.config.max_concurrency):
            future = await endpoint.pool.spawn(worker())
            future.add_done_callback(self._note_bug)
        await endpoint.pool.join()

    def _note_bug(self, future: asyncio.Future) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if isinstance(exc, asyncio.CancelledError):  # the pool hands a cancelled worker's state on as an error
            return
        if exc is not None and self._bug is None:  # a defect, not a request failure: stop the run, report it
            self._bug = exc
            self._stop.set()

    async def _do_cell(self, endpoint: Endpoint, cell: PlannedCell) -> None:
        messages, messages_json, prompt_hash, input_estimate = _rendered(cell.prompt)
        s = cell.sampling
        request = ChatRequest(
            endpoint.config.model, messages, s.seed, s.temperature, s.top_p, s.max_tokens, messages_json, s.constraint
        )
        call = endpoint.provider.call(endpoint.config.base_url, endpoint.api_key, request)
        started = now_us()
        last: dict[str, float | int | None] = {"latency_s": None, "status": None}

        async def attempt():
            if self._stop.is_set():
                raise Interrupted("stopping: no new attempts")
            if not endpoint.gate.try_acquire():
                await endpoint.gate.acquire(self._sleep)
            try:
                if self._stop.is_set():
                    raise Interrupted("stopping: no new attempts")
                ticket = (
                    None
                    if endpoint.limiter.unlimited
                    else (await endpoint.limiter.acquire(input_estimate + s.max_tokens, self._sleep))
                )
                t0 = time.monotonic()
                reply = None
                try:
                    reply = await send(endpoint.transport, endpoint.provider, call)
                except RequestError as exc:
                    last["status"] = exc.status
                    if isinstance(exc, RateLimited):
                        endpoint.stats.rate_limited += 1
                        endpoint.gate.on_rate_limited(exc.retry_after_s)
                    raise
                finally:
                    last["latency_s"] = time.monotonic() - t0
                    used = None
                    if reply is not None and (reply.input_tokens is not None or reply.output_tokens is not None):
                        used = (reply.input_tokens or 0) + (reply.output_tokens or 0)
                    endpoint.limiter.release(ticket, used)
                last["status"] = 200
                endpoint.gate.on_success()
                return reply
            finally:
                endpoint.gate.release()

        def on_retry(exc: BaseException, wait_s: float) -> None:
            endpoint.stats.retries += 1
            self.stats.retries += 1

        try:
            reply, attempts = await call_with_retries(
                attempt, endpoint.policy, sleep=self._sleep, on_retry=on_retry, rng=self.rng
            )
            outcome = Outcome(reply, None, attempts, last["latency_s"], 200, started, now_us())
            self.stats.done += 1
            endpoint.stats.done += 1
            self.stats.input_tokens += reply.input_tokens or 0
            self.stats.output_tokens += reply.output_tokens or 0
        except Interrupted:
            return
        except RequestError as exc:
            attempts = getattr(exc, "attempts", 1)
            if self._stop.is_set() and isinstance(exc, RetryableError) and attempts <= endpoint.policy.max_retries:
                return  # retries were cut short by the stop: leave the cell for the next run
            exc.args = (self._redact(str(exc)),)
            outcome = Outcome(None, exc, attempts, last["latency_s"], exc.status, started, now_us())
            self.stats.failed += 1
            endpoint.stats.failed += 1
        self.writer.add_prompt(prompt_hash, messages_json)
        self.writer.add(response_row(cell, prompt_hash, outcome))
        if self.writer.full:
            self.commit()

    async def _sleep(self, seconds: float) -> None:
        """Sleep, unless the run is stopping: then raise ``Interrupted`` (at once, or when the stop comes)."""
        if self._stop.is_set():
            raise Interrupted("stopping")
        if self._wait is not None:
            await self._wait(seconds)
            if self._stop.is_set():
                raise Interrupted("stopping")
            return
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return
        raise Interrupted("stopping")

    async def _flush_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval_s)
            self.commit()

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<redacted>")
        return text


def prompt_estimate(prompt: PromptCell) -> int:
    """Estimated input tokens of a prompt's messages (characters / 4, plus 4 per message)."""
    return _rendered(prompt)[3]


@lru_cache(maxsize=8192)
def _rendered(prompt: PromptCell) -> tuple[list[dict[str, str]], str, str, int]:
    """Messages, their canonical JSON, its 16-hex-digit hash and the input-token estimate of a prompt."""
    from runner.survey.prompts import build_messages

    messages = build_messages(prompt)
    text = json.dumps(messages, ensure_ascii=False, separators=(",", ":"))
    estimate = sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN + 4 * len(messages)
    return messages, text, hashlib.sha256(text.encode()).hexdigest()[:16], estimate
