"""One tidy long table of a run: a row per parsed answer, beside every design factor of its cell.

The store keeps responses (one row per cell: factors, request, reply) apart from answers (one row per
question read from a reply). A researcher wants them joined, with the run's identity on every row, so that
two runs can be stacked and any tool (polars, DuckDB, pandas, R) can read the file as it is. The join runs one
part pair at a time, so memory is bounded by the part size, not by the run.

Columns, in order: the run (``run_id``, ``run_name``, ``spec_hash``, ``session``), the cell's response columns
except the reply text and bookkeeping that has no meaning outside the store, the derived ``country`` and its
source, and the answer's columns. Columns that later hofcat versions add to responses or answers flow through unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from runner.analyze.load import language_countries
from runner.errors import InputError
from runner.escape import csv_cells
from runner.parse.stage import update_answers
from runner.rundir import (
    PartPair,
    RunWriter,
    part_columns,
    part_pairs,
    part_schema,
    read_manifest,
    read_part,
    unique_cells,
)
from runner.rundir.guard import output_file, written_beside

__all__ = ["EXPORT_FORMATS", "ExportResult", "export_run", "tidy_batches"]

EXPORT_FORMATS = ("parquet", "csv")
Format = Literal["parquet", "csv"]

# Response columns that describe the store, not the cell; the reply text is in responses/ for whoever needs it.
_RESPONSE_EXCLUDED = frozenset(
    {
        "response_text",
        "questions",
        "question",
        "error_class",
        "error_message",
        "template_hash",
        "http_status",
        "session",
    }
)
_RUN_FIELDS = [
    pa.field("run_id", pa.string()),  # unique per run directory (null for runs made before it was recorded)
    pa.field("run_name", pa.string()),
    pa.field("spec_hash", pa.string()),
    pa.field("session", pa.int32()),
]
_COUNTRY_SOURCE = pa.field("country_source", pa.string())  # persona | language | null (no country known)


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an export wrote: the file, its rows and columns."""

    path: Path
    rows: int
    columns: tuple[str, ...]


def _union_schema(paths: list[Path], excluded: frozenset[str] = frozenset()) -> pa.Schema:
    """The columns of all ``paths`` (Parquet footers only, through the checked reader), first seen first, minus
    ``excluded``."""
    seen: dict[str, pa.Field] = {}
    for path in paths:
        for f in part_schema(path):
            if f.name not in excluded and f.name not in seen:
                seen[f.name] = f.remove_metadata()
    return pa.schema(list(seen.values()))


def _output_schema(pairs: list[PartPair]) -> tuple[pa.Schema, pa.Schema, pa.Schema]:
    """(export schema, response columns taken, answer columns taken) over every part of the run."""
    responses = _union_schema([p.responses for p in pairs], _RESPONSE_EXCLUDED)
    answers = _union_schema([p.answers for p in pairs if p.answers is not None], frozenset({"cell_key"}))
    fields = [*_RUN_FIELDS, *responses]
    at = responses.get_field_index("country") + 1 + len(_RUN_FIELDS) if "country" in responses.names else len(fields)
    fields.insert(at, _COUNTRY_SOURCE)
    return pa.schema([*fields, *answers]), responses, answers


def _session_starts(manifest: dict[str, Any]) -> np.ndarray:
    """Each session's start in µs since the epoch, in session order (the manifest's ISO timestamps)."""
    starts = [datetime.fromisoformat(s["started_at"]).timestamp() for s in manifest.get("sessions", [])]
    return (np.asarray(starts, dtype=np.float64) * 1e6).astype(np.int64)


def _sessions(responses: pa.Table, starts: np.ndarray) -> pa.Array:
    """The 1-based session that stored each response: its own ``session`` column, else (parts written before
    the column existed) the last session started at or before the request (sessions never overlap: one writer
    holds the lock; the manifest's starts are whole seconds, so two sessions within one second are told apart
    only by the column)."""
    if "session" in responses.column_names:
        return responses.column("session").cast(pa.int32())
    if not len(starts):
        return pa.nulls(len(responses), pa.int32())
    sent = responses.column("started_at").cast(pa.int64()).to_numpy(zero_copy_only=False)
    index = np.searchsorted(starts, sent, side="right")
    return pa.array(np.maximum(index, 1), type=pa.int32())


def _country(cells: pa.Table, countries: dict[str, str]) -> tuple[pa.Array, pa.Array]:
    """(country, its source): the persona's country, else the country the prompt language stands for."""
    persona = cells.column("country") if "country" in cells.column_names else pa.nulls(len(cells), pa.string())
    if "language" in cells.column_names:
        keys = pa.array(list(countries), pa.string())
        at = pc.index_in(cells.column("language"), value_set=keys)
        by_language = pa.array(list(countries.values()), pa.string()).take(at)
    else:
        by_language = pa.nulls(len(cells), pa.string())
    country = pc.coalesce(persona, by_language)
    source = pc.if_else(
        pc.is_valid(persona),
        pa.scalar("persona"),
        pc.if_else(pc.is_valid(by_language), pa.scalar("language"), pa.scalar(None, pa.string())),
    )
    return country.combine_chunks() if isinstance(country, pa.ChunkedArray) else country, source


def _conform(table: pa.Table, schema: pa.Schema) -> list[pa.Array]:
    """``table``'s columns in ``schema``'s order and types; columns it lacks (older parts) as nulls."""
    n = len(table)
    out = []
    for f in schema:
        if f.name in table.column_names:
            out.append(table.column(f.name).cast(f.type))
        else:
            out.append(pa.nulls(n, f.type))
    return out


