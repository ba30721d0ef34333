"""A response cache that several runs share: replies kept by the exact request, so nothing is paid for twice.

Content-addressed: the key is the SHA-256 of the provider, the request path and the canonical JSON body (model,
messages, seed, sampling, every parameter), so two requests share an entry exactly when a server would see the
same request. Hosts and headers are not in the key: replicas of one model answer the same request alike, and
the headers carry the API key, which must never reach a file name or an entry.

Only requests whose reply is determined are served from the cache — temperature 0, or a seed the endpoint
honours (its determinism probe says so) — unless the run forces it; any other request is sent as usual, and a
2xx reply to a determined request is stored. Each entry records its origin (run, session, time) and a hit hands
it on as the reply's ``cache_origin`` mark, so the stored row says where its reply came from.

Safe when runs share the directory at once: an entry is written to a unique temporary file and renamed into
place (two runs writing the same key write the same reply; the last rename wins; a reader sees a whole entry
or none). Entries are not fsynced (that would stall the event loop per reply): an entry a power loss leaves
damaged reads as absent and is asked again. Memory stays bounded: there is no index in memory, one file per
entry, fanned out over 256 folders.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from yarl import URL

from runner.errors import RequestError, SpecError
from runner.sweep.providers import HttpCall, provider_for
from runner.sweep.spec import EndpointConfig, Spec
from runner.sweep.transport import RawReply, Transport, TransportFactory, decode, redact

__all__ = [
    "CACHE_ENV",
    "CacheStats",
    "CachingFactory",
    "CachingTransport",
    "ResponseCache",
    "cache_dir",
    "determined",
    "request_key",
]

CACHE_ENV = "HOFCAT_CACHE"  # the cache directory when the spec sets no [run] cache
_KEPT_HEADERS = ("content-type", "openai-model", "x-request-id", "request-id")


def request_key(provider: str, call: HttpCall) -> str:
    """The cache key of ``call``: SHA-256 hex of provider, URL path and canonical JSON body (no host, no headers)."""
    body = json.dumps(call.body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    text = f"{provider}\n{URL(call.url).path}\n{body}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def determined(body: Mapping[str, Any], seed_honoured: bool) -> bool:
    """Whether the reply to ``body`` is fixed by the request: greedy decoding, or a seed the server honours."""
    config = body.get("generationConfig") if isinstance(body.get("generationConfig"), Mapping) else body
    temperature = config.get("temperature")
    if temperature == 0:
        return True
    return seed_honoured and config.get("seed") is not None


@dataclass(slots=True)
class CacheStats:
    """What the cache did in one session: replies served from it, replies stored, requests not eligible."""

    hits: int = 0
    stored: int = 0
    ineligible: int = 0
    write_errors: int = 0  # replies that could not be stored (full disk, permissions): sent, kept, not cached

    def to_dict(self) -> dict[str, int]:
        """For the session's manifest entry."""
        return {
            "hits": self.hits,
            "stored": self.stored,
            "ineligible": self.ineligible,
            "write_errors": self.write_errors,
        }


