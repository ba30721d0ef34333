"""What a resumed session still has to run: the selected plan minus the stored outcomes.

Three ways to the same answer, cheapest first (``remaining_work``):

1. Covered: the stored keys are the whole plan (counted in Arrow), so nothing is left and no key is derived.
2. By plan keys: the plan's keys, in plan order, are read from the run directory's plan-keys file
   (``runner.rundir.plan_keys``; written by the first session that needs it, one keys-only walk of the plan),
   the stored keys are subtracted in Arrow (``pyarrow.compute.is_in``), and only the cells left are made, by
   arithmetic from their positions (``plan.cells_at``), lazily. Each cell made is checked against the file's key
   at its position. A file for another spec hash or fingerprint, of the wrong length, corrupt or failing the
   sample check is rebuilt (the reason goes in the session's manifest entry, ``plan_keys_rebuilt``).
3. By walking (nothing stored yet, plans over ``PLAN_KEYS_MAX_CELLS`` cells, and ``--limit`` pilots of any
   plan): every selected cell is made and filtered by set membership. A first session thus never holds the plan's
   keys (~40 bytes a cell for the whole session); a resume does, as the price of not walking the plan.

All three give the same cells in the same order and the same ``already_stored`` / ``failed_before`` counts
(tests/test_runner_resume_fast.py checks 2 and 3 against each other on random specs, selections and stores).
The counts are returned values: each endpoint's ``Unstored`` cells count the cells they skip (final from the
start by plan keys; growing as the cells are taken by walking), and ``Remaining`` sums them.
"""

from __future__ import annotations

import array
import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runner.errors import RunDirError
from runner.rundir import RunWriter, stored_key_columns
from runner.rundir.plan_keys import read_plan_keys, write_plan_keys
from runner.sweep.plan import PlannedCell, Selection, cells_at, count_cells, endpoint_cell_count, iter_cells, iter_keys
from runner.sweep.spec import EndpointConfig, Spec

__all__ = [
    "PLAN_KEYS_MAX_CELLS",
    "PLAN_SAMPLE",
    "Remaining",
    "Unstored",
    "plan_fingerprint",
    "plan_keys",
    "remaining_work",
    "strings",
]

PLAN_SAMPLE = 64  # first cells per endpoint whose keys must match before stored or filed keys are trusted
# Beyond this many cells no plan-keys file is kept (10^7 keys are ~0.4 GB as Arrow) and the plan is walked.
PLAN_KEYS_MAX_CELLS = 10_000_000
_CHUNK = 1 << 16  # keys per Arrow chunk while deriving them, and cells per check against the file
KEY_SCHEME = "cell-key/1"  # bump when plan.cell_key's definition changes: every plan-keys file is then stale
# The sources that define a key besides the spec and the templates: a development checkout edited without a
# version bump must not reuse keys the old code derived.
_KEY_SOURCES = ("sweep/plan.py", "sweep/providers/logprobs.py", "survey/prompts.py", "survey/cell.py")


class Unstored(Iterator[PlannedCell]):
    """One endpoint's selected cells still without an outcome, lazily, with the counts of the cells it skipped
    because an outcome is stored: ``already_stored``, and of those ``failed_before`` (a stored failure).

    ``done`` and ``failed``: keys to skip as it goes (a walk; the counts grow as cells are taken); without them
    the cells are already filtered and the counts given are final. ``known_empty``: nothing is left, known
    without iterating (no transport needs opening for it).
    """

    def __init__(
        self,
        cells: Iterable[PlannedCell],
        *,
        already_stored: int = 0,
        failed_before: int = 0,
        done: set[str] | frozenset[str] = frozenset(),
        failed: set[str] | frozenset[str] = frozenset(),
        known_empty: bool = False,
    ) -> None:
        self._cells = iter(cells)
        self.already_stored = already_stored
        self.failed_before = failed_before
        self._done, self._failed = done, failed
        self.known_empty = known_empty

    def __iter__(self) -> Iterator[PlannedCell]:
        """Itself while it has keys to skip; else the cells themselves, so a worker's ``next`` reaches the plan
        with no Python frame of this class between (~1 k instructions a cell; the counts are final then)."""
        return self if self._done or self._failed else self._cells

    def __next__(self) -> PlannedCell:
        for cell in self._cells:
            if cell.key in self._done:
                self.already_stored += 1
            elif cell.key in self._failed:
                self.already_stored += 1
                self.failed_before += 1
            else:
                return cell
        raise StopIteration


@dataclass
class Remaining:
    """What a session has left: each selected endpoint's ``Unstored`` cells (iterating it gives the
    ``(endpoint, cells)`` pairs), and the cells skipped because an outcome is stored, summed over endpoints."""

    work: list[tuple[EndpointConfig, Unstored]]
    covered_failures: int = field(default=0)  # a covered plan's stored failures, counted as a whole (no keys made)

    def __iter__(self) -> Iterator[tuple[EndpointConfig, Unstored]]:
        return iter(self.work)

    @property
    def already_stored(self) -> int:
        """Selected cells skipped so far because an outcome is stored (final once every ``Unstored`` is spent)."""
        return sum(cells.already_stored for _, cells in self.work)

    @property
    def failed_before(self) -> int:
        """Of ``already_stored``: the cells whose stored outcome is a failure."""
        return self.covered_failures + sum(cells.failed_before for _, cells in self.work)


