"""Plain-aiohttp helpers for the simulator tests: build a request for a cell and post it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

import aiohttp

from runner.survey.cell import PromptCell
from runner.survey.prompts import build_messages

# A small reference table (a user-CSV-like set): tests that must not depend on the shipped sets use it.
SCORES: dict[str, dict[str, float | None]] = {
    "China": {"pdi": 80, "idv": 20, "mas": 66, "uai": 30, "lto": 87, "ivr": 24},
    "Germany": {"pdi": 35, "idv": 67, "mas": 66, "uai": 65, "lto": 83, "ivr": 40},
    "Japan": {"pdi": 54, "idv": 46, "mas": 95, "uai": 92, "lto": 88, "ivr": 42},
    "U.S.A.": {"pdi": 40, "idv": 91, "mas": 62, "uai": 46, "lto": 26, "ivr": 68},
    "Slovak Rep": {"pdi": 100, "idv": 52, "mas": 100, "uai": 51, "lto": 77, "ivr": 28},
    "Nigeria": {"pdi": 80, "idv": 30, "mas": 60, "uai": 55, "lto": 13, "ivr": 84},
    "Mexico": {"pdi": 81, "idv": 30, "mas": 69, "uai": 82, "lto": 24, "ivr": 97},
    "Arab countries": {"pdi": 80, "idv": 38, "mas": 53, "uai": 68, "lto": None, "ivr": None},
}


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run one coroutine to completion in a fresh event loop."""
    return asyncio.run(coro)


def chat_body(
    cell: PromptCell,
    *,
    seed: int | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_tokens: int | None = None,
    model: str = "sim-1",
) -> dict[str, Any]:
    """The chat-completions body a client sends for ``cell`` (messages from the real prompt builder)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": build_messages(cell),
        "temperature": temperature,
        "top_p": top_p,
    }
    if seed is not None:
        body["seed"] = seed
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


async def post(session: aiohttp.ClientSession, base_url: str, body: Any, **kwargs: Any) -> tuple[int, dict, str]:
    """POST a body (dict → JSON, bytes as is) to /chat/completions → (status, headers, body text)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with session.post(
        f"{base_url}/chat/completions", data=data, headers={"Content-Type": "application/json"}, **kwargs
    ) as response:
        return response.status, dict(response.headers), await response.text()


def content(text: str) -> str:
    """The assistant message content of a completion body."""
    return json.loads(text)["choices"][0]["message"]["content"]
