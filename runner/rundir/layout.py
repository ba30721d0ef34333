"""Where things are in a run directory: datasets, their numbered parts, the manifest, outputs, temp files.

RUN_DIR/manifest.json             spec, spec hash, versions, parser version, policies, seeds, sessions
RUN_DIR/responses/part-ID.parquet  one row per answered cell (cell_key unique across the dataset)
RUN_DIR/failures/part-ID.parquet   one row per cell that exhausted its retries (a log: a cell retried with
                                   --retry-failed that fails again appears again)
RUN_DIR/prompts/part-ID.parquet    prompt_hash → the exact messages sent (each prompt once)
RUN_DIR/answers/part-ID.parquet    the parse stage's reading of responses/part-ID (same ID)
RUN_DIR/analysis/, RUN_DIR/report/  outputs of ``hofcat analyze`` and ``hofcat report``
RUN_DIR/plan-keys/SPEC_HASH.parquet the plan's cell keys in plan order (``runner.rundir.plan_keys``): derived
                                   from the spec, rebuilt when stale or damaged; lets a resume skip the plan walk
RUN_DIR/.tmp/                      files being written (never read; hofcat's own cleared when the directory's
                                   locking writer opens and closes it, whoever wrote them: a session or a shard)
RUN_DIR/.lock                      records the pid and host of the one process writing the directory, which
                                   holds an exclusive flock on the directory itself (deleting .lock frees nothing)

Nothing inside a run directory is a link or a special file hofcat would follow (``runner.rundir.guard``).

A part ID is ``N-TOKEN``: N a part number with no width limit (zero-padded to six digits, more when it
grows; parts sort numerically), TOKEN eight hex digits unique to the writer session that made it, so two
writers can never overwrite each other's parts even when one ignored the other's lock. Parts written before
tokens existed are named ``part-N.parquet`` and still read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from runner.rundir.guard import checked

__all__ = ["DATASETS", "FORMAT", "RunDir", "part_id", "part_number"]

FORMAT = "hofcat-run/1"
DATASETS = ("responses", "failures", "prompts", "answers")
_PART = re.compile(r"^part-(\d+)(-[0-9a-f]{8})?\.parquet$")


def part_id(n: int, token: str) -> str:
    """The ID of part number ``n`` written by the session with ``token`` (eight hex digits)."""
    return f"{n:06d}-{token}"


def part_number(part: str) -> int:
    """The number of a part ID (``"000012-1a2b3c4d"`` → 12)."""
    return int(part.split("-", 1)[0])


@dataclass(frozen=True, slots=True)
class RunDir:
    """The paths of one run directory (nothing is created or read by constructing it)."""

    root: Path

    @property
    def manifest(self) -> Path:
        """``manifest.json``."""
        return self.root / "manifest.json"

    @property
    def lock(self) -> Path:
        """The lock file held by the directory's one writer."""
        return self.root / ".lock"

    @property
    def tmp(self) -> Path:
        """Where files are written before they are renamed into place."""
        return self.root / ".tmp"

    def dataset(self, name: str) -> Path:
        """The folder of dataset ``name`` (one of ``DATASETS``)."""
        return self.root / name

    def part(self, dataset: str, part: str | int) -> Path:
        """The committed part ``part`` (an ID from ``parts``; an int names a part of the old ``part-N`` form)."""
        name = f"{part:06d}" if isinstance(part, int) else part
        return self.root / dataset / f"part-{name}.parquet"

    def parts(self, dataset: str) -> list[str]:
        """IDs of the committed parts of ``dataset``, in numeric part order (empty when the folder is missing)."""
        folder = checked(self.root, self.dataset(dataset), file=False)
        if not folder.is_dir():
            return []
        found = [(int(m.group(1)), f[5:-8]) for f in os.listdir(folder) if (m := _PART.match(f))]
        return [part for _, part in sorted(found)]

    def plan_keys(self, spec_hash: str) -> Path:
        """The plan-keys file of the spec with ``spec_hash`` (``runner.rundir.plan_keys``)."""
        return self.root / "plan-keys" / f"{spec_hash}.parquet"

    def output(self, name: str) -> Path:
        """The folder of an output stage (``analysis``, ``report``)."""
        return self.root / name
