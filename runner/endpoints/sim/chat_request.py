"""Validation of a chat-completions request body into the few values the simulator uses."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from runner.errors import BadRequest


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs a setattr call per field, per request
class ChatRequest:
    """The reply-deciding parts of a valid request."""

    body: dict[str, Any]
    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content)
    raw_messages: tuple[tuple[str, str], ...]  # (role, content or the repr of its parts) for the request key
    temperature: float
    top_p: float
    seed: int | None
    max_tokens: int | None
    json_mode: bool = False  # response_format asked for a JSON object or schema
    grammar: bool = False  # llama.cpp's ``grammar`` field: the reply is constrained (answered as a bare number)
    top_logprobs: int | None = None  # ``logprobs: true``: alternatives per token to report (0 allowed); else None


def parse_request(raw: bytes) -> ChatRequest:
    """Decode and validate a request body (OpenAI's ranges: temperature 0–2, top_p 0–1)."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    pairs = []
    raw = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string 'role'", f"messages[{i}]")
        text = _content_text(message.get("content"), i)
        pairs.append((message["role"], text))
        raw.append((message["role"], text if isinstance(message["content"], str) else repr(message["content"])))
    if body.get("stream"):
        raise BadRequest("streaming is not supported by the simulator", "stream")
    if body.get("n", 1) != 1:
        raise BadRequest("only n=1 is supported", "n")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' must be a non-empty string", "model")
    return ChatRequest(
        body=body,
        model=model,
        messages=tuple(pairs),
        raw_messages=tuple(raw),
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0),
        seed=_integer(body, "seed", minimum=None),
        max_tokens=_integer(body, "max_tokens", minimum=1)
        if body.get("max_tokens") is not None
        else _integer(body, "max_completion_tokens", minimum=1),
        json_mode=_json_mode(body.get("response_format")),
        grammar=_grammar(body.get("grammar")) or _choice(body.get("guided_choice")),
        top_logprobs=_top_logprobs(body),
    )


def _top_logprobs(body: dict[str, Any]) -> int | None:
    """None unless ``logprobs`` is true; then ``top_logprobs`` (0-20, OpenAI's range; default 0)."""
    logprobs = body.get("logprobs")
    if logprobs is None or logprobs is False:
        if body.get("top_logprobs") is not None:
            raise BadRequest("'top_logprobs' requires 'logprobs' to be true", "top_logprobs")
        return None
    if logprobs is not True:
        raise BadRequest(f"'logprobs' must be a boolean, got {logprobs!r}", "logprobs")
    k = _integer(body, "top_logprobs", minimum=0)
    if k is not None and k > 20:
        raise BadRequest(f"'top_logprobs' must be an integer between 0 and 20, got {k!r}", "top_logprobs")
    return k or 0


def _choice(choice: object) -> bool:
    """vLLM's ``guided_choice``: the reply is one of the listed strings (answered, like a grammar, as the number)."""
    if choice is None:
        return False
    if not isinstance(choice, list) or not choice or not all(isinstance(c, str) for c in choice):
        raise BadRequest("'guided_choice' must be a non-empty list of strings", "guided_choice")
    return True


def _grammar(grammar: object) -> bool:
    if grammar is None:
        return False
    if not isinstance(grammar, str) or not grammar.strip():
        raise BadRequest("'grammar' must be a non-empty GBNF string", "grammar")
    return True


def _json_mode(response_format: object) -> bool:
    if response_format is None:
        return False
    if not isinstance(response_format, dict) or not isinstance(response_format.get("type"), str):
        raise BadRequest("'response_format' must be an object with a string 'type'", "response_format")
    return response_format["type"] in ("json_object", "json_schema")


def _content_text(content: object, index: int) -> str:
    """Message content as text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    raise BadRequest(f"messages[{index}].content must be a string or a list of parts", f"messages[{index}].content")


def _number(body: dict[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not lo <= value <= hi:
        raise BadRequest(f"'{name}' must be a number between {lo:g} and {hi:g}, got {value!r}", name)
    return float(value)


def _integer(body: dict[str, Any], name: str, minimum: int | None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        floor = "" if minimum is None else f" >= {minimum}"
        raise BadRequest(f"'{name}' must be an integer{floor}, got {value!r}", name)
    return value
