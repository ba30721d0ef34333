"""Reading a run directory: the manifest, whole datasets, one column, stored keys, and part pairs.

Readers take no lock: the writer only ever renames whole files into place, so a reader sees committed
parts or nothing, even while a sweep is running.

Every part is checked as it is read (``read_part``): its footer must parse (a truncated or junk file fails
here), every data page read is checked against the CRC-32 the writer stored in its header, and the key
column (``cell_key``; ``prompt_hash`` for prompts) is hashed and compared with the digest the writer put in
the file's metadata (``hofcat.key_digest``). A part failing any check raises ``RunDirError`` naming it. The
key digest costs one SHA-256 pass over the key bytes (32 MB for 10^6 cells), not a re-read of the replies.

What the checks cover: the CRC-32 of every data page covers that page's bytes as stored (compressed values,
repetition and definition levels); the footer is parsed and must be consistent (schema, row groups, offsets),
and the key digest covers the key column's values. Not covered: the page headers' own fields other than what
parsing them validates, the footer's free-text fields (``created_by``, key-value metadata other than the
digest) and bytes no reader looks at (padding, the unused tail of a page header, statistics not used to read) —
a flipped byte there changes nothing that is read, which is why fuzzing finds such flips "undetected".

Every file is opened through ``runner.rundir.guard`` (no link or special file is followed), and readers that
gather a run's responses check that no ``cell_key`` is stored twice (``unique_cells``): two writers storing
one cell is a located error, never a cell analysed twice.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runner.errors import RunDirError
from runner.rundir.guard import open_read, read_text
from runner.rundir.layout import FORMAT, RunDir
from runner.rundir.schema import ANSWER_SCHEMA, PROMPT_SCHEMA, RESPONSE_SCHEMA

__all__ = [
    "PartPair",
    "answers_parser_version",
    "column",
    "part_columns",
    "part_footer",
    "part_pairs",
    "part_schema",
    "read_dataset",
    "read_manifest",
    "read_output_json",
    "read_output_table",
    "read_part",
    "stored_key_columns",
    "stored_keys",
    "unique_cells",
]

_SCHEMAS = {
    "responses": RESPONSE_SCHEMA,
    "failures": RESPONSE_SCHEMA,
    "prompts": PROMPT_SCHEMA,
    "answers": ANSWER_SCHEMA,
}


KEY_COLUMNS = {
    "responses": "cell_key",
    "failures": "cell_key",
    "answers": "cell_key",
    "prompts": "prompt_hash",
    "extractions": "cell_key",  # runner.extract's dataset
}
DIGEST_KEY = b"hofcat.key_digest"


def key_digest(values: pa.Array | pa.ChunkedArray) -> str:
    """32 hex digits of SHA-256 over a string column's row count, value lengths and bytes (nulls count as empty)."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    arr = arr.cast(pa.large_string()) if arr.type != pa.large_string() else arr
    digest = hashlib.sha256(str(len(arr)).encode())
    if len(arr):
        _, offsets_buf, data_buf = arr.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
        digest.update((offsets - offsets[0]).tobytes())
        digest.update(memoryview(data_buf)[offsets[0] : offsets[-1]] if data_buf is not None else b"")
    return digest.hexdigest()[:32]


# What reading a part from elsewhere can raise: Arrow's own errors, the system's, and ValueError — pyarrow decodes
# a footer's column names as UTF-8 and lets a damaged byte escape as UnicodeDecodeError (found by the fuzz test).
_PARQUET_ERRORS = (pa.ArrowException, OSError, ValueError)


def _where(path: Path) -> str:
    """A part's name as the user knows it: ``responses/part-000012-1a2b3c4d.parquet``."""
    return f"{path.parent.name}/{path.name}"


def read_part(path: Path, columns: Iterable[str] | None = None, key_column: str | None = None) -> pa.Table:
    """One committed part (``columns`` of it), its page checksums and key digest verified; ``RunDirError``
    naming the file when it is truncated, junk, a byte of it changed, or it lacks its dataset's ``key_column``."""
    cols = None if columns is None else list(columns)
    try:
        # ParquetFile, not read_table: read_table imports pyarrow.dataset, and with it pandas (~0.3 s at start-up)
        with pq.ParquetFile(pa.BufferReader(_bytes_of(path)), page_checksum_verification=True) as part:
            # a requested column a part lacks is skipped (older parts), but never the key: a file without it is
            # another dataset's part (a prompts part in responses/), and every caller indexes by the key
            names = part.schema_arrow.names
            if key_column is not None and key_column not in names:
                raise RunDirError(
                    f"part {_where(path)} has no {key_column} column: it is not a {path.parent.name} part; "
                    "move the file away"
                )
            _check_names(path, names)  # found by the fuzz test: a renamed column that the export missed
            data = part.read(columns=cols)
    except _PARQUET_ERRORS as exc:
        raise _unreadable(path, exc, "Parquet") from None
    stored = (data.schema.metadata or {}).get(DIGEST_KEY)
    if stored is not None and key_column is not None and key_column in data.column_names:
        found = key_digest(data.column(key_column))
        recorded = stored.decode("utf-8", "replace")[:64]
        if found != recorded:
            raise RunDirError(
                f"part {_where(path)} is corrupt (checksum mismatch): {key_column} digest {found}, "
                f"recorded {recorded!r}; move the file away and rerun to redo its cells"
            )
    return data


