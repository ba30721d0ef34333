"""Per-run policies turning parsed answers into scored answers; pure, so stored parses can be re-policied.

The rule is defined once, as the polars expression ``scored_option(policy)`` (the option to score, or null):

1. with ``health_items="neutral"``, Q15 and Q18 score 3 whatever was answered;
2. otherwise an answer with status ``ok`` (and an option) scores its option; so does a ``partial`` distribution
   cell's reply with ``partial="sample"`` (its own drawn answer: the distribution is not fully known);
3. otherwise (any other status) it scores 3 with ``unparseable="neutral"`` and is dropped (null) with ``"drop"``.

``apply_policies`` evaluates that same expression on the answers of one parse, and the analysis applies it to
whole answer tables, so a parse and a table can never be scored by different rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from runner.errors import PolicyError
from runner.parse.result import EXTRACTED, Answer, ParseResult
from runner.survey.instrument import HEALTH_QUESTIONS

if TYPE_CHECKING:  # polars is imported when a policy is applied, not when the parser is
    import polars as pl

NEUTRAL = 3
PARTIAL = "partial"  # a distribution cell whose option tokens were not all listed (runner/parse/distribution.py)


@dataclass(frozen=True, slots=True)
class Policy:
    """``unparseable``: answers without status "ok" are dropped or set to 3; ``health_items``: Q15 and Q18
    are kept as answered or pinned to 3 (CAT convention); ``partial``: a distribution cell whose options were
    not all listed (status ``partial``) scores its reply's parsed option (``"sample"``, an unbiased draw from
    the distribution it could not fully measure) or counts as unparseable (``"drop"``). Recorded with every
    scored result (the analysis writes it to ``summary.json`` under ``policy``)."""

    unparseable: Literal["drop", "neutral"] = "drop"
    health_items: Literal["answered", "neutral"] = "answered"
    partial: Literal["sample", "drop"] = "sample"

    def __post_init__(self) -> None:
        if self.unparseable not in ("drop", "neutral"):
            raise PolicyError(f"unparseable: {self.unparseable!r} is not 'drop' or 'neutral'")
        if self.health_items not in ("answered", "neutral"):
            raise PolicyError(f"health_items: {self.health_items!r} is not 'answered' or 'neutral'")
        if self.partial not in ("sample", "drop"):
            raise PolicyError(f"partial: {self.partial!r} is not 'sample' or 'drop'")

    def to_dict(self) -> dict[str, str]:
        """The policy as a JSON-ready dict, for run metadata."""
        return asdict(self)


DEFAULT_POLICY = Policy()  # today's behaviour: score ok answers only, health items as answered
# The value-differences study (Section 4): Q15 and Q18 pinned to option 3, unrecognisable answers scored 3.
VALUE_DIFFERENCES_POLICY = Policy(unparseable="neutral", health_items="neutral")


def scored_option(
    policy: Policy = DEFAULT_POLICY, *, question: str = "question", status: str = "status", option: str = "option_id"
) -> pl.Expr:
    """The option (Int64, 1-5) that ``policy`` scores for each answer row, null where it drops the answer.

    Reads the columns ``question``, ``status`` and ``option``; the result is named ``scored``. This expression is
    the one definition of the policy rule (see the module docstring); ``apply_policies`` evaluates it too.
    """
    import polars as pl

    neutral = pl.lit(NEUTRAL, dtype=pl.Int64)
    fallback = neutral if policy.unparseable == "neutral" else pl.lit(None, dtype=pl.Int64)
    scored_statuses = ("ok", EXTRACTED, PARTIAL) if policy.partial == "sample" else ("ok", EXTRACTED)
    usable = pl.col(status).is_in(scored_statuses) & pl.col(option).is_not_null()  # extracted: only when asked
    expr = pl.when(usable).then(pl.col(option).cast(pl.Int64)).otherwise(fallback)
    if policy.health_items == "neutral":
        expr = pl.when(pl.col(question).is_in(HEALTH_QUESTIONS)).then(neutral).otherwise(expr)
    return expr.alias("scored")


def apply_policies(results: ParseResult | Iterable[Answer], policy: Policy) -> dict[int, int]:
    """Question number -> option ID (1-5) to score; questions dropped by the policy are absent.

    ``scored_option(policy)`` evaluated on the answers; a question answered twice keeps its last scored answer.
    """
    import polars as pl

    answers = results.answers if isinstance(results, ParseResult) else tuple(results)
    frame = pl.DataFrame(
        {
            "question": [a.question for a in answers],
            "status": [a.status for a in answers],
            "option_id": [a.option_id for a in answers],
        },
        schema={"question": pl.Int64, "status": pl.String, "option_id": pl.Int64},
    )
    scored = frame.select("question", scored_option(policy))
    return {q: s for q, s in scored.iter_rows() if s is not None}
