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
            "messages": [
                {"role": m["role"], "content": m["content"]} for m in request.messages if m["role"] != "system"
            ],
        }
        if system:
            body["system"] = system
        body.update(_sampling(request))
        return HttpCall(f"{base_url}/messages", headers, body, secret=api_key)

    def reply(self, body: Any) -> Reply:
        """Concatenated text blocks (thinking blocks left out), ``stop_reason`` and ``usage``."""
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
            ("output_tokens",),  # thinking included (Anthropic bills and counts it as output)
        )

    def plain(self, body: bytes) -> Reply | None:
        """No shortcut: every reply is decoded and read by ``reply``."""
        return None


def _sampling(request: ChatRequest) -> dict[str, float]:
    """Temperature, or top_p alone where temperature is 1.0 (the API's default, so nothing is lost).

    Recent models refuse the two together; the spec refuses a design pairing top_p < 1 with another
    temperature (and any temperature above 1, the API's maximum).
    """
    if request.top_p != 1.0 and request.temperature == 1.0:
        return {"top_p": request.top_p}
    return {"temperature": request.temperature}


PROVIDER = AnthropicProvider()
