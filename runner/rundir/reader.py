"""Reading a run directory: the manifest, whole datasets, one column, stored keys, and part pairs.

Readers take no lock: the writer only ever renames whole files into place, so a reader sees committed
parts or nothing, even while a sweep is running.

Every part is checked as it is read (``read_part``): its footer must parse (a truncated or junk file fails
here), every data page read is checked against the CRC-32 the writer stored in its header, and the key
column (``cell_key``; ``prompt_hash`` for prompts) is hashed and compared with the digest the writer put in
the file's metadata (``hofcat.key_digest``). A part failing any check raises ``RunDirError`` naming it. The
key digest costs one SHA-256 pass over the key bytes (32 MB for 10^6 cells), not a re-read of the replies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from runner.errors import RunDirError
from runner.rundir.layout import FORMAT, RunDir
from runner.rundir.schema import ANSWER_SCHEMA, PROMPT_SCHEMA, RESPONSE_SCHEMA

__all__ = [
    "PartPair",
    "answers_parser_version",
    "column",
    "part_columns",
    "part_footer",
    "part_pairs",
    "read_dataset",
    "read_manifest",
    "read_output_json",
    "read_output_table",
    "read_part",
    "stored_key_columns",
    "stored_keys",
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


def _where(path: Path) -> str:
    """A part's name as the user knows it: ``responses/part-000012-1a2b3c4d.parquet``."""
    return f"{path.parent.name}/{path.name}"


def read_part(path: Path, columns: Iterable[str] | None = None, key_column: str | None = None) -> pa.Table:
    """One committed part (``columns`` of it), its page checksums and key digest verified; ``RunDirError``
    naming the file when it is truncated, junk, or a byte of it changed."""
    cols = None if columns is None else list(columns)
    try:
        # ParquetFile, not read_table: read_table imports pyarrow.dataset, and with it pandas (~0.3 s at start-up)
        with pq.ParquetFile(path, page_checksum_verification=True) as part:
            data = part.read(columns=cols)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(path, exc, "Parquet") from None
    stored = (data.schema.metadata or {}).get(DIGEST_KEY)
    if stored is not None and key_column is not None and key_column in data.column_names:
        found = key_digest(data.column(key_column))
        if found != stored.decode():
            raise RunDirError(
                f"part {_where(path)} is corrupt (checksum mismatch): {key_column} digest {found}, "
                f"recorded {stored.decode()}; move the file away and rerun to redo its cells"
            )
    return data


def part_footer(path: Path) -> tuple[dict[bytes, bytes], int]:
    """A committed part's schema metadata and row count, from its footer alone (no page is read);
    ``RunDirError`` naming the file as ``read_part`` does."""
    try:
        with pq.ParquetFile(path) as part:
            return part.schema_arrow.metadata or {}, part.metadata.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(path, exc, "Parquet footer") from None


def _unreadable(path: Path, exc: Exception, what: str) -> RunDirError:
    """The located error for a part the system refused (``cannot be read``) or Arrow could not parse (``corrupt``)."""
    if isinstance(exc, (FileNotFoundError, PermissionError)):
        return RunDirError(f"part {_where(path)} cannot be read ({exc.strerror})")
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return RunDirError(f"part {_where(path)} is corrupt (unreadable {what}): {detail}")


def part_columns(path: Path) -> list[str]:
    """The column names of a committed part (from its footer); ``RunDirError`` naming a corrupt one."""
    try:
        return pq.read_schema(path).names
    except (pa.ArrowException, OSError) as exc:
        raise RunDirError(f"part {_where(path)} is corrupt (unreadable Parquet footer): {exc}") from None


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
    key = KEY_COLUMNS.get(dataset)
    tables = [read_part(layout.part(dataset, n), cols, key) for n in layout.parts(dataset)]
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
    out: list[Any] = []
    for n in layout.parts(dataset):
        out.extend(read_part(layout.part(dataset, n), [name], key).column(0).to_pylist())
    return out


def stored_keys(run_dir: str | Path | RunDir) -> tuple[set[str], set[str]]:
    """(keys of cells with a committed response, keys of cells with only a committed failure)."""
    done = set(column(run_dir, "responses", "cell_key"))
    return done, set(column(run_dir, "failures", "cell_key")) - done


def stored_key_columns(run_dir: str | Path | RunDir) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """The ``cell_key`` columns of every committed responses part and failures part, as Arrow (verified)."""
    layout = _layout(run_dir)

    def keys(dataset: str) -> pa.ChunkedArray:
        parts = [read_part(layout.part(dataset, n), ["cell_key"], "cell_key") for n in layout.parts(dataset)]
        return pa.chunked_array([c for t in parts for c in t.column(0).chunks], type=pa.string())

    return keys("responses"), keys("failures")


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
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError) as exc:
        raise RunDirError(f"part {_where(path)} is corrupt (unreadable Parquet footer): {exc}") from None
    if b"hofcat.parser_version" in metadata:
        return metadata[b"hofcat.parser_version"].decode()
    versions = set(read_part(path, ["parser_version"]).column(0).to_pylist())
    return versions.pop() if len(versions) == 1 else None


def read_output_table(run_dir: str | Path | RunDir, stage: str, name: str) -> pa.Table | None:
    """Table ``name`` that stage ``stage`` (``analysis``) wrote into the run directory; None if it did not."""
    path = _layout(run_dir).output(stage) / f"{name}.parquet"
    return pq.read_table(path) if path.is_file() else None


def read_output_json(run_dir: str | Path | RunDir, stage: str, name: str) -> Any | None:
    """JSON document ``name`` that stage ``stage`` wrote into the run directory; None if it did not."""
    path = _layout(run_dir).output(stage) / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
