"""How a cell ended, and the stored row that records it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from runner.errors import RequestError
from runner.rundir.schema import ResponseRow
from runner.sweep.plan import PlannedCell
from runner.sweep.providers import Reply

__all__ = ["Outcome", "now_us", "response_row"]


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


def response_row(cell: PlannedCell, prompt_hash: str, outcome: Outcome) -> ResponseRow:
    """The row that stores ``outcome`` of ``cell`` (a failure row when it carries an error)."""
    p, s, r, e = cell.prompt, cell.sampling, outcome.reply, outcome.error
    return ResponseRow(
        cell_key=cell.key,
        endpoint=cell.endpoint.name,
        provider=cell.endpoint.provider,
        model=cell.endpoint.model,
        language=p.language,
        mode=p.mode,
        questions=p.questions,
        question=p.questions[0] if p.mode == "item" else None,
        framing=p.framing.kind,
        country=p.framing.country,
        age=p.framing.age,
        gender=p.framing.gender,
        option_order=p.option_order,
        reply_format=p.reply_format,
        template_hash=cell.template_hash,
        prompt_hash=prompt_hash,
        shuffle_seed=cell.shuffle_seed,
        seed=s.seed,
        temperature=s.temperature,
        top_p=s.top_p,
        max_tokens=s.max_tokens,
        constraint=s.constraint,
        response_text=None if r is None else r.text,
        finish_reason=None if r is None else r.finish_reason,
        input_tokens=None if r is None else r.input_tokens,
        output_tokens=None if r is None else r.output_tokens,
        latency_s=outcome.latency_s,
        attempts=outcome.attempts,
        http_status=outcome.http_status,
        error_class=None if e is None else type(e).__name__,
        error_message=None if e is None else str(e),
        started_at=outcome.started_at_us,
        finished_at=outcome.finished_at_us,
    )


def now_us() -> int:
    """Microseconds since the Unix epoch (the stored timestamps' unit)."""
    return time.time_ns() // 1000
