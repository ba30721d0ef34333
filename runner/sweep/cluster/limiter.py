"""One rate limiter per endpoint for the whole cluster: the ``LimiterHost`` actor and the workers' handle on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from runner.rundir.admissions import AdmissionLog
from runner.sweep.cluster.progress import REPORT_S
from runner.sweep.cluster.writer import ShardWriter
from runner.sweep.limits import RateLimiter, Ticket
from runner.sweep.progress import Progress
from runner.sweep.replicas import executor_view
from runner.sweep.spec import EndpointConfig

LEASE_SLACK_S = 30.0  # an admission not given back 2 × timeout_s + this after it was granted was a dead worker's
HOST_RESTARTS = 3  # Ray restarts a limiter actor whose node died this many times


class RemoteLimiter:
    """An endpoint's limiter as a worker's executor sees it: each admission comes from the cluster's
    ``LimiterHost`` actor; a granted admission the worker no longer wants is given back at once."""

    unlimited = False

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def acquire(self, tokens: float, sleep: Callable[[float], Any], *, output_reserve: float = 0.0) -> int:
        """Wait for the actor to admit a request charging ``tokens``; its admission id. ``sleep`` (the
        executor's) raises when the run stops: the wait ends then and a late admission is given back."""
        granted = asyncio.wrap_future(self.actor.acquire.remote(tokens, output_reserve).future())
        try:
            while True:
                napping = asyncio.ensure_future(sleep(REPORT_S))
                done, _ = await asyncio.wait({granted, napping}, return_when=asyncio.FIRST_COMPLETED)
                if granted in done:
                    napping.cancel()
                    return granted.result()
                napping.result()  # raises Interrupted when the run stops
        except BaseException:
            granted.add_done_callback(self._give_back)
            raise

    def release(self, ticket: int | None, input_tokens: object = None, output_tokens: object = None) -> None:
        """Admission ``ticket`` finished now, with the usage its reply reported (sent without waiting)."""
        if ticket is not None:
            self.actor.release.remote(ticket, input_tokens, output_tokens)

    def _give_back(self, granted: asyncio.Future) -> None:
        if not granted.cancelled() and granted.exception() is None:
            self.release(granted.result())


class LimiterHost:
    """A Ray actor (made by ``run_sweep_on_ray``): one endpoint's ``RateLimiter`` for every worker, journaled.

    Restores the run directory's admissions journal when it starts and appends to it (the one writer of the
    journal while the cluster runs), so the limit holds across restarts with or without Ray.
    """

    def __init__(self, endpoint: EndpointConfig, run_dir: str) -> None:
        self.log = AdmissionLog.open(ShardWriter.secondary(run_dir, batch_rows=1, session=None, prompts=False))
        self.limiter = RateLimiter.of(endpoint, admissions=self.log)
        self.lease_s = 2 * endpoint.timeout_s + LEASE_SLACK_S
        self.tickets: dict[int, tuple[Ticket, float]] = {}  # admission id → (ticket, lease end, monotonic)
        self.next_id = 0
        self.expiring: asyncio.Task | None = None

    async def acquire(self, tokens: float, output_reserve: float) -> int:
        """Wait until a request charging ``tokens`` fits the endpoint's windows; admit it; its id."""
        if self.expiring is None:
            self.expiring = asyncio.get_running_loop().create_task(self._expire())
        ticket = await self.limiter.acquire(tokens, asyncio.sleep, output_reserve=output_reserve)
        assert ticket is not None  # the driver makes a host only for a limited endpoint
        ident, self.next_id = self.next_id, self.next_id + 1
        self.tickets[ident] = (ticket, time.monotonic() + self.lease_s)
        return ident

    async def release(self, ident: int, input_tokens: object, output_tokens: object) -> None:
        """Admission ``ident`` finished now (ignored when its lease already ended)."""
        held = self.tickets.pop(ident, None)
        if held is not None:
            self.limiter.release(held[0], input_tokens, output_tokens)

    async def close(self) -> str | None:
        """End every open lease (finished now), compact and close the journal; why journaling stopped, if it did."""
        for ticket, _ in self.tickets.values():
            self.limiter.release(ticket)
        self.tickets.clear()
        self.log.close()
        return self.log.error

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            now = time.monotonic()
            for ident in [i for i, (_, end) in self.tickets.items() if end <= now]:
                self.limiter.release(self.tickets.pop(ident)[0])  # a dead worker's: counted as finished now


def limited(endpoint: EndpointConfig) -> bool:
    """Whether the executor rate-limits ``endpoint`` (not with per-replica limits: ``executor_view``)."""
    return executor_view(endpoint).rate_limited


def start_host(ray: ModuleType, endpoint: EndpointConfig, run_dir: Path) -> Any:
    """The endpoint's ``LimiterHost`` actor (no CPU: it only hands out admissions), restarted if its node dies."""
    actor = ray.remote(num_cpus=0, max_restarts=HOST_RESTARTS, max_task_retries=HOST_RESTARTS)(LimiterHost)
    return actor.remote(endpoint, str(Path(run_dir).resolve()))


def close_host(ray: ModuleType, host: Any, progress: Progress) -> None:
    """Close a limiter actor's journal (noting why journaling stopped, if it did), then end the actor."""
    try:
        error = ray.get(host.close.remote(), timeout=60)
    except ray.exceptions.RayError as exc:
        error = f"the rate limiter's journal was not closed ({one_line(exc)}); the next session reads what it holds"
    if error:
        progress.note(error)
    ray.kill(host)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and the last line of its message (Ray's errors span many)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}".strip(": ")
