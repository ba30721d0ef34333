"""Verbalized replies: the simulated respondent states each option's probability as a JSON object.

What it states is the distribution its sampled answers and its first-token log-probabilities follow
(``AnswerModel.distribution`` at temperature 1, nucleus 1: the truth ``runner.endpoints.sim.logprobs`` serves),
so with the defaults the three measurements share one underlying distribution — the null of method agreement.
Disagreement is planted with ``SimConfig``'s

- ``verbalized_temperature`` τ: the stated probabilities are ∝ p^(1/τ) (τ < 1 overconfident, τ > 1 hedging);
- ``verbalized_noise`` σ: independent N(0, σ²) noise added to each option's log-probability per request
  (seeded requests reproducible), before renormalising;
- ``verbalized_malformed_rate``: the share of verbalized replies that are malformed (an option left out, a
  value written as prose, or the object cut short): each parses to a status, never to a distribution.

Values are written with four decimals, keyed by the labels the prompt shows, in display order.
"""

from __future__ import annotations

import json
import math

from runner.endpoints.sim.effects import Planted
from runner.endpoints.sim.respondent import AnswerModel
from runner.endpoints.sim.seeding import Draws
from runner.survey.cell import PromptCell, position_marks

__all__ = ["MALFORMED_KINDS", "stated_distribution", "verbalized_reply"]

MALFORMED_KINDS = ("missing_option", "prose_value", "cut_short")


def stated_distribution(truth: tuple[float, ...], temperature: float, noise: float, rng: Draws) -> tuple[float, ...]:
    """``truth`` (option-ID order) as the respondent states it: sharpened by ``temperature``, log-noise ``noise``."""
    logs = [math.log(p) / temperature if p > 0.0 else -math.inf for p in truth]
    if noise > 0.0:
        logs = [lp + rng.gauss(0.0, noise) if lp > -math.inf else lp for lp in logs]
    top = max(logs)
    weights = [math.exp(lp - top) for lp in logs]
    total = math.fsum(weights)
    return tuple(w / total for w in weights)


def verbalized_reply(
    model: AnswerModel,
    cell: PromptCell,
    country: str | None,
    *,
    temperature: float = 1.0,
    noise: float = 0.0,
    malformed_rate: float = 0.0,
    rng: Draws,
    planted: Planted | None = None,
) -> tuple[str, str, int]:
    """(reply text, outcome "ok" or "malformed_verbalized", the stated distribution's likeliest option ID);
    ``planted`` (runner/endpoints/sim/effects.py) moves the respondent's distribution as it moves sampled replies."""
    truth = model.distribution(country, cell.questions[0], 1.0, 1.0, planted)
    stated = stated_distribution(truth, temperature, noise, rng)
    marks = position_marks(cell.labels) or position_marks("digits")
    shown = {mark: round(stated[option - 1], 4) for mark, option in zip(marks, cell.option_order, strict=True)}
    likeliest = 1 + max(range(len(stated)), key=lambda k: (stated[k], -k))
    text = json.dumps(shown)
    if malformed_rate > 0.0 and rng.random() < malformed_rate:
        kind = MALFORMED_KINDS[rng.randrange(len(MALFORMED_KINDS))]
        if kind == "missing_option":
            text = json.dumps({m: v for m, v in shown.items() if m != marks[-1]})
        elif kind == "prose_value":
            text = json.dumps({**shown, marks[0]: "quite likely"})
        else:
            text = text[: len(text) // 2]
        return text, "malformed_verbalized", likeliest
    return text, "ok", likeliest
