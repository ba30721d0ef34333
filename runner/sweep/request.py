"""Cell → request: a cell's rendered prompt (messages, their JSON and hash, token estimate), the ``ChatRequest``
it sends, and the endpoint's key.

The one place a planned cell becomes what goes on the wire: the executor, the batch runner, the determinism
probe, the extractor and ``hofcat plan --show-prompts`` all build their requests here, so what is shown is what
is sent. Knows neither transports nor retries.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from functools import lru_cache
from typing import NamedTuple

from runner.errors import SpecError
from runner.survey.cell import PromptCell, position_marks
from runner.sweep.accounting import input_estimate
from runner.sweep.plan import PlannedCell
from runner.sweep.providers import ChatRequest, conventional_key_env, get_provider
from runner.sweep.spec import EndpointConfig

__all__ = [
    "PromptMemo",
    "Rendered",
    "api_key_for",
    "prompt_estimate",
    "rendered",
    "request_for",
    "unsupported_parameters",
]


class Rendered(NamedTuple):
    """A prompt rendered once: chat messages, their canonical JSON, its 16-hex-digit hash, input-token estimate."""

    messages: list[dict[str, str]]
    messages_json: str
    prompt_hash: str
    input_estimate: int


@lru_cache(maxsize=8192)
def rendered(prompt: PromptCell, measurement: str = "sample") -> Rendered:
    """``prompt`` rendered for ``measurement`` (cached: a sweep asks each prompt under many samplings)."""
    from runner.survey.prompts import build_messages

    messages = build_messages(prompt, measurement)
    text = json.dumps(messages, ensure_ascii=False, separators=(",", ":"))
    return Rendered(messages, text, hashlib.sha256(text.encode()).hexdigest()[:16], input_estimate(messages))


class PromptMemo:
    """``rendered`` for cells taken in plan order (an executor's endpoint): the last prompt's renderings are handed
    back while cells holding that same prompt object follow one another, as the plan makes them (one object per
    prompt, its samplings in a row, measurements alternating among them), without hashing the prompt for the
    cache again (~0.5 µs a cell)."""

    __slots__ = ("_prompt", "_rendered")

    def __init__(self) -> None:
        self._prompt: PromptCell | None = None  # held, so its identity cannot pass to another object
        self._rendered: dict[str, Rendered] = {}  # the prompt's renderings by measurement

    def of(self, cell: PlannedCell) -> Rendered:
        """``rendered(cell.prompt, cell.sampling.measurement)``."""
        prompt, measurement = cell.prompt, cell.sampling.measurement
        if prompt is not self._prompt:
            self._prompt, self._rendered = prompt, {}
        found = self._rendered.get(measurement)
        if found is None:
            found = self._rendered[measurement] = rendered(prompt, measurement)
        return found


def prompt_estimate(prompt: PromptCell) -> int:
    """Estimated input tokens of a prompt's messages (characters / 4, plus 4 per message)."""
    return rendered(prompt).input_estimate


def request_for(cell: PlannedCell, prompt: Rendered | None = None) -> ChatRequest:
    """The request a cell sends (its endpoint's model, prompt messages and their JSON, sampling), before the
    provider maps it to HTTP; ``prompt`` when the caller has rendered it already."""
    s = cell.sampling
    prompt = prompt or rendered(cell.prompt, s.measurement)
    verbalized = (position_marks(cell.prompt.labels) or ()) if s.measurement == "verbalized" else ()
    return ChatRequest(
        cell.endpoint.model,
        prompt.messages,
        s.seed,
        s.temperature,
        s.top_p,
        s.max_tokens,
        prompt.messages_json,
        s.constraint,
        top_logprobs=s.top_logprobs,
        verbalized=verbalized,
    )


def api_key_for(endpoint: EndpointConfig, source: str = "spec") -> str | None:
    """The endpoint's API key from its ``api_key_env`` variable; ``SpecError`` when that variable is unset.

    Without ``api_key_env``: the provider's conventional variable (``OPENAI_API_KEY``, ...) when the endpoint
    is the provider's own host and it is set, else None.
    """
    if endpoint.api_key_env is None:
        conventional = conventional_key_env(endpoint)
        key = (os.environ.get(conventional) or None) if conventional else None
        return _sendable(key, f"{source}: endpoints.{endpoint.name}: the key in ${conventional}")
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise SpecError(
            f"{source}: endpoints.{endpoint.name}.api_key_env = {endpoint.api_key_env!r}: "
            "must name a set, non-empty environment variable"
        )
    return _sendable(key, f"{source}: endpoints.{endpoint.name}.api_key_env = {endpoint.api_key_env!r}: its key")


def _sendable(key: str | None, where: str) -> str | None:
    """``key`` when it can go in an HTTP header as it is; else a ``SpecError`` at ``where`` that never shows it.

    A line break, tab or other control character (a key pasted with its newline) would fail every request of
    the sweep, one by one, as a header error; blanks at its ends are the same paste and no provider's key."""
    if key is not None and (key != key.strip() or any(unicodedata.category(c) == "Cc" for c in key)):
        raise SpecError(f"{where} holds a line break, tab, other control character or blank at its ends; set it again")
    return key


def unsupported_parameters(endpoint: EndpointConfig) -> list[str]:
    """Sampling parameters of the plan that this endpoint's provider cannot pass on."""
    return sorted(get_provider(endpoint.provider).unsupported)
