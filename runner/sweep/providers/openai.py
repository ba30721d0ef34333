"""OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp server, Ollama, TGI, hofcat serve-sim)."""

from __future__ import annotations

import dataclasses
import json
import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import msgspec

from runner.survey.constrained import constrained_request_fields
from runner.sweep.providers import ChatRequest, HttpCall, Reply, json_headers, plain_reply, shape_error, text_reply
from runner.sweep.providers.logprobs import openai_request_fields, openai_top_logprobs

if TYPE_CHECKING:
    from runner.sweep.spec import EndpointConfig


class OpenAIProvider:
    """``POST {base_url}/chat/completions``; seed, temperature, top_p, max_tokens and constraint fields passed."""

    name = "openai"
    unsupported: frozenset[str] = frozenset()

    def __init__(self, max_tokens_field: str = "max_tokens") -> None:
        self.max_tokens_field = max_tokens_field  # or max_completion_tokens (reasoning models take only that)

    def call(self, base_url: str, api_key: str | None, request: ChatRequest) -> HttpCall:
        """The chat-completions request; the key goes in a Bearer header."""
        headers = _headers(api_key)
        body: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "top_p": request.top_p,
            self.max_tokens_field: request.max_tokens,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.constraint != "none":  # llama.cpp `grammar` or `response_format` with a JSON schema
            body.update(constrained_request_fields(request.constraint, request.verbalized))
        if request.top_logprobs:  # the distribution measurement: the first token's alternatives
            body.update(openai_request_fields(request.top_logprobs, request.constraint))
        data = None
        if request.messages_json is not None:  # splice the prompt's JSON, rendered once per prompt
            if request.constraint == "none" and not request.top_logprobs:  # the common body: its tail cached
                tail = _sampling_json(
                    self.max_tokens_field, request.temperature, request.top_p, request.max_tokens, request.seed
                )
            else:
                tail = _json_tail({k: v for k, v in body.items() if k not in ("model", "messages")}).encode()
            data = _body_head(request.model, request.messages_json) + tail
        return HttpCall(_url(base_url), headers, body, data, api_key)

    def reply(self, body: Any) -> Reply:
        """Text of the first choice (its refusal text when content is null), finish reason and usage.

        ``content`` may be a list of parts (its text parts are joined); null content without a refusal is ""
        with a warning. ``completion_tokens`` already counts reasoning tokens (OpenAI's usage contract).
        """
        try:
            choice = body["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise shape_error(self.name, body, "choices[0].message") from None
        if not isinstance(message, dict):
            raise shape_error(self.name, body, "a choices[0].message object")
        usage = body.get("usage")
        if type(usage) is dict and type(choice) is dict and not choice.get("logprobs"):  # the common reply at once
            plain = plain_reply(
                message.get("content"),
                choice.get("finish_reason"),
                usage.get("prompt_tokens"),
                usage.get("completion_tokens"),
                body.get("model"),
                body.get("system_fingerprint"),
            )
            if plain is not None:
                return plain
        texts, warnings = _content_texts(message)
        reply = text_reply(
            self.name,
            body,
            texts,
            "a string choices[0].message.content",
            choice.get("finish_reason"),
            "usage",
            "prompt_tokens",
            ("completion_tokens",),
            warnings,
        )
        if isinstance(choice, dict) and choice.get("logprobs"):
            top, sampled = openai_top_logprobs(choice)
            reply = dataclasses.replace(reply, top_logprobs=top, logprobs_sampled=sampled)
        return reply

    def plain(self, body: bytes) -> Reply | None:
        """The common reply read straight from an ASCII body, only the fields ``reply`` reads decoded (msgspec:
        ~0.4 µs against ~2 for orjson's dicts and the walk through them); ``plain_reply``'s checks then decide.

        Only ASCII bodies: msgspec skips the fields it is not asked for without checking their UTF-8, where the
        JSON decode refuses the whole body. Anything msgspec cannot read as this shape (a value of another
        type, a malformed or too deeply nested body) is None, and ``reply`` sees the body as before."""
        if not body.isascii():
            return None
        try:
            completion = _COMPLETION.decode(body)
        except (msgspec.DecodeError, RecursionError):
            return None
        if not completion.choices or completion.usage is None:
            return None
        choice, usage = completion.choices[0], completion.usage
        if choice.logprobs:
            return None
        return plain_reply(
            choice.message.content,
            choice.finish_reason,
            usage.prompt_tokens,
            usage.completion_tokens,
            completion.model,
            completion.system_fingerprint,
        )


# The fields of a chat completion ``reply`` reads, as msgspec reads them (``OpenAIProvider.plain``): any JSON value
# where ``reply`` checks the type itself, an object where it requires one. A duplicated key keeps its last value,
# as orjson and json.loads do. gc=False: decoded JSON holds no cycles, so the four objects a reply makes are not
# tracked by the cyclic collector (~70 ns a reply, and fewer young collections on the event loop).
class _Usage(msgspec.Struct, gc=False):
    prompt_tokens: Any = None
    completion_tokens: Any = None


class _Message(msgspec.Struct, gc=False):
    content: Any = None


class _Choice(msgspec.Struct, gc=False):
    message: _Message
    finish_reason: Any = None
    logprobs: Any = None


class _Completion(msgspec.Struct, gc=False):
    choices: list[_Choice]
    model: Any = None
    system_fingerprint: Any = None
    usage: _Usage | None = None


_COMPLETION = msgspec.json.Decoder(_Completion)


def _json_tail(fields: dict[str, Any]) -> str:
    """``fields`` as compact JSON without its opening brace: the rest of a body after model and messages."""
    return json.dumps(fields, separators=(",", ":"))[1:]


@lru_cache(maxsize=4096, typed=True)  # typed: 1 and 1.0 serialize differently
def _sampling_json(max_tokens_field: str, temperature: float, top_p: float, max_tokens: int, seed: int | None) -> bytes:
    """The body's tail for plain sampling (the fields ``call`` puts after the messages, in its order), UTF-8:
    a sweep repeats few combinations, so each is serialized once, not once per request."""
    fields: dict[str, Any] = {"temperature": temperature, "top_p": top_p, max_tokens_field: max_tokens}
    if seed is not None:
        fields["seed"] = seed
    return _json_tail(fields).encode()


@lru_cache(maxsize=8192)  # a prompt's JSON comes from ``rendered``'s cache: one object, its hash kept
def _body_head(model: str, messages_json: str) -> bytes:
    """The body up to its sampling fields (model and messages), UTF-8: encoded once per prompt, not per request."""
    return f'{{"model":{_json_string(model)},"messages":{messages_json},'.encode()


@lru_cache(maxsize=64)
def _headers(api_key: str | None) -> dict[str, str]:
    """The request headers for ``api_key``: made once per key and shared by its calls (nothing changes them: the
    transport and the wrapping providers copy)."""
    return json_headers(api_key, "Authorization", "Bearer ")


@lru_cache(maxsize=64)
def _url(base_url: str) -> str:
    """The chat-completions URL under ``base_url``."""
    return f"{base_url}/chat/completions"


@lru_cache(maxsize=64)
def _json_string(text: str) -> str:
    """``text`` as a JSON string (a model name: one per endpoint)."""
    return json.dumps(text)


def _content_texts(message: dict[str, Any]) -> tuple[list[Any], list[str]]:
    """The text pieces of a message (content string, its text parts, else the refusal) and what was assumed."""
    content = message.get("content")
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]: other part types carry no text
        return [p.get("text") for p in content if isinstance(p, dict) and p.get("type") in ("text", "output_text")], []
    if content is None:
        refusal = message.get("refusal")
        if refusal is None:
            return [""], ["message content is null; stored as empty text"]
        return [refusal], []
    return [content], []


def max_tokens_field(endpoint: EndpointConfig) -> str:
    """The body field that carries max_tokens: the endpoint's ``max_tokens_field``, or for ``auto``
    ``max_completion_tokens`` when the model (after any ``vendor/`` prefix) is an o-series or GPT-5 model."""
    if endpoint.max_tokens_field != "auto":
        return endpoint.max_tokens_field
    return "max_completion_tokens" if _REASONING_MODEL.match(endpoint.model.rpartition("/")[2]) else "max_tokens"


def for_endpoint(endpoint: EndpointConfig) -> OpenAIProvider:
    """The OpenAI mapping with the endpoint's max-tokens field."""
    field = max_tokens_field(endpoint)
    return PROVIDER if field == PROVIDER.max_tokens_field else OpenAIProvider(field)


_REASONING_MODEL = re.compile(r"(o\d|gpt-5)", re.IGNORECASE)  # o1, o3-mini, o4-mini, gpt-5, gpt-5-mini, ...
PROVIDER = OpenAIProvider()
