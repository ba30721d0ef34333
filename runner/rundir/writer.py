"""The one writer of a run directory: the lock, atomic parts, the manifest, and the stages' output files.

Crash safety: every file is written in ``RUN_DIR/.tmp``, fsynced, then renamed into place, so a reader or a
resumed run sees whole files or nothing. Buffered rows are committed as one new part per dataset per flush
(prompts first, then failures, then responses), so every committed response has its prompt. A cell counts
as stored once its row is in a committed part; a crash loses only the buffered rows, which the next run
redoes. One process at a time holds ``RUN_DIR/.lock``: a sweep session, the parse stage, the analysis or
the report. The writer knows nothing of parsing: the parse stage (``runner.parse.stage``) commits answers
parts through ``commit``.

A flush is two steps so that the slow one can run off the event loop: ``take`` hands the buffered rows over
as a ``Batch`` (its part ID fixed once), and ``commit_batch`` writes it, from any one thread at a time.
Committing the same batch again rewrites the same files, so a flush retried after a failed write can never
store a row twice. Replies may be buffered in a ``LazyRows`` buffer (``buffer_replies``): their rows are built only
when their batch is committed, for the whole batch at once as Arrow columns, off the event loop. A row that cannot be
stored (an ill-typed or out-of-range value) never sinks its batch: the batch is bisected down to the bad rows,
each becomes a failure of class ``store_error`` naming the bad columns, and the rest is committed. Every part
carries page checksums and a digest of its key column (checked by ``runner.rundir.reader.read_part``).

One writer: the lock is an exclusive ``flock`` on the run directory itself (``.lock`` only records who holds
it, and is also locked for older versions), so deleting ``.lock`` lets no second writer in. Every file is
created and every folder entered through ``runner.rundir.guard``: no link or special file inside the run
directory is followed. The writer that holds the lock clears hofcat's own leftover temp files in ``.tmp``
when it opens and when it closes the directory, whoever left them (a crashed session, a killed Ray shard).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from runner.errors import RunDirError
from runner.rundir.guard import arrow_path, checked, clear_temp, create_new, ensure_dir, store_error
from runner.rundir.layout import DATASETS, RunDir, part_id, part_number
from runner.rundir.lock import locked
from runner.rundir.reader import DIGEST_KEY, KEY_COLUMNS, column, key_digest, read_manifest
from runner.rundir.schema import PromptRow, ResponseRow, table

__all__ = ["Batch", "Committed", "LazyRows", "RunWriter", "now_iso", "store_error", "versions"]

STORE_ERROR = "store_error"  # error_class of a row whose values the store cannot hold
# What building an Arrow column raises on a bad value: ill-typed (TypeError/ArrowTypeError), out of range
# (OverflowError/ArrowInvalid), not encodable (UnicodeEncodeError, a ValueError).
_ROW_ERRORS = (pa.ArrowException, OverflowError, TypeError, ValueError)


class LazyRows(Protocol):
    """Replies buffered before their rows are built (``RunWriter.buffer_replies``; its owner adds to it): the
    writer takes batches off its front (``take``) and builds a batch's rows at once when it commits the batch
    (``table``), or one by one (``rows``) when that fails."""

    def __len__(self) -> int: ...

    def take(self, n: int) -> LazyRows:
        """The first ``n`` replies, removed from this buffer."""
        ...

    def rows(self) -> list[ResponseRow]:
        """The replies' rows, as ``table`` would hold them (``session`` unset)."""
        ...

    def table(self, session: int | None) -> pa.Table:
        """The replies as a table of ``ResponseRow``'s schema, stamped with ``session``; raises what building an
        Arrow column raises on a value the store cannot hold."""
        ...


@dataclass(slots=True)
class Batch:
    """Rows taken out of the writer's buffer for one flush, and the part ID they are committed under."""

    part: str
    prompts: list[PromptRow]
    failed: list[ResponseRow]
    rows: list[ResponseRow]
    lazy: LazyRows | None = None  # replies whose rows are built at commit

    def __len__(self) -> int:
        return len(self.failed) + len(self.rows) + (0 if self.lazy is None else len(self.lazy))


@dataclass(frozen=True, slots=True)
class Committed:
    """A committed batch: its part ID, the responses table (None without responses) and the response rows that
    could not be stored and were committed as ``store_error`` failures instead."""

    part: str
    responses: pa.Table | None
    unstorable: tuple[ResponseRow, ...] = ()


