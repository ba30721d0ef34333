"""The closed sets every stage shares, each defined once: a ``Literal`` type and the tuple of its values.

Specs, cells, the planner, the CLI's ``choices`` and the validators all take their allowed values from here,
so adding a provider or a mode is one edit.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "CONSTRAINTS",
    "FRAMINGS",
    "MEASUREMENTS",
    "MODES",
    "OPTION_LABELS",
    "PROVIDERS",
    "QUESTIONS",
    "UNDEFINED_TAU",
    "Constraint",
    "FramingKind",
    "Measurement",
    "Mode",
    "OptionLabels",
    "ProviderName",
    "UndefinedTau",
]

Mode = Literal["item", "survey"]  # one question per request, or all questions in one
FramingKind = Literal["none", "persona", "identity"]  # the model itself, someone from a country, an identity
ProviderName = Literal["anthropic", "gemini", "openai"]  # openai: any OpenAI-compatible server
# constrained decoding; "none": free decoding; "choice": vLLM's guided_choice among the option numbers
Constraint = Literal["none", "grammar", "json_schema", "choice"]
# What one cell measures: one sampled answer, the answer distribution from next-token log-probabilities, or the
# probabilities the model states for each option (a JSON object: runner/parse/verbalized.py)
Measurement = Literal["sample", "distribution", "verbalized"]
# How options are labelled in the prompt: "1 = …" (digits), "A = …" (letters), or by their words alone ("- …")
OptionLabels = Literal["digits", "letters", "words"]
UndefinedTau = Literal["nan", "-1"]  # Kendall tau of a constant ranking: undefined (NaN) or scored -1 (CAT)

MODES: tuple[Mode, ...] = get_args(Mode)
FRAMINGS: tuple[FramingKind, ...] = get_args(FramingKind)
PROVIDERS: tuple[ProviderName, ...] = get_args(ProviderName)
CONSTRAINTS: tuple[Constraint, ...] = get_args(Constraint)
MEASUREMENTS: tuple[Measurement, ...] = get_args(Measurement)
OPTION_LABELS: tuple[OptionLabels, ...] = get_args(OptionLabels)
UNDEFINED_TAU: tuple[UndefinedTau, ...] = get_args(UndefinedTau)

QUESTIONS: tuple[int, ...] = tuple(range(1, 25))  # the 24 VSM13 content questions, in instrument order
