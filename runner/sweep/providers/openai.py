"""OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp server, Ollama, TGI, hofcat serve-sim)."""

from __future__ import annotations

import json
from typing import Any

from runner.survey.constrained import constrained_request_fields
from runner.sweep.providers import ChatRequest, HttpCall, Reply, json_headers, shape_error, text_reply


class OpenAIProvider:
    """``POST {base_url}/chat/completions``; seed, temperature, top_p, max_tokens and constraint fields passed."""

    name = "openai"
    unsupported: frozenset[str] = frozenset()

    def call(self, base_url: str, api_key: str | None, request: ChatRequest) -> HttpCall:
        """The chat-completions request; the key goes in a Bearer header."""
        headers = json_headers(api_key, "Authorization", "Bearer ")
        body: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.constraint != "none":  # llama.cpp `grammar` or `response_format` with a JSON schema
            body.update(constrained_request_fields(request.constraint))
        data = None
        if request.messages_json is not None:  # splice the prompt's JSON, rendered once per prompt
            tail = {k: v for k, v in body.items() if k not in ("model", "messages")}
            data = (
                f'{{"model":{json.dumps(request.model)},"messages":{request.messages_json},'
                f"{json.dumps(tail, separators=(',', ':'))[1:]}"
            ).encode()
        return HttpCall(f"{base_url}/chat/completions", headers, body, data)

    def reply(self, body: Any) -> Reply:
        """Text of the first choice (its refusal text when content is null), finish reason and usage."""
        try:
            choice = body["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise shape_error(self.name, body, "choices[0].message") from None
        text = message.get("content") if isinstance(message, dict) else None
        if text is None and isinstance(message, dict):
            text = message.get("refusal")
        return text_reply(
            self.name,
            body,
            [text],
            "a string choices[0].message.content",
            choice.get("finish_reason"),
            "usage",
            "prompt_tokens",
            "completion_tokens",
        )


PROVIDER = OpenAIProvider()