class RunWriter:
    """Holds the lock of one run directory; open with ``open_run`` (a sweep) or ``attach``, always ``close``."""

    def __init__(
        self,
        layout: RunDir,
        lock: tuple[int, int] | None,
        manifest: dict[str, Any] | None,
        batch_rows: int,
        seen_prompts: set[str],
    ) -> None:
        self.layout = layout
        self.manifest = manifest
        self.batch_rows = batch_rows
        self._lock = lock  # (the directory's fd, .lock's fd), both flocked; None for a secondary writer
        self._rows: list[ResponseRow] = []
        self._failed: list[ResponseRow] = []
        self._lazy: LazyRows | None = None
        self._prompts: list[PromptRow] = []
        self._seen_prompts = seen_prompts  # prompt hashes stored or buffered: each prompt is stored once
        self._next_part = 1 + max((part_number(n) for d in DATASETS for n in layout.parts(d)), default=0)
        self.token = _session_token()  # in every part ID and temp name of this writer: no two writers collide
        self.session: int | None = None  # a sweep session's 1-based number in the manifest: stamped on its rows

    @property
    def run_dir(self) -> Path:
        """The run directory's root."""
        return self.layout.root

    @classmethod
    def open_run(
        cls,
        run_dir: str | Path,
        manifest: dict[str, Any],
        *,
        batch_rows: int,
        grow: Callable[[dict[str, Any]], None] | None = None,
    ) -> RunWriter:
        """Lock ``run_dir`` for a sweep session (creating it), check or write its manifest, start a session entry.

        A directory made by a spec with another hash is grown to this spec when ``grow`` (called with the stored
        manifest, under the lock) accepts it by returning — it raises when the new spec would change stored
        cells: the manifest then takes this spec and keeps every spec in ``spec_history``. Without ``grow``, or
        for a directory holding parts without a manifest, ``RunDirError``.
        """
        layout = RunDir(arrow_path(Path(run_dir), "run directory"))  # before a request is sent
        try:
            layout.root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise RunDirError(f"{layout.root}: is a file, not a run directory; --out must name a directory") from None
        except OSError as exc:
            raise store_error(exc, f"{layout.root}: cannot create the run directory") from None
        with locked(layout) as fd:
            existing = read_manifest(layout.root) if layout.manifest.exists() else None
            if existing is None:
                if any(layout.parts(d) for d in DATASETS):
                    raise RunDirError(f"{layout.root}: holds Parquet parts but no manifest.json; use a new --out")
                existing = {**manifest, "sessions": []}
            elif existing.get("spec_hash") != manifest["spec_hash"]:
                if grow is None:
                    raise RunDirError(
                        f"{layout.root}: made by a spec with hash {existing.get('spec_hash')}, this spec's hash is "
                        f"{manifest['spec_hash']}; resume with the same spec or choose a new --out"
                    )
                grow(existing)  # raises when the new spec would change what stored cells mean
                _grown(existing, manifest)
            for d in DATASETS:
                ensure_dir(layout.root, layout.dataset(d))
            writer = cls(layout, fd, existing, batch_rows, set(column(layout, "prompts", "prompt_hash")))
            writer._clear_tmp()
            existing.setdefault("sessions", []).append(
                {
                    "started_at": now_iso(),
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "token": writer.token,
                    "versions": manifest.get("versions"),
                }
            )
            writer.session = len(existing["sessions"])
            writer.write_manifest()
            writer._reserve()
            return writer

    @classmethod
    def attach(cls, run_dir: str | Path) -> RunWriter:
        """Lock an existing directory to add to it (re-parse, analysis, report); its manifest if it has one."""
        layout = RunDir(Path(run_dir))
        if not layout.root.is_dir():
            raise RunDirError(f"{layout.root}: no such run directory")
        arrow_path(layout.root, "run directory")
        with locked(layout) as fd:
            manifest = read_manifest(layout.root) if layout.manifest.exists() else None
            writer = cls(layout, fd, manifest, batch_rows=1, seen_prompts=set())  # adds no rows: no sweep
            writer._clear_tmp()
            return writer

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # --- rows of a sweep -------------------------------------------------------------------------------

    def add_prompt(self, prompt_hash: str, messages_json: str) -> None:
        """Buffer a prompt's messages unless this run already stored or buffered them."""
        if prompt_hash not in self._seen_prompts:
            self._seen_prompts.add(prompt_hash)
            self._prompts.append(PromptRow(prompt_hash=prompt_hash, messages_json=messages_json))

    def add(self, row: ResponseRow) -> None:
        """Buffer one cell's outcome (stamped with this session's number): a failure when it carries an
        ``error_class``, else a response."""
        row.session = self.session
        (self._failed if row.error_class is not None else self._rows).append(row)

    def buffer_replies(self, replies: LazyRows) -> None:
        """Buffer the replies its owner adds to ``replies`` (``LazyRows``) with this writer's rows: their rows are
        built when their batch is committed, in bulk, in the committing thread, stamped with this session's
        number. One buffer at a time: it replaces an empty one (``ValueError`` if that one holds replies)."""
        if self._lazy is not None and self._lazy is not replies and len(self._lazy):
            raise ValueError(f"{self.layout.root}: the writer's reply buffer still holds {len(self._lazy)} replies")
        self._lazy = replies

    @property
    def buffered(self) -> int:
        """Outcomes buffered since the last flush."""
        return len(self._rows) + len(self._failed) + (0 if self._lazy is None else len(self._lazy))

    @property
    def full(self) -> bool:
        """Whether the buffer holds a batch (``batch_rows`` outcomes): time to flush."""
        return self.buffered >= self.batch_rows

    def take(self) -> Batch | None:
        """Hand at most ``batch_rows`` buffered outcomes (and every buffered prompt) over as a batch with the next
        part ID; None when nothing is buffered. The taken rows leave the buffer: the batch is the committer's."""
        if not self.buffered and not self._prompts:
            return None
        rows, self._rows = self._rows[: self.batch_rows], self._rows[self.batch_rows :]
        room = self.batch_rows - len(rows)
        lazy = self._lazy.take(room) if self._lazy is not None and room and len(self._lazy) else None
        room -= 0 if lazy is None else len(lazy)
        failed, self._failed = self._failed[:room], self._failed[room:]
        batch = Batch(part_id(self._next_part, self.token), self._prompts, failed, rows, lazy)
        self._next_part += 1
        self._prompts = []
        return batch

    def commit_batch(self, batch: Batch) -> Committed:
        """Commit a batch as part ``batch.part`` of prompts, failures, responses (in that order); rows the store
        cannot hold become ``store_error`` failures. Raises ``OSError`` on a failed write: committing the same
        batch again is safe (it rewrites the same files)."""
        # (no empty table of 45 columns built for a sweep's batch, which holds lazy replies only: ~0.3 ms)
        responses, bad = _storable(batch.rows, ResponseRow) if batch.rows or not batch.lazy else (None, [])
        if batch.lazy:  # (None or empty: no replies buffered in it)
            lazy, lazy_bad = self._lazy_storable(batch.lazy)
            responses, bad = lazy if responses is None else pa.concat_tables([responses, lazy]), bad + lazy_bad
        unstorable = tuple(_store_failure(row, columns) for row, columns in bad)
        if batch.prompts:
            self.commit("prompts", batch.part, _storable(batch.prompts, PromptRow, sanitize=True)[0])
        if batch.failed or unstorable:
            failed = _storable([*batch.failed, *unstorable], ResponseRow, sanitize=True)[0]
            self.commit("failures", batch.part, failed)
        if not responses.num_rows:
            return Committed(batch.part, None, unstorable)
        self.commit("responses", batch.part, responses)
        return Committed(batch.part, responses, unstorable)

    def _lazy_storable(self, replies: LazyRows) -> tuple[pa.Table, list[tuple[Any, list[str]]]]:
        """``replies`` as a table (``_storable``'s result): built in bulk, or, when a value stops that, row by row
        and bisected down to the bad rows as any other rows are."""
        try:
            return replies.table(self.session), []
        except _ROW_ERRORS:
            rows = replies.rows()
            for row in rows:
                row.session = self.session
            return _storable(rows, ResponseRow)

    def flush(self) -> tuple[str, pa.Table] | None:
        """Take and commit every buffered row on this thread (one part per ``batch_rows``); (part ID, table) of
        the last responses part committed, if any."""
        last = None
        while (batch := self.take()) is not None:
            committed = self.commit_batch(batch)
            last = last if committed.responses is None else (committed.part, committed.responses)
        return last

    def commit(self, dataset: str, part: str | int, data: pa.Table) -> None:
        """Write part ``part`` of ``dataset`` atomically (replacing a committed part of that ID, if any), with
        page checksums and its key column's digest in the file's metadata."""
        key = KEY_COLUMNS.get(dataset)
        if key is not None and key in data.column_names:
            data = data.replace_schema_metadata(
                {**(data.schema.metadata or {}), DIGEST_KEY: key_digest(data.column(key)).encode()}
            )
        with self._atomic(self.layout.part(dataset, part)) as tmp:
            # no dictionary pages: a part of a few thousand rows is smaller without them under zstd (42 vs 47 kB
            # per 1,000 responses) and each costs a compressed page per column (-30% CPU per part)
            pq.write_table(data, tmp, compression="zstd", use_dictionary=False, write_page_checksum=True)

    # --- the manifest ----------------------------------------------------------------------------------

    def write_manifest(self) -> None:
        """Write ``self.manifest`` atomically."""
        if self.manifest is None:
            raise RunDirError(f"{self.layout.root}: not a hofcat run directory (no manifest.json)")
        text = json.dumps(self.manifest, indent=2, sort_keys=True) + "\n"
        with self._atomic(self.layout.manifest) as tmp:
            tmp.write_text(text, encoding="utf-8")

    def probe_result(self, endpoint: str) -> dict[str, Any] | None:
        """The determinism probe recorded for ``endpoint`` in this run's manifest (by any session), or None."""
        return (self.manifest or {}).get("determinism_probe", {}).get(endpoint)

    def record_probe(self, endpoint: str, result: dict[str, Any]) -> None:
        """Write ``result`` (``DeterminismProbe.to_dict()`` or ``{"error": ...}``) to the manifest for ``endpoint``."""
        assert self.manifest is not None
        self.manifest.setdefault("determinism_probe", {})[endpoint] = result
        self.write_manifest()

    # --- outputs of later stages -------------------------------------------------------------------------

    @contextlib.contextmanager
    def output_file(self, stage: str, name: str) -> Iterator[Path]:
        """A temp path to write ``RUN_DIR/<stage>/<name>`` to; renamed into place when the block succeeds."""
        with self._atomic(self.layout.output(stage) / name) as tmp:
            yield tmp

    def close(self, session: dict[str, Any] | None = None) -> None:
        """Flush; for a sweep, record how its session ended (``session`` merged into its entry); unlock.

        A failed write (``RunDirError``) is raised after the session's end record was attempted (best effort:
        on a full disk the small manifest may still fit, with the error in the record)."""
        if self._lock is None:
            return
        try:
            error: RunDirError | None = None
            try:
                self.flush()
            except OSError as exc:
                error = store_error(exc, f"{self.layout.root}: cannot write the buffered rows")
            if session is not None and self.manifest is not None:
                entry = {"ended_at": now_iso(), **session}
                if error is not None:
                    entry.update(outcome="store_error", error=str(error))
                self.manifest["sessions"][-1].update(entry)
                try:
                    self._ballast.unlink(missing_ok=True)  # on a full disk, room for the end record
                    self.write_manifest()
                except OSError as exc:
                    error = error or store_error(exc, f"{self.layout.root}: cannot write the manifest")
            if error is not None:
                raise error
        finally:
            with contextlib.suppress(OSError):
                self._ballast.unlink(missing_ok=True)
            with contextlib.suppress(OSError, RunDirError):
                self._clear_tmp()  # what this session's writers (a Ray shard killed mid-write too) left behind
            for fd in self._lock:
                os.close(fd)
            self._lock = None

    @contextlib.contextmanager
    def _atomic(self, final: Path) -> Iterator[Path]:
        """Yield a temp path beside nothing the readers see; fsync it and rename it to ``final``. No folder on
        the way and neither file may be a link (``RunDirError`` naming it)."""
        root = self.layout.root
        ensure_dir(root, self.layout.tmp)
        ensure_dir(root, final.parent)
        checked(root, final)
        tmp = self.layout.tmp / f"{self.token}-{final.parent.name}-{final.name}"
        create_new(root, tmp)  # before the try: a foreign entry of that name is refused, never removed
        try:
            yield tmp
            _fsync(tmp)
            os.replace(tmp, final)
            _fsync(final.parent)
        finally:
            tmp.unlink(missing_ok=True)

    @property
    def _ballast(self) -> Path:
        return self.layout.tmp / f"{self.token}-reserve"

    def _reserve(self) -> None:
        """Set aside room for the session's end record: a full disk must still let the manifest be written."""
        size = max(64 * 1024, 2 * self.layout.manifest.stat().st_size)
        create_new(self.layout.root, self._ballast)
        with self._ballast.open("r+b") as fh:
            fh.write(b"\0" * size)
            fh.flush()
            os.fsync(fh.fileno())

    def _clear_tmp(self) -> None:
        """Delete half-written files a crashed writer left (never committed); only hofcat's own temp files."""
        ensure_dir(self.layout.root, self.layout.tmp)
        clear_temp(self.layout.root, self.layout.tmp)


