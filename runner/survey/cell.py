"""What one prompt asks: the design factors that decide the exact messages sent.

``PromptCell`` is the contract between the planner (which makes cells), the prompt builder (cell →
messages) and the parser (reply text + cell → answers). Endpoint and sampling parameters (seed,
temperature, top_p, max_tokens) are not part of it: they change how a request is answered, not what it asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.survey.vocab import FramingKind, Mode

CANONICAL_ORDER: tuple[int, ...] = (1, 2, 3, 4, 5)
LETTERS: tuple[str, ...] = ("A", "B", "C", "D", "E")  # option_labels = "letters": the mark of positions 1-5


def position_marks(labels: str) -> tuple[str, ...] | None:
    """What the prompt shows before the option at positions 1-5: digits, letters A-E; None for words only."""
    return {"digits": ("1", "2", "3", "4", "5"), "letters": LETTERS}.get(labels)


@dataclass(frozen=True, slots=True)
class Framing:
    """Who the model is asked to be: itself ("none"), someone from a country, or a simulated identity."""

    kind: FramingKind = "none"
    country: str | None = None  # canonical reference-set country name, for "persona" and "identity"
    age: int | None = None  # years, "identity" only
    gender: str | None = None  # "male" | "female", "identity" only


@dataclass(frozen=True, slots=True)
class PromptCell:
    """One prompt's design: language, mode, question(s), framing, option order and reply format."""

    language: str  # instrument language code, a file in data/instrument/ ("en", "zh", "ar", "sk")
    mode: Mode
    questions: tuple[int, ...]  # (q,) in item mode; (1, ..., 24) in survey mode
    framing: Framing = field(default_factory=Framing)
    # option_order[i] is the option ID displayed at position i + 1; IDs keep their text, only positions move.
    option_order: tuple[int, ...] = CANONICAL_ORDER
    reply_format: str = "number"  # a reply-format template name in data/prompts/ ("number", "json", ...)
    labels: str = "digits"  # how options are labelled (runner.survey.vocab.OPTION_LABELS); a bias control
