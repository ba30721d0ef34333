"""The simulated respondent: answer distributions whose VSM13 indices follow a reference set's country scores.

Generative model (docs/simulator.md has the derivation):

- Each of the 24 questions enters exactly one index with coefficient ``c_q`` (PDI = 35(m07 − m02) + …).
  For country ``s`` with reference score ``S`` on that dimension, question ``q`` gets the target mean
  ``μ_q = 3 + o_q + sign(c_q) · δ``, ``δ = signal · (S − 50) / (2 Σ|c|/2)``, so that the expected index is
  ``Σ c_q μ_q = signal · (S − 50)``: the offsets ``o_q`` cancel within each ± pair and only stagger where the
  modal answer changes (a finer staircase at temperature 0). Targets are clamped to [1.1, 4.9].
- Answers k = 1…5 have logits ``θ (k − 3) − (k − 3)² / (2 spread²)``; ``θ`` is solved so that the mean at
  temperature 1 equals ``μ_q``. A request's temperature T divides the logits (T = 0: the modal answer, no
  randomness), top_p keeps the smallest set of most likely answers whose mass reaches top_p, as nucleus
  sampling does.
- The answer mean is strictly increasing in θ for every T > 0 (an exponential family), and the mode is
  non-decreasing in θ, so at any temperature the expected index is a monotone function of the reference
  score: the expressed ranking equals the reference ranking in expectation (ties possible at T = 0).
- A missing reference value (or an unknown country) makes that dimension neutral: S is taken as 50.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from runner.errors import SimConfigError
from runner.score.indices import FORMULAS
from runner.survey.dimensions import DIMENSIONS
from runner.survey.vocab import QUESTIONS

# dimension → ((question, signed coefficient), …) from the official formulas: the + and − question of the
# first pair, then of the second pair.
INDEX_TERMS: dict[str, tuple[tuple[int, float], ...]] = {
    dim: tuple(term for weight, plus, minus in FORMULAS[dim] for term in ((plus, weight), (minus, -weight)))
    for dim in DIMENSIONS
}
CENTER = 50.0  # the reference score that maps to an expected index of 0
# Offsets of the first and second ± pair of each index: they cancel in the index but put the points where the
# modal answer of the four questions changes at different δ, so that temperature-0 indices take more values.
PAIR_OFFSETS = (0.125, -0.375)
MEAN_BOUNDS = (1.1, 4.9)
OPTIONS = (1, 2, 3, 4, 5)

Scores = Mapping[str, Mapping[str, float | None]]


class UniformSource(Protocol):
    """Anything with ``random() -> float`` in [0, 1) (``runner.endpoints.sim.seeding.Draws``, ``random.Random``)."""

    def random(self) -> float:
        """One uniform draw."""


@dataclass
class CountryScores:
    """A reference set's scores, country → dimension → score (None = missing), with name resolution."""

    name: str
    table: Scores
    resolve: Callable[[str], str | None] | None = None  # alias → the table's spelling; None = exact names only
    _resolved: dict[str, str | None] = field(default_factory=dict, repr=False)

    def lookup(self, country: str) -> str | None:
        """The table's name for ``country`` (aliases allowed), or None when the set does not know it."""
        if country in self.table:
            return country
        if country not in self._resolved:
            found = self.resolve(country) if self.resolve is not None else None
            self._resolved[country] = found if found in self.table else None
        return self._resolved[country]


