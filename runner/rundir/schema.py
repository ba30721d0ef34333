"""The rows of a run directory's datasets: one dataclass per row type, its Arrow schema derived from it.

Each field names its Arrow type in ``metadata["arrow"]``, and rows are built by keyword only, so a value
can never land in another column's place. (Not frozen: a frozen dataclass's ``__init__`` costs 3.5 µs more
per row, and the writer builds one per cell.) ``table(rows, Row)`` turns buffered rows into an Arrow table column
by column (no intermediate dicts).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

import pyarrow as pa

__all__ = [
    "ANSWER_SCHEMA",
    "EXTRACTION_SCHEMA",
    "PROMPT_SCHEMA",
    "RESPONSE_SCHEMA",
    "AnswerRow",
    "ExtractionRow",
    "PromptRow",
    "ResponseRow",
    "arrow_field",
    "schema_of",
    "table",
    "tables_without_pandas",
]

_TS = pa.timestamp("us", tz="UTC")


def arrow_field(arrow_type: pa.DataType) -> Any:
    """A row dataclass field stored as an Arrow column of ``arrow_type`` (how every row type here declares one)."""
    return field(metadata={"arrow": arrow_type})


def _optional(arrow_type: pa.DataType, default: Any = None) -> Any:
    """A column added after runs were stored: rows that do not set it store ``default``; old parts read null."""
    return field(default=default, metadata={"arrow": arrow_type})


# The distribution measurement's raw material: the first reply token's top-k alternatives, most likely first.
TOP_LOGPROBS_TYPE = pa.list_(pa.struct([("token", pa.string()), ("logprob", pa.float64())]))


@dataclass(slots=True, kw_only=True)
class ResponseRow:
    """One cell's outcome: its design factors, the request, the reply (or the error), timings.

    Rows with an error go to ``failures``, the others to ``responses``; both datasets share this schema.
    """

    cell_key: str = arrow_field(pa.string())
    endpoint: str = arrow_field(pa.string())
    provider: str = arrow_field(pa.string())
    model: str = arrow_field(pa.string())
    language: str = arrow_field(pa.string())
    mode: str = arrow_field(pa.string())
    questions: tuple[int, ...] = arrow_field(pa.list_(pa.int16()))
    question: int | None = arrow_field(pa.int16())  # the single question in item mode, null in survey mode
    framing: str = arrow_field(pa.string())
    country: str | None = arrow_field(pa.string())
    age: int | None = arrow_field(pa.int16())
    gender: str | None = arrow_field(pa.string())
    option_order: tuple[int, ...] = arrow_field(pa.list_(pa.int16()))
    reply_format: str = arrow_field(pa.string())
    template_hash: str = arrow_field(pa.string())
    prompt_hash: str = arrow_field(pa.string())
    shuffle_seed: int | None = arrow_field(pa.int64())
    seed: int | None = arrow_field(pa.int64())
    temperature: float = arrow_field(pa.float64())
    top_p: float = arrow_field(pa.float64())
    max_tokens: int = arrow_field(pa.int32())
    constraint: str = arrow_field(pa.string())  # constrained decoding: none, grammar, json_schema
    response_text: str | None = arrow_field(pa.string())
    finish_reason: str | None = arrow_field(pa.string())
    input_tokens: int | None = arrow_field(pa.int64())
    output_tokens: int | None = arrow_field(pa.int64())
    latency_s: float | None = arrow_field(pa.float64())
    attempts: int = arrow_field(pa.int32())
    http_status: int | None = arrow_field(pa.int16())
    error_class: str | None = arrow_field(pa.string())
    error_message: str | None = arrow_field(pa.string())
    started_at: int = arrow_field(_TS)  # µs since the Unix epoch
    finished_at: int = arrow_field(_TS)
    measurement: str = _optional(pa.string(), "sample")  # sample | distribution (null in older parts: sample)
    draw: int | None = _optional(pa.int16())  # K-sample fallback of a distribution cell: which reply (0-based)
    top_logprobs: tuple[tuple[str, float], ...] | None = _optional(TOP_LOGPROBS_TYPE)  # (token, logprob) pairs
    option_labels: str = _optional(pa.string(), "digits")  # digits | letters | words (null in older parts: digits)
    # what the reply boundary changed or dropped ("; "-joined, e.g. an int finish_reason nulled); null: nothing
    reply_warnings: str | None = _optional(pa.string())
    batch_id: str | None = _optional(pa.string())  # the provider batch that answered (execution = "batch")
    served_model: str | None = _optional(pa.string())  # the model the server says answered (its snapshot)
    system_fingerprint: str | None = _optional(pa.string())  # OpenAI's backend configuration fingerprint
    session: int | None = _optional(pa.int32())  # the sweep session that stored the row (manifest sessions, 1-based)
    # a reply served from the shared response cache: JSON {run_id, run_name, session, time} of the run that
    # stored it ([run] cache); null: sent to the endpoint
    cache_origin: str | None = _optional(pa.string())
    replica: str | None = _optional(pa.string())  # base URL of the replica that answered (base_urls); null: one server
    # top_logprobs are the server's probabilities after its samplers (llama.cpp post_sampling_probs: at the request's
    # temperature, after its grammar); null or false: the model's raw log-probabilities (temperature 1)
    logprobs_sampled: bool | None = _optional(pa.bool_())


@dataclass(slots=True, kw_only=True)
class AnswerRow:
    """The parser's reading of one question of one stored reply."""

    cell_key: str = arrow_field(pa.string())
    question: int = arrow_field(pa.int16())
    option_id: int | None = arrow_field(pa.int16())  # 1-5, null unless status is "ok"
    status: str = arrow_field(pa.string())  # ok | refusal | no_answer | ambiguous | out_of_range | invalid_format
    hedged: bool = arrow_field(pa.bool_())
    displayed: int | None = arrow_field(pa.int16())  # position (1-5) the chosen option had in the prompt
    parser_version: str = arrow_field(pa.string())
    # distribution measurement: P(option 1..5) drawn, renormalised over the listed options (an unlisted one null),
    # the listed option tokens' mass before that, and (status partial) the most an unlisted option can hold
    option_probs: tuple[float | None, ...] | None = _optional(pa.list_(pa.float64()))
    option_mass: float | None = _optional(pa.float64())
    option_bound: float | None = _optional(pa.float64())
    # verbalized measurement: the stated probabilities' sum before renormalising (runner/parse/verbalized.py)
    stated_sum: float | None = _optional(pa.float64())


