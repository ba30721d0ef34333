"""One HTTP attempt, split in two: a ``Transport`` sends the call, ``decode`` classifies the raw reply.

The transport is the only part that touches the network, so the executor and the probe take one and tests
drive them with a scripted in-memory transport; ``AiohttpTransport`` is the real one.

Status classes (``decode``): 2xx → the provider's ``Reply`` (or ``UnreadableBody``); 429 → ``RateLimited``
with the server's wait; 408 and 5xx → ``ServerError``; other statuses → ``FatalRequestError``. A transport
raises ``TransportError`` when no response came (refused, reset, timed out). Error messages never contain
request headers (where API keys live), and the key, or any run of 8+ of its characters a server echoes, is
redacted from every message before it is cut to length.

Bodies are bounded: the real transport reads the decoded (decompressed) stream in chunks and stops at the
endpoint's ``max_reply_bytes``: a 2xx reply past it is an ``OversizeReply``; an error body is cut there.
Redirects are never followed by aiohttp (it would forward ``x-api-key`` / ``x-goog-api-key`` to another
host): the transport follows same-origin ones itself, re-sending the same POST, and refuses the others.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from yarl import URL

from runner.errors import (
    FatalRequestError,
    OversizeReply,
    RateLimited,
    ServerError,
    TransportError,
    UnreadableBody,
)
from runner.sweep.providers import HttpCall, Provider, Reply
from runner.sweep.retry import retry_after_s
from runner.sweep.spec import EndpointConfig

if TYPE_CHECKING:  # aiohttp is imported when a transport is made: a run with nothing to send never needs it
    import aiohttp

__all__ = [
    "AiohttpTransport",
    "RawReply",
    "Transport",
    "TransportFactory",
    "aiohttp_transport",
    "decode",
    "redact",
    "send",
]

_SNIPPET = 300  # characters of an error body kept in messages
_WINDOW = 4096  # bytes of an error body redacted before the snippet is cut from it
SECRET_RUN = 8  # a run of this many characters copied from a key is redacted wherever it appears
DEFAULT_MAX_REPLY_BYTES = 8 * 1024 * 1024
_CHUNK = 64 * 1024
_REDIRECTS = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 5


@dataclass(slots=True)  # not frozen, never changed: see ChatRequest
class RawReply:
    """What came back for one call: HTTP status, headers and the body's bytes."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    # what a wrapping transport says about the reply (``MARKS``: cache_origin, replica), never what the server
    # sent: a server cannot forge them through its headers; ``send`` copies them onto the ``Reply``
    marks: Mapping[str, str] = field(default_factory=dict)


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
    """The real transport: one aiohttp session with a bounded connection pool and a total timeout per call.

    ``max_reply_bytes`` caps each decoded body; redirects are followed only within the call's origin.
    """

    def __init__(self, max_connections: int, timeout_s: float, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=max_connections, force_close=False)
        self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_s))
        self.max_reply_bytes = max_reply_bytes

    async def send(self, call: HttpCall) -> RawReply:
        """POST ``call`` once; ``TransportError`` on refusal, reset, bad framing or timeout (message redacted)."""
        import aiohttp

        try:
            data = call.data if call.data is not None else json.dumps(call.body).encode()
            url = _url(call.url)
            for _ in range(MAX_REDIRECTS + 1):
                async with self._session.post(url, data=data, headers=call.headers, allow_redirects=False) as response:
                    if response.status in _REDIRECTS and "Location" in response.headers:
                        url = _same_origin(url, response)
                        continue
                    body = await self._read(response)
                    return RawReply(response.status, body, response.headers)
            raise FatalRequestError(f"more than {MAX_REDIRECTS} redirects from {call.url}", status=response.status)
        except TimeoutError:
            raise TransportError("timed out waiting for the response") from None
        except aiohttp.ClientError as exc:  # refused, reset, bad HTTP framing, payload errors
            raise TransportError(redact(f"{type(exc).__name__}: {exc}", [call.secret])) from None

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        """The decoded body, read in chunks up to ``max_reply_bytes`` (past it: ``OversizeReply`` for a 2xx,
        the first ``max_reply_bytes`` otherwise); an unfinished body closes its connection."""
        cap, chunks, size = self.max_reply_bytes, [], 0
        declared = response.content_length if "Content-Encoding" not in response.headers else None
        if declared is not None and declared <= cap:  # the framing bounds the body: one read, no chunk loop
            return await response.read()
        if declared is None:
            async for chunk in response.content.iter_chunked(_CHUNK):
                size += len(chunk)
                chunks.append(chunk)
                if size > cap:
                    break
            else:
                return b"".join(chunks)
        response.close()  # do not read the rest, nor reuse the connection
        if 200 <= response.status < 300:
            raise OversizeReply(
                f"HTTP {response.status} with a body over max_reply_bytes = {cap} (decoded); not read further",
                status=response.status,
            )
        return b"".join(chunks)[:cap]

    async def close(self) -> None:
        """Close the session and its connections."""
        await self._session.close()


