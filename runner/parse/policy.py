"""Per-run policies turning parsed answers into scored answers; pure, so stored parses can be re-policied."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from runner.errors import PolicyError
from runner.instrument import HEALTH_QUESTIONS
from runner.parse.result import Answer, ParseResult

NEUTRAL = 3


@dataclass(frozen=True, slots=True)
class Policy:
    """``unparseable``: answers without status "ok" are dropped or set to 3; ``health_items``: Q15 and Q18
    are kept as answered or pinned to 3 (CAT convention). Recorded with every scored result."""

    unparseable: Literal["drop", "neutral"] = "drop"
    health_items: Literal["answered", "neutral"] = "answered"

    def __post_init__(self) -> None:
        if self.unparseable not in ("drop", "neutral"):
            raise PolicyError(f"unparseable: {self.unparseable!r} is not 'drop' or 'neutral'")
        if self.health_items not in ("answered", "neutral"):
            raise PolicyError(f"health_items: {self.health_items!r} is not 'answered' or 'neutral'")

    def to_dict(self) -> dict[str, str]:
        """The policy as a JSON-ready dict, for run metadata."""
        return asdict(self)


def apply_policies(results: ParseResult | Iterable[Answer], policy: Policy) -> dict[int, int]:
    """Question number -> option ID (1-5) to score; questions dropped by the policy are absent."""
    answers = results.answers if isinstance(results, ParseResult) else results
    scored: dict[int, int] = {}
    for answer in answers:
        if policy.health_items == "neutral" and answer.question in HEALTH_QUESTIONS:
            scored[answer.question] = NEUTRAL
        elif answer.status == "ok" and answer.option_id is not None:
            scored[answer.question] = answer.option_id
        elif policy.unparseable == "neutral":
            scored[answer.question] = NEUTRAL
    return scored
