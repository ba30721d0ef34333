"""``execution = "batch"``: an endpoint's cells sent through its provider's batch API, exactly once.

Every step is recorded in the run directory's batch journal (``runner.rundir.batches``) *before* the provider
call that depends on it, so a session killed at any moment resumes without paying twice:

1. A chunk of unsent cells (at most ``max_batch_requests`` and ``max_batch_bytes``) gets a tag and a journal
   entry listing its keys (``preparing``); only then is it uploaded and created, with the tag at the provider
   (OpenAI: ``metadata.hofcat_batch``; Anthropic: the ``custom_id`` prefix). The batch id is then recorded
   (``submitted``).
2. A resumed session first settles every ``preparing`` entry: it looks the tag up at the provider and adopts
   the batch it finds (for Anthropic, a candidate is verified by its results' ids before they are used); it
   submits the chunk only when the provider has no such batch.
3. Submitted batches are polled every ``batch_poll_s``; an ended batch's results are committed as parts like
   online replies (same schema, plus ``batch_id``), cells already stored are skipped, so collecting twice is
   harmless; requests that failed, expired or were cancelled go alone into a new batch (attempt + 1, within
   ``max_retries``) or are stored as failures; then the entry is ``collected``.

A cell in any entry not yet collected is in flight and never submitted again. ``wait=False`` submits and
returns; a later session collects. No online chat request is ever sent for a batch endpoint.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass

import pyarrow.compute as pc

from runner.errors import BatchRequestFailed, RequestError, RunDirError
from runner.rundir import RunWriter
from runner.rundir.batches import BatchEntry, BatchJournal
from runner.rundir.reader import stored_key_columns
from runner.sweep.batch_api import BatchAPI, BatchResult, batch_api
from runner.sweep.outcome import Outcome, response_row
from runner.sweep.plan import PlannedCell, cells_at, endpoint_cell_count, iter_cells, iter_keys
from runner.sweep.progress import Progress, RunStats
from runner.sweep.providers import HttpCall, provider_for
from runner.sweep.remaining import plan_keys, strings
from runner.sweep.spec import EndpointConfig, Spec
from runner.sweep.transport import decode

__all__ = ["BatchOutcome", "BatchRunner"]


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """What one endpoint's batch work did in this session."""

    submitted: int  # batches created at the provider
    collected: int  # batches whose results were committed
    open: int  # batches still at the provider when the session ended


def _now_us() -> int:
    return time.time_ns() // 1000


