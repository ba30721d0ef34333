"""runner.sweep.outcome: replies buffered as columns and built at once into Arrow (``Replies.table``, what the
executor's flush commits) are the table of the rows ``response_row`` builds one by one, for plain replies and for
every kind of reply the reply boundary changes; a value the store cannot hold still reaches the writer's
bisection; batches taken off the buffer's front hold the replies in the order they came."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.rundir import RunWriter, read_dataset
from runner.rundir.schema import ResponseRow, table
from runner.sweep.outcome import Outcome, Replies, response_row
from runner.sweep.plan import iter_cells
from runner.sweep.providers import Reply
from runner.sweep.spec import parse_spec

SPEC = """
[run]
name = "outcome"
seed = 7

[[endpoints]]
name = "e"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"

[design]
mode = ["item", "survey"]
languages = ["en", "zh"]
personas = ["Germany", "Japan"]
identities = { countries = ["Brazil"], genders = ["female", "male"], ages = [25, 65] }
shuffle_options = true
seeds = [1, 2, 3]
temperature = [0.0, 0.7]
"""


def _cells(n: int) -> list:
    """``n`` cells spread over the plan (both modes, every framing), the first among them."""
    cells = list(iter_cells(parse_spec(SPEC)))
    assert len(cells) >= 1000
    return [cells[i * len(cells) // n] for i in range(n)]


Item = tuple  # (cell, prompt hash, Outcome): what one reply's row is built from


def _items(replies: list[Reply]) -> list[Item]:
    cells = _cells(len(replies))
    return [
        (cell, f"{i:016x}", Outcome(reply, None, 1 + i % 3, 0.25 * i, 200, 10 * i, 10 * i + 7))
        for i, (cell, reply) in enumerate(zip(cells, replies, strict=True))
    ]


def _buffer(items: list[Item]) -> Replies:
    """The items added to a new buffer, in order, as the executor adds replies."""
    replies = Replies()
    for cell, prompt_hash, o in items:
        times = (o.started_at_us, o.finished_at_us)
        replies.add(cell, prompt_hash, o.reply, o.attempts, o.latency_s, o.http_status, *times)
    return replies


def _row_by_row(items: list[Item], session: int | None) -> object:
    """The reference: ``response_row`` of each item, on its own."""
    rows = [response_row(*item) for item in items]
    for row in rows:
        row.session = session
    return table(rows, ResponseRow)


PLAIN = [
    Reply("3", "stop", 12, 1, served_model="m-2024", system_fingerprint="fp"),
    Reply("日本語の回答 é", None, None, None, cache_origin='{"run_id": "r"}', replica="http://127.0.0.1:1/v1"),
    Reply("", "length", 0, 2**63 - 1),
]
ODD = [
    Reply("\ud800 lone surrogate", "stop", 1, 1),  # replaced by U+FFFD, warned
    Reply("3", 7, 1, 1),  # type: ignore[arg-type]  # a finish reason that is not a string: null, warned
    Reply("3", "stop", -1, True),  # type: ignore[arg-type]  # impossible token counts: null, warned
    Reply("3", "stop", 1, 2**63),  # past int64: null, warned
    Reply(None, "stop", 1, 1),  # type: ignore[arg-type]  # no text
    Reply("3", "stop", 1, 1, warnings=("message content is null; stored as empty text",)),
    Reply("3", "stop", 1, 1, top_logprobs=(("3", -0.1), ("\ud800", -2.0)), logprobs_sampled=True),
    Reply("3", "stop\udc00", 1, 1),
]


@pytest.mark.parametrize("size", [1, 100, 1000])
def test_bulk_table_of_plain_replies_equals_the_rows_built_one_by_one(size: int) -> None:
    items = _items([PLAIN[i % len(PLAIN)] for i in range(size)])
    bulk = _buffer(items).table(4)
    assert bulk.equals(_row_by_row(items, 4))
    assert bulk.num_rows == size
    assert set(bulk.column("mode").to_pylist()) == ({"item"} if size == 1 else {"item", "survey"})
    assert bulk.column("session").to_pylist() == [4] * size


@pytest.mark.parametrize("odd", ODD, ids=range(len(ODD)))
def test_bulk_table_of_a_batch_with_an_odd_reply_equals_the_rows_built_one_by_one(odd: Reply) -> None:
    items = _items([*PLAIN, odd, *PLAIN])
    bulk = _buffer(items).table(None)
    assert bulk.equals(_row_by_row(items, None))
    warnings = bulk.column("reply_warnings").to_pylist()
    assert warnings[len(PLAIN)] is not None or odd.text is None  # the boundary said what it changed
    assert all(w is None for i, w in enumerate(warnings) if i != len(PLAIN))


def test_writer_commits_lazy_replies_and_bisects_an_unstorable_one(tmp_path: Path) -> None:
    spec = parse_spec(SPEC)
    good = _items([PLAIN[i % len(PLAIN)] for i in range(40)])
    bad_cell = good[5][0]
    # a latency the float64 column cannot take: the bulk build fails, the bisection finds this row alone
    bad = (bad_cell, good[5][1], Outcome(PLAIN[0], None, 1, "slow", 200, 1, 2))
    items = [*good[:5], bad, *good[6:]]
    from runner.sweep.session import build_manifest

    with RunWriter.open_run(tmp_path / "run", build_manifest(spec), batch_rows=100) as writer:
        writer.session = 1
        writer.buffer_replies(_buffer(items))
        assert writer.buffered == 40
        batch = writer.take()
        assert batch is not None and len(batch) == 40 and writer.buffered == 0
        committed = writer.commit_batch(batch)
    assert [row.cell_key for row in committed.unstorable] == [bad_cell.key]
    assert committed.unstorable[0].error_class == "store_error"
    assert "latency_s" in committed.unstorable[0].error_message
    stored = read_dataset(tmp_path / "run", "responses", ["cell_key", "session"])
    assert sorted(stored.column("cell_key").to_pylist()) == sorted(i[0].key for i in items if i is not bad)
    assert set(stored.column("session").to_pylist()) == {1}
    failures = read_dataset(tmp_path / "run", "failures", ["cell_key"])
    assert failures.column("cell_key").to_pylist() == [bad_cell.key]


# Two specs whose cells mix in one batch: two endpoints (two providers), both modes, personas and identities (null
# and set age / gender / country), shuffled orders (a shuffle seed per cell), letter labels, sampling grids.
MIXED = """
[run]
name = "mixed"
seed = 11

