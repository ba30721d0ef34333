"""The closed sets every stage shares, each defined once: a ``Literal`` type and the tuple of its values.

Specs, cells, the planner, the CLI's ``choices`` and the validators all take their allowed values from here,
so adding a provider or a mode is one edit.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "CONSTRAINTS",
    "FRAMINGS",
    "MODES",
    "PROVIDERS",
    "QUESTIONS",
    "UNDEFINED_TAU",
    "Constraint",
    "FramingKind",
    "Mode",
    "ProviderName",
    "UndefinedTau",
]

Mode = Literal["item", "survey"]  # one question per request, or all questions in one
FramingKind = Literal["none", "persona", "identity"]  # the model itself, someone from a country, an identity
ProviderName = Literal["anthropic", "gemini", "openai"]  # openai: any OpenAI-compatible server
Constraint = Literal["none", "grammar", "json_schema"]  # constrained decoding; "none": free decoding
UndefinedTau = Literal["nan", "-1"]  # Kendall tau of a constant ranking: undefined (NaN) or scored -1 (CAT)

MODES: tuple[Mode, ...] = get_args(Mode)
FRAMINGS: tuple[FramingKind, ...] = get_args(FramingKind)
PROVIDERS: tuple[ProviderName, ...] = get_args(ProviderName)
CONSTRAINTS: tuple[Constraint, ...] = get_args(Constraint)
UNDEFINED_TAU: tuple[UndefinedTau, ...] = get_args(UndefinedTau)

QUESTIONS: tuple[int, ...] = tuple(range(1, 25))  # the 24 VSM13 content questions, in instrument order
