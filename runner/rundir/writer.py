"""The one writer of a run directory: the lock, atomic parts, the manifest, and the stages' output files.

Crash safety: every file is written in ``RUN_DIR/.tmp``, fsynced, then renamed into place, so a reader or a
resumed run sees whole files or nothing. Buffered rows are committed as one new part per dataset per flush
(prompts first, then failures, then responses), so every committed response has its prompt. A cell counts
as stored once its row is in a committed part; a crash loses only the buffered rows, which the next run
redoes. One process at a time holds ``RUN_DIR/.lock``: a sweep session, the parse stage, the analysis or
the report. The writer knows nothing of parsing: the parse stage (``runner.parse.stage``) commits answers
parts through ``commit``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from runner.errors import RunDirError
from runner.rundir.layout import DATASETS, RunDir
from runner.rundir.reader import column, read_manifest
from runner.rundir.schema import PromptRow, ResponseRow, table

__all__ = ["RunWriter", "now_iso", "versions"]


class RunWriter:
    """Holds the lock of one run directory; open with ``open_run`` (a sweep) or ``attach``, always ``close``."""

    def __init__(
        self, layout: RunDir, lock_fd: int, manifest: dict[str, Any] | None, batch_rows: int, seen_prompts: set[str]
    ) -> None:
        self.layout = layout
        self.manifest = manifest
        self.batch_rows = batch_rows
        self._lock_fd: int | None = lock_fd
        self._rows: list[ResponseRow] = []
        self._failed: list[ResponseRow] = []
        self._prompts: list[PromptRow] = []
        self._seen_prompts = seen_prompts  # prompt hashes stored or buffered: each prompt is stored once
        self._next_part = 1 + max((n for d in DATASETS for n in layout.parts(d)), default=0)

    @property
    def run_dir(self) -> Path:
        """The run directory's root."""
        return self.layout.root

    @classmethod
    def open_run(cls, run_dir: str | Path, manifest: dict[str, Any], *, batch_rows: int) -> RunWriter:
        """Lock ``run_dir`` for a sweep session (creating it), check or write its manifest, start a session entry.

        A directory made by a spec with another hash, or holding parts without a manifest, raises ``RunDirError``.
        """
        layout = RunDir(Path(run_dir))
        layout.root.mkdir(parents=True, exist_ok=True)
        fd = _lock(layout)
        try:
            existing = read_manifest(layout.root) if layout.manifest.exists() else None
            if existing is None:
                if any(layout.parts(d) for d in DATASETS):
                    raise RunDirError(f"{layout.root}: holds Parquet parts but no manifest.json; use a new --out")
                existing = {**manifest, "sessions": []}
            elif existing.get("spec_hash") != manifest["spec_hash"]:
                raise RunDirError(
                    f"{layout.root}: made by a spec with hash {existing.get('spec_hash')}, this spec's hash is "
                    f"{manifest['spec_hash']}; resume with the same spec or choose a new --out"
                )
            for d in DATASETS:
                layout.dataset(d).mkdir(exist_ok=True)
            writer = cls(layout, fd, existing, batch_rows, set(column(layout, "prompts", "prompt_hash")))
            writer._clear_tmp()
            existing.setdefault("sessions", []).append(
                {"started_at": now_iso(), "pid": os.getpid(), "versions": manifest.get("versions")}
            )
            writer.write_manifest()
            return writer
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def attach(cls, run_dir: str | Path) -> RunWriter:
        """Lock an existing directory to add to it (re-parse, analysis, report); its manifest if it has one."""
        layout = RunDir(Path(run_dir))
        if not layout.root.is_dir():
            raise RunDirError(f"{layout.root}: no such run directory")
        fd = _lock(layout)
        try:
            manifest = read_manifest(layout.root) if layout.manifest.exists() else None
            writer = cls(layout, fd, manifest, batch_rows=1, seen_prompts=set())  # adds no rows: no sweep
            writer._clear_tmp()
            return writer
        except BaseException:
            os.close(fd)
            raise

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
        """Buffer one cell's outcome: a failure when it carries an ``error_class``, else a response."""
        (self._failed if row.error_class is not None else self._rows).append(row)

    @property
    def buffered(self) -> int:
        """Outcomes buffered since the last flush."""
        return len(self._rows) + len(self._failed)

    @property
    def full(self) -> bool:
        """Whether the buffer holds a batch (``batch_rows`` outcomes): time to flush."""
        return self.buffered >= self.batch_rows

    def flush(self) -> tuple[int, pa.Table] | None:
        """Commit buffered rows as new parts; (number, table) of the responses part committed, if any."""
        if not self.buffered and not self._prompts:
            return None
        n = self._next_part
        self._next_part += 1
        if self._prompts:
            self.commit("prompts", n, table(self._prompts, PromptRow))
            self._prompts = []
        if self._failed:
            self.commit("failures", n, table(self._failed, ResponseRow))
            self._failed = []
        if not self._rows:
            return None
        responses = table(self._rows, ResponseRow)
        self.commit("responses", n, responses)
        self._rows = []
        return n, responses

    def commit(self, dataset: str, n: int, data: pa.Table) -> None:
        """Write part ``n`` of ``dataset`` atomically (replacing a committed part of that number, if any)."""
        with self._atomic(self.layout.part(dataset, n)) as tmp:
            pq.write_table(data, tmp, compression="zstd")

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
        folder = self.layout.output(stage)
        folder.mkdir(exist_ok=True)
        with self._atomic(folder / name) as tmp:
            yield tmp

    def close(self, session: dict[str, Any] | None = None) -> None:
        """Flush; for a sweep, record how its session ended (``session`` merged into its entry); unlock."""
        if self._lock_fd is None:
            return
        try:
            self.flush()
            if session is not None and self.manifest is not None:
                self.manifest["sessions"][-1].update({"ended_at": now_iso(), **session})
                self.write_manifest()
        finally:
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextlib.contextmanager
    def _atomic(self, final: Path) -> Iterator[Path]:
        """Yield a temp path beside nothing the readers see; fsync it and rename it to ``final``."""
        self.layout.tmp.mkdir(exist_ok=True)
        tmp = self.layout.tmp / f"{final.parent.name}-{final.name}"
        try:
            yield tmp
            _fsync(tmp)
            os.replace(tmp, final)
            _fsync(final.parent)
        finally:
            tmp.unlink(missing_ok=True)

    def _clear_tmp(self) -> None:
        """Delete half-written files a crashed writer left: they were never committed."""
        self.layout.tmp.mkdir(exist_ok=True)
        for leftover in self.layout.tmp.iterdir():
            leftover.unlink()


def versions() -> dict[str, str]:
    """Versions of hofcat, Python and the libraries that shape the stored data, for the manifest."""
    import importlib.metadata

    from runner import __version__

    libraries = {name: importlib.metadata.version(name) for name in ("pyarrow", "polars", "aiohttp", "tenacity")}
    return {"hofcat": __version__, "python": platform.python_version(), **libraries}


def _lock(layout: RunDir) -> int:
    """Take the directory's lock without waiting; ``RunDirError`` when another process holds it."""
    fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunDirError(f"{layout.root}: another hofcat process is using this directory") from None
    return fd


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def now_iso() -> str:
    """The current UTC time in ISO 8601, to the second (the manifest's timestamps)."""
    return datetime.now(UTC).isoformat(timespec="seconds")
