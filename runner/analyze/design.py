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
from pathlib import Path

import polars as pl

from runner.errors import InputError

__all__ = ["ANSWER_COLUMNS", "BOOKKEEPING", "Design", "infer_design", "scan_answers"]

ANSWER_COLUMNS = ("country", "question", "option_id", "status")
# Columns that identify or describe a response rather than the design that produced it.
BOOKKEEPING = frozenset({
    "cell_key", "response_text", "reason", "raw", "error", "error_class", "error_message", "finish_reason",
    "latency_s", "attempts", "attempt", "http_status", "prompt_tokens", "completion_tokens", "total_tokens",
    "started_at", "finished_at", "timestamp", "parser_version", "position", "displayed_position", "questions",
    "option_order", "template_hash", "request_id", "part",
})
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
    overlap = set(factors) & set(units)
    if overlap:
        raise InputError(f"factors and units share {sorted(overlap)}")
    return Design(tuple(factors), tuple(units))


ANSWER_LOCATIONS = ("answers", "parsed", "answers.parquet", "parsed.parquet")


def scan_answers(run_dir: str | Path) -> pl.LazyFrame:
    """The parsed-answers dataset of a run directory as a LazyFrame (a Parquet file or a folder of parts)."""
    root = Path(run_dir)
    for name in ANSWER_LOCATIONS:
        path = root / name
        if path.is_dir() and any(path.rglob("*.parquet")):
            return pl.scan_parquet(path / "**" / "*.parquet", hive_partitioning=False)
        if path.is_file():
            return pl.scan_parquet(path)
    raise InputError(f"{root}: no parsed-answers dataset (looked for {', '.join(ANSWER_LOCATIONS)})")
