"""runner.sweep.outcome: a batch of replies built at once as Arrow columns (``Replied.table``, what the executor's
flush commits) is the table of the rows ``response_row`` builds one by one, for plain replies and for every
kind of reply the reply boundary changes; a value the store cannot hold still reaches the writer's bisection."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.rundir import RunWriter, read_dataset
from runner.rundir.schema import ResponseRow, table
from runner.sweep.outcome import Outcome, Replied
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


def _items(replies: list[Reply]) -> list[Replied]:
    cells = _cells(len(replies))
    return [
        Replied(cell, f"{i:016x}", Outcome(reply, None, 1 + i % 3, 0.25 * i, 200, 10 * i, 10 * i + 7))
        for i, (cell, reply) in enumerate(zip(cells, replies, strict=True))
    ]


def _row_by_row(items: list[Replied], session: int | None) -> object:
    rows = [item.row() for item in items]
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
    bulk = Replied.table(items, 4)
    assert bulk.equals(_row_by_row(items, 4))
    assert bulk.num_rows == size
    assert set(bulk.column("mode").to_pylist()) == ({"item"} if size == 1 else {"item", "survey"})
    assert bulk.column("session").to_pylist() == [4] * size


@pytest.mark.parametrize("odd", ODD, ids=range(len(ODD)))
def test_bulk_table_of_a_batch_with_an_odd_reply_equals_the_rows_built_one_by_one(odd: Reply) -> None:
    items = _items([*PLAIN, odd, *PLAIN])
    bulk = Replied.table(items, None)
    assert bulk.equals(_row_by_row(items, None))
    warnings = bulk.column("reply_warnings").to_pylist()
    assert warnings[len(PLAIN)] is not None or odd.text is None  # the boundary said what it changed
    assert all(w is None for i, w in enumerate(warnings) if i != len(PLAIN))


def test_writer_commits_lazy_replies_and_bisects_an_unstorable_one(tmp_path: Path) -> None:
    spec = parse_spec(SPEC)
    good = _items([PLAIN[i % len(PLAIN)] for i in range(40)])
    bad_cell = good[5].cell
    # a latency the float64 column cannot take: the bulk build fails, the bisection finds this row alone
    bad = Replied(bad_cell, good[5].prompt_hash, Outcome(PLAIN[0], None, 1, "slow", 200, 1, 2))  # type: ignore[arg-type]
    items = [*good[:5], bad, *good[6:]]
    from runner.sweep.session import build_manifest

    with RunWriter.open_run(tmp_path / "run", build_manifest(spec), batch_rows=100) as writer:
        writer.session = 1
        for item in items:
            writer.add_lazy(item)
        assert writer.buffered == 40
        batch = writer.take()
        assert batch is not None and len(batch) == 40 and writer.buffered == 0
        committed = writer.commit_batch(batch)
    assert [row.cell_key for row in committed.unstorable] == [bad_cell.key]
    assert committed.unstorable[0].error_class == "store_error"
    assert "latency_s" in committed.unstorable[0].error_message
    stored = read_dataset(tmp_path / "run", "responses", ["cell_key", "session"])
    assert sorted(stored.column("cell_key").to_pylist()) == sorted(i.cell.key for i in items if i is not bad)
    assert set(stored.column("session").to_pylist()) == {1}
    failures = read_dataset(tmp_path / "run", "failures", ["cell_key"])
    assert failures.column("cell_key").to_pylist() == [bad_cell.key]