@lru_cache(maxsize=64)
def _url(text: str) -> URL:
    """``text`` parsed once per distinct URL (an endpoint posts to one or two), not once per request."""
    return URL(text)


def _same_origin(url: URL, response: aiohttp.ClientResponse) -> URL:
    """Where a redirect points, when it stays on ``url``'s scheme, host and port; else ``FatalRequestError``."""
    status = response.status
    try:
        target = url.join(URL(response.headers["Location"]))
        same = target.origin() == url.origin()
    except ValueError:
        raise FatalRequestError(f"HTTP {status} redirect to an unreadable Location", status=status) from None
    if not same:
        where = f"{target.scheme}://{target.host}:{target.port}"[:120]
        raise FatalRequestError(
            f"HTTP {status} redirect to another origin ({where}) refused: credentials are never sent to another "
            "host; set base_url to the address the API answers at",
            status=status,
        )
    return target


def aiohttp_transport(endpoint: EndpointConfig) -> Transport:
    """The default ``TransportFactory``: ``max_concurrency`` connections, ``timeout_s`` per request and
    ``max_reply_bytes`` per body."""
    return AiohttpTransport(endpoint.max_concurrency, endpoint.timeout_s, endpoint.max_reply_bytes)


def decode(provider: Provider, raw: RawReply, secret: str | None = None) -> Reply:
    """The provider's ``Reply`` in a 2xx ``raw``, else the classified ``RequestError`` for its status.

    Every message quoting the body has ``secret`` (the key sent) and any 8-character run of it redacted.
    """
    status, body = raw.status, raw.body
    if status == 429:
        wait = retry_after_s(raw.headers)
        raise RateLimited(f"HTTP 429: {_snippet(body, secret)}", status=status, retry_after_s=wait)
    if status == 408 or status >= 500:
        wait = retry_after_s(raw.headers)
        raise ServerError(f"HTTP {status}: {_snippet(body, secret)}", status=status, retry_after_s=wait)
    if status >= 300 or status < 200:  # 3xx: a redirect the transport did not follow
        raise FatalRequestError(f"HTTP {status}: {_snippet(body, secret)}", status=status)
    try:
        decoded = _json(body)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past the stack, a 5,000-digit number
        raise UnreadableBody(
            f"HTTP {status} with a body that is not JSON: {_snippet(body, secret)}", status=status
        ) from None
    try:
        return provider.reply(decoded)
    except UnreadableBody as exc:
        exc.args, exc.status = (redact(str(exc), [secret]),), status
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError, ArithmeticError, RecursionError):
        raise UnreadableBody(
            f"HTTP {status} with an unexpected JSON shape: {_snippet(body, secret)}", status=status
        ) from None


def _json(body: bytes) -> object:
    """``json.loads(body)``: a body opening with ``{`` and a non-NUL byte is the UTF-8 that ``json.loads`` would
    detect, so it is decoded as such at once (as ``json.loads`` does, surrogates passed); others go through it."""
    if len(body) > 1 and body[0] == 0x7B and body[1]:
        return json.loads(body.decode("utf-8", "surrogatepass"))
    return json.loads(body)


MARKS = ("cache_origin", "replica")  # the ``RawReply.marks`` copied onto the ``Reply`` (and so the stored row)


async def send(transport: Transport, provider: Provider, call: HttpCall) -> Reply:
    """One attempt: send ``call`` over ``transport`` and decode the reply (a ``RequestError`` on failure);
    the reply carries the transport's marks (which cache entry or replica answered)."""
    raw = await transport.send(call)
    reply = decode(provider, raw, call.secret)
    if raw.marks:
        reply = dataclasses.replace(reply, **{k: raw.marks[k] for k in MARKS if k in raw.marks})
    return reply


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each secret, and each run of ``SECRET_RUN``+ characters copied from one, as ``<redacted>``."""
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, "<redacted>")
        if len(secret) < SECRET_RUN or len(text) < SECRET_RUN:
            continue
        grams = {secret[i : i + SECRET_RUN] for i in range(len(secret) - SECRET_RUN + 1)}
        covered = bytearray(len(text))
        for i in range(len(text) - SECRET_RUN + 1):
            if text[i : i + SECRET_RUN] in grams:
                covered[i : i + SECRET_RUN] = b"\x01" * SECRET_RUN
        runs = [m.span() for m in re.finditer(rb"\x01+", covered)]
        for start, end in reversed(runs):
            text = text[:start] + "<redacted>" + text[end:]
    return text


def _snippet(body: bytes, secret: str | None) -> str:
    """The start of an error body for a message: redacted first, then cut to ``_SNIPPET`` characters."""
    text = redact(body[:_WINDOW].decode("utf-8", errors="replace").strip(), [secret])
    return text[:_SNIPPET] + ("…" if len(text) > _SNIPPET or len(body) > _WINDOW else "")
