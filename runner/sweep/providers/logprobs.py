"""Next-token log-probabilities on the wire: the request fields that ask for them and the reply parts that hold them.

The ``distribution`` measurement reads the top-k alternatives of the reply's first token. Shapes:

- OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp's server, hofcat serve-sim): request
  ``logprobs: true, top_logprobs: k`` (OpenAI allows k ≤ 20); reply
  ``choices[0].logprobs.content[0].top_logprobs = [{"token", "logprob", ...}, ...]``. llama.cpp reports them
  from the raw logits, before its grammar and samplers (measured: docs/measurement.md).
- Gemini ``generateContent``: ``generationConfig.responseLogprobs: true, logprobs: k``; reply
  ``candidates[0].logprobsResult.topCandidates[0].candidates = [{"token", "logProbability"}, ...]``.
- Anthropic's Messages API offers none: a ``distribution`` cell falls back to K sampled replies.

A reply without the expected parts yields ``None`` (the cell is then parsed from its text alone), never an error:
a server that ignores the request fields still answers.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "LOGPROB_PROVIDERS",
    "MAX_TOP_LOGPROBS",
    "TopLogprobs",
    "gemini_generation_fields",
    "gemini_top_logprobs",
    "openai_request_fields",
    "openai_top_logprobs",
    "supports_logprobs",
]

TopLogprobs = tuple[tuple[str, float], ...]  # (token text, natural-log probability), most likely first
LOGPROB_PROVIDERS = frozenset({"openai", "gemini"})  # APIs that return next-token log-probabilities
MAX_TOP_LOGPROBS = 20  # OpenAI's and Gemini's cap on alternatives per token


def supports_logprobs(provider: str) -> bool:
    """True when the provider's API can return next-token log-probabilities (``anthropic``: no)."""
    return provider in LOGPROB_PROVIDERS


def openai_request_fields(top_logprobs: int) -> dict[str, Any]:
    """Chat-completions body fields asking for the ``top_logprobs`` most likely alternatives of each token."""
    return {"logprobs": True, "top_logprobs": top_logprobs}


def gemini_generation_fields(top_logprobs: int) -> dict[str, Any]:
    """``generationConfig`` fields asking Gemini for the ``top_logprobs`` most likely alternatives per token."""
    return {"responseLogprobs": True, "logprobs": top_logprobs}


def openai_top_logprobs(choice: Any) -> TopLogprobs | None:
    """The first token's alternatives in an OpenAI-shaped ``choices[i]`` object; None when it has none."""
    try:
        first = choice["logprobs"]["content"][0]
        alternatives = first["top_logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    return _pairs(alternatives, "logprob")


def gemini_top_logprobs(candidate: Any) -> TopLogprobs | None:
    """The first token's alternatives in a Gemini ``candidates[i]`` object; None when it has none."""
    try:
        alternatives = candidate["logprobsResult"]["topCandidates"][0]["candidates"]
    except (KeyError, IndexError, TypeError):
        return None
    return _pairs(alternatives, "logProbability")


def _pairs(alternatives: Any, key: str) -> TopLogprobs | None:
    """(token, logprob) pairs of well-formed entries (string token, finite or -inf number ≤ 0), or None."""
    if not isinstance(alternatives, list):
        return None
    out = []
    for entry in alternatives:
        if not isinstance(entry, dict):
            continue
        token, logprob = entry.get("token"), entry.get(key)
        if isinstance(token, str) and isinstance(logprob, int | float) and not isinstance(logprob, bool):
            value = float(logprob)
            if not math.isnan(value) and value <= 1e-6:  # a log-probability; tiny positive rounding allowed
                out.append((token, min(value, 0.0)))
    return tuple(out) if out else None
