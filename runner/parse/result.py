"""What the parser returns: one ``Answer`` per question asked, inside a versioned ``ParseResult``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Bump on any change that can change a parse: stored runs record it and can be re-parsed with a newer one.
PARSER_VERSION = "1.7.0"  # 1.7.0: the verbalized measurement (runner/parse/verbalized.py)

Status = Literal["ok", "refusal", "no_answer", "ambiguous", "out_of_range", "invalid_format"]
STATUSES: tuple[str, ...] = ("ok", "refusal", "no_answer", "ambiguous", "out_of_range", "invalid_format")
# Not a parser status: an answer an extractor model restated (runner/extract); scored like "ok" when the analysis
# is asked to use extractions (``AnalysisOptions.extracted``), never otherwise.
EXTRACTED = "extracted"


@dataclass(frozen=True, slots=True)
class Answer:
    """The parse of one question: option ID 1-5 (None unless status is "ok") and how it was found.

    ``displayed`` is the position (1-5) the chosen option had in the prompt; ``hedged`` is True when the
    reply named a second, different option after a hedge ("a 2, maybe even a 1" → 2, hedged).
    """

    question: int
    option_id: int | None
    status: Status
    hedged: bool = False
    displayed: int | None = None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of the fields."""
        return {
            "question": self.question,
            "option_id": self.option_id,
            "status": self.status,
            "hedged": self.hedged,
            "displayed": self.displayed,
        }


@dataclass(frozen=True, slots=True)
class ParseResult:
    """The answers to every question a cell asked, in the cell's question order, and the parser version."""

    answers: tuple[Answer, ...]
    parser_version: str = PARSER_VERSION

    def by_question(self) -> dict[int, Answer]:
        """The answers keyed by question number."""
        return {a.question: a for a in self.answers}