def remaining_work(spec: Spec, writer: RunWriter, retry_failed: bool, selection: Selection) -> Remaining:
    """Each selected endpoint's selected cells still without an outcome (lazy), with the counts of those skipped.

    Without an outcome: no stored response, and, unless ``retry_failed``, no stored failure. See the module
    docstring for how; the answer does not depend on which way is taken.
    """
    done_col, failed_col = stored_key_columns(writer.layout)
    covering = (
        done_col
        if retry_failed or not len(failed_col)
        else pa.chunked_array([*done_col.chunks, *failed_col.chunks], type=pa.string())
    )
    if plan_covered(spec, writer, covering):  # the whole plan is covered, so is any selection of it
        planned = count_cells(spec)
        failed_only = planned - pc.count_distinct(done_col).as_py() if covering is not done_col else 0
        if failed_only == 0 or selection.cells == planned:  # else: which selected cells failed needs the keys
            quota = selection.quota
            nothing = [(e, Unstored((), already_stored=quota(e), known_empty=True)) for e in selection.endpoints]
            return Remaining(nothing, failed_only)
    failed_col = failed_col if not retry_failed else failed_col[:0]
    if not len(done_col) and not len(failed_col):
        # nothing stored (a first session): every selected cell is left, made as it is sent; the plan's keys (~40
        # bytes a cell, held all session) are neither derived nor filed: memory follows the batch, not the plan
        return _remaining_by_walk(spec, done_col, failed_col, selection)
    if selection.limit is not None and selection.cells < count_cells(spec):
        # a pilot (--limit): its cells are the first of each endpoint's plan, made as they are sent; the whole
        # plan's keys are neither derived nor filed, so its memory and time follow the pilot, not the plan
        return _remaining_by_walk(spec, done_col, failed_col, selection)
    keys = plan_keys(spec, writer)
    if keys is None:
        return _remaining_by_walk(spec, done_col, failed_col, selection)
    return _remaining_by_keys(spec, writer, keys, done_col, failed_col, selection)


def plan_covered(spec: Spec, writer: RunWriter, stored: pa.ChunkedArray) -> bool:
    """Whether the ``stored`` keys are the whole plan; cheapest checks first.

    Covered means: as many distinct stored keys as the plan has cells; every session of the directory ran the
    same versions as this one (the spec hash is already the same, so the plan is); and the first
    ``PLAN_SAMPLE`` planned keys of every endpoint are among them."""
    planned = count_cells(spec)
    if len(stored) < planned:
        return False
    sessions = (writer.manifest or {}).get("sessions") or [{}]
    if any(s.get("versions") != sessions[-1].get("versions") for s in sessions):
        return False
    sample = {c.key for e in spec.endpoints for c in itertools.islice(iter_cells(spec, e), PLAN_SAMPLE)}
    found = pc.sum(pc.is_in(stored, value_set=strings(sorted(sample)))).as_py() or 0
    return found >= len(sample) and pc.count_distinct(stored).as_py() == planned


def plan_keys(spec: Spec, writer: RunWriter) -> pa.ChunkedArray | None:
    """The plan's cell keys in plan order, from the run directory's plan-keys file, (re)made when it is missing
    or fails a check; None for plans over ``PLAN_KEYS_MAX_CELLS`` cells."""
    planned = count_cells(spec)
    if planned > PLAN_KEYS_MAX_CELLS:
        return None
    fingerprint = plan_fingerprint(spec, writer)
    keys, why = read_plan_keys(writer.layout, spec.spec_hash, fingerprint, planned)
    if keys is not None and not _sample_matches(spec, keys):
        keys, why = None, "its keys are not the plan's (sample check)"
    if keys is not None:
        return keys
    if why != "missing" and writer.manifest is not None:  # visible after the session: the file was not trusted
        writer.manifest["sessions"][-1]["plan_keys_rebuilt"] = why
    keys = pa.chunked_array([strings(list(chunk)) for chunk in _batched(iter_keys(spec), _CHUNK)], type=pa.string())
    write_plan_keys(writer, spec.spec_hash, fingerprint, keys)
    return keys


def plan_fingerprint(spec: Spec, writer: RunWriter) -> str:
    """16 hex digits over what the keys depend on besides the spec: key scheme, this session's versions, and
    the bytes of the templates, instruments and key-defining sources the spec's languages use."""
    from runner.survey.instrument import instrument_dir
    from runner.survey.prompts import prompts_dir

    session = ((writer.manifest or {}).get("sessions") or [{}])[-1]
    languages = sorted({lang for e in spec.endpoints for lang in spec.design_for(e).languages})
    package = Path(__file__).resolve().parent.parent
    files = [package / s for s in _KEY_SOURCES]
    files += [d / f"{lang}.json" for lang in languages for d in (prompts_dir(), instrument_dir())]
    digest = hashlib.sha256(json.dumps([KEY_SCHEME, session.get("versions")], sort_keys=True).encode())
    for path in files:  # a file not there (a build without sources) counts as absent, never as an error
        digest.update(hashlib.sha256(path.read_bytes() if path.is_file() else b"").digest())
    return digest.hexdigest()[:16]


