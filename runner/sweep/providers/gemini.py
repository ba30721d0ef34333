"""Google Gemini ``generateContent`` (``POST {base_url}/models/{model}:generateContent``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from runner.sweep.providers import ChatRequest, HttpCall, Reply, json_headers, shape_error, system_text, text_reply
from runner.sweep.providers.logprobs import gemini_generation_fields, gemini_top_logprobs


class GeminiProvider:
    """System text in ``systemInstruction``; assistant turns have role ``model``; sampling in ``generationConfig``."""

    name = "gemini"
    unsupported: frozenset[str] = frozenset()

    def call(self, base_url: str, api_key: str | None, request: ChatRequest) -> HttpCall:
        """The generateContent request; the key goes in the ``x-goog-api-key`` header, never the URL."""
        headers = json_headers(api_key, "x-goog-api-key")
        system = system_text(request.messages)
        config: dict[str, Any] = {
            "temperature": request.temperature,
            "topP": request.top_p,
            "maxOutputTokens": request.max_tokens,
        }
        if request.seed is not None:
            config["seed"] = request.seed
        if request.top_logprobs:  # the distribution measurement: the first token's alternatives
            config.update(gemini_generation_fields(request.top_logprobs))
        body: dict[str, Any] = {
            "contents": [
                {"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
                for m in request.messages
                if m["role"] != "system"
            ],
            "generationConfig": config,
        }
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        return HttpCall(f"{base_url}/models/{request.model}:generateContent", headers, body, secret=api_key)

    def reply(self, body: Any) -> Reply:
        """Text parts of the first candidate (thought summaries left out), its ``finishReason`` and usage.

        A prompt Gemini blocked (``promptFeedback.blockReason``, no candidates) is an empty reply with finish
        reason ``blocked:<reason>``; a candidate stopped for safety without text keeps its ``finishReason``
        (``SAFETY``). Output tokens include thinking (``thoughtsTokenCount``, billed as output).
        """
        blocked = _block_reason(body)
        if blocked is not None:
            return text_reply(self.name, body, [], "", blocked, *_USAGE)
        try:
            candidate = body["candidates"][0]
        except (KeyError, IndexError, TypeError):
            raise shape_error(self.name, body, "candidates[0]") from None
        if not isinstance(candidate, dict):
            raise shape_error(self.name, body, "a candidates[0] object")
        content = candidate.get("content")
        parts = (content or {}).get("parts", []) if isinstance(content, dict | None) else None
        if not isinstance(parts, list):
            raise shape_error(self.name, body, "candidates[0].content.parts")
        texts = [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("thought") is not True]
        reply = text_reply(self.name, body, texts, "string text parts", candidate.get("finishReason"), *_USAGE)
        if isinstance(candidate, dict) and candidate.get("logprobsResult"):
            reply = dataclasses.replace(reply, top_logprobs=gemini_top_logprobs(candidate))
        return reply

    def plain(self, body: bytes) -> Reply | None:
        """No shortcut: every reply is decoded and read by ``reply``."""
        return None


_USAGE = ("usageMetadata", "promptTokenCount", ("candidatesTokenCount", "thoughtsTokenCount"))


def _block_reason(body: Any) -> str | None:
    """``blocked:<reason>`` when Gemini refused the prompt itself (no candidates), else None."""
    feedback = body.get("promptFeedback") if isinstance(body, dict) else None
    if not isinstance(feedback, dict) or "blockReason" not in feedback or body.get("candidates"):
        return None
    reason = feedback["blockReason"]
    return f"blocked:{reason}" if isinstance(reason, str) else "blocked"


PROVIDER = GeminiProvider()
