"""The extract stage: ask an extractor model to restate answers the parser could not read; store what it said.

``extract_answers(run_dir, endpoint)`` takes every stored answer whose parse status is one of ``statuses``
(default ``ambiguous``), sends one extractor request per (cell, question) to ``endpoint`` (an ``EndpointConfig``:
a spec's endpoint, or a local llama.cpp server the command started) and stores one row per request in
``RUN_DIR/extractions/part-ID.parquet``: status ``extracted`` (with the option), ``none`` (the extractor said
the reply chose none), ``unreadable`` (its reply named no single position) or ``failed`` (the request failed
after its retries; error class and redacted message kept). The extractor's raw reply and the endpoint, provider,
requested and served model are kept beside it; responses and answers are never changed.

Requests go through the sweep's machinery: the endpoint's provider mapping, its transport (aiohttp, bounded
bodies, same-origin redirects only), its rate limiter (journalled in the run's ``admissions.jsonl`` with the
sweep's, so both share the windows) and its retry policy; keys come from ``api_key_env`` and are redacted from
every stored message. Rows are committed in parts of ``batch_rows`` through the run directory's writer (atomic,
under the directory's lock): a crash or Ctrl-C loses only uncommitted rows, and the next call redoes them.
A second call with the same extractor sends nothing already stored (failures only with ``retry_failed``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from runner.errors import RunDirError, UsageError
from runner.extract.request import (
    CONSTRAINTS,
    DEFAULT_STATUSES,
    EXTRACTABLE_STATUSES,
    constraint_fields,
    extractor_messages,
    read_extraction,
)
from runner.parse.answers import CELL_COLUMNS, _prompt_cell
from runner.parse.result import PARSER_VERSION
from runner.parse.stage import update_answers
from runner.rundir import RunDir, RunWriter, part_columns, part_pairs, read_manifest, read_part, table
from runner.rundir.admissions import AdmissionLog
from runner.rundir.layout import part_id, part_number
from runner.rundir.schema import EXTRACTION_SCHEMA, ExtractionRow
from runner.rundir.writer import now_iso
from runner.survey.cell import PromptCell
from runner.sweep.accounting import input_estimate
from runner.sweep.limits import RateLimiter
from runner.sweep.outcome import now_us
from runner.sweep.providers import ChatRequest, Reply, provider_for
from runner.sweep.request import api_key_for
from runner.sweep.retry import Attempt, RetryPolicy, attempting, call_with_retries
from runner.sweep.session import blocking
from runner.sweep.spec import EndpointConfig, Spec, spec_from_dict
from runner.sweep.transport import Transport, TransportFactory, aiohttp_transport, redact, send

__all__ = [
    "DATASET",
    "ExtractResult",
    "ExtractionRow",
    "extract_answers",
    "extract_answers_async",
    "spec_endpoint",
    "stored_extractions",
]

DATASET = "extractions"
_MESSAGE_CHARS = 500


@dataclass(frozen=True, slots=True)
class ExtractResult:
    """What one call did: answers eligible, already extracted before, requests sent, rows by status."""

    eligible: int
    already: int
    sent: int
    counts: dict[str, int]  # status → rows stored by this call
    left: int = 0  # eligible answers not sent because of ``limit``


@dataclass(frozen=True, slots=True)
class _Candidate:
    cell_key: str
    question: int
    parse_status: str
    parser_version: str
    cell: PromptCell
    reply: str


def stored_extractions(run_dir: str | Path | RunDir, columns: Sequence[str] | None = None) -> pa.Table:
    """Every committed extractions part of ``run_dir`` in part order (``columns`` of them; empty if none)."""
    layout = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    schema = EXTRACTION_SCHEMA
    cols = list(columns) if columns is not None else schema.names
    parts = [read_part(layout.part(DATASET, n), cols, "cell_key") for n in layout.parts(DATASET)]
    if not parts:
        return pa.schema([schema.field(c) for c in cols]).empty_table()
    return pa.concat_tables(parts, promote_options="default")


def spec_endpoint(run_dir: str | Path, name: str, spec: Spec | None = None) -> EndpointConfig:
    """Endpoint ``name`` of ``spec``, or of the spec recorded in ``run_dir``'s manifest; ``UsageError`` naming
    the endpoints there when it has none of that name."""
    if spec is None:
        spec = spec_from_dict(read_manifest(run_dir).get("spec") or {}, source=f"{run_dir}/manifest.json spec")
    names = [e.name for e in spec.endpoints]
    if name not in names:
        raise UsageError(f"endpoint {name!r}: {spec.source} has endpoints {', '.join(names)}")
    return spec.endpoint(name)


def _candidates(layout: RunDir, statuses: Sequence[str], skip: set[tuple[str, int]]) -> Iterator[_Candidate]:
    """Stored answers with a status in ``statuses`` and not in ``skip``, with their cell and raw reply, part by
    part (memory: one part's selected replies)."""
    wanted = pa.array(list(statuses), type=pa.string())
    for pair in part_pairs(layout):
        if pair.answers is None:
            continue
        answers = read_part(pair.answers, ["cell_key", "question", "status", "parser_version"], "cell_key")
        chosen = answers.filter(pc.fill_null(pc.is_in(answers.column("status"), wanted), False))
        if not chosen.num_rows:
            continue
        have = part_columns(pair.responses)
        extra = [c for c in ("option_labels", "measurement") if c in have]
        responses = read_part(pair.responses, [*CELL_COLUMNS, *extra], "cell_key")
        responses = responses.filter(pc.is_in(responses.column("cell_key"), chosen.column("cell_key").unique()))
        # a verbalized cell's answer is a stated distribution: no single option for an extractor to restate
        rows = {r["cell_key"]: r for r in responses.to_pylist() if r.get("measurement") != "verbalized"}
        for key, question, status, version in zip(*chosen.to_pydict().values(), strict=True):
            if (key, question) in skip or key not in rows:
                continue
            r = rows[key]
            factors = tuple(tuple(v) if isinstance(v, list) else v for v in (r[c] for c in CELL_COLUMNS[2:]))
            cell = dataclasses.replace(_prompt_cell(factors), labels=r.get("option_labels") or "digits")
            yield _Candidate(key, question, status, version, cell, r["response_text"] or "")


def _done(layout: RunDir, endpoint: EndpointConfig, retry_failed: bool) -> set[tuple[str, int]]:
    """(cell_key, question) this extractor (endpoint name and model) already has a row for (failures only
    count when they are not to be retried)."""
    stored = stored_extractions(layout, ["cell_key", "question", "extractor_endpoint", "extractor_model", "status"])
    return {
        (key, question)
        for key, question, name, model, status in zip(*stored.to_pydict().values(), strict=True)
        if name == endpoint.name and model == endpoint.model and not (retry_failed and status == "failed")
    }


async def extract_answers_async(
    run_dir: str | Path,
    endpoint: EndpointConfig,
    *,
    statuses: Sequence[str] = DEFAULT_STATUSES,
    constraint: str = "none",
    retry_failed: bool = False,
    limit: int | None = None,
    max_tokens: int = 16,
    batch_rows: int = 50,
    seed: int = 0,
    transport_factory: TransportFactory = aiohttp_transport,
) -> ExtractResult:
    """Send one extractor request per stored answer whose status is in ``statuses`` and store the rows.

    ``endpoint``: where to send (temperature 0, ``seed``, ``max_tokens`` per request); ``constraint``: how the
    reply is held to a position or NONE (``grammar``/``choice``/``json_schema``: OpenAI-compatible servers
    only); ``limit``: at most this many requests (the rest stay for the next call). Raises ``UsageError`` on
    bad arguments and ``RunDirError`` for a directory that is not a run or is in use.
    """
    bad = sorted(set(statuses) - set(EXTRACTABLE_STATUSES))
    if bad or not statuses:
        raise UsageError(f"statuses: {', '.join(bad) or 'none given'}: must be among {', '.join(EXTRACTABLE_STATUSES)}")
    if constraint not in CONSTRAINTS:
        raise UsageError(f"constraint: {constraint!r} is not one of {', '.join(CONSTRAINTS)}")
    if constraint != "none" and endpoint.provider != "openai":
        raise UsageError(
            f"constraint {constraint!r}: only OpenAI-compatible endpoints take it; endpoint {endpoint.name!r} is "
            f"{endpoint.provider} (use --constraint none)"
        )
    for name, value in (("limit", limit), ("max_tokens", max_tokens), ("batch_rows", batch_rows)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{name}: {value!r} must be a positive integer")
    key = api_key_for(endpoint, "extractor endpoint")
    with RunWriter.attach(run_dir) as writer:
        if writer.manifest is None:
            raise RunDirError(f"{writer.run_dir}: not a hofcat run directory (no manifest.json)")
        update_answers(writer)  # parts a crash left unparsed: their statuses count too
        layout = writer.layout
        done = _done(layout, endpoint, retry_failed)
        work = _Work(writer, endpoint, key, constraint, max_tokens, batch_rows, seed, transport_factory)
        eligible = _candidates(layout, statuses, done)
        try:
            await work.run(eligible, limit)
        finally:
            work.commit()
            left = sum(1 for _ in eligible)  # what ``limit`` (or an interrupt) left unsent
            if work.sent:
                writer.manifest.setdefault("extractions", []).append(
                    {
                        "at": now_iso(),
                        "endpoint": endpoint.name,
                        "provider": endpoint.provider,
                        "model": endpoint.model,
                        "constraint": constraint,
                        "statuses": list(statuses),
                        "sent": work.sent,
                        "stored": dict(work.counts),
                        "left": left,
                        "parser_version": PARSER_VERSION,
                    }
                )
                writer.write_manifest()
        already = len(done)
        return ExtractResult(already + work.sent + left, already, work.sent, dict(work.counts), left)


class _Work:
    """One call's requests: the endpoint's provider, transport, limiter and retry policy; rows buffered and
    committed as parts of ``batch_rows``."""

    def __init__(
        self,
        writer: RunWriter,
        endpoint: EndpointConfig,
        key: str | None,
        constraint: str,
        max_tokens: int,
        batch_rows: int,
        seed: int,
        transport_factory: TransportFactory,
    ) -> None:
        self.writer, self.endpoint, self.key = writer, endpoint, key
        self.constraint, self.max_tokens, self.batch_rows, self.seed = constraint, max_tokens, batch_rows, seed
        self.transport_factory = transport_factory
        self.provider = provider_for(endpoint)
        self.policy = RetryPolicy.of(endpoint)
        self.rng = random.Random(seed)  # jitter of retry waits only
        self.rows: list[ExtractionRow] = []
        self.sent = 0
        self.counts: dict[str, int] = {}
        layout = writer.layout
        self.next_part = 1 + max((part_number(n) for n in layout.parts(DATASET)), default=0)

    async def run(self, candidates: Iterator[_Candidate], limit: int | None) -> None:
        """Send the candidates (at most ``limit``) with ``max_concurrency`` workers pulling from one iterator."""
        admissions = AdmissionLog.open(self.writer)
        config = self.endpoint
        limiter = RateLimiter.of(config, admissions=admissions)  # shares the windows with the sweep's sessions
        taken = 0

        def next_candidate() -> _Candidate | None:
            nonlocal taken
            if limit is not None and taken >= limit:
                return None
            found = next(candidates, None)
            taken += found is not None
            return found

        transport = self.transport_factory(config)
        try:

            async def worker() -> None:
                while (candidate := next_candidate()) is not None:
                    self.sent += 1
                    self._store(await self._ask(candidate, limiter, transport))

            workers = [asyncio.ensure_future(worker()) for _ in range(config.max_concurrency)]
            try:
                await asyncio.gather(*workers)
            finally:  # one worker's error (a corrupt part) or Ctrl-C stops the others; what came back is kept
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
        finally:
            await transport.close()
            admissions.close()

    async def _ask(self, candidate: _Candidate, limiter: RateLimiter, transport: Transport) -> ExtractionRow:
        """One extractor request with retries; its row (a ``failed`` row when the request failed for good)."""
        messages = extractor_messages(candidate.cell, candidate.question, candidate.reply)
        request = ChatRequest(self.endpoint.model, messages, self.seed, 0.0, 1.0, self.max_tokens)
        call = self.provider.call(self.endpoint.base_url.rstrip("/"), self.key, request)
        fields = constraint_fields(self.constraint, len(candidate.cell.option_order))
        if fields:  # merged over the body the provider built (and any extra_body), as sweep constraints are
            call = dataclasses.replace(call, body={**call.body, **fields}, data=None)
        charge = input_estimate(messages) + self.max_tokens
        started = now_us()

        async def attempt() -> Attempt[Reply]:
            ticket = (
                None
                if limiter.unlimited
                else await limiter.acquire(charge, asyncio.sleep, output_reserve=self.max_tokens)
            )
            reply = None
            try:
                result = await attempting(send(transport, self.provider, call))
                reply = result.value
                return result
            finally:
                limiter.release(ticket, *((reply.input_tokens, reply.output_tokens) if reply else ()))

        row = ExtractionRow(
            cell_key=candidate.cell_key,
            question=candidate.question,
            parse_status=candidate.parse_status,
            parser_version=candidate.parser_version,
            status="failed",
            option_id=None,
            displayed=None,
            extractor_endpoint=self.endpoint.name,
            extractor_provider=self.endpoint.provider,
            extractor_model=self.endpoint.model,
            served_model=None,
            constraint=self.constraint,
            extractor_text=None,
            finish_reason=None,
            input_tokens=None,
            output_tokens=None,
            attempts=1,
            http_status=None,
            error_class=None,
            error_message=None,
            started_at=started,
            finished_at=started,
        )
        tried = await call_with_retries(attempt, self.policy, sleep=asyncio.sleep, rng=self.rng)
        row.attempts, reply, error = tried.attempts, tried.last.value, tried.last.error
        if error is not None:
            row.http_status, row.error_class = error.status, type(error).__name__
            row.error_message = redact(str(error), [self.key])[:_MESSAGE_CHARS]
        else:
            row.status, row.option_id, row.displayed = read_extraction(reply.text, candidate.cell, candidate.question)
            row.extractor_text, row.finish_reason, row.served_model = (
                reply.text,
                reply.finish_reason,
                reply.served_model,
            )
            row.input_tokens, row.output_tokens, row.http_status = reply.input_tokens, reply.output_tokens, 200
        row.finished_at = now_us()
        return row

    def _store(self, row: ExtractionRow) -> None:
        self.rows.append(row)
        self.counts[row.status] = self.counts.get(row.status, 0) + 1
        if len(self.rows) >= self.batch_rows:
            self.commit()

    def commit(self) -> None:
        """Commit the buffered rows as the next extractions part (atomic; nothing when the buffer is empty)."""
        if not self.rows:
            return
        rows, self.rows = self.rows, []
        self.writer.layout.dataset(DATASET).mkdir(exist_ok=True)
        self.writer.commit(DATASET, part_id(self.next_part, self.writer.token), table(rows, ExtractionRow))
        self.next_part += 1


extract_answers = blocking(extract_answers_async)