def part_footer(path: Path) -> tuple[dict[bytes, bytes], int]:
    """A committed part's schema metadata and row count, from its footer alone (no page is read);
    ``RunDirError`` naming the file as ``read_part`` does."""
    try:
        with _open(path) as fh, pq.ParquetFile(fh) as part:
            return part.schema_arrow.metadata or {}, part.metadata.num_rows
    except _PARQUET_ERRORS as exc:
        raise _unreadable(path, exc, "Parquet footer") from None


def _open(path: Path):
    """A part opened for reading: no link or special file at it or its folder (its run directory is two up)."""
    return open_read(path.parent.parent, path)


def _bytes_of(path: Path, root: Path | None = None) -> pa.Buffer:
    """A part's bytes in a buffer Arrow owns, opened as ``open_read`` does under ``root`` (default: two folders up).

    Why not hand Arrow the Python file: its reader threads would then call back into Python and hold Python
    objects, and one still releasing such an object as the interpreter exits is killed by CPython mid C++ frame,
    which aborts the process ("terminate called without an active exception", exit -6) after its work was done.
    A part is one batch, so holding it whole is bounded by the batch size.
    """
    with open_read(path.parent.parent if root is None else root, path) as fh:
        buffer = pa.allocate_buffer(os.fstat(fh.fileno()).st_size)
        with memoryview(buffer) as view:
            size = 0
            while size < len(view) and (got := fh.readinto(view[size:])):  # a short read is not the end
                size += got
    return buffer if size == buffer.size else buffer.slice(0, size)


def _unreadable(path: Path, exc: Exception, what: str) -> RunDirError:
    """The located error for a part the system refused (``cannot be read``) or Arrow could not parse (``corrupt``)."""
    if isinstance(exc, (FileNotFoundError, PermissionError)):
        return RunDirError(f"part {_where(path)} cannot be read ({exc.strerror})")
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return RunDirError(f"part {_where(path)} is corrupt (unreadable {what}): {detail}")


def part_columns(path: Path) -> list[str]:
    """The column names of a committed part (from its footer); ``RunDirError`` naming a corrupt one."""
    return part_schema(path).names


def part_schema(path: Path) -> pa.Schema:
    """The Arrow schema of a committed part (from its footer); ``RunDirError`` naming a corrupt one."""
    try:
        with _open(path) as fh, pq.ParquetFile(fh) as part:
            schema = part.schema_arrow
    except _PARQUET_ERRORS as exc:
        raise _unreadable(path, exc, "Parquet footer") from None
    _check_names(path, schema.names)
    return schema


def _check_names(path: Path, names: list[str]) -> None:
    """``RunDirError`` naming a part of a known dataset that holds a column hofcat never writes: no checksum covers
    the footer's names, so a changed byte there renames a column that every reader by name would miss."""
    known = _SCHEMAS.get(path.parent.name)
    if known is not None and (unknown := next((n for n in names if known.get_field_index(n) < 0), None)):
        raise RunDirError(
            f"part {_where(path)} is corrupt (a column hofcat does not write: {unknown[:80]!r}); move the "
            "file away and rerun to redo its cells"
        )


def _layout(run_dir: str | Path | RunDir) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))


