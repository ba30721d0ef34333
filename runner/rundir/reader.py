"""Reading a run directory: the manifest, whole datasets, one column, stored keys, and part pairs.

Readers take no lock: the writer only ever renames whole files into place, so a reader sees committed
parts or nothing, even while a sweep is running.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from runner.errors import RunDirError
from runner.rundir.layout import FORMAT, RunDir
from runner.rundir.schema import ANSWER_SCHEMA, PROMPT_SCHEMA, RESPONSE_SCHEMA

__all__ = [
    "PartPair",
    "answers_parser_version",
    "column",
    "part_pairs",
    "read_dataset",
    "read_manifest",
    "read_output_json",
    "read_output_table",
    "stored_keys",
]

_SCHEMAS = {
    "responses": RESPONSE_SCHEMA,
    "failures": RESPONSE_SCHEMA,
    "prompts": PROMPT_SCHEMA,
    "answers": ANSWER_SCHEMA,
}


def _layout(run_dir: str | Path | RunDir) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))


def read_manifest(run_dir: str | Path | RunDir) -> dict[str, Any]:
    """The manifest of ``run_dir``; ``RunDirError`` when it is missing or unreadable."""
    path = _layout(run_dir).manifest
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{path}: not a readable hofcat run manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise RunDirError(f"{path}: format {found!r} is not {FORMAT!r}")
    return manifest


def read_dataset(run_dir: str | Path | RunDir, dataset: str, columns: Iterable[str] | None = None) -> pa.Table:
    """All committed parts of one dataset of ``run_dir`` as one table (empty with the schema if none)."""
    layout = _layout(run_dir)
    cols = None if columns is None else list(columns)
    tables = [pq.read_table(layout.part(dataset, n), columns=cols) for n in layout.parts(dataset)]
    if tables:  # parts written before a column existed (e.g. ``constraint``) read it as null
        return pa.concat_tables(tables, promote_options="default")
    schema = _SCHEMAS[dataset]
    if cols is not None:
        schema = pa.schema([schema.field(c) for c in cols])
    return schema.empty_table()


def column(run_dir: str | Path | RunDir, dataset: str, name: str) -> list[Any]:
    """One column of every committed part of ``dataset``, as Python values, part by part."""
    layout = _layout(run_dir)
    out: list[Any] = []
    for n in layout.parts(dataset):
        out.extend(pq.read_table(layout.part(dataset, n), columns=[name]).column(0).to_pylist())
    return out


def stored_keys(run_dir: str | Path | RunDir) -> tuple[set[str], set[str]]:
    """(keys of cells with a committed response, keys of cells with only a committed failure)."""
    done = set(column(run_dir, "responses", "cell_key"))
    return done, set(column(run_dir, "failures", "cell_key")) - done


@dataclass(frozen=True, slots=True)
class PartPair:
    """Responses part ``n`` and the answers part the parse stage made of it (None while missing)."""

    n: int
    responses: Path
    answers: Path | None


def part_pairs(run_dir: str | Path | RunDir) -> list[PartPair]:
    """Every committed responses part with its answers part, in part order."""
    layout = _layout(run_dir)
    have = set(layout.parts("answers"))
    return [
        PartPair(n, layout.part("responses", n), layout.part("answers", n) if n in have else None)
        for n in layout.parts("responses")
    ]


def answers_parser_version(path: Path) -> str | None:
    """The parser version an answers part was written by (from its schema metadata, else its rows)."""
    metadata = pq.read_schema(path).metadata or {}
    if b"hofcat.parser_version" in metadata:
        return metadata[b"hofcat.parser_version"].decode()
    versions = set(pq.read_table(path, columns=["parser_version"]).column(0).to_pylist())
    return versions.pop() if len(versions) == 1 else None


def read_output_table(run_dir: str | Path | RunDir, stage: str, name: str) -> pa.Table | None:
    """Table ``name`` that stage ``stage`` (``analysis``) wrote into the run directory; None if it did not."""
    path = _layout(run_dir).output(stage) / f"{name}.parquet"
    return pq.read_table(path) if path.is_file() else None


def read_output_json(run_dir: str | Path | RunDir, stage: str, name: str) -> Any | None:
    """JSON document ``name`` that stage ``stage`` wrote into the run directory; None if it did not."""
    path = _layout(run_dir).output(stage) / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