class BatchRunner:
    """Runs one batch endpoint of a session through the writer (which holds the lock): ``submit``, then ``finish``."""

    def __init__(
        self,
        spec: Spec,
        endpoint: EndpointConfig,
        writer: RunWriter,
        stats: RunStats,
        progress: Progress,
        commit: Callable[[], None],
        api_key: str | None,
        *,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.spec, self.endpoint, self.writer = spec, endpoint, writer
        self.stats, self.progress, self.commit = stats, progress, commit
        self.provider = provider_for(endpoint)
        self.api_key = api_key
        self.sleep = sleep
        self.journal = BatchJournal(writer)
        probe_call = self.provider.call(endpoint.base_url, api_key, _probe_request(spec, endpoint))
        self.api: BatchAPI = batch_api(endpoint.provider, endpoint.base_url, probe_call, endpoint.timeout_s)
        self.max_requests = min(endpoint.max_batch_requests, self.api.max_requests)
        self.max_bytes = min(endpoint.max_batch_bytes, self.api.max_bytes)
        self.submitted = self.collected = 0
        self._ordinals: dict[str, int] = {}  # plan position of each key in flight (``_positions``)
        self._unplanned: set[str] = set()  # keys in the journal that the endpoint's plan lacks
        self._done: set[str] | None = None  # the keys with a stored response (``_stored``)

    async def submit(self, cells: Iterable[PlannedCell]) -> None:
        """Settle the batches a killed session left ``preparing``, then submit the unsent ``cells`` in batches."""
        await self._settle_preparing()
        in_flight = self.journal.in_flight(self.endpoint.name)
        for chunk in self._chunks(c for c in cells if c.key not in in_flight):
            await self._submit_new(chunk, attempt=1)

    async def finish(self, *, wait: bool = True) -> BatchOutcome:
        """Poll and collect the open batches (until none is left when ``wait``; one round otherwise); close."""
        try:
            await self._poll(wait)
        finally:
            await self.api.close()
        still = len(self.journal.open_entries(self.endpoint.name))
        return BatchOutcome(self.submitted, self.collected, still)

    async def close(self) -> None:
        """Release the HTTP session (when ``finish`` is never reached)."""
        await self.api.close()

    # ---- submitting --------------------------------------------------------------------------------------

    def _chunks(self, cells: Iterable[PlannedCell]) -> Iterator[list[tuple[PlannedCell, HttpCall]]]:
        """Cells with their requests, grouped into batches within the request and byte limits (a byte estimate
        per request); each request is built once, here."""
        chunk: list[tuple[PlannedCell, HttpCall]] = []
        size = 0
        for cell, call in self._requests(cells):
            estimate = 2 * len(call.body.get("messages", "").__repr__()) + 512
            if chunk and (len(chunk) >= self.max_requests or size + estimate > self.max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append((cell, call))
            size += estimate
        if chunk:
            yield chunk

    def _requests(self, cells: Iterable[PlannedCell]) -> Iterator[tuple[PlannedCell, HttpCall]]:
        """Each cell with the provider request that asks it."""
        from runner.sweep.request import request_for

        for cell in cells:
            yield cell, self.provider.call(self.endpoint.base_url, self.api_key, request_for(cell))

    def _new_entry(self, n: int, attempt: int) -> BatchEntry:
        """A journal entry for a batch of ``n`` cells not yet submitted (its tag: fresh, 16 hex digits)."""
        return BatchEntry(
            tag=uuid.uuid4().hex[:16],
            endpoint=self.endpoint.name,
            provider=self.endpoint.provider,
            n=n,
            attempt=attempt,
            created_unix=time.time(),
        )

    async def _submit_new(self, requests: list[tuple[PlannedCell, HttpCall]], attempt: int) -> None:
        entry = self._new_entry(len(requests), attempt)
        self.journal.add(entry, [c.key for c, _ in requests])  # before the provider hears of it
        await self._submit(entry, requests)

    async def _submit(self, entry: BatchEntry, requests: list[tuple[PlannedCell, HttpCall]]) -> None:
        calls = [(self.api.custom_id(entry.tag, c.key), call) for c, call in requests]
        batch_id = await self.api.submit(entry.tag, calls, lambda file_id: self.journal.update(entry, file_id=file_id))
        self.journal.update(entry, batch_id=batch_id, state="submitted")
        self.submitted += 1
        self.progress.note(
            f"{self.endpoint.name}: batch {batch_id} submitted ({entry.n} cells, attempt {entry.attempt})"
        )

    async def _settle_preparing(self) -> None:
        """Entries recorded but maybe never created: adopt the provider's batch with their tag, else submit them."""
        for entry in [e for e in self.journal.open_entries(self.endpoint.name) if e.state == "preparing"]:
            # a tag the provider may hold already: look before submitting, never submit twice
            known = {e.batch_id for e in self.journal.entries.values() if e.batch_id} | set(entry.candidates_rejected)
            found = await self.api.find(entry.tag, entry.created_unix, known)
            if found:
                self.journal.update(entry, batch_id=found[-1].batch_id, state="submitted")
                self.progress.note(f"{self.endpoint.name}: batch {found[-1].batch_id} found again for {entry.tag}")
                continue
            keys = set(self.journal.keys(entry))
            await self._submit(entry, list(self._requests(self._cells_of(keys))))

    # ---- polling and collecting ----------------------------------------------------------------------------

    async def _poll(self, wait: bool) -> None:
        while True:
            entries = self.journal.open_entries(self.endpoint.name)
            if not entries:
                return
            for entry in entries:
                if entry.state == "submitted" and entry.batch_id:
                    status = await self.api.status(entry.batch_id)
                    if status.ended:
                        self.journal.update(entry, state="ended", provider_status=status.status)
                    elif status.status != entry.provider_status:
                        self.journal.update(entry, provider_status=status.status)
                if entry.state == "ended":
                    await self._collect(entry)
                elif entry.state == "preparing":
                    await self._settle_preparing()
            if not wait:
                return
            if self.journal.open_entries(self.endpoint.name):
                await self.sleep(self.endpoint.batch_poll_s)

    def _cells_of(self, keys: set[str]) -> list[PlannedCell]:
        """The planned cells with ``keys``, in plan order, made by position (``cells_at``), not by a walk."""
        where = self._positions(keys)
        pairs = sorted((where[k], k) for k in keys if k in where)
        cells = list(cells_at(self.spec, self.endpoint, [i for i, _ in pairs]))
        for cell, (i, key) in zip(cells, pairs, strict=True):
            if cell.key != key:  # the plan keys were not this plan's, whatever their checks said
                raise RunDirError(
                    f"{self.writer.layout.plan_keys(self.spec.spec_hash)}: {self.endpoint.name!r} cell {i} has key "
                    f"{cell.key}, the file {key}; delete the file and rerun (it is rebuilt from the spec)"
                )
        return cells

    def _positions(self, keys: set[str]) -> dict[str, int]:
        """Plan positions by key, covering ``keys``: the first lookup finds those of every key in flight in one
        pass over the plan's keys, so later batches (retries included: their keys are among them) find theirs."""
        if any(k not in self._ordinals and k not in self._unplanned for k in keys):
            wanted = set(keys)
            for entry in self.journal.open_entries(self.endpoint.name):
                wanted.update(self.journal.keys(entry))
            wanted -= self._ordinals.keys() | self._unplanned
            found = self._locate(wanted)
            self._ordinals.update(found)
            self._unplanned |= wanted - found.keys()
        return self._ordinals

    def _locate(self, wanted: set[str]) -> dict[str, int]:
        """Positions in the endpoint's plan of those of ``wanted`` it has: one pass over its keys, from the
        plan-keys file (``remaining.plan_keys``), or derived one by one for a plan too large for one."""
        names = [e.name for e in self.spec.endpoints]
        before = self.spec.endpoints[: names.index(self.endpoint.name)]
        start = sum(endpoint_cell_count(self.spec, e) for e in before)
        n = endpoint_cell_count(self.spec, self.endpoint)
        keys = plan_keys(self.spec, self.writer)
        if keys is None:
            return {k: i for i, k in enumerate(itertools.islice(iter_keys(self.spec), start, start + n)) if k in wanted}
        mine = keys.slice(start, n)
        at = pc.indices_nonzero(pc.is_in(mine, value_set=strings(sorted(wanted))))
        return dict(zip(mine.take(at).to_pylist(), at.to_pylist(), strict=True))

    def _stored(self) -> set[str]:
        """The keys with a stored response: read once, then kept up to date by ``_store`` (only this runner
        stores its endpoint's keys while the session holds the run directory's lock)."""
        if self._done is None:
            done, _ = stored_key_columns(self.writer.layout)
            self._done = set(done.to_pylist())
        return self._done

    async def _collect(self, entry: BatchEntry) -> None:
        """Commit an ended batch's results; resubmit or fail the requests without a reply; mark it collected."""
        assert entry.batch_id is not None
        keys = set(self.journal.keys(entry))
        results = await self.api.results(entry.batch_id)
        mine = [(self.api.cell_key(entry.tag, r.custom_id), r) for r in results]
        if results and not any(k in keys for k, _ in mine):  # an adopted candidate that was not this batch
            self.journal.update(
                entry,
                state="preparing",
                batch_id=None,
                candidates_rejected=[*entry.candidates_rejected, entry.batch_id],
            )
            return
        cells = {c.key: c for c in self._cells_of(keys)}
        stored = self._stored()
        elsewhere = {
            k for e in self.journal.open_entries(self.endpoint.name) if e is not entry for k in self.journal.keys(e)
        }
        answered: set[str] = set()
        retry: list[PlannedCell] = []
        for key, result in mine:
            if key is None or key not in cells or key in answered:
                continue
            answered.add(key)
            if key in stored or key in elsewhere:
                continue
            self._store(entry, cells[key], result, retry)
        for key in keys - answered - stored - elsewhere:  # the provider returned nothing for it
            self._store(entry, cells[key], BatchResult(key, None, "no result in the batch output"), retry)
        self.commit()
        if retry:
            new = self._new_entry(len(retry), entry.attempt + 1)
            self.journal.add(new, [c.key for c in retry])  # in flight from now: the old entry may close
            self.journal.update(entry, state="collected")
            self.collected += 1
            await self._submit(new, list(self._requests(retry)))
            return
        self.journal.update(entry, state="collected")
        self.collected += 1

    def _store(self, entry: BatchEntry, cell: PlannedCell, result: BatchResult, retry: list[PlannedCell]) -> None:
        """Buffer one result as a row, or queue its cell for another batch while retries remain."""
        from runner.sweep.request import rendered

        _, messages_json, prompt_hash, _ = rendered(cell.prompt, cell.sampling.measurement)
        started = int(entry.created_unix * 1e6)
        error: RequestError | None = None
        reply = None
        status = result.reply.status if result.reply is not None else None
        if result.reply is not None:
            try:
                reply = decode(self.provider, result.reply, self.api_key)
            except RequestError as exc:
                error = exc
        else:
            error = BatchRequestFailed(f"batch {entry.batch_id}: {result.error}")
        if error is not None and entry.attempt <= self.endpoint.max_retries:
            retry.append(cell)
            self.stats.retries += 1
            return
        outcome = Outcome(reply, error, entry.attempt, None, status, started, _now_us())
        row = response_row(cell, prompt_hash, outcome)
        row.batch_id = entry.batch_id
        self.writer.add_prompt(prompt_hash, messages_json)
        self.writer.add(row)
        if reply is not None:
            self._stored().add(cell.key)
            self.stats.done += 1
            self.stats.input_tokens += row.input_tokens or 0
            self.stats.output_tokens += row.output_tokens or 0
        else:
            self.stats.failed += 1


def _probe_request(spec: Spec, endpoint: EndpointConfig):
    """A request of the endpoint's first cell: only its headers are used (the credentials a batch call sends)."""
    from runner.sweep.request import request_for

    first = next(iter_cells(spec, endpoint))
    return request_for(first)