@dataclass(slots=True, kw_only=True)
class PromptRow:
    """The exact messages of one prompt, stored once per run."""

    prompt_hash: str = arrow_field(pa.string())  # 16 hex digits of SHA-256 of messages_json
    messages_json: str = arrow_field(pa.string())


def schema_of(row_type: type) -> pa.Schema:
    """The Arrow schema of a row dataclass, fields in declaration order."""
    return pa.schema([(f.name, f.metadata["arrow"]) for f in fields(row_type)])


RESPONSE_SCHEMA = schema_of(ResponseRow)
ANSWER_SCHEMA = schema_of(AnswerRow)
PROMPT_SCHEMA = schema_of(PromptRow)
_SCHEMAS = {ResponseRow: RESPONSE_SCHEMA, AnswerRow: ANSWER_SCHEMA, PromptRow: PROMPT_SCHEMA}


class _NoPandas:
    """A meta-path finder that refuses ``pandas`` (installed in ``sys.meta_path`` for one call only)."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        """Refuse ``pandas``; leave every other module to the finders after this one."""
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not imported by this process", name=name)


def tables_without_pandas() -> None:
    """Keep pyarrow from importing pandas in this process while it builds typed arrays (``table``).

    pyarrow's first ``pa.array`` (and its first type inference, as in ``pc.equal(column, "text")``) imports
    pandas (~0.3 s of CPU and ~15 MB, paid by every ``hofcat run``) only to ask whether its input is a pandas
    object or a pandas null; hofcat never hands it one. Refused once, pyarrow records "no pandas" and does not
    ask again, while an explicit ``to_pandas`` / ``from_pandas`` still imports it and round-trips as before (only
    ``pd.NA`` inside an object column would no longer read as null). For a process that passes no pandas objects
    to pyarrow (the ``run`` command, not a library user's notebook); a no-op where pandas is already imported.
    """
    if "pandas" in sys.modules:
        return
    # pyarrow's probe swallows a KeyboardInterrupt raised inside it (measured): a SIGINT during the probe is only
    # noted, and raised again once the probe is done, so a Ctrl-C at this moment still stops the run.
    main = threading.current_thread() is threading.main_thread()
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.append(signum)) if main else None
    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.array([0.0])  # no type given: both of pyarrow's pandas checks (the array-like one, the inference one)
    finally:
        sys.meta_path.remove(_NoPandas)
        if main:
            signal.signal(signal.SIGINT, previous)
    if interrupted:
        signal.raise_signal(signal.SIGINT)


def table(rows: Sequence[Any], row_type: type, metadata: dict[str, str] | None = None) -> pa.Table:
    """``rows`` (instances of ``row_type``) as an Arrow table with the row type's schema and ``metadata``."""
    schema = _SCHEMAS.get(row_type) or schema_of(row_type)
    if metadata:
        schema = schema.with_metadata(metadata)
    values = attrgetter(*schema.names)  # one C call per row gives all its fields, in schema order
    columns = zip(*map(values, rows), strict=True) if rows else [()] * len(schema)
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema)


@dataclass(slots=True, kw_only=True)
class ExtractionRow:
    """One extractor request about one question of one stored reply, and what came of it (``extractions/``)."""

    cell_key: str = arrow_field(pa.string())
    question: int = arrow_field(pa.int16())
    parse_status: str = arrow_field(pa.string())  # the parser's status it was asked about (ambiguous, ...)
    parser_version: str = arrow_field(pa.string())  # the parser that gave that status
    status: str = arrow_field(pa.string())  # extracted | none | unreadable | failed
    option_id: int | None = arrow_field(pa.int16())  # 1-5 when extracted
    displayed: int | None = arrow_field(pa.int16())  # the position the extractor named
    extractor_endpoint: str = arrow_field(pa.string())
    extractor_provider: str = arrow_field(pa.string())
    extractor_model: str = arrow_field(pa.string())  # the model requested
    served_model: str | None = arrow_field(pa.string())  # the model the server says answered
    constraint: str = arrow_field(pa.string())  # none | grammar | json_schema | choice
    extractor_text: str | None = arrow_field(pa.string())  # the extractor's raw reply (null when it failed)
    finish_reason: str | None = arrow_field(pa.string())
    input_tokens: int | None = arrow_field(pa.int64())
    output_tokens: int | None = arrow_field(pa.int64())
    attempts: int = arrow_field(pa.int32())
    http_status: int | None = arrow_field(pa.int16())
    error_class: str | None = arrow_field(pa.string())
    error_message: str | None = arrow_field(pa.string())  # redacted, at most 500 characters
    started_at: int = arrow_field(_TS)
    finished_at: int = arrow_field(_TS)


EXTRACTION_SCHEMA = schema_of(ExtractionRow)
_SCHEMAS[ExtractionRow] = EXTRACTION_SCHEMA
