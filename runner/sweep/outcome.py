"""How a cell ended, and the stored row that records it: one at a time (``response_row``), or a batch of replies
at once as Arrow columns (``Replied.table``, built when the batch is committed, off the event loop)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple, cast

import pyarrow as pa

from runner.errors import RequestError
from runner.rundir.schema import RESPONSE_SCHEMA, ResponseRow, table
from runner.sweep.plan import PlannedCell
from runner.sweep.providers import Reply, checked_count, encodable, finish_reason_of
from runner.sweep.spec import INT64_MAX

__all__ = ["Outcome", "Replied", "now_us", "response_row"]


@dataclass(slots=True)  # not frozen, never changed: one is made per cell, and a frozen __init__ costs ~3× a plain one
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


class Replied(NamedTuple):
    """A cell that got a reply, buffered as is (``RunWriter.add_lazy``): the event loop does no more per reply
    than make this tuple; its row is built with its batch's (``table``), in the flush thread."""

    cell: PlannedCell
    prompt_hash: str
    outcome: Outcome

    def row(self) -> ResponseRow:
        """The reply's row, as ``response_row`` builds it."""
        return response_row(self.cell, self.prompt_hash, self.outcome)

    @staticmethod
    def table(items: Sequence[Replied], session: int | None) -> pa.Table:
        """The rows of ``items`` (``response_row``'s, stamped with ``session``) as one table, built column by
        column; a batch holding a reply the reply boundary would change (a warning, a lone surrogate, a token
        count out of range, log-probabilities) is built row by row through ``response_row`` instead."""
        cells, hashes, outcomes = zip(*items, strict=True)
        key, endpoint, prompt, sampling, template, shuffle = zip(*map(_CELL, cells), strict=True)
        name, provider, model = zip(*map(_ENDPOINT, endpoint), strict=True)
        language, mode, questions, option_order, reply_format, labels, framing = zip(*map(_PROMPT, prompt), strict=True)
        kind, country, age, gender = zip(*map(_FRAMING, framing), strict=True)
        sampled = zip(*map(_SAMPLING, sampling), strict=True)
        seed, temperature, top_p, max_tokens, constraint, measurement, draw = sampled
        reply, latency, attempts, status, started, finished = zip(*map(_OUTCOME, outcomes), strict=True)
        replies = zip(*map(_REPLY, reply), strict=True)
        text, finish, input_tokens, output_tokens, top, warnings, cache, replica, served, fingerprint = replies
        if not _plain(text, finish, input_tokens, output_tokens, top, warnings):
            rows = [response_row(*item) for item in items]
            for row in rows:
                row.session = session
            return table(rows, ResponseRow)
        nulls = (None,) * len(items)
        columns = {
            "cell_key": key,
            "endpoint": name,
            "provider": provider,
            "model": model,
            "language": language,
            "mode": mode,
            "questions": questions,
            "question": [q[0] if m == "item" else None for q, m in zip(questions, mode, strict=True)],
            "framing": kind,
            "country": country,
            "age": age,
            "gender": gender,
            "option_order": option_order,
            "reply_format": reply_format,
            "template_hash": template,
            "prompt_hash": hashes,
            "shuffle_seed": shuffle,
            "seed": seed,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "constraint": constraint,
            "response_text": text,
            "finish_reason": finish,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "latency_s": latency,
            "attempts": attempts,
            "http_status": status,
            "error_class": nulls,
            "error_message": nulls,
            "started_at": started,
            "finished_at": finished,
            "measurement": measurement,
            "draw": draw,
            "top_logprobs": nulls,
            "option_labels": labels,
            "reply_warnings": nulls,
            "batch_id": nulls,
            "served_model": served,
            "system_fingerprint": fingerprint,
            "session": (session,) * len(items),
            "cache_origin": cache,
            "replica": replica,
            "logprobs_sampled": nulls,
        }
        arrays = [pa.array(columns[f.name], type=f.type) for f in RESPONSE_SCHEMA]
        return pa.Table.from_arrays(arrays, schema=RESPONSE_SCHEMA)


# One C call per item gives the fields ``Replied.table`` reads from it, in the order it unpacks them.
_CELL = attrgetter("key", "endpoint", "prompt", "sampling", "template_hash", "shuffle_seed")
_ENDPOINT = attrgetter("name", "provider", "model")
_PROMPT = attrgetter("language", "mode", "questions", "option_order", "reply_format", "labels", "framing")
_FRAMING = attrgetter("kind", "country", "age", "gender")
_SAMPLING = attrgetter("seed", "temperature", "top_p", "max_tokens", "constraint", "measurement", "draw")
_OUTCOME = attrgetter("reply", "latency_s", "attempts", "http_status", "started_at_us", "finished_at_us")
_REPLY = attrgetter(
    "text",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "top_logprobs",
    "warnings",
    "cache_origin",
    "replica",
    "served_model",
    "system_fingerprint",
)


def _plain(
    text: Sequence[object],
    finish: Sequence[object],
    input_tokens: Sequence[object],
    output_tokens: Sequence[object],
    top: Sequence[object],
    warnings: Sequence[tuple[str, ...]],
) -> bool:
    """Whether ``response_row`` would store every one of these replies' values as they are: no warnings, no
    log-probabilities, texts and finish reasons strings (or null finish reasons) without lone surrogates,
    token counts null or integers in [0, 2**63)."""
    if any(warnings) or top.count(None) != len(top):
        return False
    if not all(type(t) is str for t in text) or not all(f is None or type(f) is str for f in finish):
        return False
    joined = "\x00".join(cast("list[str]", [*text, *(f for f in finish if f is not None)]))  # strings: checked
    if not joined.isascii():
        try:
            joined.encode()  # what ``encodable`` asks of each: a lone surrogate does not encode
        except UnicodeEncodeError:
            return False
    return all(n is None or (type(n) is int and 0 <= n <= INT64_MAX) for n in (*input_tokens, *output_tokens))
