"""Google Gemini ``generateContent`` (``POST {base_url}/models/{model}:generateContent``)."""

from __future__ import annotations

from typing import Any

from runner.providers import ChatRequest, HttpCall, Reply, as_int, shape_error


class GeminiProvider:
    """System text goes in ``systemInstruction``; assistant turns are role ``model``; sampling in ``generationConfig``."""

    name = "gemini"
    unsupported: frozenset[str] = frozenset()

    def call(self, base_url: str, api_key: str | None, request: ChatRequest) -> HttpCall:
        """The generateContent request; the key goes in the ``x-goog-api-key`` header, never the URL."""
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["x-goog-api-key"] = api_key
        system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
        config: dict[str, Any] = {
            "temperature": request.temperature, "topP": request.top_p, "maxOutputTokens": request.max_tokens,
        }
        if request.seed is not None:
            config["seed"] = request.seed
        body: dict[str, Any] = {
            "contents": [{"role": "model" if m["role"] == "assistant" else "user", "parts": [{"text": m["content"]}]}
                         for m in request.messages if m["role"] != "system"],
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
        if any(not isinstance(t, str) for t in texts):
            raise shape_error(self.name, body, "string text parts")
        usage = body.get("usageMetadata") if isinstance(body.get("usageMetadata"), dict) else {}
        return Reply("".join(texts), candidate.get("finishReason"), as_int(usage.get("promptTokenCount")),
                     as_int(usage.get("candidatesTokenCount")))


PROVIDER = GeminiProvider()