def versions() -> dict[str, str]:
    """Versions of hofcat, Python and the libraries that shape the stored data, for the manifest."""
    import importlib.metadata

    from runner import __version__

    libraries = {name: importlib.metadata.version(name) for name in ("pyarrow", "polars", "aiohttp", "tenacity")}
    return {"hofcat": __version__, "python": platform.python_version(), **libraries}


def _session_token() -> str:
    """Eight hex digits unique to this writer: host, pid and the start time in ns, hashed (no randomness)."""
    text = f"{socket.gethostname()}:{os.getpid()}:{time.time_ns()}:{id(object())}"
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _storable(
    rows: Sequence[Any], row_type: type, *, sanitize: bool = False
) -> tuple[pa.Table, list[tuple[Any, list[str]]]]:
    """``rows`` as a table, without the rows whose values the store cannot hold: those come back with their
    bad columns (``sanitize``: kept instead, those columns null). Bisects, so a batch of n rows with k bad
    ones costs O(k log n) table builds beyond the first."""
    try:
        return table(rows, row_type), []
    except _ROW_ERRORS:
        if len(rows) > 1:
            mid = len(rows) // 2
            head, bad_head = _storable(rows[:mid], row_type, sanitize=sanitize)
            tail, bad_tail = _storable(rows[mid:], row_type, sanitize=sanitize)
            return pa.concat_tables([head, tail]), bad_head + bad_tail
    row = rows[0]
    columns = _bad_columns(row, row_type)
    if sanitize:
        fixed = dataclasses.replace(row, **dict.fromkeys(columns))
        return table([fixed], row_type), []
    return table([], row_type), [(row, columns)]


