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

Hostile servers (``tests/test_hostile_http.py``): broken framing, garbage status lines, bad lengths or chunks,
resets and disconnects are ``TransportError`` (retried) with a short redacted message; one ``timeout_s``
bounds an attempt, redirects included; a body in a ``Content-Encoding`` aiohttp does not decode (``x-foo``,
``gzip, gzip``) is never read as if it were plain (a 2xx: ``UnreadableBody``); a reply that arrives on a
pooled connection with no request outstanding (a second reply to one request) is dropped with its connection,
never handed to the next request; cookies are neither kept nor sent; a key echoed in a 2xx reply's text or
labels is redacted there too, with a warning.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import errno
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

import orjson
from yarl import URL

from runner.errors import (
    ConnectionFailed,
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
    "failure_text",
    "redact",
    "reply_of",
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
    # the 2xx body decoded already, by the wrapping transport that had to read it (the cache's keep check), for
    # the same provider and key: ``decode`` returns it instead of decoding the body again
    decoded: Reply | None = None


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

        self._session = aiohttp.ClientSession(
            connector=(connector := _connector(max_connections)),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            # an API needs no cookies: a server's Set-Cookie would be kept (unbounded) and sent back on every call
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        self.timeout_s = timeout_s
        self.max_reply_bytes = max_reply_bytes
        # the guarded protocol counts the bytes each request got back: only then is "no byte" known (_unreached)
        self._counts_bytes = not connector.force_close

    async def send(self, call: HttpCall) -> RawReply:
        """POST ``call`` once; ``TransportError`` on refusal, reset, bad framing or timeout (message redacted).

        ``timeout_s`` bounds the whole attempt: same-origin redirects share it."""
        import aiohttp

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        _HEARD.set(None)  # the guarded protocol of this attempt's connection says whether a byte came back
        replied = False  # a response's status line and headers arrived (the server was reached)
        try:
            data = call.data if call.data is not None else json.dumps(call.body).encode()
            url, timeout = _url(call.url), {}  # the first post: the session's timeout (no object made per call)
            for _ in range(MAX_REDIRECTS + 1):
                async with self._session.post(
                    url, data=data, headers=call.headers, allow_redirects=False, **timeout
                ) as response:
                    replied = True
                    if response.status in _REDIRECTS and "Location" in response.headers:
                        url = _same_origin(url, response, call.secret)
                        left = deadline - loop.time()
                        if left <= 0:
                            raise TimeoutError
                        timeout = {"timeout": aiohttp.ClientTimeout(total=left)}  # None would mean none
                        continue
                    headers = response.headers
                    encoding = headers.get("Content-Encoding")
                    declared = headers.get("Content-Length") if encoding is None else None
                    if declared is not None and declared.isdigit() and int(declared) <= self.max_reply_bytes:
                        body = await response.read()  # the framing bounds the body: one read (the common reply)
                    else:
                        body = await self._read(response, encoding)
                    return RawReply(response.status, body, headers)
            raise FatalRequestError(f"more than {MAX_REDIRECTS} redirects from {call.url}", status=response.status)
        except TimeoutError:
            raise TransportError("timed out waiting for the response") from None
        except aiohttp.ClientError as exc:  # refused, reset, bad HTTP framing, payload errors
            if not replied and _unreached(exc, _HEARD.get(), self._counts_bytes):
                raise ConnectionFailed(failure_text(exc, call.secret)) from None
            raise TransportError(failure_text(exc, call.secret)) from None
        except ValueError as exc:  # a header value aiohttp, yarl or multidict cannot take (never our own data)
            text = f"unreadable HTTP reply ({type(exc).__name__}: {exc})"
            raise TransportError(_cut(redact(text, [call.secret]))) from None

    async def _read(self, response: aiohttp.ClientResponse, encoding: str | None) -> bytes:
        """The decoded body (in ``encoding``, the reply's Content-Encoding), read in chunks up to
        ``max_reply_bytes`` (past it: ``OversizeReply`` for a 2xx, the first ``max_reply_bytes`` otherwise); an
        unfinished body closes its connection."""
        cap, chunks, size = self.max_reply_bytes, [], 0
        if encoding is not None and encoding.strip().lower() not in _DECODED:
            return _undecoded(response, encoding)
        declared = response.content_length if encoding is None else None
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


# Content-Encoding values aiohttp decodes (br and zstd only with their packages; it raises otherwise), and
# identity or an empty value (nothing to decode): any other (``x-foo``, ``gzip, gzip``) would reach us encoded.
_DECODED = frozenset({"gzip", "deflate", "br", "zstd", "identity", ""})


def _undecoded(response: aiohttp.ClientResponse, encoding: str) -> bytes:
    """A body in a Content-Encoding nobody decoded: a 2xx is ``UnreadableBody`` (retried); another status keeps
    its class, with a note for a body (never read: its bytes are not what they would decode to)."""
    response.close()
    shown = ascii(encoding[:40])
    if 200 <= response.status < 300:
        raise UnreadableBody(
            f"HTTP {response.status} with Content-Encoding {shown}, which hofcat cannot decode; not read",
            status=response.status,
        )
    return f"(a body in Content-Encoding {shown}, not decoded)".encode()


def _unreached(exc: Exception, heard: _Heard | None, counts_bytes: bool) -> bool:
    """Whether an aiohttp failure means no server answered: the connection was refused, the name did not
    resolve, TLS failed, or the connection was reset or closed before any byte of a reply came back (``heard``:
    what the attempt's connection received, None when it dropped before the request was sent on it; only known
    where ``counts_bytes``: the connection pool runs the guarded protocol)."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ClientSSLError):
        return True
    dropped = isinstance(exc, aiohttp.ServerDisconnectedError) or (
        isinstance(exc, aiohttp.ClientOSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED)
    )
    if not dropped or not counts_bytes:  # without the guard, bytes received are unknown: the cell's failure
        return False
    return heard is None or not heard.bytes  # None: dropped before the request was even sent on it


def failure_text(exc: Exception, secret: str | None) -> str:
    """A short, redacted message for an aiohttp failure (aiohttp's own quote raw bytes, headers and all)."""
    import aiohttp

    if isinstance(exc, aiohttp.ServerDisconnectedError):
        text = "the server closed the connection before a complete reply"
    elif isinstance(exc, aiohttp.ClientPayloadError):
        text = f"the reply's body is broken ({exc})"
    elif isinstance(exc, aiohttp.ClientResponseError):  # the parser's: a bad status line, headers, framing
        text = f"the reply is not valid HTTP ({exc.message})"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return _cut(redact(" ".join(text.split()), [secret]))


def _cut(text: str) -> str:
    return text[:_SNIPPET] + ("…" if len(text) > _SNIPPET else "")


def _connector(limit: int) -> aiohttp.TCPConnector:
    """A pool of ``limit`` keep-alive connections, each answering only the request in flight on it.

    aiohttp parses bytes that arrive on an idle pooled connection and hands them to the next request sent on
    it: a server that answers twice (or a reply with trailing bytes after a pause) would have one cell's reply
    stored as another's. The guarded protocol drops such bytes and the connection. It rests on aiohttp
    internals (``TCPConnector._factory``, ``ResponseHandler``); where they are not as expected, connections
    are not reused at all (slower, never wrong). ``tests/test_hostile_http.py`` pins it.
    """
    import aiohttp

    guarded = _guarded_protocol()
    connector = aiohttp.TCPConnector(limit=limit, force_close=guarded is None)
    factory = getattr(connector, "_factory", None)
    if guarded is not None and isinstance(factory, functools.partial) and factory.func is guarded.__base__:
        connector._factory = functools.partial(guarded, *factory.args, **factory.keywords)
    elif guarded is not None:  # the factory is not the one the guard wraps: never reuse a connection
        connector._force_close = True  # what force_close=True sets (one connector made, none left unclosed)
    return connector


@dataclass(slots=True)
class _Heard:
    """Bytes received on a connection for the request in flight (set by the guarded protocol)."""

    bytes: int = 0


# the sending task's current request: its connection's _Heard (a context variable: each worker task has its own)
_HEARD: contextvars.ContextVar[_Heard | None] = contextvars.ContextVar("hofcat_heard", default=None)


@functools.cache
def _guarded_protocol() -> type | None:
    """aiohttp's ``ResponseHandler``, made to take one final reply per request (None when it cannot be)."""
    try:
        from aiohttp.client_proto import ResponseHandler
    except ImportError:
        return None
    if not all(hasattr(ResponseHandler, name) for name in ("set_response_params", "feed_data", "data_received")):
        return None

    class OneReplyPerRequest(ResponseHandler):
        _answered = True  # no request yet: any byte is unsolicited
        _heard: _Heard | None = None  # what came back for the request in flight

        def set_response_params(self, *args: object, **kwargs: object) -> None:
            self._answered = False  # a request is about to be sent on this connection
            # called in the sending task: its ``send`` reads whether any byte came back (``_unreached``)
            self._heard = _Heard()
            _HEARD.set(self._heard)
            super().set_response_params(*args, **kwargs)

        def feed_data(self, data: object, size: int = 0) -> None:
            if self._answered:  # a second reply, parsed from the bytes after the first: nobody asked for it
                self._drop()
                return
            code = getattr(data[0], "code", 200) if isinstance(data, tuple) and data else 200
            if not 100 <= code < 200 or code == 101:  # 1xx (but 101) are interim: the final reply follows
                self._answered = True
            super().feed_data(data, size)

        def data_received(self, data: bytes) -> None:
            if data and self._heard is not None:
                self._heard.bytes += len(data)
            payload = self._payload
            if data and self._answered and (payload is None or payload.is_eof()):
                self._drop()  # bytes on a connection that owes nothing: an idle one, or past the reply
                return
            super().data_received(data)

        def _drop(self) -> None:
            self.force_close()
            if self.transport is not None:
                self.transport.close()  # not reusable: the pool checks is_connected()

    return OneReplyPerRequest


@lru_cache(maxsize=64)
def _url(text: str) -> URL:
    """``text`` parsed once per distinct URL (an endpoint posts to one or two), not once per request."""
    return URL(text)


def _same_origin(url: URL, response: aiohttp.ClientResponse, secret: str | None = None) -> URL:
    """Where a redirect points, when it stays on ``url``'s scheme, host and port; else ``FatalRequestError``
    (naming the other origin with ``secret`` redacted, also as the lowercase a host name is read in)."""
    status = response.status
    try:
        target = url.join(URL(response.headers["Location"]))
        same = target.origin() == url.origin()
    except ValueError:
        raise FatalRequestError(f"HTTP {status} redirect to an unreadable Location", status=status) from None
    if not same:
        where = redact(f"{target.scheme}://{target.host}:{target.port}", [secret, secret and secret.lower()])[:120]
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
    if raw.decoded is not None:
        return raw.decoded
    if status == 429:
        wait = retry_after_s(raw.headers)
        raise RateLimited(f"HTTP 429: {_snippet(body, secret)}", status=status, retry_after_s=wait)
    if status == 408 or status >= 500:
        wait = retry_after_s(raw.headers)
        raise ServerError(f"HTTP {status}: {_snippet(body, secret)}", status=status, retry_after_s=wait)
    if status >= 300 or status < 200:  # 3xx: a redirect the transport did not follow
        raise FatalRequestError(f"HTTP {status}: {_snippet(body, secret)}", status=status)
    if (plain := provider.plain(body)) is not None:  # the common reply, read without the JSON decode
        return _without_secret(plain, secret) if secret else plain
    try:
        decoded = _json(body)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past the stack, a 5,000-digit number
        raise UnreadableBody(
            f"HTTP {status} with a body that is not JSON: {_snippet(body, secret)}", status=status
        ) from None
    try:
        reply = provider.reply(decoded)
    except UnreadableBody as exc:
        exc.args, exc.status = (redact(str(exc), [secret]),), status
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError, ArithmeticError, RecursionError):
        raise UnreadableBody(
            f"HTTP {status} with an unexpected JSON shape: {_snippet(body, secret)}", status=status
        ) from None
    return _without_secret(reply, secret) if secret else reply


# The texts of a ``Reply`` a server writes, and the stored column each becomes (named in the warning).
_REPLY_TEXTS = (
    ("text", "response_text"),
    ("finish_reason", "finish_reason"),
    ("served_model", "served_model"),
    ("system_fingerprint", "system_fingerprint"),
)


def _without_secret(reply: Reply, secret: str) -> Reply:
    """``reply`` with ``secret`` (and 8+ character runs of it) redacted from its texts, each change warned.

    A server that echoes the request (a debugging proxy, a hostile one) puts the key in a 2xx answer, which
    the run directory would store; the check costs a few substring searches per reply."""
    texts = [getattr(reply, name) or "" for name, _ in _REPLY_TEXTS]
    tokens = [token for token, _ in reply.top_logprobs] if reply.top_logprobs else []
    if not _may_hold("\x00".join(texts + tokens), secret):
        return reply
    changes: dict[str, object] = {}
    changed: list[str] = []
    for (name, column), text in zip(_REPLY_TEXTS, texts, strict=True):
        if text and (clean := redact(text, [secret])) != text:
            changes[name] = clean
            changed.append(column)
    if tokens and reply.top_logprobs:
        top = tuple((redact(token, [secret]), logprob) for token, logprob in reply.top_logprobs)
        if top != reply.top_logprobs:
            changes["top_logprobs"] = top
            changed.append("top_logprobs")
    if not changes:
        return reply
    note = f"{', '.join(changed)}: the API key (or a run of 8+ of its characters) replaced by <redacted>"
    return dataclasses.replace(reply, **changes, warnings=(*reply.warnings, note))


@lru_cache(maxsize=16)
def _probes(secret: str) -> tuple[str, ...]:
    """Substrings of which any text holding ``secret`` or a ``SECRET_RUN``-run of it holds one: the 4-character
    pieces at every 4th position (each 8-run of the key covers one), or the secret itself when it is short."""
    if len(secret) < SECRET_RUN:
        return (secret,)
    return tuple(dict.fromkeys(secret[j : j + 4] for j in range(0, len(secret) - 3, 4)))


def _may_hold(text: str, secret: str) -> bool:
    """False when ``text`` surely holds no part of ``secret`` that ``redact`` would replace."""
    return any(probe in text for probe in _probes(secret))


def _json(body: bytes) -> object:
    """``json.loads(body)``, at orjson's speed (~1.5 µs instead of ~4.5 for a chat completion).

    What orjson reads it reads as ``json.loads`` does, but for integers past 64 bits (it makes them floats): a
    body holding a run of 19+ digits goes to ``json.loads``, as does anything orjson refuses (UTF-16, a lone
    surrogate escape, NaN, nesting past 1,024 levels), which ``json.loads`` accepts or rejects as before. There,
    a body opening with ``{`` and a non-NUL byte is the UTF-8 that ``json.loads`` would detect, so it is decoded
    as such at once (as ``json.loads`` does, surrogates passed)."""
    if _DIGIT_RUN not in body.translate(_DIGITS_AS_9):  # a translate and a find: a fifth of a regex search
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    if len(body) > 1 and body[0] == 0x7B and body[1]:
        return json.loads(body.decode("utf-8", "surrogatepass"))
    return json.loads(body)


# 19 digits in a row: maybe an integer orjson would not keep exact (past 2**63, or 2**64 unsigned)
_DIGITS_AS_9 = bytes(0x39 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_DIGIT_RUN = b"9" * 19

MARKS = ("cache_origin", "replica")  # the ``RawReply.marks`` copied onto the ``Reply`` (and so the stored row)


async def send(transport: Transport, provider: Provider, call: HttpCall) -> Reply:
    """One attempt: send ``call`` over ``transport`` and decode the reply (a ``RequestError`` on failure);
    the reply carries the transport's marks (which cache entry or replica answered)."""
    return reply_of(provider, await transport.send(call), call.secret)


def reply_of(provider: Provider, raw: RawReply, secret: str | None) -> Reply:
    """What ``send`` makes of a raw reply: ``decode``'s ``Reply`` (or its ``RequestError``), with the marks of the
    transport that sent it. The executor's workers await the transport themselves and call this: one coroutine
    fewer per request on the hot path."""
    reply = decode(provider, raw, secret)
    if raw.marks:
        reply = dataclasses.replace(reply, **{k: raw.marks[k] for k in MARKS if k in raw.marks})
    return reply


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with each secret, and each run of ``SECRET_RUN``+ characters copied from one, as ``<redacted>``.

    Linear in ``text`` at C speed (one search per 8-character piece of a key, then work per occurrence), so an
    8 MB reply a server fills with pieces of the key does not hold the event loop for seconds."""
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, "<redacted>")
        if len(secret) < SECRET_RUN or len(text) < SECRET_RUN:
            continue
        starts: list[int] = []
        for gram in _grams(secret):
            i = text.find(gram)
            while i != -1:
                starts.append(i)
                if len(starts) > _MAX_WINDOWS:  # a text made of the key's pieces: mask them piece by piece
                    return redact(_masked(text, secret), secrets)
                i = text.find(gram, i + 1)
        if not starts:
            continue
        starts.sort()
        pieces, end = [], 0  # end: where the text after the last masked run resumes
        run_start = run_end = -1
        for i in starts:
            if i <= run_end:  # overlaps or touches the current run
                run_end = max(run_end, i + SECRET_RUN)
                continue
            if run_end >= 0:
                pieces += [text[end:run_start], "<redacted>"]
                end = run_end
            run_start, run_end = i, i + SECRET_RUN
        pieces += [text[end:run_start], "<redacted>", text[run_end:]]
        text = "".join(pieces)
    return text


_MAX_WINDOWS = 10_000  # key pieces located one by one; past this many, str.replace passes do the masking


@lru_cache(maxsize=16)
def _grams(secret: str) -> tuple[str, ...]:
    """The distinct ``SECRET_RUN``-character pieces of ``secret``."""
    return tuple(dict.fromkeys(secret[i : i + SECRET_RUN] for i in range(len(secret) - SECRET_RUN + 1)))


def _masked(text: str, secret: str) -> str:
    """``text`` with every ``SECRET_RUN``-piece of ``secret`` replaced, runs of masks merged: no piece survives
    the pass over it, though an occurrence overlapping one masked before may keep up to 7 characters."""
    for gram in _grams(secret):  # a noncharacter as the mask: no key holds it, and text hardly ever does
        text = text.replace(gram, "\ufdd0")
    return re.sub("\ufdd0+", "<redacted>", text)


def _snippet(body: bytes, secret: str | None) -> str:
    """The start of an error body for a message: redacted first, then cut to ``_SNIPPET`` characters."""
    text = redact(body[:_WINDOW].decode("utf-8", errors="replace").strip(), [secret])
    return text[:_SNIPPET] + ("…" if len(text) > _SNIPPET or len(body) > _WINDOW else "")
