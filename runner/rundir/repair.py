"""``dedupe``: keep each cell's first committed response when two writers stored it, and say what was dropped.

hofcat lets one writer at a time into a run directory (the directory's own flock), and readers refuse a run
whose ``cell_key`` repeats (``runner.rundir.reader``), so a duplicate comes only from outside: an older
hofcat whose ``.lock`` was deleted under it, or parts copied in from another directory. ``dedupe`` is the
documented repair: parts are walked in part order (a writer numbers its parts upward from the highest it
found, so part order is commit order) and rows in file order; a response whose cell an earlier row already
holds is dropped, with the answers parsed from it. Each changed part is rewritten atomically under its own
ID; failures are a log and stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from runner.rundir.reader import KEY_COLUMNS, read_part
from runner.rundir.writer import RunWriter

__all__ = ["DedupeResult", "dedupe"]


@dataclass(frozen=True, slots=True)
class DedupeResult:
    """What ``dedupe`` did: rows kept in all, and per rewritten part the response and answer rows dropped."""

    kept: int
    dropped: dict[str, tuple[int, int]]  # part ID → (responses dropped, answers dropped)


def dedupe(run_dir: str | Path) -> DedupeResult:
    """Drop every response row of ``run_dir`` whose cell an earlier committed row holds (and its answers)."""
    with RunWriter.attach(run_dir) as writer:
        layout = writer.layout
        seen: set[str] = set()
        kept = 0
        dropped: dict[str, tuple[int, int]] = {}
        answered = set(layout.parts("answers"))
        for part in layout.parts("responses"):
            responses = read_part(layout.part("responses", part), None, KEY_COLUMNS["responses"])
            keys = responses.column("cell_key").to_pylist()
            keep = []
            for key in keys:
                keep.append(key not in seen)
                seen.add(key)
            kept += sum(keep)
            if all(keep):
                continue
            mask = pa.array(keep, pa.bool_())
            answers_dropped = 0
            if part in answered:  # answers first: a crash in between leaves answers of kept cells only
                answers = read_part(layout.part("answers", part), None, KEY_COLUMNS["answers"])
                # the answers of the dropped rows: same cell keys, so keep answers of the rows kept (one each)
                kept_keys = pa.array([k for k, ok in zip(keys, keep, strict=True) if ok], pa.string())
                inside = pc.is_in(answers.column("cell_key"), value_set=kept_keys)
                answers_dropped = len(answers) - int(pc.sum(inside).as_py() or 0)
                writer.commit("answers", part, answers.filter(inside))
            writer.commit("responses", part, responses.filter(mask))
            dropped[part] = (len(keys) - sum(keep), answers_dropped)
    return DedupeResult(kept, dropped)
