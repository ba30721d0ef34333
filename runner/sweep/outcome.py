"""How a cell ended, and the stored row that records it: one at a time (``response_row``), or a batch of replies
at once as Arrow columns (``Replied.table``, built when the batch is committed, off the event loop)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, NamedTuple, cast

import numpy as np
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
        count out of range, log-probabilities) is built row by row through ``response_row`` instead.

        A batch repeats a few endpoints, prompts and samplings: each distinct one is converted once and its
        values are spread over its rows by index (``_spread``); only the per-reply columns are converted value
        by value."""
        cells, hashes, outcomes = zip(*items, strict=True)
        key, endpoint, prompt, sampling, template, shuffle = _fields(cells, _CELL)
        reply, latency, attempts, status, started, finished = _fields(outcomes, _OUTCOME)
        replies = _fields(reply, _REPLY)
        text, finish, input_tokens, output_tokens, top, warnings, cache, replica, served, fingerprint = replies
        if not _plain(text, finish, input_tokens, output_tokens, top, warnings):
            rows = [response_row(*item) for item in items]
            for row in rows:
                row.session = session
            return table(rows, ResponseRow)
        n = len(items)
        columns: dict[str, Sequence[object] | pa.Array | pa.ChunkedArray] = {
            **_spread(endpoint, _endpoint_columns),
            **_spread(prompt, _prompt_columns),
            **_spread(sampling, _sampling_columns),
            "cell_key": key,
            "template_hash": template,
            "prompt_hash": hashes,
            "shuffle_seed": shuffle,
            "response_text": text,
            "finish_reason": finish,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "latency_s": latency,
            "attempts": attempts,
            "http_status": status,
            "started_at": started,
            "finished_at": finished,
            "served_model": served,
            "system_fingerprint": fingerprint,
            "session": pa.repeat(pa.scalar(session, RESPONSE_SCHEMA.field("session").type), n),
            "cache_origin": cache,
            "replica": replica,
        }
        columns.update(zip(_NULLS.names, pa.nulls(n, _NULLS).flatten(), strict=True))  # one call, not six
        arrays = [_array(columns[f.name], f.type) for f in RESPONSE_SCHEMA]
        return pa.Table.from_arrays(arrays, schema=RESPONSE_SCHEMA)


# What a plain reply stores as null whatever it holds (``_plain``: no error, no log-probabilities, no warnings).
_NULLS = pa.struct(
    [
        RESPONSE_SCHEMA.field(name)
        for name in ("error_class", "error_message", "top_logprobs", "reply_warnings", "batch_id", "logprobs_sampled")
    ]
)


def _array(
    values: Sequence[object] | pa.Array | pa.ChunkedArray, arrow_type: pa.DataType
) -> pa.Array | pa.ChunkedArray:
    """``values`` as an Arrow array of ``arrow_type`` (already one: as it is)."""
    return values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, type=arrow_type)


def _spread(
    objects: Sequence[object], columns_of: Callable[[list[Any]], dict[str, Sequence[object]]]
) -> dict[str, pa.Array]:
    """The columns ``columns_of`` gives for ``objects``, one row per object: each distinct object (by identity;
    all of them are alive, so no two share an id) is converted once, then taken into place by index."""
    ids = np.fromiter(map(id, objects), np.uint64, len(objects))
    _, first, indices = np.unique(ids, return_index=True, return_inverse=True)
    columns = columns_of([objects[i] for i in first.tolist()])
    # one conversion and one take for all the columns (as a struct): each call costs ~5-20 µs whatever its size
    struct = pa.struct([RESPONSE_SCHEMA.field(name) for name in columns])
    distinct = pa.array(list(zip(*columns.values(), strict=True)), type=struct)
    return dict(zip(columns, distinct.take(indices).flatten(), strict=True))


def _endpoint_columns(endpoints: list[Any]) -> dict[str, Sequence[object]]:
    """The stored columns of distinct endpoints."""
    name, provider, model = zip(*map(_ENDPOINT, endpoints), strict=True)
    return {"endpoint": name, "provider": provider, "model": model}


def _prompt_columns(prompts: list[Any]) -> dict[str, Sequence[object]]:
    """The stored columns of distinct prompts (``response_row``'s: the single question in item mode only)."""
    language, mode, questions, option_order, reply_format, labels, framing = zip(*map(_PROMPT, prompts), strict=True)
    kind, country, age, gender = zip(*map(_FRAMING, framing), strict=True)
    return {
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
        "option_labels": labels,
    }


def _sampling_columns(samplings: list[Any]) -> dict[str, Sequence[object]]:
    """The stored columns of distinct samplings."""
    seed, temperature, top_p, max_tokens, constraint, measurement, draw = zip(*map(_SAMPLING, samplings), strict=True)
    return {
        "seed": seed,
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_tokens,
        "constraint": constraint,
        "measurement": measurement,
        "draw": draw,
    }


def _fields(objects: Sequence[object], getters: tuple[attrgetter[Any], ...]) -> list[list[Any]]:
    """Each getter's values over ``objects``, one list per getter: a C loop per field, and no tuple per object
    (which a single getter of all fields makes, and the cyclic GC then scans)."""
    return [list(map(getter, objects)) for getter in getters]


# The fields ``Replied.table`` reads from an item, in the order it unpacks them.
_CELL = tuple(map(attrgetter, ("key", "endpoint", "prompt", "sampling", "template_hash", "shuffle_seed")))
_OUTCOME = tuple(map(attrgetter, ("reply", "latency_s", "attempts", "http_status", "started_at_us", "finished_at_us")))
_REPLY = tuple(
    map(
        attrgetter,
        (
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
        ),
    )
)
# ... and from each distinct endpoint, prompt, framing and sampling: one C call per object.
_ENDPOINT = attrgetter("name", "provider", "model")
_PROMPT = attrgetter("language", "mode", "questions", "option_order", "reply_format", "labels", "framing")
_FRAMING = attrgetter("kind", "country", "age", "gender")
_SAMPLING = attrgetter("seed", "temperature", "top_p", "max_tokens", "constraint", "measurement", "draw")


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
    finish_types = {*map(type, finish)}  # a set of the types: one C pass instead of a generator per value
    if not {*map(type, text)} <= {str} or not finish_types <= {str, _NONE}:
        return False
    finishes = [f for f in finish if f is not None] if _NONE in finish_types else finish
    joined = "\x00".join(cast("list[str]", [*text, *finishes]))  # strings: checked
    if not joined.isascii():
        try:
            joined.encode()  # what ``encodable`` asks of each: a lone surrogate does not encode
        except UnicodeEncodeError:
            return False
    counts = [*input_tokens, *output_tokens]
    count_types = {*map(type, counts)}  # int, not bool or another subclass (``checked_count`` nulls those)
    if not count_types <= {int, _NONE}:
        return False
    if _NONE in count_types:
        counts = [n for n in counts if n is not None]
    return not counts or (min(cast("list[int]", counts)) >= 0 and max(cast("list[int]", counts)) <= INT64_MAX)


_NONE = type(None)
