"""Request/response mapping for each provider's chat API; no networking, retries or limits here.

A provider turns a ``ChatRequest`` into an ``HttpCall`` (URL path, headers, JSON body) and a decoded JSON
reply into a ``Reply``; a body that is not its reply shape raises ``UnreadableBody``. Sampling parameters a
provider's API cannot take are listed in ``unsupported`` so that the executor reports them once.
"""

from __future__ import annotations

import re
import reprlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from runner.errors import UnreadableBody
from runner.sweep.spec import INT64_MAX  # the store's int64 columns: a token count past it is impossible

if TYPE_CHECKING:
    from runner.sweep.spec import EndpointConfig

__all__ = [
    "ChatRequest",
    "HttpCall",
    "Provider",
    "Reply",
    "conventional_key_env",
    "get_provider",
    "no_credentials_note",
    "provider_for",
]

_SURROGATE = re.compile("[\ud800-\udfff]")  # lone surrogates (JSON "\\ud800"): not encodable as UTF-8
_SHORT = reprlib.Repr()  # a bounded, depth-safe repr for messages (keyword arguments need Python 3.12)
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict = 3, 60, 60, 4, 4
# The provider's own hosts and the variable its SDKs read the key from, for endpoints without api_key_env.
CONVENTIONAL_KEYS = {
    "openai": ("api.openai.com", "OPENAI_API_KEY"),
    "anthropic": ("api.anthropic.com", "ANTHROPIC_API_KEY"),
    "gemini": ("generativelanguage.googleapis.com", "GEMINI_API_KEY"),
}


# Not frozen, though never changed after it is made (derive with dataclasses.replace): one is made per request
# and a frozen dataclass's __init__ costs ~5x (object.__setattr__ per field).
@dataclass(slots=True)
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
    top_logprobs: int = 0  # > 0: ask for this many next-token alternatives (runner.sweep.providers.logprobs)
    # the verbalized measurement: the option labels its JSON reply is keyed by (the constraint admits that object)
    verbalized: tuple[str, ...] = ()


@dataclass(slots=True)
class HttpCall:
    """One HTTP POST: absolute URL, headers (may hold the API key: never log them) and JSON body.

    ``data``, when set, is ``body`` already serialized (a provider may splice pre-rendered JSON).
    """

    url: str
    headers: dict[str, str]
    body: dict[str, Any]
    data: bytes | None = None
    secret: str | None = None  # the API key the headers carry: redacted from every error text


@dataclass(slots=True)
class Reply:
    """A provider's answer: text, why generation stopped, and token usage when the server reported it."""

    text: str
    finish_reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    # the first token's most likely alternatives, (token, natural-log probability), when the request asked for them
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    logprobs_sampled: bool = False  # top_logprobs are after the server's samplers (llama.cpp post_sampling_probs)
    # what the reply boundary changed: a field nulled for its type or range, lone surrogates replaced
    warnings: tuple[str, ...] = ()
    # set by ``transport.send`` from the transport's marker headers, never from the server's body:
    cache_origin: str | None = None  # JSON origin of a reply served from the response cache (runner/sweep/cache.py)
    replica: str | None = None  # base URL of the replica that answered (runner/sweep/replicas.py)
    # the model snapshot the server says answered (``model`` / Gemini ``modelVersion``) and OpenAI's
    # ``system_fingerprint``: what a paper reports as the model version, which the requested name may not pin
    served_model: str | None = None
    system_fingerprint: str | None = None


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

    def plain(self, body: bytes) -> Reply | None:
        """The common reply read straight from a 2xx body's bytes, equal to what ``reply`` makes of it; None when
        the body needs the JSON decode and ``reply``'s checks (any doubt, any other shape)."""
        ...


def get_provider(name: str) -> Provider:
    """The provider mapping called ``name`` (openai, anthropic, gemini)."""
    from runner.sweep.providers import anthropic, gemini, openai

    return {"openai": openai.PROVIDER, "anthropic": anthropic.PROVIDER, "gemini": gemini.PROVIDER}[name]


def shape_error(provider: str, body: Any, what: str) -> UnreadableBody:
    """An ``UnreadableBody`` saying which part of ``provider``'s reply shape is missing (body abbreviated)."""
    return UnreadableBody(f"{provider} reply without {what}: {_SHORT.repr(body)}")


def token_count(usage: dict[str, Any], key: str, warnings: list[str]) -> int | None:
    """``usage[key]`` if it is an integer token count in [0, 2**63), else None (a warning unless absent/null)."""
    return checked_count(usage.get(key), f"usage {key}", warnings)


