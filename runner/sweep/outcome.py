"""How a cell ended, and the stored row that records it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from runner.errors import RequestError
from runner.rundir.schema import ResponseRow
from runner.sweep.plan import PlannedCell
from runner.sweep.providers import Reply, checked_count, encodable, finish_reason_of

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
    """The row that stores ``outcome`` of ``cell`` (a failure row when it carries an error).

    The last gate before the store: every value taken from a reply or an error fits its column (text made
    encodable, impossible token counts null), and what was changed is listed in ``reply_warnings``.
    """
    p, s, r, e = cell.prompt, cell.sampling, outcome.reply, outcome.error
    warnings = [] if r is None else list(r.warnings)
    text = finish = input_tokens = output_tokens = top = message = None
    if r is not None:
        text = encodable(r.text, "response_text", warnings) if isinstance(r.text, str) else None
        finish = finish_reason_of(r.finish_reason, warnings)
        input_tokens = checked_count(r.input_tokens, "input_tokens", warnings)
        output_tokens = checked_count(r.output_tokens, "output_tokens", warnings)
        top = r.top_logprobs and tuple((encodable(t, "top_logprobs", warnings), lp) for t, lp in r.top_logprobs)
    if e is not None:
        message = encodable(str(e), "error_message", warnings)
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
        response_text=text,
        finish_reason=finish,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        latency_s=outcome.latency_s,
        attempts=outcome.attempts,
        http_status=outcome.http_status,
        error_class=None if e is None else type(e).__name__,
        error_message=message,
        started_at=outcome.started_at_us,
        finished_at=outcome.finished_at_us,
        measurement=s.measurement,
        draw=s.draw,
        top_logprobs=top,
        logprobs_sampled=None if r is None or top is None else r.logprobs_sampled,
        option_labels=p.labels,
        reply_warnings="; ".join(dict.fromkeys(warnings)) or None,
        cache_origin=None if r is None else r.cache_origin,
        replica=None if r is None else r.replica,
        served_model=None if r is None else r.served_model,
        system_fingerprint=None if r is None else r.system_fingerprint,
    )


def now_us() -> int:
    """Microseconds since the Unix epoch (the stored timestamps' unit)."""
    return time.time_ns() // 1000
