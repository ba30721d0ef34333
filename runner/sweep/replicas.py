"""Replicas behind one endpoint: servers that serve the same model, used as one, failures routed around.

Each request goes to the least-loaded healthy replica (fewest requests in hand; ties in turn). A replica that
fails — no response at all (refused, reset, timed out) or ``fail_after`` consecutive 5xx — is taken out for a
cool-down that doubles with each failure (up to ``max_cooldown_s``); after it, one request at a time probes
it (a success brings it back, a failure takes it out again). A failed request raises as usual, so the
executor's retry sends it again, and the retry goes to another replica: a dead replica's cells go to the
others. When every replica is out, the one due back first is tried. Every reply is marked with the replica
that answered (``RawReply.marks["replica"]``), so the stored row records it.

Limits (``replica_limits``): ``"endpoint"`` — the executor applies the endpoint's rate limits and
``max_concurrency`` to all replicas together (one API key); ``"replica"`` — each replica gets its own
``RateLimiter`` (the endpoint's ``requests_per_minute``, ``tokens_per_minute``, ``burst``) and at most
``max_concurrency`` requests in hand, inside this transport, and the executor's own limits are lifted
(``executor_view``) so that they do not cap the replicas' sum. A request counts against its replica's window
from admission until ``window_s`` after its reply, as in ``runner.sweep.limits``; tokens are charged the
request body's bytes / 4 plus ``max_tokens`` (at least the executor's estimate), and the charge is kept.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from runner.errors import TransportError
from runner.sweep.limits import RateLimiter, Ticket
from runner.sweep.providers import HttpCall
from runner.sweep.spec import EndpointConfig
from runner.sweep.transport import RawReply, Transport, TransportFactory

__all__ = ["Replica", "ReplicaFactory", "ReplicaTransport", "executor_view", "replica_probe_summary"]


@dataclass(slots=True)
class Replica:
    """One server: its base URL, its transport, its own limiter (replica limits), and its health."""

    base_url: str
    transport: Transport
    limiter: RateLimiter | None = None
    in_flight: int = 0  # requests in hand: waiting for its limiter or sent
    failures: int = 0  # consecutive failed requests
    down_until: float = 0.0  # out of service until this clock time (0: in service)
    cooldown_s: float = 0.0
    probing: bool = False  # out, cool-down over, one request in hand to see whether it is back
    sent: int = 0
    answered: int = 0
    taken_out: int = 0  # times it was taken out of service

    def available(self, now: float) -> bool:
        """In service, or out with its cool-down over and no probe in hand (the next request probes it)."""
        return self.down_until == 0.0 or (now >= self.down_until and not self.probing)


class ReplicaTransport:
    """A ``Transport`` over several replicas of one endpoint (``base_urls``), least-loaded healthy first.

    ``capacity``: most requests in hand per replica (None: no cap here); ``limits``: the endpoint whose rate
    limits each replica gets for itself (None: no limiter here).
    """

    def __init__(
        self,
        base_url: str,
        replicas: Sequence[str],
        make: Callable[[str], Transport],
        *,
        fail_after: int = 3,
        cooldown_s: float = 2.0,
        max_cooldown_s: float = 60.0,
        capacity: int | None = None,
        limits: EndpointConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not replicas:
            raise ValueError("at least one replica")
        self.base_url = base_url.rstrip("/")
        self.replicas = [Replica(url.rstrip("/"), make(url), _limiter(limits, clock)) for url in replicas]
        self.fail_after, self.cooldown_s, self.max_cooldown_s = fail_after, cooldown_s, max_cooldown_s
        self.capacity = capacity
        self.clock = clock
        self._turn = 0
        self._freed = asyncio.Event()

    def candidates(self) -> list[Replica]:
        """Replicas the next request may go to, in order of preference: those with room (below ``capacity``)
        that are in service or due a probe, least in hand first (ties in turn); when every one with room is
        out, the one due back first (rather than stall). Empty when every replica is at capacity."""
        now = self.clock()
        room = [r for r in self.replicas if self.capacity is None or r.in_flight < self.capacity]
        ready = [r for r in room if r.available(now)]
        if not ready:
            out = [r for r in room if not r.probing] or room
            return sorted(out, key=lambda r: r.down_until)[:1]
        self._turn += 1
        n = len(self.replicas)
        return sorted(ready, key=lambda r: (r.in_flight, (self.replicas.index(r) - self._turn) % n))

    async def _take(self, call: HttpCall) -> tuple[Replica, Ticket | None, bool]:
        """The first candidate whose limiter admits ``call`` now, its admission ticket, and whether this
        request is its probe (it is out); holds one more request on it. Waits while every replica is at
        capacity, or until the soonest limiter has room."""
        reserve = _max_tokens(call.body)
        charge = _charge(call, reserve)
        while True:
            soonest = None
            for replica in self.candidates():
                ticket, wait_s = await _try_admit(replica.limiter, charge, reserve)
                if wait_s is None:
                    probe = replica.down_until != 0.0
                    replica.probing = replica.probing or probe
                    replica.in_flight += 1
                    return replica, ticket, probe
                soonest = wait_s if soonest is None else min(soonest, wait_s)
            self._freed.clear()
            try:  # a freed slot, or the soonest limiter's room, whichever comes first
                await asyncio.wait_for(self._freed.wait(), soonest)
            except TimeoutError:
                pass

    def _route(self, call: HttpCall, replica: Replica) -> HttpCall:
        """``call`` addressed to ``replica`` (the endpoint's base URL swapped for the replica's)."""
        if not call.url.startswith(self.base_url):
            raise ValueError(f"{call.url} is not under the endpoint's base_url {self.base_url}")
        return replace(call, url=replica.base_url + call.url[len(self.base_url) :])

    def _failed(self, replica: Replica, *, hard: bool, probe: bool) -> None:
        """Count a failure; take the replica out (again, with a doubled cool-down) when it is in service and
        failed hard or ``fail_after`` times in a row, or when this was its probe."""
        replica.failures += 1
        if replica.down_until != 0.0 and not probe:
            return  # already out: requests sent before it went out tell nothing new
        if probe or hard or replica.failures >= self.fail_after:
            replica.cooldown_s = min(self.max_cooldown_s, max(self.cooldown_s, 2 * replica.cooldown_s))
            replica.down_until = self.clock() + replica.cooldown_s
            replica.taken_out += 1

    async def send(self, call: HttpCall) -> RawReply:
        """Send ``call`` to the chosen replica; its reply names the replica. ``TransportError`` when none came."""
        replica, ticket, probe = await self._take(call)
        try:
            replica.sent += 1
            try:
                reply = await replica.transport.send(self._route(call, replica))
            except TransportError:
                self._failed(replica, hard=True, probe=probe)
                raise
        finally:
            if probe:
                replica.probing = False
            replica.in_flight -= 1
            if replica.limiter is not None:
                replica.limiter.release(ticket)
            self._freed.set()
        if reply.status >= 500:
            self._failed(replica, hard=False, probe=probe)
        else:
            replica.failures, replica.cooldown_s, replica.down_until = 0, 0.0, 0.0
            replica.answered += 1
        return RawReply(reply.status, reply.body, reply.headers, {**reply.marks, "replica": replica.base_url})

    def health(self) -> list[dict[str, object]]:
        """Per replica: base URL, requests sent and answered, times taken out, in service now (manifest)."""
        return [
            {
                "base_url": r.base_url,
                "sent": r.sent,
                "answered": r.answered,
                "taken_out": r.taken_out,
                "in_service": r.down_until == 0.0,
            }
            for r in self.replicas
        ]

    async def close(self) -> None:
        """Close every replica's transport."""
        for r in self.replicas:
            await r.transport.close()


