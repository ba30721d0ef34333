"""A hostile HTTP server on 127.0.0.1 for the transport tests: raw asyncio TCP, so it can send broken bytes.

Each request is answered by one behaviour of ``BEHAVIOURS``: the one named in the request path
(``/b/NAME/...``), or, under ``/mix/...``, one drawn from ``MIX`` by a ``random.Random`` seeded with the server's
seed, the request body's digest and how many times that body came before. The draw depends only on the seed
and the requests, never on their order or timing, so a run against it is the same under any concurrency.

No aiohttp server: framing, lengths, encodings and the connection itself are the behaviour's to break.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import random
import socket
import struct
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

# A fake 36-character key; no 8-character run of it may reach a file, stdout or stderr.
KEY = "sk-hostile-Qm2xV9pL4tR8wZ3nB6cJ1dFyH"
assert len(KEY) == 36
KEY_ENV = "HOFCAT_HOSTILE_KEY"


def completion(content: str = "3", provider: str = "openai") -> bytes:
    """A well-formed chat reply of ``provider`` (openai, anthropic, gemini) whose answer text is ``content``."""
    if provider == "anthropic":
        body = {
            "content": [{"type": "text", "text": content}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 20},
        }
    elif provider == "gemini":
        parts = {"content": {"role": "model", "parts": [{"text": content}]}, "finishReason": "STOP"}
        body = {"candidates": [parts], "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 1}}
    else:
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        body = {"choices": [choice], "usage": {"prompt_tokens": 20, "completion_tokens": 1}}
    return json.dumps(body).encode()


# Texts a reply carries when hofcat must NOT store it as the answer (a stray or undecodable body).
SMUGGLED = "SMUGGLED 5"
UNDECODED = "UNDECODED 4"


@dataclass
class Exchange:
    """One request as the behaviour sees it, and the connection to answer on."""

    server: HostileServer
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    head: bytes  # request line and headers, as sent
    body: bytes
    target: str  # the request's path

    @property
    def provider(self) -> str:
        """The API the request was for, from its path."""
        if self.target.endswith("/messages"):
            return "anthropic"
        return "gemini" if ":generateContent" in self.target else "openai"

    def ok(self, content: str = "3") -> bytes:
        """A healthy reply body in the request's API."""
        return completion(content, self.provider)

    async def send(self, *parts: bytes) -> None:
        for part in parts:
            self.writer.write(part)
        await self.writer.drain()


