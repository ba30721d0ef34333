"""An in-memory ``Transport`` and virtual time: run a spec's sweep without a server or real waiting.

As httpx ships ``MockTransport``, hofcat ships the transport its own executor tests use, so users can test
their specs, their analysis code and their failure handling without any server::

    import runner as hofcat
    from runner.sweep.mock import MockTransport, error_reply, openai_reply

    mock = MockTransport(lambda body, attempt: error_reply(503) if attempt == 1 else openai_reply("3"))
    result = hofcat.run_sweep("spec.toml", "runs/test", transport=mock)   # every cell: one 503, then "3"
    assert result.stored == hofcat.plan_sweep("spec.toml")["cells"] and len(mock.sent) == 2 * result.stored

``MockTransport(script)`` calls ``script(body, attempt)`` for every request — ``body`` the decoded JSON the
provider built (exactly what would go on the wire), ``attempt`` how many times this exact body has been sent
(1 first) — and returns the ``RawReply`` it gives (or raises the ``RequestError`` it raises, as a broken
connection would). Replies pass through the same decoding, checks, retries, limits and store as a server's.
It records every body sent, each one's virtual admission time (with ``time``) and the most requests it held at
once. ``VirtualTime`` is a clock plus a wait that advances it: give both to an ``Executor`` (``clock``,
``wait``) and retries, rate limits and backoff run in virtual time.
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

__all__ = ["MockTransport", "Script", "VirtualTime", "error_reply", "openai_reply"]


@dataclass
class VirtualTime:
    """A monotonic clock in seconds that only ``wait`` moves; ``waits`` lists every wait asked for (seconds)."""

    now_s: float = 1000.0
    waits: list[float] = field(default_factory=list)

    def clock(self) -> float:
        """The current virtual time (seconds)."""
        return self.now_s

    async def wait(self, seconds: float) -> None:
        """Advance the clock by ``seconds`` (none when negative) and let other tasks run once."""
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
    """An OpenAI chat-completions reply carrying ``text`` (and the token counts given)."""
    body = {
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }
    return RawReply(status, json.dumps(body).encode(), headers or {})


def error_reply(status: int, headers: dict[str, str] | None = None) -> RawReply:
    """An error status with a small JSON body (``headers``: e.g. ``{"Retry-After": "2"}`` for a 429)."""
    return RawReply(status, json.dumps({"error": {"message": f"status {status}"}}).encode(), headers or {})


Script = Callable[[dict[str, Any], int], RawReply]


class MockTransport:
    """A ``Transport`` whose replies come from ``script``; counts calls, attempts and concurrency.

    ``time``: the ``VirtualTime`` whose clock stamps each admission (``admitted_at``); ``on_send``: called with
    the number of requests sent so far (e.g. to stop a run after the n-th).
    """

    def __init__(self, script: Script, time: VirtualTime | None = None, on_send: Callable[[int], None] | None = None):
        self.script = script
        self.time = time
        self.on_send = on_send
        self.sent: list[dict[str, Any]] = []
        self.admitted_at: list[float] = []
        self.attempts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.closed = 0

    def __call__(self, endpoint: object) -> MockTransport:
        """This transport for every endpoint: a ``MockTransport`` is its own ``TransportFactory``."""
        return self

    async def send(self, call: HttpCall) -> RawReply:
        """The script's reply to ``call`` (after letting the other workers run once, as a wire would)."""
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
        """Count the close (each endpoint's executor closes its transport once)."""
        self.closed += 1
