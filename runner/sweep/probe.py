"""Determinism probe: does an endpoint (any provider the runner speaks) repeat its text for one request and seed?

Four conditions, each one chat request repeated ``repeats`` times:

- ``t0``: temperature 0, no seed -- greedy decoding;
- ``t0_seed``: temperature 0, a fixed seed;
- ``hot_seed``: temperature > 0, the same fixed seed every time -- repeats exactly only if the seed is honoured;
- ``hot_seeds``: temperature > 0, a different seed each time -- the control: if these replies are all equal
  too, sampling is not random for this prompt and ``hot_seed`` proves nothing.

How they are sent matters on batching servers (llama.cpp, vLLM): the logits of a sequence can depend on
which other sequences share its batch. So the first request of ``t0``, ``t0_seed`` and ``hot_seed`` is sent
alone, one after another ("solo"); then all remaining requests of the four conditions go at once, in one
mixed concurrent batch together with ``repeats`` "distractor" requests (the same messages lengthened, so
other prompts of other lengths share the batch, as in a sweep; their replies are not compared).

Verdict (``seed``), from ``hot_seed`` and its control:

- ``honoured``: every ``hot_seed`` reply is identical (solo and batched) and the control varies;
- ``batch_dependent``: the batched ``hot_seed`` replies agree with each other but not with the solo one;
- ``ignored``: batched ``hot_seed`` replies differ among themselves;
- ``inconclusive``: the control did not vary, or too few replies came back.

Requests that fail count as errors and are left out of the shares. Requests go through a ``Transport``
(``runner.sweep.transport``): the caller's, or an aiohttp one the probe opens and closes itself.

``probe_endpoint`` probes a spec endpoint with the requests its sweep would send: the body and headers come
from the same provider mapping (``providers.provider_for``: ``max_tokens_field`` such as
``max_completion_tokens``, ``extra_headers``, ``extra_body``) and the same key lookup (``request.api_key_for``).
``probe_determinism`` probes a bare base URL (``hofcat probe``) with the provider's plain mapping.
``probe_endpoints`` is what a sweep session with ``run.determinism_probe`` does before sending any cell: each
selected OpenAI-compatible endpoint (each replica) probed once per run, the result kept in the manifest and
reported on the session's progress stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from runner.errors import ProbeError, RequestError
from runner.rundir import RunWriter
from runner.sweep.plan import Selection
from runner.sweep.progress import Progress
from runner.sweep.providers import ChatRequest, HttpCall, Provider, get_provider, provider_for
from runner.sweep.replicas import replica_probe_summary
from runner.sweep.request import api_key_for
from runner.sweep.spec import EndpointConfig, Spec
from runner.sweep.transport import AiohttpTransport, Transport, TransportFactory, send

SESSION_REPEATS = 4  # a sweep session's probe is small: 5 × 4 requests per endpoint before the sweep
SESSION_MAX_TOKENS = 8
DEFAULT_MESSAGES: tuple[dict[str, str], ...] = ({"role": "user", "content": "Write one short sentence about the sea."},)


@dataclass(frozen=True, slots=True)
class ProbeCondition:
    """Replies to one repeated request: how many, how many distinct, and the share equal to the commonest."""

    name: str
    temperature: float
    seed: int | None  # None: no seed sent, or a different seed per request (``hot_seeds``)
    requests: int
    errors: int
    distinct_texts: int
    identical_share: float  # replies equal to the most common reply / successful replies (0 when none)


@dataclass(frozen=True, slots=True)
class DeterminismProbe:
    """The probe's result: per-condition counts and a verdict on seed handling."""

    endpoint: str
    model: str
    repeats: int
    max_tokens: int
    conditions: tuple[ProbeCondition, ...]
    seed: str  # "honoured" | "batch_dependent" | "ignored" | "inconclusive"
    greedy_identical_share: float  # identical_share at temperature 0 without a seed

    @property
    def seed_honoured(self) -> bool:
        """True when the same seed gave the same text (alone and in a batch) and different seeds did not."""
        return self.seed == "honoured"

    def condition(self, name: str) -> ProbeCondition:
        """The condition called ``name`` (t0, t0_seed, hot_seed, hot_seeds)."""
        for condition in self.conditions:
            if condition.name == name:
                return condition
        raise KeyError(f"no probe condition {name!r}; have {', '.join(c.name for c in self.conditions)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data for the run manifest and the report."""
        data = asdict(self)
        data["conditions"] = [asdict(condition) for condition in self.conditions]
        data["seed_honoured"] = self.seed_honoured
        return data


async def probe_determinism(
    base_url: str,
    model: str,
    *,
    messages: Sequence[dict[str, str]] = DEFAULT_MESSAGES,
    repeats: int = 6,
    max_tokens: int = 24,
    seed: int = 1234,
    hot_temperature: float = 1.0,
    top_p: float = 1.0,
    provider_name: str = "openai",
    api_key_env: str | None = None,
    timeout_s: float = 120.0,
    transport: Transport | None = None,
) -> DeterminismProbe:
    """Probe ``base_url`` (e.g. an OpenAI base ending in /v1) with ``5 * repeats`` chat requests to ``model``.

    Requests go through the runner's provider mapping (``provider_name``: openai, anthropic, gemini) and
    transport, one attempt each.

    ``api_key_env`` names the environment variable holding the API key (never the key itself).
    ``transport`` carries the requests (default: an aiohttp transport with ``timeout_s`` per request).
    Raises ``ValueError`` on bad arguments and ``ProbeError`` when every request fails.
    """
    _check_options(repeats, max_tokens, hot_temperature)
    key = None
    if api_key_env is not None:
        key = os.environ.get(api_key_env)
        if not key:
            raise ValueError(f"api_key_env: environment variable {api_key_env} is not set")
    try:
        provider = get_provider(provider_name)
    except KeyError:
        raise ValueError(f"provider_name: {provider_name!r} is not one of anthropic, gemini, openai") from None
    wire = transport or AiohttpTransport(5 * repeats, timeout_s)
    try:
        return await _probe(
            base_url, model, provider, key, wire, messages, repeats, max_tokens, seed, hot_temperature, top_p
        )
    finally:
        if transport is None:  # the probe opened it
            await wire.close()


async def probe_endpoint(
    endpoint: EndpointConfig,
    transport: Transport,
    *,
    repeats: int = 6,
    max_tokens: int = 24,
    seed: int = 1234,
    hot_temperature: float = 1.0,
    source: str = "spec",
) -> DeterminismProbe:
    """Probe spec ``endpoint`` over ``transport`` with ``5 * repeats`` requests built as its sweep builds them.

    Same provider mapping (``provider_for``: max-tokens field, extra headers and body) and key (``api_key_for``;
    ``source`` names the spec in its error) as the sweep; ``max_tokens`` caps each reply. Raises as
    ``probe_determinism``, and ``SpecError`` when the endpoint's key variable is unset.
    """
    _check_options(repeats, max_tokens, hot_temperature)
    key = api_key_for(endpoint, source)
    return await _probe(
        endpoint.base_url,
        endpoint.model,
        provider_for(endpoint),
        key,
        transport,
        DEFAULT_MESSAGES,
        repeats,
        max_tokens,
        seed,
        hot_temperature,
        1.0,
    )


def _check_options(repeats: int, max_tokens: int, hot_temperature: float) -> None:
    """``ValueError`` for a probe that cannot compare replies: under 2 repeats, no tokens, a cold "hot" run."""
    if repeats < 2:
        raise ValueError(f"repeats: {repeats} must be at least 2 to compare replies")
    if max_tokens < 1:
        raise ValueError(f"max_tokens: {max_tokens} must be at least 1")
    if hot_temperature <= 0:
        raise ValueError(f"hot_temperature: {hot_temperature} must be > 0")


async def _probe(
    base_url: str,
    model: str,
    provider: Provider,
    key: str | None,
    wire: Transport,
    messages: Sequence[dict[str, str]],
    repeats: int,
    max_tokens: int,
    seed: int,
    hot_temperature: float,
    top_p: float,
) -> DeterminismProbe:
    """The probe's requests through ``provider``'s mapping with ``key``, over ``wire``; the result."""
    plans = (
        ("t0", 0.0, [None] * repeats),
        ("t0_seed", 0.0, [seed] * repeats),
        ("hot_seed", hot_temperature, [seed] * repeats),
        ("hot_seeds", hot_temperature, [seed + 1 + i for i in range(repeats)]),
    )
    base = base_url.rstrip("/")

    def call(temperature: float, request_seed: int | None) -> Any:
        request = ChatRequest(model, [dict(m) for m in messages], request_seed, temperature, top_p, max_tokens)
        return provider.call(base, key, request)

    texts: dict[str, list[str | None]] = {name: [] for name, _, _ in plans}
    for name, temperature, seeds in plans[:3]:  # solo: one request at a time, nothing else in flight
        texts[name].append(await _reply_text(wire, provider, call(temperature, seeds[0])))
    batched = [
        (name, call(temperature, s))
        for name, temperature, seeds in plans
        for s in (seeds if name == "hot_seeds" else seeds[1:])
    ]
    # Other prompts of other lengths in the same batch, as in a sweep; their replies are not compared.
    batched += [
        (
            "distractor",
            provider.call(
                base, key, ChatRequest(model, _distractor(messages, i), seed, hot_temperature, top_p, max_tokens)
            ),
        )
        for i in range(repeats)
    ]
    replies = await asyncio.gather(*(_reply_text(wire, provider, c) for _, c in batched))
    for (name, _), text in zip(batched, replies, strict=True):
        if name in texts:
            texts[name].append(text)
    conditions = [_condition(name, temperature, seeds, texts[name]) for name, temperature, seeds in plans]
    if all(c.errors == c.requests for c in conditions):
        raise ProbeError(f"determinism probe: all {4 * repeats} requests to {base} failed")
    return DeterminismProbe(
        endpoint=base_url,
        model=model,
        repeats=repeats,
        max_tokens=max_tokens,
        conditions=tuple(conditions),
        seed=_verdict(texts["hot_seed"], conditions[3]),
        greedy_identical_share=conditions[0].identical_share,
    )


def _distractor(messages: Sequence[dict[str, str]], i: int) -> list[dict[str, str]]:
    """``messages`` with the last one lengthened by ``i + 1`` sentences: a different prompt of another length."""
    *rest, last = [dict(m) for m in messages]
    last["content"] += " Please be brief." * (i + 1)
    return [*rest, last]


async def _reply_text(transport: Transport, provider: Provider, call: HttpCall) -> str | None:
    """The reply text, or None when the attempt failed (any classified request error; no retries here)."""
    try:
        return (await send(transport, provider, call)).text
    except RequestError:
        return None


def _condition(name: str, temperature: float, seeds: list[int | None], texts: list[str | None]) -> ProbeCondition:
    """Count distinct replies and the share of the most common one among successful replies."""
    ok = [text for text in texts if text is not None]
    counts = Counter(ok)
    same_seed = len(set(seeds)) == 1
    return ProbeCondition(
        name=name,
        temperature=temperature,
        seed=seeds[0] if same_seed else None,
        requests=len(texts),
        errors=len(texts) - len(ok),
        distinct_texts=len(counts),
        identical_share=(counts.most_common(1)[0][1] / len(ok)) if ok else 0.0,
    )


def _verdict(hot_seed: list[str | None], control: ProbeCondition) -> str:
    """The seed verdict from the same-seed replies (solo first, then batched) and the different-seeds control."""
    solo, batched = hot_seed[0], [text for text in hot_seed[1:] if text is not None]
    if not batched or (solo is None and len(batched) < 2) or control.distinct_texts < 2:
        return "inconclusive"
    if len(set(batched)) > 1:
        return "ignored"
    return "honoured" if solo in (None, batched[0]) else "batch_dependent"


async def probe_endpoints(
    spec: Spec, selection: Selection, writer: RunWriter, progress: Progress, transport_factory: TransportFactory
) -> None:
    """With ``run.determinism_probe``: probe each selected OpenAI-compatible endpoint not yet probed in this run
    (each replica of one with ``base_urls``, ``SESSION_REPEATS`` repeats of ``SESSION_MAX_TOKENS``); record the
    results (or errors) in the manifest and report each on the progress stream."""
    if not spec.run.determinism_probe:
        return
    for endpoint in selection.endpoints:
        if endpoint.provider != "openai" or writer.probe_result(endpoint.name) is not None:
            continue
        if endpoint.base_urls:
            replicas = [dataclasses.replace(endpoint, base_url=url, base_urls=()) for url in endpoint.base_urls]
            results = {
                r.base_url: await _probe_record(r, transport_factory, progress, f" at {r.base_url}") for r in replicas
            }
            result = replica_probe_summary(results)
        else:
            result = await _probe_record(endpoint, transport_factory, progress)
        writer.record_probe(endpoint.name, result)


async def _probe_record(
    endpoint: EndpointConfig, transport_factory: TransportFactory, progress: Progress, at: str = ""
) -> dict[str, Any]:
    """The probe of one server as the manifest records it (``{"error": ...}`` when it failed), reported."""
    where = f"endpoint {endpoint.name!r}{at}"
    try:
        result = (await _probe_session(endpoint, transport_factory)).to_dict()
        progress.note(
            f"{where}: determinism probe: seed {result['seed']}, greedy identical "
            f"share {result['greedy_identical_share']:.2f}"
        )
    except ProbeError as exc:  # an unreachable endpoint: the sweep's own retries and errors will tell more
        result = {"error": str(exc)}
        progress.note(f"{where}: determinism probe failed: {exc}")
    return result


async def _probe_session(endpoint: EndpointConfig, transport_factory: TransportFactory) -> DeterminismProbe:
    """The small determinism probe of one endpoint, over a transport of its own."""
    transport = transport_factory(endpoint)
    try:
        # built as the sweep builds its requests: max-tokens field, extra headers and body, the key lookup
        return await probe_endpoint(endpoint, transport, repeats=SESSION_REPEATS, max_tokens=SESSION_MAX_TOKENS)
    finally:
        await transport.close()