def tidy_batches(run_dir: str | Path) -> tuple[pa.Schema, Iterator[pa.Table]]:
    """The export schema of ``run_dir`` and its rows, one table per committed part pair (read lazily).

    Responses parts a crash left unparsed must be parsed first (``export_run`` does); parts still without
    answers are refused rather than dropped.
    """
    root = Path(run_dir)
    manifest = read_manifest(root)
    pairs = part_pairs(root)
    unparsed = [p.responses for p in pairs if p.answers is None]
    if unparsed:
        raise InputError(f"{unparsed[0]}: has no answers part; run `hofcat reparse {root}` first")
    unique_cells(root)  # a cell two writers stored would be exported twice
    schema, response_cols, answer_cols = _output_schema(pairs)
    starts = _session_starts(manifest)
    countries = language_countries()
    run = {key: manifest.get(key) for key in ("run_id", "run_name", "spec_hash")}

    wanted = list(dict.fromkeys(["cell_key", "started_at", "session", *response_cols.names]))

    def batches() -> Iterator[pa.Table]:
        for pair in pairs:
            # through the run directory's reader: page checksums and key digests verified, a corrupt part named
            answers = read_part(pair.answers, None, "cell_key")
            have = set(part_columns(pair.responses))  # older parts may lack newer columns
            responses = read_part(pair.responses, [c for c in wanted if c in have], "cell_key")
            # answers part N was parsed from responses part N, so every answer's cell is in this part
            cells = responses.take(pc.index_in(answers.column("cell_key"), value_set=responses.column("cell_key")))
            country, source = _country(cells, countries)
            n = len(answers)
            columns: dict[str, Any] = {key: pa.array([value] * n, pa.string()) for key, value in run.items()}
            columns["session"] = _sessions(cells, starts)
            for name in response_cols.names:
                if name == "country":
                    columns[name] = country
                elif name in cells.column_names:
                    columns[name] = cells.column(name)
            columns["country_source"] = source
            for name in answer_cols.names:
                columns[name] = answers.column(name)
            yield pa.Table.from_arrays(_conform(pa.table(columns), schema), schema=schema)

    return schema, batches()


def export_run(
    run_dir: str | Path, out: str | Path | None = None, fmt: Format = "parquet", *, raw_csv: bool = False
) -> ExportResult:
    """Write ``run_dir``'s tidy table to ``out`` (default ``RUN_DIR/export/answers.<fmt>``), streaming by part.

    The file appears whole or not at all (written beside its target, then renamed). CSV text cells a
    spreadsheet would evaluate as formulas are neutralised (``runner.escape.csv_cells``) unless ``raw_csv``;
    Parquet keeps every value as stored.
    """
    if fmt not in EXPORT_FORMATS:
        raise InputError(f"export format {fmt!r}: choose one of {', '.join(EXPORT_FORMATS)}")
    root = Path(run_dir)
    read_manifest(root)  # a located error for a directory that is not a run
    target = None if out is None else output_file(Path(out))
    with RunWriter.attach(root) as writer:  # the lock: no part appears or is rewritten while we read
        update_answers(writer)
        schema, batches = tidy_batches(root)
        with ExitStack() as files:
            if target is None:  # inside the run: through the writer (no link followed, temp in .tmp)
                target = writer.layout.output("export") / f"answers.{fmt}"
                tmp = files.enter_context(writer.output_file("export", target.name))
            else:
                tmp = files.enter_context(written_beside(target))
            rows = _write(tmp, fmt, schema, batches, raw_csv)
    return ExportResult(target, rows, tuple(schema.names))


def _write(tmp: Path, fmt: Format, schema: pa.Schema, batches: Iterator[pa.Table], raw_csv: bool) -> int:
    """Stream ``batches`` into ``tmp`` as ``fmt``; the rows written."""
    rows = 0
    with ExitStack() as stack:
        if fmt == "parquet":
            sink = stack.enter_context(pq.ParquetWriter(tmp, schema))
        else:
            sink = stack.enter_context(pacsv.CSVWriter(tmp, _csv_schema(schema)))
        for batch in batches:
            sink.write_table(batch if fmt == "parquet" else _csv_table(batch, raw=raw_csv))
            rows += len(batch)
        if not rows and fmt == "parquet":
            sink.write_table(schema.empty_table())
    return rows


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _csv_schema(schema: pa.Schema) -> pa.Schema:
    """CSV has no lists: list columns travel as text (``[1, 2, 3]``)."""
    return pa.schema([pa.field(f.name, pa.string()) if _is_list(f.type) else f for f in schema])


def _csv_table(table: pa.Table, *, raw: bool) -> pa.Table:
    """``table`` with list columns written as text, for CSV (vectorised through polars); text cells neutralised
    for spreadsheets unless ``raw``."""
    import polars as pl

    columns = []
    for f, col in zip(table.schema, table.columns, strict=True):
        if _is_list(f.type):
            values = pl.from_arrow(col.combine_chunks())
            assert isinstance(values, pl.Series)
            text = pl.concat_str(
                pl.lit("["), pl.col("v").list.eval(pl.element().cast(pl.String)).list.join(", "), pl.lit("]")
            )
            col = pl.DataFrame({"v": values}).select(text.alias("v"))["v"].to_arrow().cast(pa.string())
        columns.append(col)
    text = pa.Table.from_arrays(columns, schema=_csv_schema(table.schema))
    return text if raw else pa.Table.from_arrays(csv_cells(text).columns, schema=text.schema)