async def _try_admit(limiter: RateLimiter | None, charge: int, reserve: int) -> tuple[Ticket | None, float | None]:
    """Admit a request now if ``limiter`` lets it (ticket, None), else (None, seconds until it might)."""
    if limiter is None:
        return None, None

    async def not_now(wait_s: float) -> None:  # the limiter charges nothing before its wait is over
        raise TimeoutError(wait_s)  # a builtin used as a signal: no request has run, nothing is lost

    try:
        return await limiter.acquire(charge, not_now, output_reserve=reserve), None
    except TimeoutError as exc:
        return None, float(exc.args[0])


def _limiter(limits: EndpointConfig | None, clock: Callable[[], float]) -> RateLimiter | None:
    """A replica's own limiter with the endpoint's limits (None when there are none to apply)."""
    if limits is None or not limits.rate_limited:
        return None
    return RateLimiter(
        limits.requests_per_minute,
        limits.tokens_per_minute,
        window_s=limits.rate_window_s,
        burst=limits.burst,
        clock=clock,
        token_counting="reserved",  # the transport does not read usage: the reservation is the charge
    )


def _max_tokens(body: Mapping[str, Any]) -> int:
    """The reply tokens a request may use: ``max_tokens`` / ``max_completion_tokens`` / Gemini's maxOutputTokens."""
    config = body.get("generationConfig") if isinstance(body.get("generationConfig"), Mapping) else {}
    for value in (body.get("max_tokens"), body.get("max_completion_tokens"), config.get("maxOutputTokens")):
        if isinstance(value, int):
            return value
    return 0


