"""Anthropic Messages API (``POST {base_url}/messages``)."""

from __future__ import annotations

from typing import Any

from runner.sweep.providers import ChatRequest, HttpCall, Reply, json_headers, shape_error, system_text, text_reply

API_VERSION = "2023-06-01"


class AnthropicProvider:
    """System messages go in the top-level ``system`` field; the API has no sampling seed."""

    name = "anthropic"
    unsupported: frozenset[str] = frozenset({"seed"})

    def call(self, base_url: str, api_key: str | None, request: ChatRequest) -> HttpCall:
        """The Messages request; the key goes in the ``x-api-key`` header."""
        headers = json_headers(api_key, "x-api-key", extra={"anthropic-version": API_VERSION})
        system = system_text(request.messages)
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "messages": [
                {"role": m["role"], "content": m["content"]} for m in request.messages if m["role"] != "system"
            ],
        }
        if system:
            body["system"] = system
        # Recent models reject temperature and top_p together; top_p = 1 is the API's own default.
        if request.top_p != 1.0:
            body["top_p"] = request.top_p
        return HttpCall(f"{base_url}/messages", headers, body)

    def reply(self, body: Any) -> Reply:
        """Concatenated text blocks, ``stop_reason`` and ``usage``."""
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, list):
            raise shape_error(self.name, body, "a content list")
        texts = [block.get("text") for block in content if isinstance(block, dict) and block.get("type") == "text"]
        return text_reply(
            self.name,
            body,
            texts,
            "string text blocks",
            body.get("stop_reason"),
            "usage",
            "input_tokens",
            "output_tokens",
        )


PROVIDER = AnthropicProvider()
