"""The six Hofstede dimensions, in the order every hofcat array and table uses."""

from __future__ import annotations

from runner.survey import vocab

DIMENSIONS: tuple[str, ...] = ("pdi", "idv", "mas", "uai", "lto", "ivr")

DIMENSION_NAMES: dict[str, str] = {
    "pdi": "Power Distance",
    "idv": "Individualism",
    "mas": "Masculinity",
    "uai": "Uncertainty Avoidance",
    "lto": "Long-Term Orientation",
    "ivr": "Indulgence",
}

QUESTIONS = vocab.QUESTIONS  # the 24 content questions that enter the indices
