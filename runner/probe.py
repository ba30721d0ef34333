"""Determinism probe: does an OpenAI-compatible endpoint give the same text for the same request and seed?

Four conditions, each the same chat request repeated ``repeats`` times (concurrently, so parallel slots and
batching are part of what is probed):

- ``t0``: temperature 0, no seed -- greedy decoding; should repeat exactly on any sound endpoint;
- ``t0_seed``: temperature 0, fixed seed;
- ``hot_seed``: temperature > 0, the same fixed seed every time -- repeats exactly only if the seed is honoured;
- ``hot_seeds``: temperature > 0, a different seed each time -- the control: if these replies are all equal
  too, sampling is not random for this prompt and ``hot_seed`` proves nothing (verdict ``inconclusive``).

Verdict (``seed``): ``honoured`` when ``hot_seed`` replies are all identical and ``hot_seeds`` differ,
``ignored`` when ``hot_seed`` replies differ, ``inconclusive`` otherwise. Requests that fail count as errors
and are left out of the shares.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_MESSAGES: tuple[dict[str, str], ...] = (
    {"role": "user", "content": "Write one short sentence about the sea."},
)


class ProbeError(RuntimeError):
    """Every request of the probe failed (the endpoint is unreachable or rejects the request)."""


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
    seed: str  # "honoured" | "ignored" | "inconclusive"
    greedy_identical_share: float  # identical_share at temperature 0 without a seed

    @property
    def seed_honoured(self) -> bool:
        """True when the same seed gave the same text and different seeds did not."""
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
    api_key_env: str | None = None,
    timeout_s: float = 120.0,
) -> DeterminismProbe:
    """Probe ``base_url`` (an OpenAI base ending in /v1) with ``4 * repeats`` chat requests to ``model``.

    ``api_key_env`` names the environment variable holding the API key (never the key itself).
    Raises ``ValueError`` on bad arguments and ``ProbeError`` when every request fails.
    """
    import aiohttp

    if repeats < 2:
        raise ValueError(f"repeats: {repeats} must be at least 2 to compare replies")
    if max_tokens < 1:
        raise ValueError(f"max_tokens: {max_tokens} must be at least 1")
    if hot_temperature <= 0:
        raise ValueError(f"hot_temperature: {hot_temperature} must be > 0")
    headers = {}
    if api_key_env is not None:
        key = os.environ.get(api_key_env)
        if not key:
            raise ValueError(f"api_key_env: environment variable {api_key_env} is not set")
        headers["Authorization"] = f"Bearer {key}"
    base = {"model": model, "messages": [dict(m) for m in messages], "max_tokens": max_tokens}
    plans = (
        ("t0", 0.0, [None] * repeats),
        ("t0_seed", 0.0, [seed] * repeats),
        ("hot_seed", hot_temperature, [seed] * repeats),
        ("hot_seeds", hot_temperature, [seed + 1 + i for i in range(repeats)]),
    )
    url = base_url.rstrip("/") + "/chat/completions"
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        conditions = []
        for name, temperature, seeds in plans:
            bodies = [{**base, "temperature": temperature, **({"seed": s} if s is not None else {})} for s in seeds]
            texts = await asyncio.gather(*(_reply_text(session, url, body) for body in bodies))
            conditions.append(_condition(name, temperature, seeds, texts))
    if all(c.errors == c.requests for c in conditions):
        raise ProbeError(f"determinism probe: all {4 * repeats} requests to {url} failed")
    return DeterminismProbe(
        endpoint=base_url, model=model, repeats=repeats, max_tokens=max_tokens, conditions=tuple(conditions),
        seed=_verdict(conditions[2], conditions[3]), greedy_identical_share=conditions[0].identical_share,
    )


async def _reply_text(session: Any, url: str, body: dict[str, Any]) -> str | None:
    """The reply text, or None when the request failed (status, transport or shape)."""
    import aiohttp

    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                return None
            data = await response.json()
        return str(data["choices"][0]["message"]["content"])
    except (aiohttp.ClientError, asyncio.TimeoutError, KeyError, IndexError, TypeError, ValueError):
        return None


def _condition(name: str, temperature: float, seeds: list[int | None], texts: list[str | None]) -> ProbeCondition:
    """Count distinct replies and the share of the most common one among successful replies."""
    ok = [text for text in texts if text is not None]
    counts = Counter(ok)
    same_seed = len(set(seeds)) == 1
    return ProbeCondition(
        name=name, temperature=temperature, seed=seeds[0] if same_seed else None, requests=len(texts),
        errors=len(texts) - len(ok), distinct_texts=len(counts),
        identical_share=(counts.most_common(1)[0][1] / len(ok)) if ok else 0.0,
    )


def _verdict(hot_seed: ProbeCondition, hot_seeds: ProbeCondition) -> str:
    """honoured / ignored / inconclusive, from the same-seed condition and its different-seeds control."""
    if hot_seed.requests - hot_seed.errors < 2:
        return "inconclusive"
    if hot_seed.distinct_texts > 1:
        return "ignored"
    return "honoured" if hot_seeds.distinct_texts > 1 else "inconclusive"