[[endpoints]]
name = "a"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m-a"

[[endpoints]]
name = "b"
provider = "anthropic"
base_url = "http://127.0.0.1:9/v1"
model = "m-b"

[design]
mode = ["item", "survey"]
languages = ["en", "zh"]
personas = ["Germany", "Japan"]
identities = { countries = ["Brazil"], genders = ["female", "male"], ages = [25, 65] }
shuffle_options = true
seeds = [1, 2]
temperature = [0.0, 0.7]
"""
LETTERS = """
[run]
name = "letters"

[[endpoints]]
name = "c"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m-c"

[design]
mode = ["item"]
option_labels = ["digits", "letters"]
option_order = ["given", "reversed"]
seeds = [5]
temperature = [1.0]
top_p = [0.9, 1.0]
max_tokens = 64
"""
TEXTS = ["3", "Ich wähle 2.", "我选择 4", "", "B", "(c) because…", "1\n2\n3\n4\n5", "نعم 5", "maybe 2, or 1"]


def _mixed_items(size: int, seed: int) -> list[Item]:
    """``size`` plain replies to cells drawn at random (with repeats, out of plan order) from both specs, a
    few of them made again with equal but distinct prompt and sampling objects; texts, finish reasons, token
    counts, statuses and markers vary, some null."""
    import dataclasses
    import random

    rng = random.Random(seed)
    pool = [*iter_cells(parse_spec(MIXED)), *iter_cells(parse_spec(LETTERS))]
    items = []
    for i in range(size):
        cell = rng.choice(pool)
        if rng.random() < 0.1:  # the same values in other objects: spread by identity, stored by value
            prompt = dataclasses.replace(cell.prompt)
            cell = dataclasses.replace(cell, prompt=prompt, sampling=dataclasses.replace(cell.sampling))
        reply = Reply(
            rng.choice(TEXTS),
            rng.choice(["stop", "length", None, "content_filter"]),
            rng.choice([None, 0, 17, 2**63 - 1]),
            rng.choice([None, 1, 5]),
            cache_origin=rng.choice([None, '{"run_id": "r", "run_name": "ünï"}']),
            replica=rng.choice([None, "http://127.0.0.1:2/v1"]),
            served_model=rng.choice([None, "m-a-2024", "模型"]),
            system_fingerprint=rng.choice([None, "fp_1"]),
        )
        latency = rng.choice([None, 0.5 * i])
        status = rng.choice([None, 200])
        items.append((cell, f"{rng.getrandbits(64):016x}", Outcome(reply, None, 1 + i % 4, latency, status, i, i + 3)))
    return items


@pytest.mark.parametrize("size", [1, 100, 1000])
def test_bulk_table_of_a_batch_mixing_endpoints_prompts_and_samplings_equals_the_rows_built_one_by_one(
    size: int,
) -> None:
    items = _mixed_items(size, seed=size)
    bulk = _buffer(items).table(2)
    expected = _row_by_row(items, 2)
    assert bulk.schema == expected.schema
    assert bulk.equals(expected)
    assert bulk.to_pylist() == expected.to_pylist()  # value for value, as Python reads them back
    if size > 1:  # the batch mixes what the bulk build converts once per distinct object
        for column in ("endpoint", "mode", "option_labels", "age", "temperature", "top_p", "response_text"):
            assert len(set(bulk.column(column).to_pylist())) > 1, column


def test_bulk_table_of_one_object_repeated_at_every_row_equals_the_rows_built_one_by_one() -> None:
    (item,) = _mixed_items(1, seed=3)
    items = [item] * 300
    assert _buffer(items).table(None).equals(_row_by_row(items, None))


def test_committed_bulk_replies_read_back_as_the_rows_built_one_by_one(tmp_path: Path) -> None:
    import polars as pl

    from runner.rundir.layout import RunDir
    from runner.rundir.reader import read_part
    from runner.sweep.session import build_manifest

    items = _mixed_items(1000, seed=9)
    with RunWriter.open_run(tmp_path / "run", build_manifest(parse_spec(SPEC)), batch_rows=1000) as writer:
        writer.session = 1
        writer.buffer_replies(_buffer(items))
        batch = writer.take()
        assert batch is not None
        committed = writer.commit_batch(batch)
    assert committed.unstorable == ()
    expected = _row_by_row(items, 1)
    (part,) = RunDir(tmp_path / "run").parts("responses")
    path = RunDir(tmp_path / "run").part("responses", part)
    stored = read_part(path, key_column="cell_key")  # the part itself: the random draw repeats cells
    assert stored.select(expected.column_names).equals(expected)
    # any Parquet reader reads the part as pyarrow does (the analysis reads parts with polars)
    assert pl.read_parquet(path).select(["cell_key", "response_text", "age", "questions"]).to_dicts() == (
        expected.select(["cell_key", "response_text", "age", "questions"]).to_pylist()
    )


@pytest.mark.parametrize("batch_rows", [1, 7, 100])
def test_batches_taken_off_the_buffer_hold_the_replies_in_order_and_leave_the_rest(batch_rows: int) -> None:
    items = _mixed_items(250, seed=batch_rows)
    replies = _buffer(items)
    taken = []
    while len(replies):
        before = len(replies)
        batch = replies.take(batch_rows)
        assert len(batch) == min(batch_rows, before) and len(replies) == before - len(batch)
        taken.append(batch.table(3))
    import pyarrow as pa

    assert pa.concat_tables(taken).equals(_row_by_row(items, 3))
    assert len(taken) == -(-250 // batch_rows)
    # the buffer keeps its lists (the executor appends to them) and takes new replies after the old ones
    replies.add(items[0][0], "f" * 16, PLAIN[0], 1, 0.5, 200, 1, 2)
    assert len(replies) == 1 and replies.take(5).rows()[0].cell_key == items[0][0].key


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("attempts", [1, True, 1]),  # equal, not one value: bool is not stored as an int
        ("latency_s", [1.0, 1, 1.0]),  # equal across types
        ("latency_s", [0.0, -0.0, 0.0]),  # equal, two stored values
        ("response_text", ["3", "3", "3"]),
        ("served_model", [None, None, None]),
    ],
)
def test_a_column_of_one_value_is_stored_as_the_values_converted_one_by_one(column: str, values: list) -> None:
    import pyarrow as pa

    from runner.rundir.schema import RESPONSE_SCHEMA
    from runner.sweep.outcome import _array

    arrow_type = RESPONSE_SCHEMA.field(column).type
    try:
        expected = pa.array(values, type=arrow_type)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            _array(values, arrow_type)
        return
    got = _array(values, arrow_type)
    assert got.equals(expected)
    assert [str(v) for v in got.to_pylist()] == [str(v) for v in expected.to_pylist()]  # -0.0 stays -0.0