def checked_count(value: Any, what: str, warnings: list[str]) -> int | None:
    """``value`` if it is None or an integer in [0, 2**63) (a count the store holds), else None and a warning."""
    if value is None or (type(value) is int and 0 <= value <= INT64_MAX):
        return value
    if isinstance(value, int | float) and not (isinstance(value, int) and value.bit_length() > 128):
        shown = repr(value)[:40]
    else:  # the type only: never echo text (it may quote the key), nor print a 10**5000
        shown = f"<{type(value).__name__}>"
    warnings.append(f"{what} = {shown}: not a token count, stored as null")
    return None


def encodable(text: str, what: str, warnings: list[str]) -> str:
    """``text`` itself when it encodes as UTF-8, else with each lone surrogate replaced by U+FFFD (warned)."""
    if text.isascii():
        return text
    fixed, n = _SURROGATE.subn("\ufffd", text)
    if n:
        warnings.append(f"{what}: {n} lone surrogate(s) replaced by U+FFFD")
    return fixed


def finish_reason_of(value: Any, warnings: list[str]) -> str | None:
    """A string (or null) finish reason as is (made encodable); any other type is null, with a warning."""
    if value is None or isinstance(value, str):
        return value if value is None else encodable(value, "finish_reason", warnings)
    warnings.append(f"finish_reason = <{type(value).__name__}>: not a string, stored as null")
    return None


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
    body: dict[str, Any],
    texts: list[Any],
    what: str,
    finish_reason: Any,
    usage_key: str,
    input_key: str,
    output_keys: tuple[str, ...],
    warnings: list[str] | None = None,
) -> Reply:
    """A ``Reply`` joining ``texts`` (all strings, else ``UnreadableBody`` naming ``what``), made encodable.

    Input tokens are ``body[usage_key][input_key]``; output tokens the sum of ``output_keys`` there (a provider
    that counts thinking apart lists both). Ill-typed or impossible fields become None with a warning, added to
    ``warnings`` (the provider's own); nothing else is changed.
    """
    usage = body.get(usage_key)
    if not warnings and len(texts) == 1 and len(output_keys) == 1 and type(usage) is dict:
        counts = usage.get(input_key), usage.get(output_keys[0])
        plain = plain_reply(texts[0], finish_reason, *counts, body.get("model"), body.get("system_fingerprint"))
        if plain is not None:  # the common reply: every field fits its column as it is
            return plain
    if len(texts) == 1 and type(texts[0]) is str:  # one text, nothing to join
        joined = texts[0]
    elif all(isinstance(t, str) for t in texts):
        joined = "".join(texts)
    else:
        raise shape_error(provider, body, what)
    notes = list(warnings) if warnings else []
    usage = usage if isinstance(usage, dict) else {}
    input_tokens = token_count(usage, input_key, notes)
    before = len(notes)
    if len(output_keys) == 1:  # one count: itself (no sum to guard)
        output_tokens = token_count(usage, output_keys[0], notes)
    else:
        known = [n for n in (token_count(usage, key, notes) for key in output_keys) if n is not None]
        output_tokens = sum(known) if known and len(notes) == before else None  # a part unknown: the sum is too
    if output_tokens is not None and output_tokens > INT64_MAX:
        notes.append(f"usage {'+'.join(output_keys)}: past 2**63, stored as null")
        output_tokens = None
    text = encodable(joined, "response_text", notes)
    finish = finish_reason_of(finish_reason, notes)
    served = label_of(body, ("model", "modelVersion"), notes)
    fingerprint = label_of(body, ("system_fingerprint",), notes)
    return Reply(
        text,
        finish,
        input_tokens,
        output_tokens,
        warnings=tuple(notes),
        served_model=served,
        system_fingerprint=fingerprint,
    )


LABEL_MAX = 256  # characters of a model name or fingerprint kept (a longer one is not a label)


