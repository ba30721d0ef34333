"""The run directory: Parquet datasets committed in atomic parts, the manifest, and resume.

Nothing else writes a run directory. Layout (see docs/runner.md)::

    RUN_DIR/manifest.json           spec, spec hash, versions, parser version, policies, seeds, sessions
    RUN_DIR/responses/part-N.parquet  one row per answered cell (cell_key unique across the dataset)
    RUN_DIR/failures/part-N.parquet   one row per cell that exhausted its retries (a log: a cell retried with
                                      --retry-failed that fails again appears again)
    RUN_DIR/prompts/part-N.parquet    prompt_hash → the exact messages sent (each prompt once)
    RUN_DIR/answers/part-N.parquet    the parser's reading of responses/part-N (rebuilt if missing)

Crash safety: rows are buffered and written as one new part per dataset per flush; each part is written in
``RUN_DIR/.tmp``, fsynced, then renamed into place, so a reader or a resumed run sees whole parts or
nothing. A cell counts as stored once its row is in a committed part; a crash loses only the buffered rows,
which the next run redoes. One run at a time holds ``RUN_DIR/.lock``.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from runner.answers import answer_rows, answers_table, parse_responses
from runner.plan import PlannedCell
from runner.providers import Reply
from runner.errors import RequestError, RunDirError

FORMAT = "hofcat-run/1"
DATASETS = ("responses", "failures", "prompts", "answers")
_PART = re.compile(r"^part-(\d{6})\.parquet$")
_TS = pa.timestamp("us", tz="UTC")

RESPONSE_SCHEMA = pa.schema([
    ("cell_key", pa.string()),
    ("endpoint", pa.string()),
    ("provider", pa.string()),
    ("model", pa.string()),
    ("language", pa.string()),
    ("mode", pa.string()),
    ("questions", pa.list_(pa.int16())),
    ("question", pa.int16()),  # the single question in item mode, null in survey mode
    ("framing", pa.string()),
    ("country", pa.string()),
    ("age", pa.int16()),
    ("gender", pa.string()),
    ("option_order", pa.list_(pa.int16())),
    ("reply_format", pa.string()),
    ("template_hash", pa.string()),
    ("prompt_hash", pa.string()),
    ("shuffle_seed", pa.int64()),
    ("seed", pa.int64()),
    ("temperature", pa.float64()),
    ("top_p", pa.float64()),
    ("max_tokens", pa.int32()),
    ("constraint", pa.string()),  # constrained decoding: none, grammar, json_schema
    ("response_text", pa.string()),
    ("finish_reason", pa.string()),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("latency_s", pa.float64()),
    ("attempts", pa.int32()),
    ("http_status", pa.int16()),
    ("error_class", pa.string()),
    ("error_message", pa.string()),
    ("started_at", _TS),
    ("finished_at", _TS),
])
PROMPT_SCHEMA = pa.schema([("prompt_hash", pa.string()), ("messages_json", pa.string())])



@dataclass(frozen=True, slots=True)
class Outcome:
    """How a cell ended: a reply, or the error that exhausted its retries; timings in seconds / µs since epoch."""

    reply: Reply | None
    error: RequestError | None
    attempts: int
    latency_s: float | None  # of the last attempt
    http_status: int | None
    started_at_us: int
    finished_at_us: int


class RunStore:
    """The single writer of one run directory; open with ``RunStore.open``, always ``close``."""

    def __init__(self, run_dir: Path, lock_fd: int, batch_rows: int, parse_answers: bool) -> None:
        self.run_dir = run_dir
        self._lock_fd = lock_fd
        self.batch_rows = batch_rows
        self.parse_answers = parse_answers
        self._rows: list[tuple] = []  # RESPONSE_SCHEMA order; columns are formed at flush
        self._failed: list[tuple] = []
        self._answers: list[tuple] = []
        self._prompts: list[tuple[str, str]] = []
        self._seen_prompts: set[str] = set(_column(run_dir / "prompts", "prompt_hash"))
        self._next_part = 1 + max((n for d in DATASETS for n in _part_numbers(run_dir / d)), default=0)
        self.buffered = 0

    @classmethod
    def open(cls, run_dir: str | Path, manifest: dict[str, Any], *, batch_rows: int,
             parse_answers: bool = True) -> RunStore:
        """Lock ``run_dir`` (creating it), check or write its manifest, clean temp files, repair answers.

        With ``parse_answers``, every stored response is also parsed into the answers dataset.

        A directory made by a spec with another hash raises ``RunDirError``.
        """
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirError(f"{run_dir}: another hofcat run is using this directory") from None
        try:
            existing = read_manifest(run_dir) if (run_dir / "manifest.json").exists() else None
            if existing is None:
                if any(_part_numbers(run_dir / d) for d in DATASETS):
                    raise RunDirError(f"{run_dir}: holds Parquet parts but no manifest.json; use a new --out")
                existing = {**manifest, "sessions": []}
            elif existing.get("spec_hash") != manifest["spec_hash"]:
                raise RunDirError(
                    f"{run_dir}: made by a spec with hash {existing.get('spec_hash')}, this spec's hash is "
                    f"{manifest['spec_hash']}; resume with the same spec or choose a new --out")
            tmp = run_dir / ".tmp"
            tmp.mkdir(exist_ok=True)
            for leftover in tmp.iterdir():  # half-written parts of a crashed run: never committed
                leftover.unlink()
            for d in DATASETS:
                (run_dir / d).mkdir(exist_ok=True)
            store = cls(run_dir, fd, batch_rows, parse_answers)
            store.manifest = existing
            store.manifest.setdefault("sessions", []).append(
                {"started_at": _now_iso(), "pid": os.getpid(), "versions": manifest.get("versions")})
            store._write_manifest()
            store._repair_answers()
            return store
        except BaseException:
            os.close(fd)
            raise

    def probe_result(self, endpoint: str) -> dict[str, Any] | None:
        """The determinism probe recorded for ``endpoint`` in this run's manifest (by any session), or None."""
        return self.manifest.get("determinism_probe", {}).get(endpoint)

    def record_probe(self, endpoint: str, result: dict[str, Any]) -> None:
        """Write ``result`` (``DeterminismProbe.to_dict()`` or ``{"error": ...}``) to the manifest for ``endpoint``."""
        self.manifest.setdefault("determinism_probe", {})[endpoint] = result
        self._write_manifest()

    def stored_keys(self) -> tuple[set[str], set[str]]:
        """(keys of cells with a committed response, keys of cells with only a committed failure)."""
        done = set(_column(self.run_dir / "responses", "cell_key"))
        return done, set(_column(self.run_dir / "failures", "cell_key")) - done

    def add(self, cell: PlannedCell, messages_json: str, prompt_hash: str, outcome: Outcome) -> None:
        """Buffer one cell's outcome (and its prompt, first time seen); commits when the batch is full."""
        if prompt_hash not in self._seen_prompts:
            self._seen_prompts.add(prompt_hash)
            self._prompts.append((prompt_hash, messages_json))
        p, s, r, e = cell.prompt, cell.sampling, outcome.reply, outcome.error
        row = (
            cell.key, cell.endpoint.name, cell.endpoint.provider, cell.endpoint.model, p.language, p.mode,
            p.questions, p.questions[0] if p.mode == "item" else None, p.framing.kind, p.framing.country,
            p.framing.age, p.framing.gender, p.option_order, p.reply_format, cell.template_hash, prompt_hash,
            cell.shuffle_seed, s.seed, s.temperature, s.top_p, s.max_tokens, s.constraint,
            None if r is None else r.text, None if r is None else r.finish_reason,
            None if r is None else r.input_tokens, None if r is None else r.output_tokens,
            outcome.latency_s, outcome.attempts, outcome.http_status,
            None if e is None else type(e).__name__, None if e is None else str(e),
            outcome.started_at_us, outcome.finished_at_us,
        )
        if e is None:
            self._rows.append(row)
            if self.parse_answers:
                self._answers.extend(answer_rows(cell.key, r.text, p))
        else:
            self._failed.append(row)
        self.buffered += 1
        if self.buffered >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        """Commit buffered rows as new parts: prompts first, so every committed response has its prompt."""
        if not self.buffered and not self._prompts:
            return
        n = self._next_part
        self._next_part += 1
        if self._prompts:
            self._commit("prompts", n, _table(self._prompts, PROMPT_SCHEMA))
            self._prompts = []
        if self._failed:
            self._commit("failures", n, _table(self._failed, RESPONSE_SCHEMA))
            self._failed = []
        if self._rows:
            self._commit("responses", n, _table(self._rows, RESPONSE_SCHEMA))
            self._rows = []
            if self.parse_answers:
                self._commit("answers", n, answers_table(self._answers))
                self._answers = []
        self.buffered = 0

    def close(self, session: dict[str, Any]) -> None:
        """Flush, record how this session ended (``session`` merged into its manifest entry), unlock."""
        try:
            self.flush()
            self.manifest["sessions"][-1].update({"ended_at": _now_iso(), **session})
            self._write_manifest()
        finally:
            os.close(self._lock_fd)

    def _commit(self, dataset: str, n: int, table: pa.Table) -> None:
        tmp = self.run_dir / ".tmp" / f"{dataset}-part-{n:06d}.parquet"
        pq.write_table(table, tmp, compression="zstd")
        _fsync(tmp)
        final = self.run_dir / dataset / f"part-{n:06d}.parquet"
        os.replace(tmp, final)
        _fsync(final.parent)

    def _write_manifest(self) -> None:
        tmp = self.run_dir / ".tmp" / "manifest.json"
        tmp.write_text(json.dumps(self.manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _fsync(tmp)
        os.replace(tmp, self.run_dir / "manifest.json")
        _fsync(self.run_dir)

    def _repair_answers(self) -> None:
        """Parse responses parts whose answers part a crash (or an older parser) left missing."""
        if not self.parse_answers:
            return
        have = set(_part_numbers(self.run_dir / "answers"))
        for n in _part_numbers(self.run_dir / "responses"):
            if n not in have:
                table = pq.read_table(self.run_dir / "responses" / f"part-{n:06d}.parquet", schema=RESPONSE_SCHEMA)
                self._commit("answers", n, parse_responses(table))


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    """The manifest of ``run_dir``; ``RunDirError`` when it is missing or unreadable."""
    path = Path(run_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RunDirError(f"{path}: not a readable hofcat run manifest ({exc})") from None
    if manifest.get("format") != FORMAT:
        raise RunDirError(f"{path}: format {manifest.get('format')!r} is not {FORMAT!r}")
    return manifest


def read_dataset(run_dir: str | Path, dataset: str, columns: Iterable[str] | None = None) -> pa.Table:
    """All committed parts of one dataset of ``run_dir`` as one table (empty with the schema if none)."""
    folder = Path(run_dir) / dataset
    parts = [folder / f"part-{n:06d}.parquet" for n in _part_numbers(folder)]
    cols = None if columns is None else list(columns)
    tables = [pq.read_table(p, columns=cols) for p in parts]
    if tables:  # parts written before a column existed (e.g. ``constraint``) read it as null
        return pa.concat_tables(tables, promote_options="default")
    schema = PROMPT_SCHEMA if dataset == "prompts" else RESPONSE_SCHEMA
    if cols is not None and dataset != "answers":
        schema = pa.schema([schema.field(c) for c in cols])
    return schema.empty_table()


def versions() -> dict[str, str]:
    """Versions of hofcat, Python and the libraries that shape the stored data, for the manifest."""
    import importlib.metadata

    from runner import __version__

    libraries = {name: importlib.metadata.version(name) for name in ("pyarrow", "polars", "aiohttp", "tenacity")}
    return {"hofcat": __version__, "python": platform.python_version(), **libraries}


def _table(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    """Rows (tuples in schema order) as an Arrow table."""
    columns = list(zip(*rows, strict=True))
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema)


def _column(folder: Path, name: str) -> list[str]:
    out: list[str] = []
    for n in _part_numbers(folder):
        out.extend(pq.read_table(folder / f"part-{n:06d}.parquet", columns=[name]).column(0).to_pylist())
    return out


def _part_numbers(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for f in os.listdir(folder) if (m := _PART.match(f)))


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def now_us() -> int:
    """Microseconds since the Unix epoch (the stored timestamps' unit)."""
    return time.time_ns() // 1000
