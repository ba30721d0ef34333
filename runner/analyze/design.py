"""What the analysis reads: the parsed-answers schema, the design factors and the resampling units.

A parsed-answers frame has one row per (response, question) with at least ``country``, ``question``
(1–30), ``option_id`` (1–5, null when no usable answer), ``status`` (``ok``, ``refusal``, ``no_answer``, …) and
``seed``; every other column that is not bookkeeping is a design factor (endpoint, model, language, framing,
shuffle, temperature, top_p, …), and a *condition* is one combination of factor values. Resampling units are
the repeated, exchangeable respondents inside a condition × country: seeds, and simulated identities when present.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from runner.errors import InputError

__all__ = ["ANSWER_COLUMNS", "BOOKKEEPING", "Design", "infer_design", "varying"]

ANSWER_COLUMNS = ("country", "question", "option_id", "status")
# Columns that identify or describe a response rather than the design that produced it.
BOOKKEEPING = frozenset(
    {
        "cell_key",
        "response_text",
        "option_probs",  # the distribution measurement's answer and its captured mass: values, not factors
        "option_mass",
        "option_bound",
        "logprobs_sampled",
        "top_logprobs",
        "draw",
        "option_order_code",
        "reason",
        "raw",
        "error",
        "error_class",
        "error_message",
        "finish_reason",
        "latency_s",
        "attempts",
        "attempt",
        "http_status",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "started_at",
        "finished_at",
        "timestamp",
        "parser_version",
        "position",
        "displayed_position",
        "questions",
        "option_order",
        "template_hash",
        "prompt_hash",
        "shuffle_seed",
        "provider",
        "hedged",
        "displayed",
        "input_tokens",
        "output_tokens",
        "request_id",
        "part",
    }
)
IDENTITY_UNITS = ("respondent", "gender", "age")


@dataclass(frozen=True)
class Design:
    """Condition factors and resampling units (column names of the answers frame)."""

    factors: tuple[str, ...]
    units: tuple[str, ...]

    def to_dict(self) -> dict[str, list[str]]:
        """JSON form for the analysis provenance."""
        return {"factors": list(self.factors), "units": list(self.units)}


def infer_design(
    schema: Sequence[str], factors: Sequence[str] | None = None, units: Sequence[str] | None = None
) -> Design:
    """Factors and units from the column names; explicit lists win and are checked against ``schema``."""
    columns = list(schema)
    missing = [c for c in (*ANSWER_COLUMNS, "seed") if c not in columns]
    if missing:
        raise InputError(f"answers: missing column(s) {missing}; have {columns}")
    if units is None:
        units = ["seed", *[c for c in IDENTITY_UNITS if c in columns]]
    if factors is None:
        taken = {*ANSWER_COLUMNS, *units}
        factors = [c for c in columns if c not in taken and c not in BOOKKEEPING]
    for name, given in (("factors", factors), ("units", units)):
        unknown = [c for c in given if c not in columns]
        if unknown:
            raise InputError(f"{name}: column(s) {unknown} are not in the answers (have {columns})")
        repeated = sorted({c for c in given if list(given).count(c) > 1})
        if repeated:
            raise InputError(f"{name}: column(s) {repeated} named more than once")
    overlap = set(factors) & set(units)
    if overlap:
        raise InputError(f"factors and units share {sorted(overlap)}")
    return Design(tuple(factors), tuple(units))


def varying(answers: pl.LazyFrame, columns: Sequence[str]) -> tuple[str, ...]:
    """The ``columns`` that take more than one value in ``answers`` (constant ones define no condition)."""
    if not columns:
        return ()
    counts = answers.select([pl.col(c).n_unique() for c in columns]).collect(engine="streaming").row(0)
    return tuple(c for c, n in zip(columns, counts, strict=True) if n > 1)
