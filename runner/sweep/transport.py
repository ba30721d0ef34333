"""One HTTP attempt, split in two: a ``Transport`` sends the call, ``decode`` classifies the raw reply.

The transport is the only part that touches the network, so the executor and the probe take one and tests
drive them with a scripted in-memory transport; ``AiohttpTransport`` is the real one.

Status classes (``decode``): 2xx → the provider's ``Reply`` (or ``UnreadableBody``); 429 → ``RateLimited``
with the server's wait; 408 and 5xx → ``ServerError``; other statuses → ``FatalRequestError``. A transport
raises ``TransportError`` when no response came (refused, reset, timed out). Error messages never contain
request headers (where API keys live).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp

from runner.errors import FatalRequestError, RateLimited, ServerError, TransportError, UnreadableBody
from runner.sweep.providers import HttpCall, Provider, Reply
from runner.sweep.retry import retry_after_s
from runner.sweep.spec import EndpointConfig

__all__ = ["AiohttpTransport", "RawReply", "Transport", "TransportFactory", "aiohttp_transport", "decode", "send"]

_SNIPPET = 300  # characters of an error body kept in messages


@dataclass(frozen=True, slots=True)
class RawReply:
    """What came back for one call: HTTP status, headers and the body's bytes."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


class Transport(Protocol):
    """Sends one HTTP call and returns the raw reply; ``TransportError`` when no reply came."""

    async def send(self, call: HttpCall) -> RawReply:
        """POST ``call`` once (no retries) and return what the server answered."""
        ...

    async def close(self) -> None:
        """Release connections; the transport is not used afterwards."""
        ...


# Builds the transport of one endpoint of the spec.
TransportFactory = Callable[[EndpointConfig], Transport]


class AiohttpTransport:
    """The real transport: one aiohttp session with a bounded connection pool and a total timeout per call."""

    def __init__(self, max_connections: int, timeout_s: float) -> None:
        connector = aiohttp.TCPConnector(limit=max_connections, force_close=False)
        self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_s))

    async def send(self, call: HttpCall) -> RawReply:
        """POST ``call`` once; ``TransportError`` on refusal, reset, bad framing or timeout."""
        try:
            data = call.data if call.data is not None else json.dumps(call.body).encode()
            async with self._session.post(call.url, data=data, headers=call.headers) as response:
                return RawReply(response.status, await response.read(), response.headers)
        except TimeoutError:
            raise TransportError("timed out waiting for the response") from None
        except aiohttp.ClientError as exc:  # refused, reset, bad HTTP framing, payload errors
            raise TransportError(f"{type(exc).__name__}: {exc}") from None

    async def close(self) -> None:
        """Close the session and its connections."""
        await self._session.close()


def aiohttp_transport(endpoint: EndpointConfig) -> Transport:
    """The default ``TransportFactory``: ``max_concurrency`` connections, ``timeout_s`` per request."""
    return AiohttpTransport(endpoint.max_concurrency, endpoint.timeout_s)


def decode(provider: Provider, raw: RawReply) -> Reply:
    """The provider's ``Reply`` in a 2xx ``raw``, else the classified ``RequestError`` for its status."""
    status, body = raw.status, raw.body
    if status == 429:
        raise RateLimited(f"HTTP 429: {_snippet(body)}", status=status, retry_after_s=retry_after_s(raw.headers))
    if status == 408 or status >= 500:
        raise ServerError(f"HTTP {status}: {_snippet(body)}", status=status, retry_after_s=retry_after_s(raw.headers))
    if status >= 400 or status < 200:
        raise FatalRequestError(f"HTTP {status}: {_snippet(body)}", status=status)
    try:
        decoded = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UnreadableBody(f"HTTP {status} with a body that is not JSON: {_snippet(body)}", status=status) from None
    try:
        return provider.reply(decoded)
    except UnreadableBody as exc:
        exc.status = status
        raise
    except (AttributeError, TypeError, KeyError, IndexError):  # a shape too odd for the provider's checks
        raise UnreadableBody(f"HTTP {status} with an unexpected JSON shape: {_snippet(body)}", status=status) from None


async def send(transport: Transport, provider: Provider, call: HttpCall) -> Reply:
    """One attempt: send ``call`` over ``transport`` and decode the reply (a ``RequestError`` on failure)."""
    return decode(provider, await transport.send(call))


def _snippet(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    return text[:_SNIPPET] + ("…" if len(text) > _SNIPPET else "")
