"""Extracted answers laid over the parsed ones, for an analysis that asks for them (``AnalysisOptions.extracted``).

An answer takes its extraction when the run holds an ``extracted`` row for its (cell, question) *and* the answer
still has the status the extractor was asked about (a newer parser that now reads the reply wins). Its status
becomes ``extracted`` (scored like ``ok`` by every policy) and its option the extractor's. When several
extractions exist for one answer (two extractor models, or a call with ``--retry-failed``), the last one
stored wins. Nothing is written: the stored answers and extractions stay as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from runner.errors import InputError
from runner.extract.stage import stored_extractions
from runner.parse.result import EXTRACTED
from runner.rundir import RunDir

__all__ = ["extraction_note", "with_extractions"]

_COLUMNS = ("cell_key", "question", "parse_status", "status", "option_id", "extractor_endpoint", "extractor_model")


def _extracted(run_dir: str | Path) -> pl.DataFrame:
    """The last ``extracted`` row per (cell_key, question), in store order."""
    frame = pl.from_arrow(stored_extractions(run_dir, _COLUMNS))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.filter(pl.col("status") == EXTRACTED).drop("status")
    return frame.unique(subset=["cell_key", "question"], keep="last", maintain_order=True)


def with_extractions(answers: pl.LazyFrame, run_dir: str | Path) -> tuple[pl.LazyFrame, dict[str, Any]]:
    """``answers`` (with ``cell_key``, ``question``, ``status``, ``option_id``) with the run's extractions laid over
    them, and what was used (for the analysis summary: answers replaced, per extractor, from which statuses)."""
    if "cell_key" not in answers.collect_schema().names():
        raise InputError(f"{run_dir}: extracted answers need a run directory's answers (with cell keys)")
    extracted = _extracted(run_dir).rename({"option_id": "_extracted_option"})
    joined = answers.join(extracted.lazy(), on=["cell_key", "question"], how="left")
    use = pl.col("_extracted_option").is_not_null() & (pl.col("status") == pl.col("parse_status"))
    used = (
        joined.filter(use)
        .group_by("extractor_endpoint", "extractor_model", "parse_status")
        .agg(pl.len().alias("answers"))
        .sort("extractor_endpoint", "extractor_model", "parse_status")
        .collect()
    )
    option_type = answers.collect_schema()["option_id"]
    out = joined.with_columns(
        option_id=pl.when(use).then(pl.col("_extracted_option").cast(option_type)).otherwise(pl.col("option_id")),
        status=pl.when(use).then(pl.lit(EXTRACTED)).otherwise(pl.col("status")),
    ).drop("_extracted_option", "parse_status", "extractor_endpoint", "extractor_model")
    info = {
        "used": True,
        "stored": extracted.height,
        "replaced": int(used["answers"].sum()),
        "by_extractor": used.rename({"extractor_endpoint": "endpoint", "extractor_model": "model"}).to_dicts(),
    }
    return out, info


def extraction_note(run_dir: str | Path) -> dict[str, Any] | None:
    """``{"used": False, "stored": N}`` when the run holds N extracted answers the analysis did not use; None
    when it holds none."""
    if not RunDir(Path(run_dir)).parts("extractions"):
        return None
    stored = _extracted(run_dir).height
    return {"used": False, "stored": stored} if stored else None