def _response(status: str, body: bytes, *headers: str, length: int | None = -1) -> bytes:
    lines = [f"HTTP/1.1 {status}", *headers]
    if length is not None:
        lines.append(f"Content-Length: {len(body) if length == -1 else length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + body


JSON = "Content-Type: application/json"
Behaviour = Callable[[Exchange], Awaitable[bool]]  # True: keep the connection for the next request
BEHAVIOURS: dict[str, Behaviour] = {}


def behaviour(fn: Behaviour) -> Behaviour:
    BEHAVIOURS[fn.__name__.removeprefix("b_")] = fn
    return fn


@behaviour
async def b_ok(x: Exchange) -> bool:
    await x.send(_response("200 OK", x.ok(), JSON))
    return True


@behaviour
async def b_close_at_once(x: Exchange) -> bool:
    return False


@behaviour
async def b_close_mid_status(x: Exchange) -> bool:
    await x.send(b"HTTP/1.1 20")
    return False


@behaviour
async def b_close_mid_headers(x: Exchange) -> bool:
    await x.send(b"HTTP/1.1 200 OK\r\nContent-Type: appl")
    return False


@behaviour
async def b_close_mid_body(x: Exchange) -> bool:  # Content-Length larger than what is sent
    await x.send(_response("200 OK", x.ok()[:40], JSON, length=len(x.ok())))
    return False


@behaviour
async def b_length_short_smuggle(x: Exchange) -> bool:  # Content-Length covers a prefix; the rest is a response
    await x.send(_response("200 OK", x.ok() + _response("200 OK", x.ok(SMUGGLED), JSON), JSON, length=len(x.ok())))
    return True


@behaviour
async def b_length_short_late_smuggle(x: Exchange) -> bool:  # the smuggled response arrives after a pause
    await x.send(_response("200 OK", x.ok(), JSON))
    await asyncio.sleep(0.05)
    await x.send(_response("200 OK", x.ok(SMUGGLED), JSON))
    return True


@behaviour
async def b_length_and_chunked(x: Exchange) -> bool:
    chunked = f"{len(x.ok(SMUGGLED)):x}\r\n".encode() + x.ok(SMUGGLED) + b"\r\n0\r\n\r\n"
    await x.send(_response("200 OK", chunked, JSON, "Transfer-Encoding: chunked", length=10))
    return True


@behaviour
async def b_two_lengths(x: Exchange) -> bool:
    await x.send(_response("200 OK", x.ok(), JSON, f"Content-Length: {len(x.ok()) - 5}"))
    return False


@behaviour
async def b_chunk_bad_hex(x: Exchange) -> bool:
    await x.send(
        _response("200 OK", b"zz\r\n" + x.ok() + b"\r\n0\r\n\r\n", JSON, "Transfer-Encoding: chunked", length=None)
    )
    return False


@behaviour
async def b_chunk_no_crlf(x: Exchange) -> bool:
    body = f"{len(x.ok()):x}\r\n".encode() + x.ok() + b"XX" + b"0\r\n\r\n"
    await x.send(_response("200 OK", body, JSON, "Transfer-Encoding: chunked", length=None))
    return False


@behaviour
async def b_chunk_no_end(x: Exchange) -> bool:  # a whole chunk, then close without the 0 chunk
    body = f"{len(x.ok()):x}\r\n".encode() + x.ok() + b"\r\n"
    await x.send(_response("200 OK", body, JSON, "Transfer-Encoding: chunked", length=None))
    return False


@behaviour
async def b_chunk_past_cap(x: Exchange) -> bool:  # one chunk announced at 1 GiB, sent until the client leaves
    await x.send(_response("200 OK", b"40000000\r\n", JSON, "Transfer-Encoding: chunked", length=None))
    await _stream(x, b" " * 65536)
    return False


@behaviour
async def b_infinite(x: Exchange) -> bool:  # chunks forever
    await x.send(_response("200 OK", b"", JSON, "Transfer-Encoding: chunked", length=None))
    await _stream(x, b"10000\r\n" + b"[" * 65536 + b"\r\n")
    return False


@behaviour
async def b_infinite_no_length(x: Exchange) -> bool:  # a close-delimited body that never ends
    await x.send(_response("200 OK", b"", JSON, "Connection: close", length=None))
    await _stream(x, b"9" * 65536)
    return False


async def _stream(x: Exchange, block: bytes, limit: int = 1 << 30) -> None:
    sent = 0
    try:
        while sent < limit and not x.writer.is_closing():
            x.writer.write(block)
            await x.writer.drain()
            sent += len(block)
    except (ConnectionError, RuntimeError):
        pass


@behaviour
async def b_close_delimited(x: Exchange) -> bool:  # valid HTTP/1.1: no length, body ends at close
    await x.send(_response("200 OK", x.ok(), JSON, "Connection: close", length=None))
    return False


@behaviour
async def b_http10(x: Exchange) -> bool:
    await x.send(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + x.ok())
    return False


@behaviour
async def b_continue_first(x: Exchange) -> bool:
    await x.send(b"HTTP/1.1 100 Continue\r\n\r\n", _response("200 OK", x.ok(), JSON))
    return True


@behaviour
async def b_early_hints(x: Exchange) -> bool:
    await x.send(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", _response("200 OK", x.ok(), JSON))
    return True


@behaviour
async def b_tls_bytes(x: Exchange) -> bool:
    await x.send(bytes.fromhex("160301005a0200005603035f") + bytes(80))
    return False


@behaviour
async def b_ssh_banner(x: Exchange) -> bool:
    await x.send(b"SSH-2.0-OpenSSH_9.6p1 Debian-4\r\n")
    return False


@behaviour
async def b_binary(x: Exchange) -> bool:
    await x.send(random.Random(x.body).randbytes(512))
    return False


@behaviour
async def b_status_999(x: Exchange) -> bool:
    await x.send(_response("999 Whatever", x.ok(), JSON))
    return True


@behaviour
async def b_status_0(x: Exchange) -> bool:
    await x.send(_response("0 Zero", x.ok(), JSON))
    return False


@behaviour
async def b_status_099(x: Exchange) -> bool:
    await x.send(_response("099 Low", x.ok(), JSON))
    return False


@behaviour
async def b_status_101(x: Exchange) -> bool:
    await x.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n" + x.ok())
    return False


@behaviour
async def b_huge_header(x: Exchange) -> bool:
    await x.send(_response("200 OK", x.ok(), JSON, "X-Big: " + "a" * (1 << 20)))
    return False


@behaviour
async def b_many_headers(x: Exchange) -> bool:
    await x.send(_response("200 OK", x.ok(), JSON, *(f"X-H{i}: {i}" for i in range(10_000))))
    return False


@behaviour
async def b_duplicate_content_type(x: Exchange) -> bool:
    await x.send(_response("200 OK", x.ok(), JSON, "Content-Type: text/html"))
    return True


@behaviour
async def b_gzip_corrupt(x: Exchange) -> bool:
    packed = bytearray(gzip.compress(x.ok()))
    packed[12:20] = b"\xff" * 8
    await x.send(_response("200 OK", bytes(packed), JSON, "Content-Encoding: gzip"))
    return False


@behaviour
async def b_gzip_ok(x: Exchange) -> bool:
    await x.send(_response("200 OK", gzip.compress(x.ok()), JSON, "Content-Encoding: gzip"))
    return True


@behaviour
async def b_encoding_zstd(x: Exchange) -> bool:  # claims zstd, sends a plain JSON body
    await x.send(_response("200 OK", x.ok(UNDECODED), JSON, "Content-Encoding: zstd"))
    return False


@behaviour
async def b_encoding_unknown(x: Exchange) -> bool:  # an encoding nobody knows, over a plain JSON body
    await x.send(_response("200 OK", x.ok(UNDECODED), JSON, "Content-Encoding: x-foo"))
    return False


@behaviour
async def b_encoding_stacked(x: Exchange) -> bool:  # gzip twice, which aiohttp does not undo
    await x.send(_response("200 OK", gzip.compress(gzip.compress(x.ok())), JSON, "Content-Encoding: gzip, gzip"))
    return False


@behaviour
async def b_encoding_br(x: Exchange) -> bool:  # brotli (not installed): the bytes cannot be read
    await x.send(_response("200 OK", x.ok(UNDECODED), JSON, "Content-Encoding: br"))
    return False


@behaviour
async def b_slowloris(x: Exchange) -> bool:  # one byte a second, far longer than any timeout here
    await x.send(f"HTTP/1.1 200 OK\r\n{JSON}\r\nContent-Length: {len(x.ok())}\r\n\r\n".encode())
    for byte in x.ok():
        await x.send(bytes([byte]))
        await asyncio.sleep(1.0)
    return False


@behaviour
async def b_slow_headers(x: Exchange) -> bool:  # headers one line a second, forever
    await x.send(b"HTTP/1.1 200 OK\r\n")
    for i in range(10_000):
        await x.send(f"X-Slow-{i}: 1\r\n".encode())
        await asyncio.sleep(1.0)
    return False


@behaviour
async def b_silent(x: Exchange) -> bool:  # accepts, reads the request, never answers
    await asyncio.sleep(3600)
    return False


@behaviour
async def b_continue_forever(x: Exchange) -> bool:  # 1xx replies until the client leaves
    for _ in range(100_000):
        await x.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        await asyncio.sleep(0.01)
    return False


@behaviour
async def b_reset_mid_reply(x: Exchange) -> bool:  # RST (SO_LINGER 0) after half a reply
    await x.send(_response("200 OK", x.ok(), JSON)[:60])
    sock = x.writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    x.writer.transport.abort()
    return False


@behaviour
async def b_html_200(x: Exchange) -> bool:
    await x.send(_response("200 OK", b"<html><body>Please log in</body></html>", "Content-Type: text/html"))
    return True


@behaviour
async def b_no_content_204(x: Exchange) -> bool:
    await x.send(b"HTTP/1.1 204 No Content\r\n\r\n")
    return True


def _echo(x: Exchange) -> bytes:
    """The request headers as the server received them (the credential header among them), as JSON text."""
    return json.dumps({"error": {"message": "bad request, you sent: " + x.head.decode("latin-1")}}).encode()


def _auth(x: Exchange) -> str:
    """The credential header's value as received (OpenAI's Bearer, Anthropic's and Gemini's key headers)."""
    for line in x.head.decode("latin-1").split("\r\n"):
        if line.lower().startswith(("authorization:", "x-api-key:", "x-goog-api-key:")):
            return line.partition(":")[2].strip()
    return "none"


@behaviour
async def b_echo_500(x: Exchange) -> bool:
    await x.send(_response("500 Internal Server Error", _echo(x), JSON))
    return True


@behaviour
async def b_echo_401(x: Exchange) -> bool:
    await x.send(_response("401 Unauthorized", _echo(x), JSON))
    return True


@behaviour
async def b_echo_reason(x: Exchange) -> bool:  # the key in the reason phrase and in a header of a 500
    auth = _auth(x)
    await x.send(_response(f"500 bad {auth}", b'{"error": "x"}', JSON, f"X-Echo: {auth}"))
    return True


@behaviour
async def b_echo_split(x: Exchange) -> bool:  # the key cut in pieces of 9 characters, with a 429
    key = _auth(x).removeprefix("Bearer ")
    pieces = " / ".join(key[i : i + 9] for i in range(0, len(key), 9))
    await x.send(_response("429 Too Many", json.dumps({"error": pieces}).encode(), JSON, "Retry-After: 0"))
    return True


@behaviour
async def b_echo_escaped(x: Exchange) -> bool:  # the key JSON-escaped (\u00XX) inside a 200 answer
    key = _auth(x).removeprefix("Bearer ")
    content = "".join(f"\\u{ord(c):04x}" for c in key)
    body = x.ok("3 KEY-GOES-HERE").replace(b"KEY-GOES-HERE", content.encode())
    await x.send(_response("200 OK", body, JSON))
    return True


@behaviour
async def b_echo_200(x: Exchange) -> bool:  # the request echoed in the answer text of a 200
    await x.send(_response("200 OK", x.ok("3 " + x.head.decode("latin-1")), JSON))
    return True


@behaviour
async def b_redirect_other_port(x: Exchange) -> bool:
    target = f"http://127.0.0.1:{x.server.other_port}/v1/chat/completions?key={_auth(x)}"
    await x.send(_response("307 Temporary Redirect", b"", f"Location: {target}"))
    return True


@behaviour
async def b_redirect_key_host(x: Exchange) -> bool:  # the key as the host name (read in lowercase)
    key = _auth(x).removeprefix("Bearer ")
    await x.send(_response("301 Moved", b"", f"Location: http://{key}.example:{x.server.port}/v1"))
    return True


@behaviour
async def b_redirect_self_loop(x: Exchange) -> bool:  # same origin, forever
    await x.send(_response("308 Permanent Redirect", b"", "Location: /b/redirect_self_loop/v1/chat/completions"))
    return True


@behaviour
async def b_redirect_garbage(x: Exchange) -> bool:
    await x.send(_response("302 Found", b"", "Location: http://[::1:99999999/\x7f"))
    return True


# Retry-After values of every odd shape (and retry-after-ms), each on a 429 whose retry may succeed.
RETRY_AFTERS = [
    "Retry-After: ",
    "Retry-After: soon-ish",
    "Retry-After: -1",
    "Retry-After: nan",
    "Retry-After: inf",
    "Retry-After: 1e400",
    "Retry-After: 0x10",
    "Retry-After: 1_0",
    "Retry-After: 0.01, 0.02",
    "Retry-After: Wed, 99 Foo 2025 99:99:99 GMT",
    "Retry-After: Fri, 31 Dec 9999 23:59:59 -2359",
    "Retry-After: Mon, 01 Jan 0001 00:00:00 GMT",
    "Retry-After: \xff\xfe",
    "Retry-After: " + "9" * 8000,
    "retry-after-ms: 1e-400",
    "retry-after-ms: -inf",
    "retry-after-ms: 12abc",
    "Retry-After: 0\r\nRetry-After: 1e9",
    "Retry-After: \u0661",  # Arabic-Indic digit one (float() reads it; HTTP does not)
]


@behaviour
async def b_retry_after_odd(x: Exchange) -> bool:
    pick = x.target.split("/")[3]  # /b/retry_after_odd/<index>/v1 picks one; else the body's digest does
    index = int(pick) if pick.isdigit() else int(hashlib.sha256(x.body).hexdigest(), 16)
    header = RETRY_AFTERS[index % len(RETRY_AFTERS)]
    await x.send(_response("429 Too Many Requests", b'{"error": "slow down"}', JSON, header))
    return True


class HostileServer:
    """The server, run on its own event loop in a background thread; ``base_url(name)`` addresses a behaviour.

    ``other_port`` is a second listener that only records what reaches it (a cross-origin redirect's target).
    ``seen`` counts the behaviours used; ``other_received`` holds every byte the second listener got.
    """

    def __init__(self, seed: int = 0, mix: list[tuple[str, int]] | None = None) -> None:
        self.seed = seed
        self.mix = mix or MIX
        self.seen: Counter[str] = Counter()
        self.other_received = bytearray()
        self.cookies_received = 0  # requests that carried a Cookie header
        self._attempts: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> HostileServer:
        self._thread.start()
        self._server, self._other = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        self.other_port = self._other.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            for server in (self._server, self._other):
                server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> tuple[asyncio.Server, asyncio.Server]:
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0, limit=1 << 20)
        other = await asyncio.start_server(self._record, "127.0.0.1", 0)
        return server, other

    def base_url(self, name: str = "mix") -> str:
        """The ``base_url`` whose requests all get behaviour ``name`` (``mix``: the seeded random mix)."""
        return f"http://127.0.0.1:{self.port}/{'mix' if name == 'mix' else 'b/' + name}/v1"

    def _choose(self, target: str, body: bytes) -> str:
        parts = target.split("/")
        if len(parts) > 2 and parts[1] == "b":
            return parts[2]
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            self._attempts[digest] += 1
            n = self._attempts[digest]
        rng = random.Random(f"{self.seed}:{digest}:{n}")
        names, weights = zip(*self.mix, strict=True)
        return rng.choices(names, weights)[0]

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                if b"\r\ncookie:" in head.lower():
                    self.cookies_received += 1
                target = head.split(b" ", 2)[1].decode("latin-1")
                name = self._choose(target, body)
                with self._lock:
                    self.seen[name] += 1
                if not await BEHAVIOURS[name](Exchange(self, reader, writer, head, body, target)):
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        except asyncio.CancelledError:  # the server is stopping: a behaviour still sleeping ends here
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()

    async def _record(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                self.other_received.extend(data)
        finally:
            writer.close()


@behaviour
async def b_cookie_flood(x: Exchange) -> bool:  # 100 new 4 KB cookies on every reply
    tag = hashlib.sha256(x.body + x.head).hexdigest()[:12]
    cookies = [f"Set-Cookie: c{tag}{i}={'v' * 4000}; Path=/" for i in range(100)]
    await x.send(_response("200 OK", x.ok(), JSON, *cookies))
    return True


@behaviour
async def b_header_bytes(x: Exchange) -> bool:  # non-UTF-8 reason and header bytes, a NUL, an obs-fold
    await x.send(
        b"HTTP/1.1 200 \xff\xfe\r\nX-Bin: \xc3\x28\x80\r\nX-Fold: a\r\n b\r\n" + _response("", x.ok(), JSON)[11:]
    )
    return False


@behaviour
async def b_length_huge(x: Exchange) -> bool:
    await x.send(_response("200 OK", x.ok(), JSON, "Content-Length: 18446744073709551615", length=None))
    return False


@behaviour
async def b_length_plus(x: Exchange) -> bool:
    await x.send(_response("200 OK", x.ok(), JSON, f"Content-Length: +{len(x.ok())}", length=None))
    return False


@behaviour
async def b_redirect_slow(x: Exchange) -> bool:  # same-origin redirects, each just under a second
    await asyncio.sleep(0.6)
    await x.send(_response("307 Temporary Redirect", b"", "Location: /b/redirect_slow/v1/chat/completions"))
    return True


@behaviour
async def b_echo_then_close(x: Exchange) -> bool:  # the key in a header of a reply cut off mid headers
    headers = "".join(f"X-Pad-{i}: {'p' * 60}\r\n" for i in range(40))
    await x.send(f"HTTP/1.1 200 OK\r\nX-Echo: {_auth(x)}\r\n{headers}X-Cut: ".encode())
    return False


# The random mix: (behaviour, weight). Healthy replies dominate so that most cells end stored. Left out:
# a second reply sent after a pause, which HTTP/1.1 cannot tell from the reply to a request sent meanwhile
# (the transport catches it only on an idle connection: test_a_stray_reply_on_an_idle_connection_...).
MIX_LEFT_OUT = ("length_short_late_smuggle",)
MIX: list[tuple[str, int]] = [("ok", 40), *((n, 1) for n in BEHAVIOURS if n != "ok" and n not in MIX_LEFT_OUT)]
