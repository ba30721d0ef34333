"""Next-token log-probabilities on the wire: the request fields that ask for them and the reply parts that hold them.

The ``distribution`` measurement reads the top-k alternatives of the reply's first token. Shapes:

- OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp's server, hofcat serve-sim): request
  ``logprobs: true, top_logprobs: k`` (OpenAI allows k ≤ 20); reply
  ``choices[0].logprobs.content[0].top_logprobs = [{"token", "logprob", ...}, ...]``: the model's raw
  log-probabilities (temperature 1, before any grammar or sampler).
- llama.cpp's grammar (``constraint = "grammar"``, a llama.cpp-only field): the request also carries
  ``post_sampling_probs: true`` and turns off the server's default truncation (``top_k: 0, min_p: 0``), and the
  reply lists ``content[0].top_probs = [{"token", "prob"}, ...]``: the probabilities the token was drawn with,
  at the request's temperature. When the unconstrained draw broke the grammar (the usual case when the options
  hold little mass) the server redraws under the grammar and lists exactly the option tokens; otherwise it
  lists the unconstrained candidates. Without truncation both passes draw each option token ∝ p^(1/T), so
  either list gives the drawn distribution over the options (measured: docs/measurement.md).
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


# llama.cpp: probabilities after the grammar and samplers, and no truncation sampler between the model and the
# draw (its defaults top_k 40 and min_p 0.05 would cut small options in one of its two passes but not the other)
LLAMACPP_SAMPLED_FIELDS = {"post_sampling_probs": True, "top_k": 0, "min_p": 0.0}


def openai_request_fields(top_logprobs: int, constraint: str = "none") -> dict[str, Any]:
    """Chat-completions body fields asking for the ``top_logprobs`` most likely alternatives of each token
    (with llama.cpp's ``grammar`` constraint: as drawn, after the grammar, ``LLAMACPP_SAMPLED_FIELDS``)."""
    fields: dict[str, Any] = {"logprobs": True, "top_logprobs": top_logprobs}
    if constraint == "grammar":
        fields |= LLAMACPP_SAMPLED_FIELDS
    return fields


def gemini_generation_fields(top_logprobs: int) -> dict[str, Any]:
    """``generationConfig`` fields asking Gemini for the ``top_logprobs`` most likely alternatives per token."""
    return {"responseLogprobs": True, "logprobs": top_logprobs}


def openai_top_logprobs(choice: Any) -> tuple[TopLogprobs | None, bool]:
    """The first token's alternatives in an OpenAI-shaped ``choices[i]`` object (None when it has none), and
    whether they are llama.cpp's post-sampling probabilities (``top_probs``/``prob``, returned as logs)."""
    try:
        first = choice["logprobs"]["content"][0]
    except (KeyError, IndexError, TypeError):
        return None, False
    if isinstance(first, dict) and "top_logprobs" not in first and isinstance(first.get("top_probs"), list):
        probs = _pairs(first["top_probs"], "prob", is_log=False)
        return probs, probs is not None
    try:
        return _pairs(first["top_logprobs"], "logprob"), False
    except (KeyError, TypeError):
        return None, False


def gemini_top_logprobs(candidate: Any) -> TopLogprobs | None:
    """The first token's alternatives in a Gemini ``candidates[i]`` object; None when it has none."""
    try:
        alternatives = candidate["logprobsResult"]["topCandidates"][0]["candidates"]
    except (KeyError, IndexError, TypeError):
        return None
    return _pairs(alternatives, "logProbability")


def _pairs(alternatives: Any, key: str, *, is_log: bool = True) -> TopLogprobs | None:
    """(token, logprob) pairs of well-formed entries (string token, finite or -inf number ≤ 0; with
    ``is_log`` False a probability in [0, 1], returned as its log), or None."""
    if not isinstance(alternatives, list):
        return None
    out = []
    for entry in alternatives:
        if not isinstance(entry, dict):
            continue
        token, logprob = entry.get("token"), entry.get(key)
        if isinstance(token, str) and isinstance(logprob, int | float) and not isinstance(logprob, bool):
            value = float(logprob)
            if not is_log:
                value = math.log(value) if 0.0 < value <= 1.0 + 1e-6 else (-math.inf if value == 0.0 else math.nan)
            if not math.isnan(value) and value <= 1e-6:  # a log-probability; tiny positive rounding allowed
                out.append((token, min(value, 0.0)))
    return tuple(out) if out else None
