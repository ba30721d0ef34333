"""The batch journal of a run directory: every provider batch, its cells and its state, written before each call.

``RUN_DIR/batches/journal.json`` lists the batches; ``RUN_DIR/batches/<tag>.keys`` holds each batch's cell keys
(one per line), written before the batch exists anywhere else. Both are replaced atomically through the
writer, so a reader (or a resume after SIGKILL) sees the journal as it was after some whole step.

States: ``preparing`` (cells chosen and recorded; the provider may or may not have the batch yet — a resume
finds out by the batch's tag before it submits anything), ``submitted`` (the provider's batch id is recorded),
``ended`` (the provider finished it; its results may be partly committed), ``collected`` (every cell of it is
stored, or handed to a later batch, or recorded as failed). A cell in a batch that is not ``collected`` is in
flight and is never submitted again.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import RunDirError
from runner.rundir.guard import read_text
from runner.rundir.writer import RunWriter

__all__ = ["STATES", "BatchEntry", "BatchJournal", "read_journal"]

STATES = ("preparing", "submitted", "ended", "collected")
_STAGE = "batches"
_TAG = re.compile(r"[0-9a-f]{1,64}")  # what batch_run makes (uuid4 hex); the keys file's name
_FILE = "journal.json"


@dataclass(slots=True)
class BatchEntry:
    """One provider batch of one endpoint."""

    tag: str  # hofcat's own id of the batch (metadata / custom_id prefix at the provider)
    endpoint: str
    provider: str
    n: int  # cells in it
    attempt: int  # 1 for a cell's first batch, +1 for each resubmission of failed requests
    created_unix: float
    state: str = "preparing"
    batch_id: str | None = None
    file_id: str | None = None
    provider_status: str | None = None  # the provider's last status word (in_progress, completed, expired, ended)
    candidates_rejected: list[str] = field(default_factory=list)  # provider batches found not to be this one
    updated_unix: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


class BatchJournal:
    """The journal of a run directory, changed only through its writer (which holds the lock)."""

    def __init__(self, writer: RunWriter) -> None:
        self.writer = writer
        self.folder = writer.layout.output(_STAGE)
        try:
            self.entries = {e["tag"]: BatchEntry(**e) for e in read_journal(writer.layout.root)}
        except (KeyError, TypeError) as exc:  # entries of another shape
            raise RunDirError(f"{self.folder / _FILE}: not a readable batch journal ({exc})") from None

    def save(self) -> None:
        """Replace the journal file atomically."""
        body = {"batches": [e.to_dict() for e in self.entries.values()]}
        with self.writer.output_file(_STAGE, _FILE) as tmp:
            tmp.write_text(json.dumps(body, indent=1), encoding="utf-8")

    def add(self, entry: BatchEntry, keys: list[str]) -> None:
        """Record a new batch: its keys file first, then the journal naming it."""
        with self.writer.output_file(_STAGE, f"{entry.tag}.keys") as tmp:
            tmp.write_text("\n".join(keys) + "\n", encoding="utf-8")
        entry.updated_unix = time.time()
        self.entries[entry.tag] = entry
        self.save()

    def update(self, entry: BatchEntry, **changes: Any) -> None:
        """Change an entry's fields and save the journal."""
        for name, value in changes.items():
            setattr(entry, name, value)
        entry.updated_unix = time.time()
        self.save()

    def keys(self, entry: BatchEntry) -> list[str]:
        """The cell keys of ``entry`` (its keys file)."""
        path = self.folder / f"{entry.tag}.keys"
        try:
            if not _TAG.fullmatch(str(entry.tag)):  # a journal from elsewhere names no path outside batches/
                raise ValueError(f"batch tag {str(entry.tag)[:80]!r} is not one hofcat makes")
            return [k for k in read_text(self.writer.layout.root, path).splitlines() if k]
        except (OSError, ValueError) as exc:
            raise RunDirError(f"{path}: the cell keys of batch {entry.tag} cannot be read ({exc})") from None

    def open_entries(self, endpoint: str) -> list[BatchEntry]:
        """``endpoint``'s batches not yet collected, oldest first."""
        return [e for e in self.entries.values() if e.endpoint == endpoint and e.state != "collected"]

    def in_flight(self, endpoint: str) -> set[str]:
        """Cell keys of ``endpoint`` in batches not yet collected (never to be submitted again)."""
        return {k for e in self.open_entries(endpoint) for k in self.keys(e)}


def read_journal(run_dir: str | Path) -> list[dict[str, Any]]:
    """The batch entries of ``run_dir`` as dicts (empty when the run has no batches); takes no lock."""
    path = Path(run_dir) / _STAGE / _FILE
    if not path.exists() and not path.is_symlink():
        return []
    try:
        return list(json.loads(read_text(Path(run_dir), path))["batches"])
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise RunDirError(f"{path}: not a readable batch journal ({exc})") from None