def _question_terms() -> dict[int, tuple[str, float, float]]:
    """question → (dimension, coefficient, offset)."""
    out: dict[int, tuple[str, float, float]] = {}
    for dim, terms in INDEX_TERMS.items():
        for i, (q, coef) in enumerate(terms):
            out[q] = (dim, coef, PAIR_OFFSETS[i // 2])
    return out


QUESTION_TERMS = _question_terms()


def _logits(theta: float, spread: float, bias: tuple[float, ...] | None = None) -> tuple[float, ...]:
    """Answer logits; ``bias`` (per option ID, a planted position effect) is added when given."""
    logits = tuple(theta * (k - 3) - (k - 3) ** 2 / (2.0 * spread * spread) for k in OPTIONS)
    return logits if bias is None else tuple(v + b for v, b in zip(logits, bias, strict=True))


def _softmax(logits: tuple[float, ...], temperature: float) -> tuple[float, ...]:
    top = max(logits)
    weights = [math.exp((v - top) / temperature) for v in logits]
    total = sum(weights)
    return tuple(w / total for w in weights)


def _mean(probs: tuple[float, ...]) -> float:
    return sum(k * p for k, p in zip(OPTIONS, probs, strict=True))


def _solve_theta(target: float, spread: float) -> float:
    """θ whose temperature-1 answer mean is ``target``, by Newton's method (d mean / dθ = variance > 0)."""
    theta = 0.0
    for _ in range(100):
        probs = _softmax(_logits(theta, spread), 1.0)
        mean = _mean(probs)
        if abs(mean - target) < 1e-13:
            break
        variance = sum((k - mean) ** 2 * p for k, p in zip(OPTIONS, probs, strict=True))
        theta -= max(-2.0, min(2.0, (mean - target) / variance))  # damped: the mean saturates near 1 and 5
    return theta


@lru_cache(maxsize=65_536)
def _shifted_theta(mean: float, spread: float) -> float:
    """θ of a target mean moved by planted effects (clamped to ``MEAN_BOUNDS`` like every target)."""
    return _solve_theta(min(max(mean, MEAN_BOUNDS[0]), MEAN_BOUNDS[1]), spread)


@lru_cache(maxsize=65_536)
def answer_distribution(
    theta: float, spread: float, temperature: float, top_p: float, bias: tuple[float, ...] | None = None
) -> tuple[float, ...]:
    """Probabilities of answers 1…5 for logit parameter ``theta`` after temperature and nucleus truncation;
    ``bias``: logits added per option ID (runner/endpoints/sim/effects.py), None for none."""
    logits = _logits(theta, spread, bias)
    if temperature <= 0.0:
        mode = max(OPTIONS, key=lambda k: (logits[k - 1], -k))
        return tuple(1.0 if k == mode else 0.0 for k in OPTIONS)
    probs = _softmax(logits, temperature)
    if top_p >= 1.0:
        return probs
    kept: list[int] = []
    mass = 0.0
    for k in sorted(OPTIONS, key=lambda k: (-probs[k - 1], k)):
        kept.append(k)
        mass += probs[k - 1]
        if mass >= top_p:
            break
    return tuple(probs[k - 1] / mass if k in kept else 0.0 for k in OPTIONS)


class AnswerModel:
    """Per-country answer distributions for the 24 questions, derived from reference scores."""

    def __init__(self, scores: CountryScores | Scores, *, signal: float = 2.0, spread: float = 1.0) -> None:
        """``scores``: country → dimension → score or None; ``signal``: index points per score point."""
        if not (math.isfinite(signal) and signal >= 0):
            raise SimConfigError("signal", signal, "a finite number >= 0")
        if not (math.isfinite(spread) and spread > 0):
            raise SimConfigError("spread", spread, "a finite number > 0")
        self.scores = scores if isinstance(scores, CountryScores) else CountryScores("custom", scores)
        self.signal = signal
        self.spread = spread
        self._thetas: dict[str | None, tuple[float, ...]] = {}

    def score(self, country: str | None, dimension: str) -> float | None:
        """The reference score used for ``country`` on ``dimension``; None when missing (treated as 50)."""
        name = None if country is None else self.scores.lookup(country)
        if name is None:
            return None
        value = self.scores.table[name].get(dimension)
        return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)

    def target_mean(self, country: str | None, question: int) -> float:
        """The answer mean of ``question`` (1…24) at temperature 1 for a respondent from ``country``."""
        dim, coef, offset = QUESTION_TERMS[question]
        score = self.score(country, dim)
        half_weight = sum(abs(c) for _, c in INDEX_TERMS[dim]) / 2.0
        delta = 0.0 if score is None else self.signal * (score - CENTER) / (2.0 * half_weight)
        mean = 3.0 + offset + (delta if coef > 0 else -delta)
        return min(max(mean, MEAN_BOUNDS[0]), MEAN_BOUNDS[1])

    def thetas(self, country: str | None) -> tuple[float, ...]:
        """Logit parameter θ for questions 1…24 (index 0 = Q1), computed once per country."""
        cached = self._thetas.get(country)
        if cached is None:
            name = None if country is None else self.scores.lookup(country)
            cached = self._thetas.get(name) if name != country else None
            if cached is None:
                cached = tuple(_solve_theta(self.target_mean(name, q), self.spread) for q in QUESTIONS)
            self._thetas[country] = self._thetas[name] = cached
        return cached

    def distribution(
        self,
        country: str | None,
        question: int,
        temperature: float,
        top_p: float,
        planted: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
    ) -> tuple[float, ...]:
        """Probabilities of option IDs 1…5 for one question under the request's sampling parameters; ``planted``
        (``effects.planted``: per-question mean shifts, per-option logit bias) moves them by planted effects."""
        theta = self.thetas(country)[question - 1]
        if planted is None:
            return answer_distribution(theta, self.spread, temperature, top_p)
        shift, bias = planted
        if shift[question - 1] != 0.0:
            theta = _shifted_theta(self.target_mean(country, question) + shift[question - 1], self.spread)
        return answer_distribution(theta, self.spread, temperature, top_p, bias if any(bias) else None)

    def sample(
        self,
        country: str | None,
        question: int,
        temperature: float,
        top_p: float,
        rng: UniformSource,
        planted: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
    ) -> int:
        """One answer (option ID 1…5); consumes exactly one draw of ``rng`` so answers stay aligned."""
        u = rng.random()
        cumulative = 0.0
        probs = self.distribution(country, question, temperature, top_p, planted)
        for k, p in zip(OPTIONS, probs, strict=True):
            cumulative += p
            if u < cumulative:
                return k
        return max(k for k, p in zip(OPTIONS, probs, strict=True) if p > 0)

    def expected_mean(self, country: str | None, question: int, temperature: float = 1.0, top_p: float = 1.0) -> float:
        """The exact expected answer to ``question`` under the given sampling parameters."""
        return _mean(self.distribution(country, question, temperature, top_p))

    def expected_indices(self, country: str | None, temperature: float = 1.0, top_p: float = 1.0) -> dict[str, float]:
        """Exact expected VSM13 indices (constants C = 0) of ``country``'s answers → {dimension: index}."""
        return {
            dim: sum(c * self.expected_mean(country, q, temperature, top_p) for q, c in terms)
            for dim, terms in INDEX_TERMS.items()
        }

    def truth(self, country: str | None, temperature: float = 1.0, top_p: float = 1.0) -> dict[str, object]:
        """Reference scores (None = missing, answered as 50) and exact expected indices for ``country``."""
        return {
            "country": None if country is None else self.scores.lookup(country),
            "reference": {dim: self.score(country, dim) for dim in DIMENSIONS},
            "expected_index": self.expected_indices(country, temperature, top_p),
        }