def _charge(call: HttpCall, reserve: int) -> int:
    """Tokens charged for ``call``: its body's bytes / 4 (the body holds the messages and more) + ``reserve``."""
    size = len(call.data) if call.data is not None else len(repr(call.body).encode())
    return size // 4 + reserve


def executor_view(endpoint: EndpointConfig) -> EndpointConfig:
    """The endpoint as the executor should limit it: with per-replica limits, no endpoint-wide rate limits and
    ``max_concurrency`` × replicas in flight (each replica's own cap and limiter hold in ``ReplicaTransport``)."""
    if not endpoint.base_urls or endpoint.replica_limits != "replica":
        return endpoint
    return replace(
        endpoint,
        requests_per_minute=None,
        tokens_per_minute=None,
        burst=None,
        max_concurrency=endpoint.max_concurrency * len(endpoint.base_urls),
    )


@dataclass
class ReplicaFactory:
    """A ``TransportFactory``: endpoints with ``base_urls`` get a ``ReplicaTransport`` over one ``inner``
    transport per replica; the others ``inner``'s own. ``endpoints``: the spec's, by name (the executor may be
    handed their ``executor_view``); ``built`` keeps each replica transport, for the manifest."""

    inner: TransportFactory
    endpoints: Sequence[EndpointConfig]
    built: dict[str, ReplicaTransport] = field(default_factory=dict)

    def __call__(self, endpoint: EndpointConfig) -> Transport:
        """The endpoint's transport."""
        spec_endpoint = next((e for e in self.endpoints if e.name == endpoint.name), endpoint)
        if not spec_endpoint.base_urls:
            return self.inner(endpoint)
        per_replica = spec_endpoint.replica_limits == "replica"

        def make(url: str) -> Transport:
            return self.inner(replace(spec_endpoint, base_url=url, base_urls=()))

        transport = ReplicaTransport(
            spec_endpoint.base_url,
            spec_endpoint.base_urls,
            make,
            capacity=spec_endpoint.max_concurrency if per_replica else None,
            limits=spec_endpoint if per_replica else None,
        )
        self.built[endpoint.name] = transport
        return transport

    def record(self) -> dict[str, list[dict[str, object]]]:
        """Per endpoint with replicas: each replica's health and counts (the session's manifest entry)."""
        return {name: t.health() for name, t in self.built.items()}


def replica_probe_summary(results: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """One endpoint's probe record from its replicas' (base URL → probe dict or ``{"error": ...}``).

    The first replica's result at the top (for readers of one probe), ``seed_honoured`` only when every
    replica honours the seed, ``seed`` the common verdict or ``"mixed"``, and every result under ``replicas``.
    """
    ok = [r for r in results.values() if "error" not in r]
    if not ok:
        first = next(iter(results.values()))
        return {"error": f"every replica failed the probe (first: {first['error']})", "replicas": dict(results)}
    verdicts = {r.get("seed") for r in ok}
    honoured = len(ok) == len(results) and all(r.get("seed_honoured") for r in ok)
    return {
        **ok[0],
        "seed": verdicts.pop() if len(verdicts) == 1 and len(ok) == len(results) else "mixed",
        "seed_honoured": honoured,
        "replicas": dict(results),
    }
