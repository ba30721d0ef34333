"""One HTTP attempt: POST a provider's request with aiohttp, classify the outcome, decode the reply.

Status classes: 2xx → the provider's ``Reply`` (or ``UnreadableBody``); 429 → ``RateLimited`` with the
server's wait; 408 and 5xx → ``ServerError``; other 4xx → ``FatalRequestError``; no response or a timeout
→ ``TransportError``. Error messages never contain request headers (where API keys live).
"""

from __future__ import annotations

import asyncio
import json

import aiohttp

from runner.providers import HttpCall, Provider, Reply
from runner.retry import retry_after_s
from runner.errors import FatalRequestError, RateLimited, ServerError, TransportError, UnreadableBody

_SNIPPET = 300  # characters of an error body kept in messages


async def send(session: aiohttp.ClientSession, provider: Provider, call: HttpCall) -> Reply:
    """POST ``call`` once; the decoded reply or a classified ``RequestError`` (timeouts from the session)."""
    try:
        data = call.data if call.data is not None else json.dumps(call.body).encode()
        async with session.post(call.url, data=data, headers=call.headers) as response:
            status = response.status
            body = await response.read()
            headers = response.headers
    except TimeoutError:
        raise TransportError("timed out waiting for the response") from None
    except aiohttp.ClientError as exc:  # refused, reset, bad HTTP framing, payload errors
        raise TransportError(f"{type(exc).__name__}: {exc}") from None
    except asyncio.CancelledError:
        raise
    if status == 429:
        raise RateLimited(f"HTTP 429: {_snippet(body)}", status=status, retry_after_s=retry_after_s(headers))
    if status == 408 or status >= 500:
        raise ServerError(f"HTTP {status}: {_snippet(body)}", status=status, retry_after_s=retry_after_s(headers))
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


def _snippet(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    return text[:_SNIPPET] + ("…" if len(text) > _SNIPPET else "")
