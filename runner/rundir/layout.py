"""Where things are in a run directory: datasets, their numbered parts, the manifest, outputs, temp files.

RUN_DIR/manifest.json             spec, spec hash, versions, parser version, policies, seeds, sessions
RUN_DIR/responses/part-N.parquet  one row per answered cell (cell_key unique across the dataset)
RUN_DIR/failures/part-N.parquet   one row per cell that exhausted its retries (a log: a cell retried with
                                  --retry-failed that fails again appears again)
RUN_DIR/prompts/part-N.parquet    prompt_hash → the exact messages sent (each prompt once)
RUN_DIR/answers/part-N.parquet    the parse stage's reading of responses/part-N (same N)
RUN_DIR/analysis/, RUN_DIR/report/  outputs of ``hofcat analyze`` and ``hofcat report``
RUN_DIR/.tmp/                     files being written (never read; cleared when a writer opens)
RUN_DIR/.lock                     held by the one process writing the directory
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATASETS", "FORMAT", "RunDir"]

FORMAT = "hofcat-run/1"
DATASETS = ("responses", "failures", "prompts", "answers")
_PART = re.compile(r"^part-(\d{6})\.parquet$")


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

    def part(self, dataset: str, n: int) -> Path:
        """The committed part ``n`` of ``dataset``."""
        return self.root / dataset / f"part-{n:06d}.parquet"

    def parts(self, dataset: str) -> list[int]:
        """Numbers of the committed parts of ``dataset``, ascending (empty when the folder is missing)."""
        folder = self.dataset(dataset)
        if not folder.is_dir():
            return []
        return sorted(int(m.group(1)) for f in os.listdir(folder) if (m := _PART.match(f)))

    def output(self, name: str) -> Path:
        """The folder of an output stage (``analysis``, ``report``)."""
        return self.root / name
