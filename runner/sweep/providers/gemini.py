"""Google Gemini ``generateContent`` (``POST {base_url}/models/{model}:generateContent``)."""

from __future__ import annotations

from typing import Any

from runner.sweep.providers import ChatRequest, HttpCall, Reply, json_headers, shape_error, system_text, text_reply


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
        return HttpCall(f"{base_url}/models/{request.model}:generateContent", headers, body)

    def reply(self, body: Any) -> Reply:
        """Text parts of the first candidate, its ``finishReason`` and ``usageMetadata``."""
        try:
            candidate = body["candidates"][0]
        except (KeyError, IndexError, TypeError):
            raise shape_error(self.name, body, "candidates[0]") from None
        parts = (candidate.get("content") or {}).get("parts", []) if isinstance(candidate, dict) else None
        if not isinstance(parts, list):
            raise shape_error(self.name, body, "candidates[0].content.parts")
        texts = [p.get("text", "") for p in parts if isinstance(p, dict)]
        return text_reply(
            self.name,
            body,
            texts,
            "string text parts",
            candidate.get("finishReason"),
            "usageMetadata",
            "promptTokenCount",
            "candidatesTokenCount",
        )


PROVIDER = GeminiProvider()