def _bad_columns(row: Any, row_type: type) -> list[str]:
    """The fields of ``row`` whose value does not convert to its column's Arrow type."""
    bad = []
    for f in dataclasses.fields(row_type):
        try:
            pa.array([getattr(row, f.name)], type=f.metadata["arrow"])
        except _ROW_ERRORS:
            bad.append(f.name)
    return bad


def _store_failure(row: ResponseRow, columns: list[str]) -> ResponseRow:
    """The failure row recorded for a reply the store cannot hold: the reply's fields dropped, the bad columns
    named (never their values: a value may be anything the server sent)."""
    reply = {"response_text": None, "finish_reason": None, "input_tokens": None, "output_tokens": None}
    return dataclasses.replace(
        row,
        **reply,
        error_class=STORE_ERROR,
        error_message=f"reply not storable: ill-typed or out-of-range value in {', '.join(columns) or 'a column'}",
    )


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def now_iso() -> str:
    """The current UTC time in ISO 8601, to the second (the manifest's timestamps)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


# Manifest entries of the run itself, kept when a grown spec replaces the spec-derived ones.
_RUN_ENTRIES = frozenset({"format", "run_id", "versions", "parser_version", "sessions", "reparses", "spec_history"})


def _grown(existing: dict[str, Any], manifest: dict[str, Any]) -> None:
    """``existing`` (a stored manifest) grown to the spec of ``manifest``: its spec-derived entries replaced,
    every spec the run followed kept in ``spec_history`` with the session it took effect from (1-based)."""
    history = existing.setdefault(
        "spec_history", [{"spec_hash": existing.get("spec_hash"), "spec": existing.get("spec"), "from_session": 1}]
    )
    history.append(
        {
            "spec_hash": manifest["spec_hash"],
            "spec": manifest.get("spec"),
            "from_session": len(existing.get("sessions", [])) + 1,
            "grown_at": now_iso(),
            "planned_before": (existing.get("plan") or {}).get("cells"),
        }
    )
    existing.update({k: v for k, v in manifest.items() if k not in _RUN_ENTRIES})