def plain_reply(
    text: Any, finish: Any, input_tokens: Any, output_tokens: Any, served: Any, fingerprint: Any
) -> Reply | None:
    """The ``Reply`` ``text_reply`` makes when nothing needs its checks' notes: ASCII strings (a finish reason and
    fingerprint may be null; ``served``, the body's ``model``, may not), token counts null or in [0, 2**63),
    labels within ``LABEL_MAX``; else None. One pass of C checks instead of one helper per field, for the reply
    nearly every server sends."""
    if (
        type(text) is str
        and (finish is None or type(finish) is str)
        and (type(served) is str and len(served) <= LABEL_MAX)  # absent: another provider's key (label_of)
        and (fingerprint is None or (type(fingerprint) is str and len(fingerprint) <= LABEL_MAX))
        and (input_tokens is None or (type(input_tokens) is int and 0 <= input_tokens <= INT64_MAX))
        and (output_tokens is None or (type(output_tokens) is int and 0 <= output_tokens <= INT64_MAX))
        and "".join((text, finish or "", served, fingerprint or "")).isascii()
    ):
        return Reply(text, finish, input_tokens, output_tokens, served_model=served, system_fingerprint=fingerprint)
    return None


def label_of(body: dict[str, Any], keys: tuple[str, ...], warnings: list[str]) -> str | None:
    """The first of ``keys`` in ``body`` as a short encodable string; None when absent, with a warning when unfit."""
    for key in keys:
        if key not in body or body[key] is None:
            continue
        value = body[key]
        if not isinstance(value, str) or len(value) > LABEL_MAX:
            warnings.append(f"{key}: {type(value).__name__} of length {len(str(value))} is not a label, stored as null")
            return None
        return encodable(value, key, warnings)
    return None


def conventional_key_env(endpoint: EndpointConfig) -> str | None:
    """The provider's conventional key variable (``OPENAI_API_KEY``, ...) when ``endpoint`` is the provider's
    own host over https and names no ``api_key_env``; else None (a key is never sent to a host it is not for)."""
    host, variable = CONVENTIONAL_KEYS[endpoint.provider]
    if endpoint.api_key_env is None and endpoint.base_url.startswith(f"https://{host}/"):
        return variable
    return None


def no_credentials_note(endpoint: EndpointConfig) -> str | None:
    """The one-time note for an endpoint sending no key, unless it is on this machine (local servers need none)."""
    host = endpoint.base_url.partition("://")[2].partition("/")[0].rpartition("@")[2].lower()
    host = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    if host == "localhost" or host == "::1" or host.startswith("127."):
        return None
    fallback = conventional_key_env(endpoint)
    unset = f"api_key_env is not set{f' and neither is {fallback}' if fallback else ''}"
    return f"endpoint {endpoint.name!r}: {unset}: requests to {host} are sent without credentials"


def provider_for(endpoint: EndpointConfig) -> Provider:
    """The provider mapping of one spec endpoint: its ``max_tokens_field``, ``extra_headers`` and ``extra_body``."""
    from runner.sweep.providers import openai

    provider = openai.for_endpoint(endpoint) if endpoint.provider == "openai" else get_provider(endpoint.provider)
    if endpoint.extra_headers or endpoint.extra_body:
        provider = WithExtras(provider, endpoint.extra_headers, endpoint.extra_body)
    return provider


class WithExtras:
    """A provider whose calls carry an endpoint's ``extra_headers`` and ``extra_body``.

    Precedence: hofcat's own headers (content type, credential) and body fields win. ``extra_body`` is
    merged *under* the body hofcat builds, key by key into nested tables (Gemini's ``generationConfig``):
    it adds fields (a router's ``provider`` preferences, ``thinkingConfig``) and never changes one hofcat sets.
    The spec refuses credential-like header names, so a key can only come from ``api_key_env``.
    """

    def __init__(self, inner: Provider, headers: dict[str, str], body: dict[str, Any]) -> None:
        self.inner, self.headers, self.body = inner, headers, body
        self.name, self.unsupported = inner.name, inner.unsupported

    def call(self, base_url: str, api_key: str | None, request: ChatRequest) -> HttpCall:
        """The inner provider's call with the extra headers and body fields added under its own."""
        call = self.inner.call(base_url, api_key, request)
        own = {name.lower() for name in call.headers}
        headers = {**{k: v for k, v in self.headers.items() if k.lower() not in own}, **call.headers}
        if not self.body:
            return replace(call, headers=headers)
        return replace(call, headers=headers, body=merged_under(self.body, call.body), data=None)

    def reply(self, body: Any) -> Reply:
        """The inner provider's reading of ``body``."""
        return self.inner.reply(body)

    def plain(self, body: bytes) -> Reply | None:
        """The inner provider's shortcut for ``body``."""
        return self.inner.plain(body)


def merged_under(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` with the keys of ``base`` it lacks, tables merged recursively (``top`` wins on every leaf)."""
    out = dict(base)
    for key, value in top.items():
        below = out.get(key)
        out[key] = merged_under(below, value) if isinstance(below, dict) and isinstance(value, dict) else value
    return out