def read_manifest(run_dir: str | Path | RunDir) -> dict[str, Any]:
    """The manifest of ``run_dir``; ``RunDirError`` when it is missing or unreadable."""
    layout = _layout(run_dir)
    path = layout.manifest
    try:
        manifest = json.loads(read_text(layout.root, path))
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: not UTF-8 or not JSON
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0][:200]
        raise RunDirError(f"{path}: not a readable hofcat run manifest ({reason})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise RunDirError(f"{path}: format {str(found)[:80]!r} is not {FORMAT!r}")
    _check_manifest(manifest, path)
    return manifest


# The manifest's fields every stage relies on, by type: a manifest from elsewhere is checked before it is used.
_MANIFEST_FIELDS: dict[str, tuple[type, ...]] = {
    "run_name": (str,),
    "run_id": (str, type(None)),
    "spec_hash": (str,),
    "parser_version": (str,),
    "reference": (str,),
    "spec": (dict,),
    "plan": (dict,),
    "policies": (dict,),
    "seeds": (dict,),
    "versions": (dict,),
    "measurement_fallback": (dict,),
    "determinism_probe": (dict,),
    "sessions": (list,),
}
# Each session's fields that later stages read (export dates rows by ``started_at``; status lists the stops).
_SESSION_FIELDS: dict[str, tuple[type, ...]] = {
    "started_at": (str,),
    "ended_at": (str, type(None)),
    "stopped_endpoints": (dict, type(None)),
    "served_models": (dict, type(None)),
    "versions": (dict, type(None)),
}


def _check_manifest(manifest: dict[str, Any], path: Path) -> None:
    """``RunDirError`` naming the first field of ``manifest`` whose type is not what hofcat writes."""

    def bad(key: str, value: Any, what: str) -> RunDirError:
        shown = type(value).__name__
        return RunDirError(f"{path}: {key} is of type {shown}, not {what}; this manifest was not written by hofcat")

    def check_fields(table: dict[str, Any], fields: dict[str, tuple[type, ...]], prefix: str = "") -> None:
        for key, kinds in fields.items():
            if key in table and not isinstance(table[key], kinds):
                what = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
                raise bad(prefix + key, table[key], what)

    check_fields(manifest, _MANIFEST_FIELDS)
    for i, session in enumerate(manifest.get("sessions", [])):
        if not isinstance(session, dict):
            raise bad(f"sessions[{i}]", session, "a table")
        check_fields(session, _SESSION_FIELDS, f"sessions[{i}].")
        try:  # every session hofcat records starts with its start time
            datetime.fromisoformat(session["started_at"])
        except (KeyError, ValueError) as exc:
            shown = "missing" if isinstance(exc, KeyError) else repr(session["started_at"][:80])
            raise RunDirError(
                f"{path}: sessions[{i}].started_at is {shown}, not an ISO time; this manifest was not written by hofcat"
            ) from None
    for name, probe in manifest.get("determinism_probe", {}).items():
        if not isinstance(probe, dict):
            raise bad(f"determinism_probe.{str(name)[:80]}", probe, "a table")
    cells = manifest.get("plan", {}).get("cells")
    if cells is not None and (isinstance(cells, bool) or not isinstance(cells, int) or cells < 0):
        raise bad("plan.cells", cells, "a count")


def read_dataset(run_dir: str | Path | RunDir, dataset: str, columns: Iterable[str] | None = None) -> pa.Table:
    """All committed parts of one dataset of ``run_dir`` as one table (empty with the schema if none)."""
    layout = _layout(run_dir)
    cols = None if columns is None else list(columns)
    key = KEY_COLUMNS.get(dataset)
    checks = dataset == "responses" and cols is not None and "cell_key" not in cols  # the key is read to check it
    parts = layout.parts(dataset)
    tables = [read_part(layout.part(dataset, n), [*cols, "cell_key"] if checks else cols, key) for n in parts]
    if dataset == "responses":
        _check_unique(parts, [t.column("cell_key") for t in tables])
    if checks:
        tables = [t.drop_columns(["cell_key"]) for t in tables]
    if tables:  # parts written before a column existed (e.g. ``constraint``) read it as null
        return pa.concat_tables(tables, promote_options="default")
    schema = _SCHEMAS[dataset]
    if cols is not None:
        schema = pa.schema([schema.field(c) for c in cols])
    return schema.empty_table()


def column(run_dir: str | Path | RunDir, dataset: str, name: str) -> list[Any]:
    """One column of every committed part of ``dataset``, as Python values, part by part."""
    layout = _layout(run_dir)
    key = KEY_COLUMNS.get(dataset)
    parts = layout.parts(dataset)
    columns = [read_part(layout.part(dataset, n), [name], key).column(0) for n in parts]
    if dataset == "responses" and name == "cell_key":
        _check_unique(parts, columns)
    return [value for col in columns for value in col.to_pylist()]


def stored_keys(run_dir: str | Path | RunDir) -> tuple[set[str], set[str]]:
    """(keys of cells with a committed response, keys of cells with only a committed failure)."""
    done = set(column(run_dir, "responses", "cell_key"))
    return done, set(column(run_dir, "failures", "cell_key")) - done


def stored_key_columns(run_dir: str | Path | RunDir) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """The ``cell_key`` columns of every committed responses part and failures part, as Arrow (verified)."""
    layout = _layout(run_dir)

    def keys(dataset: str) -> pa.ChunkedArray:
        names = layout.parts(dataset)
        parts = [read_part(layout.part(dataset, n), ["cell_key"], "cell_key").column(0) for n in names]
        if dataset == "responses":
            _check_unique(names, parts)
        return pa.chunked_array([c.cast(pa.string()) for col in parts for c in col.chunks], type=pa.string())

    return keys("responses"), keys("failures")


def unique_cells(run_dir: str | Path | RunDir) -> None:
    """Check that no ``cell_key`` is stored in two responses rows (reads the key columns, verified);
    ``RunDirError`` naming a duplicated key and the parts holding it."""
    stored_key_columns(run_dir)


def _check_unique(parts: list[str], keys: list[pa.ChunkedArray]) -> None:
    """``RunDirError`` when a key occurs twice among the responses parts ``parts`` (their ``keys``, in order):
    the first duplicated key and the parts that hold it."""
    total = sum(len(k) for k in keys)
    if not total:
        return
    every = pa.chunked_array([c.cast(pa.large_string()) for k in keys for c in k.chunks], type=pa.large_string())
    if _distinct(every) == total:
        return
    counts = pc.value_counts(every)
    twice = counts.filter(pc.greater(counts.field("counts"), 1))[0]["values"].as_py()
    holders = [
        f"responses/part-{p}.parquet" for p, k in zip(parts, keys, strict=True) if pc.any(pc.equal(k, twice)).as_py()
    ]
    where = " and ".join(holders) if len(holders) > 1 else f"{holders[0]} (twice)" if holders else "responses/"
    duplicated = int(pc.sum(pc.subtract(counts.field("counts"), 1)).as_py())
    raise RunDirError(
        f"{where}: cell_key {twice!r} is stored more than once ({duplicated} duplicate rows in all): two writers "
        "stored this run's cells; `hofcat repair RUN_DIR` keeps each cell's first committed row"
    )


# Below this many keys Arrow's count_distinct (20-180 ms at 10^5) costs less than importing polars (~0.2-0.3 s of
# CPU, which a 10^4-cell `hofcat run` would otherwise pay at its close); above it polars' multi-threaded
# n_unique is 2.5-5x faster (0.1 s against 0.9-2 s at 10^6: benches/unique_cells.py, benches/RESULTS.md).
POLARS_FROM_KEYS = 200_000


def _distinct(keys: pa.ChunkedArray) -> int:
    """How many distinct values ``keys`` holds (null counted as one value), by the cheaper route for its length."""
    if len(keys) < POLARS_FROM_KEYS:
        return int(pc.count_distinct(keys, mode="all").as_py())
    import polars as pl  # lazy: a reader that never gathers many responses does not pay for importing it

    return int(pl.Series(keys).n_unique())


@dataclass(frozen=True, slots=True)
class PartPair:
    """Responses part ``n`` (a part ID) and the answers part the parse stage made of it (None while missing)."""

    n: str
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
    metadata, _ = part_footer(path)
    if b"hofcat.parser_version" in metadata:
        return metadata[b"hofcat.parser_version"].decode("utf-8", "replace")
    rows = read_part(path, ["parser_version"], KEY_COLUMNS["answers"])
    versions = set(rows.column(0).to_pylist()) if rows.num_columns else set()  # none: not a parser's part
    return versions.pop() if len(versions) == 1 else None


def read_output_table(run_dir: str | Path | RunDir, stage: str, name: str) -> pa.Table | None:
    """Table ``name`` that stage ``stage`` (``analysis``) wrote into the run directory; None if it did not."""
    layout = _layout(run_dir)
    path = layout.output(stage) / f"{name}.parquet"
    if not path.exists() and not path.is_symlink():
        return None
    try:
        with pq.ParquetFile(pa.BufferReader(_bytes_of(path, layout.root))) as table:
            return table.read()
    except _PARQUET_ERRORS as exc:
        raise _unreadable(path, exc, "Parquet") from None


def read_output_json(run_dir: str | Path | RunDir, stage: str, name: str) -> Any | None:
    """JSON document ``name`` that stage ``stage`` wrote into the run directory; None if it did not."""
    layout = _layout(run_dir)
    path = layout.output(stage) / name
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return json.loads(read_text(layout.root, path))
    except (OSError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0][:200]
        raise RunDirError(f"{path}: not readable JSON ({reason}); run the stage that writes it again") from None