def _sample_matches(spec: Spec, keys: pa.ChunkedArray) -> bool:
    """Whether the first ``PLAN_SAMPLE`` and the last cell of every endpoint have the keys ``keys`` gives them."""
    start = 0
    for e in spec.endpoints:
        n = endpoint_cell_count(spec, e)
        picks = sorted({*range(min(n, PLAN_SAMPLE)), *([n - 1] if n else [])})
        filed = keys.take(_indices(np.array(picks, dtype=np.int64) + start)).to_pylist()
        if [c.key for c in cells_at(spec, e, picks)] != filed:
            return False
        start += n
    return True


def _remaining_by_keys(
    spec: Spec,
    writer: RunWriter,
    keys: pa.ChunkedArray,
    done_col: pa.ChunkedArray,
    failed_col: pa.ChunkedArray,
    selection: Selection,
) -> Remaining:
    """The remaining cells from the plan's ``keys``: stored ones masked out in Arrow, the rest made by position."""
    done = _mask(pc.is_in(keys, value_set=done_col))
    failed = _mask(pc.is_in(keys, value_set=failed_col)) & ~done if len(failed_col) else np.zeros(len(keys), dtype=bool)
    outcome = done | failed
    starts = dict(
        zip(
            (e.name for e in spec.endpoints),
            itertools.accumulate((endpoint_cell_count(spec, e) for e in spec.endpoints), initial=0),
            strict=False,
        )
    )
    where = writer.layout.plan_keys(spec.spec_hash)
    work = []
    for e in selection.endpoints:
        start, quota = starts[e.name], selection.quota(e)
        left = np.flatnonzero(~outcome[start : start + quota])
        cells = _checked_cells(spec, e, left, keys.slice(start, quota), where)
        skipped = int(np.count_nonzero(failed[start : start + quota]))
        work.append((e, Unstored(cells, already_stored=quota - len(left), failed_before=skipped)))
    return Remaining(work)


def _checked_cells(
    spec: Spec, endpoint: EndpointConfig, ordinals: np.ndarray, keys: pa.ChunkedArray, where: Path
) -> Iterator[PlannedCell]:
    """``endpoint``'s cells at ``ordinals``, each one's key compared with the file's (``RunDirError`` if one
    differs: the file is not this plan's, whatever its checks said). Lazy, one chunk of keys at a time."""
    for i in range(0, len(ordinals), _CHUNK):
        chunk = ordinals[i : i + _CHUNK]
        filed = keys.take(_indices(chunk)).to_pylist()
        for cell, key in zip(cells_at(spec, endpoint, chunk.tolist()), filed, strict=True):
            if cell.key != key:
                raise RunDirError(
                    f"{where}: the key of {endpoint.name!r} cell {cell.key} differs from the file's {key}; "
                    "delete the file and rerun (it is rebuilt from the spec)"
                )
            yield cell


def _remaining_by_walk(
    spec: Spec, done_col: pa.ChunkedArray, failed_col: pa.ChunkedArray, selection: Selection
) -> Remaining:
    """The remaining cells by making every selected cell and filtering by set membership (counted as walked)."""
    done = set(done_col.to_pylist())
    failed = set(failed_col.to_pylist()) - done
    walks = [(e, Unstored(selection.iter_cells(spec, e), done=done, failed=failed)) for e in selection.endpoints]
    return Remaining(walks)


def _mask(flags: pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow result without nulls as a numpy bool array, from its bitmaps (``to_numpy`` imports pandas)."""
    parts = []
    for c in flags.chunks:
        assert c.null_count == 0, "a stored or planned key is null"
        if len(c):
            bits = np.unpackbits(np.frombuffer(c.buffers()[1], np.uint8), bitorder="little")
            parts.append(bits[c.offset : c.offset + len(c)].view(bool))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _indices(values: np.ndarray) -> pa.Array:
    """An int64 numpy array as an Arrow array, from its buffer (``pa.array`` of numpy imports pandas)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def _batched(items: Iterable[str], n: int) -> Iterator[tuple[str, ...]]:
    """``items`` in tuples of ``n`` (the last shorter): ``itertools.batched`` of Python 3.12."""
    it = iter(items)
    while chunk := tuple(itertools.islice(it, n)):
        yield chunk


def strings(values: list[str]) -> pa.Array:
    """``values`` as an Arrow string array, built from buffers: ``pa.array`` of a list imports pandas (~0.3 s)."""
    data = [v.encode() for v in values]
    offsets = array.array("i", itertools.accumulate(map(len, data), initial=0))  # int32, as Arrow's offsets
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(data)))
