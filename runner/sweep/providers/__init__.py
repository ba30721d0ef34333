"""Request/response mapping for each provider's chat API; no networking, retries or limits here.

A provider turns a ``ChatRequest`` into an ``HttpCall`` (URL path, headers, JSON body) and a decoded JSON
reply into a ``Reply``; a body that is not its reply shape raises ``UnreadableBody``. Sampling parameters a
provider's API cannot take are listed in ``unsupported`` so that the executor reports them once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runner.errors import UnreadableBody

__all__ = ["ChatRequest", "HttpCall", "Provider", "Reply", "get_provider"]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """What to send: model, chat messages (role/content dicts) and sampling parameters."""

    model: str
    messages: list[dict[str, str]]
    seed: int | None
    temperature: float
    top_p: float
    max_tokens: int
    messages_json: str | None = None  # ``messages`` as compact JSON, when the caller already has it
    constraint: str = (
        "none"  # constrained decoding kind (runner.survey.constrained); only OpenAI-compatible APIs take it
    )


@dataclass(frozen=True, slots=True)
class HttpCall:
    """One HTTP POST: absolute URL, headers (may hold the API key: never log them) and JSON body.

    ``data``, when set, is ``body`` already serialized (a provider may splice pre-rendered JSON).
    """

    url: str
    headers: dict[str, str]
    body: dict[str, Any]
    data: bytes | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """A provider's answer: text, why generation stopped, and token usage when the server reported it."""

    text: str
    finish_reason: str | None
    input_tokens: int | None
    output_tokens: int | None


class Provider(Protocol):
    """The mapping between hofcat's request/reply and one provider's HTTP JSON shapes."""

    name: str
    unsupported: frozenset[str]  # ChatRequest fields this API cannot take (reported once per run)

    def call(self, base_url: str, api_key: str | None, request: ChatRequest) -> HttpCall:
        """The HTTP request for ``request`` against ``base_url`` (no trailing slash)."""
        ...

    def reply(self, body: Any) -> Reply:
        """The reply in a decoded JSON body; raises ``UnreadableBody`` when the shape is wrong."""
        ...


def get_provider(name: str) -> Provider:
    """The provider mapping called ``name`` (openai, anthropic, gemini)."""
    from runner.sweep.providers import anthropic, gemini, openai

    return {"openai": openai.PROVIDER, "anthropic": anthropic.PROVIDER, "gemini": gemini.PROVIDER}[name]


def shape_error(provider: str, body: Any, what: str) -> UnreadableBody:
    """An ``UnreadableBody`` saying which part of ``provider``'s reply shape is missing (body abbreviated)."""
    text = repr(body)
    return UnreadableBody(f"{provider} reply without {what}: {text[:200]}{'…' if len(text) > 200 else ''}")


def as_int(value: Any) -> int | None:
    """``value`` if it is an integer token count, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_headers(
    api_key: str | None, key_header: str, key_prefix: str = "", extra: dict[str, str] | None = None
) -> dict[str, str]:
    """JSON content-type headers plus ``extra``, with the API key (after ``key_prefix``) in ``key_header`` if set."""
    headers = {"Content-Type": "application/json", **(extra or {})}
    if api_key:
        headers[key_header] = key_prefix + api_key
    return headers


def system_text(messages: list[dict[str, str]]) -> str:
    """The system messages' contents joined by blank lines ("" without any), for APIs with one system field."""
    return "\n\n".join(m["content"] for m in messages if m["role"] == "system")


def text_reply(
    provider: str,
    body: Any,
    texts: list[Any],
    what: str,
    finish_reason: Any,
    usage_key: str,
    input_key: str,
    output_key: str,
) -> Reply:
    """A ``Reply`` joining ``texts`` (all strings, else ``UnreadableBody`` naming ``what``), with the token
    counts ``input_key`` and ``output_key`` of the ``body[usage_key]`` dict when present."""
    if any(not isinstance(t, str) for t in texts):
        raise shape_error(provider, body, what)
    usage = body.get(usage_key) if isinstance(body.get(usage_key), dict) else {}
    return Reply("".join(texts), finish_reason, as_int(usage.get(input_key)), as_int(usage.get(output_key)))