class ResponseCache:
    """A directory of cached replies, one JSON file per request key."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpecError(f"response cache {self.root}: cannot create it ({exc.strerror or exc})") from None

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> tuple[RawReply, dict[str, Any]] | None:
        """The reply stored under ``key`` and its origin, or None (a damaged entry counts as absent)."""
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
            reply = RawReply(int(entry["status"]), base64.b64decode(entry["body"]), dict(entry.get("headers", {})))
            return reply, dict(entry["origin"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, reply: RawReply, origin: Mapping[str, Any]) -> None:
        """Store ``reply`` under ``key`` atomically (unique temp file, rename; ``OSError`` when it cannot)."""
        path = self._path(key)
        path.parent.mkdir(exist_ok=True)
        headers = {k: v for k, v in reply.headers.items() if k.lower() in _KEPT_HEADERS}
        entry = {
            "status": reply.status,
            "body": base64.b64encode(reply.body).decode("ascii"),
            "headers": headers,
            "origin": dict(origin),
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class CachingTransport:
    """A transport that answers determined requests from a ``ResponseCache`` and stores what it sends.

    ``eligible(call)`` decides per request (``determined`` with the endpoint's probe result, or always when
    forced); ``origin`` is recorded with every stored entry (run id and name, session, and the time added);
    ``keep(reply, secret)`` gives the reply to hand on when it is worth storing, else None (default: any 2xx;
    ``CachingFactory`` keeps only replies the provider can read, so a malformed 200 is retried, never served
    again, and hands them on decoded). A reply that holds the call's key (a server echoing the request) is
    never stored: the entry would keep the key outside the run's reach.
    """

    def __init__(
        self,
        inner: Transport,
        cache: ResponseCache,
        provider: str,
        eligible: Callable[[HttpCall], bool],
        origin: Callable[[], Mapping[str, Any]],
        stats: CacheStats | None = None,
        keep: Callable[[RawReply, str | None], RawReply | None] | None = None,
    ) -> None:
        self.inner, self.cache, self.provider = inner, cache, provider
        self.eligible, self.origin = eligible, origin
        self.stats = stats if stats is not None else CacheStats()
        self.keep = keep or (lambda reply, secret: reply if 200 <= reply.status < 300 else None)

    async def send(self, call: HttpCall) -> RawReply:
        """The cached reply for a determined ``call`` (marked with its origin), else the inner transport's."""
        if not self.eligible(call):
            self.stats.ineligible += 1
            return await self.inner.send(call)
        key = request_key(self.provider, call)
        found = self.cache.get(key)
        if found is not None:
            reply, origin = found
            self.stats.hits += 1
            return RawReply(reply.status, reply.body, reply.headers, {"cache_origin": json.dumps(origin)})
        reply = await self.inner.send(call)
        kept = self.keep(reply, call.secret)
        if kept is None:
            return reply
        if not _echoes_key(reply, call.secret):
            try:
                self.cache.put(key, reply, self.origin())
                self.stats.stored += 1
            except OSError:  # the reply itself is good: the cell keeps it; only the cache misses it
                self.stats.write_errors += 1
        return kept

    async def close(self) -> None:
        """Close the inner transport."""
        await self.inner.close()


def _echoes_key(reply: RawReply, secret: str | None) -> bool:
    """Whether ``reply``'s body or headers hold ``secret`` or a run of it that ``redact`` would replace."""
    if not secret:
        return False
    text = "\n".join([reply.body.decode("latin-1"), *(f"{k}: {v}" for k, v in reply.headers.items())])
    return redact(text, [secret]) != text


def cache_dir(spec: Spec) -> Path | None:
    """The run's cache directory: ``[run] cache``, else the ``HOFCAT_CACHE`` variable, else None (no cache).

    A relative path is taken from the working directory."""
    where = spec.run.cache or os.environ.get(CACHE_ENV) or None
    return None if where is None else Path(where).expanduser()


@dataclass
class CachingFactory:
    """A ``TransportFactory`` that puts a ``CachingTransport`` over each endpoint's transport from ``inner``.

    ``seed_honoured(name)`` says whether the endpoint's determinism probe found its seed honoured (read when
    the endpoint opens, after the probe); ``origin`` is this session's (run_id, run_name, session); ``force``
    serves every request from the cache. ``stats`` per endpoint name, for the session's manifest entry.
    """

    inner: TransportFactory
    cache: ResponseCache
    seed_honoured: Callable[[str], bool]
    origin: Mapping[str, Any]
    force: bool = False
    stats: dict[str, CacheStats] = field(default_factory=dict)

    def __call__(self, endpoint: EndpointConfig) -> Transport:
        """The endpoint's transport, answering determined requests from the cache."""
        honoured = self.seed_honoured(endpoint.name)
        stats = self.stats.setdefault(endpoint.name, CacheStats())

        def eligible(call: HttpCall) -> bool:
            return self.force or determined(call.body, honoured)

        def origin() -> dict[str, Any]:
            return {**self.origin, "time": datetime.now(UTC).isoformat(timespec="seconds")}

        provider = provider_for(endpoint)

        def readable(reply: RawReply, secret: str | None) -> RawReply | None:
            """A 2xx the provider can read (what the executor accepts), handed on decoded: decoded once."""
            try:
                decoded = decode(provider, reply, secret)
            except RequestError:
                return None
            return dataclasses.replace(reply, decoded=decoded)

        inner = self.inner(endpoint)
        return CachingTransport(inner, self.cache, endpoint.provider, eligible, origin, stats, readable)

    def record(self) -> dict[str, Any]:
        """The session's cache counts: directory, forced or not, totals and per endpoint."""
        totals = CacheStats()
        for s in self.stats.values():
            totals.hits, totals.stored = totals.hits + s.hits, totals.stored + s.stored
            totals.ineligible, totals.write_errors = (
                totals.ineligible + s.ineligible,
                totals.write_errors + s.write_errors,
            )
        return {
            "dir": str(self.cache.root),
            "force": self.force,
            **totals.to_dict(),
            "endpoints": {name: s.to_dict() for name, s in self.stats.items()},
        }
