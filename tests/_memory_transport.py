"""An in-memory ``Transport`` and virtual time, so executor tests need no sockets and no real waiting.

``ScriptedTransport(script)`` calls ``script(body, attempt)`` for every request — ``body`` the decoded JSON
the provider built, ``attempt`` how many times this exact body has been sent (1 first) — and returns the
``RawReply`` (or raises the exception) it gives. It records each call's virtual admission time and the
most requests it ever held at once. ``VirtualTime`` is a clock plus a wait that advances it.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runner.sweep.providers import HttpCall
from runner.sweep.transport import RawReply


@dataclass
class VirtualTime:
    """A monotonic clock in seconds that only ``wait`` moves; ``waits`` lists every wait asked for."""

    now_s: float = 1000.0
    waits: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now_s

    async def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now_s += max(seconds, 0.0)
        await asyncio.sleep(0)


def openai_reply(
    text: str,
    *,
    status: int = 200,
    prompt_tokens: int = 20,
    completion_tokens: int = 1,
    headers: dict[str, str] | None = None,
) -> RawReply:
    """An OpenAI chat-completions reply carrying ``text``."""
    body = {
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    return RawReply(status, json.dumps(body).encode(), headers or {})


def error_reply(status: int, headers: dict[str, str] | None = None) -> RawReply:
    """An error status with a small JSON body."""
    return RawReply(status, json.dumps({"error": {"message": f"status {status}"}}).encode(), headers or {})


Script = Callable[[dict[str, Any], int], RawReply]


class ScriptedTransport:
    """A ``Transport`` whose replies come from ``script``; counts calls, attempts and concurrency."""

    def __init__(self, script: Script, time: VirtualTime | None = None, on_send: Callable[[int], None] | None = None):
        self.script = script
        self.time = time
        self.on_send = on_send  # called with the number of requests sent so far (e.g. to stop the run)
        self.sent: list[dict[str, Any]] = []
        self.admitted_at: list[float] = []
        self.attempts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.closed = 0

    async def send(self, call: HttpCall) -> RawReply:
        body = json.loads(call.data) if call.data is not None else call.body
        key = json.dumps(body, sort_keys=True)
        self.attempts[key] += 1
        self.sent.append(body)
        if self.time is not None:
            self.admitted_at.append(self.time.now_s)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)  # let the other workers run while this request is "on the wire"
            if self.on_send is not None:
                self.on_send(len(self.sent))
            return self.script(body, self.attempts[key])
        finally:
            self.in_flight -= 1

    async def close(self) -> None:
        self.closed += 1
