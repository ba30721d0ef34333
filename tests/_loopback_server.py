"""A small real HTTP server on 127.0.0.1 for runner tests: answers every POST through a Python function.

``LoopbackServer(answer)`` runs an aiohttp app in a daemon thread; ``answer(body, seq)`` gets the decoded
JSON body and the arrival number and returns ``(status, json_body, headers)``. Arrival times (monotonic
seconds, taken when the request reached the handler) are kept in ``arrivals``, each request's raw body and
headers in ``requests``; use it as a context manager.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

Answer = Callable[[Any, int], tuple[int, Any, dict[str, str]]]


def chat_ok(text: str = "3", headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    """An OpenAI chat-completions 200 reply carrying ``text``."""
    body = {
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 1},
    }
    return 200, body, headers or {}


class LoopbackServer:
    """A real HTTP server on 127.0.0.1 in its own thread and event loop, answering POSTs with ``answer``."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.arrivals: list[float] = []
        self.statuses: list[int] = []
        self.requests: list[tuple[bytes, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="loopback", daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            seq = len(self.arrivals)
            self.arrivals.append(arrived)
            self.requests.append((raw, dict(request.headers)))
            status, payload, headers = self.answer(body, seq)
            self.statuses.append(status)
        return web.Response(status=status, text=json.dumps(payload), content_type="application/json", headers=headers)

    def __enter__(self) -> LoopbackServer:
        self._thread.start()

        async def start() -> int:
            app = web.Application()
            app.router.add_route("POST", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            return site._server.sockets[0].getsockname()[1]

        self.port = asyncio.run_coroutine_threadsafe(start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()
