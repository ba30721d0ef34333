"""The simulated endpoint's knobs: the generative model, latency, rate limit and fault rates.

Every random choice the server makes is derived from ``SimConfig.seed`` (see ``runner.endpoints.sim.seeding``), so two
servers with the same config answer the same requests the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Literal

from runner.errors import SimConfigError

LatencyKind = Literal["fixed", "uniform", "exponential", "lognormal"]

# The language's own country for "model level" prompts (no persona), as in the CAT papers: English was
# compared with the United States, Chinese with China, Arabic with the Arab countries, Slovak with Slovakia.
DEFAULT_LANGUAGE_COUNTRIES: dict[str, str] = {
    "en": "U.S.A.",
    "zh": "China",
    "ar": "Arab countries",
    "sk": "Slovak Rep",
}


# The faults drawn per attempt, each a probability.
# Beyond this many logits per position the end option already takes every answer; larger would overflow exp().
MAX_POSITION_BIAS = 100.0
ATTEMPT_FAULTS = ("error_rate", "malformed_rate", "hang_rate", "refusal_rate", "chatty_rate", "ambiguous_rate")


@dataclass(frozen=True, slots=True)
class Latency:
    """A per-request latency distribution in milliseconds.

    ``fixed``: always ``a``; ``uniform``: between ``a`` and ``b``; ``exponential``: mean ``a``;
    ``lognormal``: median ``a`` with log-scale spread ``b``.
    """

    kind: LatencyKind = "fixed"
    a: float = 0.0
    b: float = 0.0

    @classmethod
    def parse(cls, text: str) -> Latency:
        """``"50"``, ``"fixed:50"``, ``"uniform:20:80"``, ``"exponential:100"``, ``"lognormal:200:0.5"`` → Latency."""
        parts = text.strip().split(":")
        allowed = "NUMBER, fixed:MS, uniform:LO_MS:HI_MS, exponential:MEAN_MS or lognormal:MEDIAN_MS:SIGMA"
        try:
            numbers = [float(p) for p in parts[1:]] if not _is_number(parts[0]) else [float(parts[0])]
        except ValueError:
            raise SimConfigError("latency", text, allowed) from None
        kind = "fixed" if _is_number(parts[0]) else parts[0]
        arity = {"fixed": 1, "uniform": 2, "exponential": 1, "lognormal": 2}
        if kind not in arity or len(numbers) != arity[kind]:
            raise SimConfigError("latency", text, allowed)
        latency = cls(kind, numbers[0], numbers[1] if len(numbers) > 1 else 0.0)  # type: ignore[arg-type]
        latency.validate()
        return latency

    def validate(self) -> None:
        """Raise SimConfigError unless the parameters describe a distribution over non-negative times."""
        bad = (
            not all(math.isfinite(v) and v >= 0 for v in (self.a, self.b))
            or (self.kind == "uniform" and self.b < self.a)
            or self.kind not in ("fixed", "uniform", "exponential", "lognormal")
        )
        if bad:
            raise SimConfigError("latency", str(self), "finite non-negative milliseconds, uniform with lo <= hi")

    @property
    def is_zero(self) -> bool:
        """True when every request is answered without waiting."""
        return (self.kind in ("fixed", "exponential", "lognormal") and self.a == 0.0) or (
            self.kind == "uniform" and self.b == 0.0
        )

    def __str__(self) -> str:
        if self.kind in ("fixed", "exponential"):
            return f"{self.kind}:{self.a:g}"
        return f"{self.kind}:{self.a:g}:{self.b:g}"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class SimConfig:
    """Everything that decides how the simulated endpoint answers; all rates are per request, in [0, 1]."""

    seed: int = 0
    model: str = "sim-1"  # the only model name /v1/models lists; requests for others still get answers
    # Generative model (docs/simulator.md): answer means move with the reference score by
    # signal × (score − 50) index points; spread is the base answer dispersion (a logit scale, > 0).
    reference: str = "hofstede-2015"
    signal: float = 2.0
    spread: float = 1.0
    language_countries: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_LANGUAGE_COUNTRIES))
    # Planted design-factor effects (runner/endpoints/sim/effects.py, docs/simulator.md): position_bias logits
    # per displayed position (> 0 recency, < 0 primacy); effects {factor: size}, the standard deviation in
    # answer points of a question's mean between the factor's levels (factors: effects.EFFECT_FACTORS).
    position_bias: float = 0.0
    effects: dict[str, float] = field(default_factory=dict)
    # Timing and limits.
    latency: Latency = field(default_factory=Latency)
    requests_per_minute: int | None = None  # sliding 60-s window of accepted requests; None = unlimited
    burst: int | None = None  # accepted requests per sliding 1-s window; None = unlimited
    tokens_per_minute: int | None = None  # prompt + max_tokens of accepted requests per sliding 60-s window
    # Faults, drawn per attempt from the seed, the request and how often that request was seen before.
    error_rate: float = 0.0  # HTTP 500/502/503 with an OpenAI-shaped error body
    malformed_rate: float = 0.0  # HTTP 200 with truncated JSON or an HTML error page
    hang_rate: float = 0.0  # wait hang_s before answering (the client should time out first)
    hang_s: float = 600.0
    refusal_rate: float = 0.0  # "As an AI, I do not have personal preferences…" in the prompt's language
    chatty_rate: float = 0.0  # the same answer wrapped in prose or markdown
    # an item reply (a survey's first entry) naming the answer and another option, "2 or 3": parsed as ambiguous
    ambiguous_rate: float = 0.0
    # Batch APIs (runner/endpoints/sim/batch.py): seconds until a batch completes, the share of its requests
    # that fail alone, and the share of batches that expire with only their first half processed.
    batch_latency_s: float = 0.5
    batch_error_rate: float = 0.0
    batch_expire_rate: float = 0.0
    # Request log: the last log_limit entries stay in memory; log_path also appends every entry as JSONL.
    log_limit: int = 100_000
    log_path: Path | None = None
    # Verbalized replies (runner/endpoints/sim/verbalized.py): the stated probabilities ∝ p^(1/τ), log-noise σ per
    # request, and the share of them malformed — planted disagreement between the measurements.
    verbalized_temperature: float = 1.0
    verbalized_noise: float = 0.0
    verbalized_malformed_rate: float = 0.0

    def __post_init__(self) -> None:
        for name in (*ATTEMPT_FAULTS, "batch_error_rate", "batch_expire_rate"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise SimConfigError(name, value, "a probability in [0, 1]")
        if sum(getattr(self, n) for n in ("error_rate", "malformed_rate", "hang_rate")) > 1.0:
            raise SimConfigError("error_rate + malformed_rate + hang_rate", "> 1", "a total of at most 1")
        for name in ("requests_per_minute", "burst", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise SimConfigError(name, value, "a positive integer or None (unlimited)")
        if not (math.isfinite(self.signal) and self.signal >= 0):
            raise SimConfigError("signal", self.signal, "a finite number >= 0")
        if not (math.isfinite(self.spread) and self.spread > 0):
            raise SimConfigError("spread", self.spread, "a finite number > 0")
        if not (isinstance(self.position_bias, (int, float)) and abs(self.position_bias) <= MAX_POSITION_BIAS):
            raise SimConfigError(
                "position_bias",
                self.position_bias,
                f"a number of logits per position within ±{MAX_POSITION_BIAS:g} (beyond it the end option takes all)",
            )
        from runner.endpoints.sim.effects import EFFECT_FACTORS

        for factor, size in self.effects.items():
            if factor not in EFFECT_FACTORS:
                raise SimConfigError("effects", factor, f"a factor among {', '.join(EFFECT_FACTORS)}")
            if not (isinstance(size, (int, float)) and math.isfinite(size) and size >= 0):
                raise SimConfigError(f"effects[{factor}]", size, "a finite size >= 0 (answer points)")
        if not (math.isfinite(self.batch_latency_s) and self.batch_latency_s >= 0):
            raise SimConfigError("batch_latency_s", self.batch_latency_s, "finite seconds >= 0")
        if not (math.isfinite(self.hang_s) and self.hang_s >= 0):
            raise SimConfigError("hang_s", self.hang_s, "finite seconds >= 0")
        if not isinstance(self.log_limit, int) or self.log_limit < 0:
            raise SimConfigError("log_limit", self.log_limit, "an integer >= 0")
        self.latency.validate()
        if not (math.isfinite(self.verbalized_temperature) and self.verbalized_temperature > 0):
            raise SimConfigError("verbalized_temperature", self.verbalized_temperature, "a finite number > 0")
        if not (math.isfinite(self.verbalized_noise) and self.verbalized_noise >= 0):
            raise SimConfigError("verbalized_noise", self.verbalized_noise, "a finite number >= 0")
        if not (isinstance(self.verbalized_malformed_rate, (int, float)) and 0 <= self.verbalized_malformed_rate <= 1):
            raise SimConfigError("verbalized_malformed_rate", self.verbalized_malformed_rate, "a probability in [0, 1]")

    @cached_property
    def any_attempt_fault(self) -> bool:
        """True when some fault is drawn per attempt (the server then counts attempts per request)."""
        return any(getattr(self, n) > 0 for n in ATTEMPT_FAULTS)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready description (for /sim/stats and logs)."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = str(value) if isinstance(value, (Latency, Path)) else value
        return out
