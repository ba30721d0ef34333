"""Per-attempt fault and latency draws, reproducible from (server seed, request key, attempt number).

Transport faults are exclusive, with probabilities ``error_rate``, ``malformed_rate`` and ``hang_rate`` of every
attempt that passed the rate limit; refusal and chatty are drawn independently on top (a refusal wins over
chatty) and apply to whatever reply text the attempt carries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.seeding import Draws

FaultKind = Literal["none", "server_error", "malformed", "hang"]


@dataclass(frozen=True, slots=True)
class Fault:
    """What goes wrong with one attempt; ``variant``/``fraction`` pick the error status or the cut point."""

    kind: FaultKind = "none"
    refusal: bool = False
    chatty: bool = False
    variant: int = 0
    fraction: float = 0.5
    rng: Draws | None = None  # further draws for this attempt (chatty style)
    ambiguous: bool = False  # the answer written beside a second option ("2 or 3")


NO_FAULT = Fault()


def draw_fault(config: SimConfig, key: str, attempt: int) -> Fault:
    """The fault of the ``attempt``-th arrival (from 0) of the request with ``key``."""
    if not config.any_attempt_fault:
        return NO_FAULT
    rng = Draws(config.seed, "fault", key, attempt)
    u = rng.random()
    kind: FaultKind = "none"
    edge = 0.0
    for name, rate in (
        ("server_error", config.error_rate),
        ("malformed", config.malformed_rate),
        ("hang", config.hang_rate),
    ):
        edge += rate
        if u < edge:
            kind = name  # type: ignore[assignment]
            break
    refusal = rng.random() < config.refusal_rate
    chatty = rng.random() < config.chatty_rate and not refusal
    # its own stream, so that the other draws (and every run without ambiguous replies) stay as they were
    ambiguous = (
        config.ambiguous_rate > 0
        and not (refusal or chatty)
        and Draws(config.seed, "ambiguous", key, attempt).random() < config.ambiguous_rate
    )
    return Fault(kind, refusal, chatty, rng.randrange(6), rng.uniform(0.1, 0.9), rng, ambiguous)


def latency_s(config: SimConfig, key: str, attempt: int) -> float:
    """Seconds to wait before answering this attempt, drawn from ``config.latency`` (milliseconds)."""
    latency = config.latency
    if latency.is_zero:
        return 0.0
    if latency.kind == "fixed":
        return latency.a / 1000.0
    rng = Draws(config.seed, "latency", key, attempt)
    if latency.kind == "uniform":
        ms = rng.uniform(latency.a, latency.b)
    elif latency.kind == "exponential":
        ms = rng.expovariate(1.0 / latency.a)
    else:
        ms = latency.a * math.exp(latency.b * rng.gauss(0.0, 1.0))
    return ms / 1000.0
