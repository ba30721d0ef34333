"""Planted design-factor effects: how much the prompt's design, not the respondent's country, moves the answers.

The country effect is the generative model's ``signal`` (runner/endpoints/sim/respondent.py). Everything else a
sweep varies answers the same by default; these knobs plant an effect of chosen size so that an analysis (the
variance partition, docs/analysis.md) can be shown to recover it, and to find nothing where nothing is planted.

- ``position_bias`` b (logits per displayed position): option k shown at position p(k) gets ``b · (p(k) − 3)``
  added to its logit, a recency bias for b > 0 and a primacy bias for b < 0. In the canonical order it pushes
  every answer up; a reversed order pushes it down; shuffled orders average out. So it is an effect of the
  option order (``shuffled`` / ``reversed``), as published for real models.
- ``effects`` {factor: size}: each level of the factor moves question q's target mean by ``size · z``, where z is
  a standard normal drawn from (server seed, factor, level, q): the standard deviation of a question's mean
  between levels is ``size`` answer points. Factors are read from the request as a model would see them:
  ``language``, ``labels`` (option labels), ``reply_format``, ``mode``, ``framing`` (persona kind),
  ``model`` (the request's model name) and ``measurement`` (``distribution`` when the request asks for
  log-probabilities, else ``sample``).

Effects act on the respondent's logits, so sampled replies and served log-probabilities both carry them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from runner.endpoints.sim.seeding import Draws
from runner.survey.cell import PromptCell
from runner.survey.vocab import QUESTIONS

__all__ = ["EFFECT_FACTORS", "Planted", "planted", "position_logits"]

EFFECT_FACTORS = ("language", "labels", "reply_format", "mode", "framing", "model", "measurement")
NO_BIAS: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)
NO_SHIFT: tuple[float, ...] = (0.0,) * len(QUESTIONS)

# (per-question mean shifts for questions 1…24, per-option-ID logit bias for options 1…5)
Planted = tuple[tuple[float, ...], tuple[float, ...]]


@lru_cache(maxsize=4096)
def level_shifts(seed: int, factor: str, level: str, size: float) -> tuple[float, ...]:
    """Question 1…24's mean shift (answer points) for ``level`` of ``factor``: ``size`` × a seeded normal."""
    draws = Draws(seed, "effect", factor, level)
    return tuple(size * draws.gauss() for _ in QUESTIONS)


@lru_cache(maxsize=4096)
def position_logits(bias: float, option_order: tuple[int, ...]) -> tuple[float, ...]:
    """Logit added to option IDs 1…5: ``bias · (displayed position − 3)``."""
    return tuple(bias * (option_order.index(k) + 1 - 3) if k in option_order else 0.0 for k in range(1, 6))


def factor_levels(cell: PromptCell, model: str, logprobs: bool) -> dict[str, str]:
    """The level of each effect factor in one request, as the respondent sees it."""
    return {
        "language": cell.language,
        "labels": cell.labels,
        "reply_format": cell.reply_format,
        "mode": cell.mode,
        "framing": cell.framing.kind,
        "model": model,
        # a verbalized prompt is its own measurement, whether or not log-probabilities were asked for too
        "measurement": "verbalized" if cell.reply_format == "verbalized" else "distribution" if logprobs else "sample",
    }


def planted(
    seed: int, position_bias: float, effects: Mapping[str, float], cell: PromptCell, model: str, logprobs: bool
) -> Planted | None:
    """The shifts and bias planted for one request; None when nothing is planted (the fast path)."""
    if not any(effects.values()) and position_bias == 0.0:
        return None
    shift = NO_SHIFT
    if effects:
        levels = factor_levels(cell, model, logprobs)
        parts = [level_shifts(seed, f, levels[f], size) for f, size in sorted(effects.items()) if size != 0.0]
        shift = tuple(sum(values) for values in zip(*parts, strict=True)) if parts else NO_SHIFT
    bias = position_logits(position_bias, cell.option_order) if position_bias != 0.0 else NO_BIAS
    return shift, bias
