"""How a cell ended, and the stored row that records it: one at a time (``response_row``), or replies buffered as
columns and converted a batch at once into Arrow (``Replies``: built when the batch is committed, off the loop)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, cast

import numpy as np
import pyarrow as pa

from runner.errors import RequestError
from runner.rundir.schema import RESPONSE_SCHEMA, ResponseRow, table
from runner.sweep.plan import PlannedCell
from runner.sweep.providers import Reply, checked_count, encodable, finish_reason_of
from runner.sweep.spec import INT64_MAX

__all__ = ["Outcome", "Replies", "now_us", "response_row"]


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


class Replies:
    """Replies buffered as columns until their batch is committed (``RunWriter.buffer_replies``): the event loop
    appends each reply's values to one list per stored field (``add``, no object made per reply), the committing
    thread takes batches off the front (``take``) and converts each column in one call (``table``).

    A batch holding a reply the reply boundary would change (a warning, a lone surrogate, a token count out of
    range, log-probabilities) is built row by row through ``response_row`` instead (``rows``)."""

    __slots__ = (
        "attempts",
        "cache_origin",
        "cells",
        "endpoint",
        "finish",
        "finished_at",
        "http_status",
        "input_tokens",
        "key",
        "latency_s",
        "output_tokens",
        "prompt",
        "prompt_hashes",
        "replica",
        "replies",
        "sampling",
        "served_model",
        "shuffle_seed",
        "started_at",
        "system_fingerprint",
        "template_hash",
        "text",
        "top_logprobs",
        "warnings",
    )

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, [])

    def add(
        self,
        cell: PlannedCell,
        prompt_hash: str,
        reply: Reply,
        attempts: int,
        latency_s: float | None,
        http_status: int | None,
        started_at_us: int,
        finished_at_us: int,
    ) -> int:
        """Buffer ``reply`` to ``cell`` after ``attempts`` (``latency_s`` of the last; times in µs since the
        epoch); the number of replies buffered."""
        # One list append per field, read here by the interpreter's specialised attribute loads: reading them
        # in the committing thread, object by object, costs ~15× as much (attrgetter over each column).
        self.cells.append(cell)
        self.prompt_hashes.append(prompt_hash)
        self.replies.append(reply)
        self.attempts.append(attempts)
        self.latency_s.append(latency_s)
        self.http_status.append(http_status)
        self.started_at.append(started_at_us)
        self.finished_at.append(finished_at_us)
        self.key.append(cell.key)
        self.endpoint.append(cell.endpoint)
        self.prompt.append(cell.prompt)
        self.sampling.append(cell.sampling)
        self.template_hash.append(cell.template_hash)
        self.shuffle_seed.append(cell.shuffle_seed)
        self.text.append(reply.text)
        self.finish.append(reply.finish_reason)
        self.input_tokens.append(reply.input_tokens)
        self.output_tokens.append(reply.output_tokens)
        self.top_logprobs.append(reply.top_logprobs)
        self.warnings.append(reply.warnings)
        self.cache_origin.append(reply.cache_origin)
        self.replica.append(reply.replica)
        self.served_model.append(reply.served_model)
        self.system_fingerprint.append(reply.system_fingerprint)
        return len(self.cells)

    def __len__(self) -> int:
        return len(self.cells)

    def take(self, n: int) -> Replies:
        """The first ``n`` replies, removed from this buffer (the lists stay the same objects)."""
        taken = Replies.__new__(Replies)
        for name in self.__slots__:
            column = getattr(self, name)
            setattr(taken, name, column[:n])
            del column[:n]
        return taken

    def rows(self) -> list[ResponseRow]:
        """The replies' rows, one by one, as ``response_row`` builds them (``session`` unset)."""
        return [
            response_row(cell, prompt_hash, Outcome(reply, None, attempts, latency, status, started, finished))
            for cell, prompt_hash, reply, attempts, latency, status, started, finished in zip(
                self.cells,
                self.prompt_hashes,
                self.replies,
                self.attempts,
                self.latency_s,
                self.http_status,
                self.started_at,
                self.finished_at,
                strict=True,
            )
        ]

    def table(self, session: int | None) -> pa.Table:
        """The replies' rows (``response_row``'s, stamped with ``session``) as one table, built column by column;
        row by row (``rows``) when a reply is not plain (``_plain``). Raises what building an Arrow column raises
        on a value the store cannot hold.

        A batch repeats a few endpoints, prompts and samplings: each distinct one is converted once and its
        values are spread over its rows by index (``_spread``); a per-reply column holding one value throughout
        is converted once (``_array``)."""
        if not _plain(self.text, self.finish, self.input_tokens, self.output_tokens, self.top_logprobs, self.warnings):
            rows = self.rows()
            for row in rows:
                row.session = session
            return table(rows, ResponseRow)
        n = len(self.cells)
        columns: dict[str, Sequence[object] | pa.Array | pa.ChunkedArray] = {
            **_spread(self.endpoint, _endpoint_columns),
            **_spread(self.prompt, _prompt_columns),
            **_spread(self.sampling, _sampling_columns),
            "cell_key": self.key,
            "template_hash": self.template_hash,
            "prompt_hash": self.prompt_hashes,
            "shuffle_seed": self.shuffle_seed,
            "response_text": self.text,
            "finish_reason": self.finish,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_s": self.latency_s,
            "attempts": self.attempts,
            "http_status": self.http_status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "served_model": self.served_model,
            "system_fingerprint": self.system_fingerprint,
            "session": pa.repeat(pa.scalar(session, RESPONSE_SCHEMA.field("session").type), n),
            "cache_origin": self.cache_origin,
            "replica": self.replica,
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
    """``values`` as an Arrow array of ``arrow_type`` (already one: as it is). A list of one value throughout
    (equal to the first, as ``list.count`` compares: identity first, a C pass) is converted once and repeated."""
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values
    first = values[0] if len(values) > 1 and type(values) is list else None
    # Equal strings, and nulls, are one stored value; an equal int may be a bool (1 == True): ints only then. Not
    # floats: 0.0 == -0.0, and NaN is equal to itself only as one object.
    if (
        type(first) in _ONE_VALUE_TYPES
        and values.count(first) == len(values)
        and (type(first) is not int or len({*map(type, values)}) == 1)
    ):
        return pa.repeat(pa.scalar(first, type=arrow_type), len(values))
    return pa.array(values, type=arrow_type)


_ONE_VALUE_TYPES = (str, int, type(None))


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


# What ``Replies.table`` reads from each distinct endpoint, prompt, framing and sampling: one C call per object.
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
