"""runner.parse.answers: the answers table built per group of equal rows (``answers_table``) is the one a
row-by-row parse gives — each row's prompt cell rebuilt from its columns, its text parsed (letters read as
positions, provider blocks as refusals), one answer row per question — for mixed batches of every size, chunked
and sliced tables, and tables without the optional columns; rows group together exactly when equal."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from runner.parse.answers import CELL_COLUMNS, CURRENT, VERSION_KEY, _groups, answers_table
from runner.parse.blocks import blocked_result, is_provider_block
from runner.parse.option_labels import letters_as_positions
from runner.rundir.schema import AnswerRow, table
from runner.survey.cell import Framing, PromptCell
from runner.sweep.outcome import Replies
from runner.sweep.plan import iter_cells
from runner.sweep.providers import Reply
from runner.sweep.spec import parse_spec

SPECS = [
    """
[run]
name = "modes"
seed = 5
[[endpoints]]
name = "e"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[design]
mode = ["item", "survey"]
languages = ["en", "zh"]
personas = ["Germany"]
identities = { countries = ["Brazil"], genders = ["female"], ages = [30] }
shuffle_options = true
seeds = [1, 2]
""",
    """
[run]
name = "letters"
[[endpoints]]
name = "e"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[design]
mode = ["item"]
option_labels = ["digits", "letters"]
option_order = ["given", "reversed"]
seeds = [1]
""",
]
TEXTS = [
    "3",
    "B",
    "(c)",
    "A good question: D",
    "I'd say 2, maybe even 1",
    "",
    "I cannot answer that.",
    "我选择 4",
    "1. 3\n2. 4\n3. 2\n4. 5\n5. 1\n6. 3\n7. 3\n8. 2\n9. 4\n10. 1\n11. 2\n12. 3",
    '{"answer": 5}',
    "7",
]
FINISHES = ["stop", "stop", "length", None, "content_filter", "blocked:SAFETY"]


def _responses(size: int, seed: int) -> pa.Table:
    """A responses table of ``size`` replies to cells drawn at random from both designs, texts and finish
    reasons drawn from the lists above (some null): many equal rows, as a sweep's batch has."""
    rng = random.Random(seed)
    cells = [c for spec in SPECS for c in iter_cells(parse_spec(spec))]
    replies = Replies()
    for i in range(size):
        reply = Reply(rng.choice(TEXTS), rng.choice(FINISHES), None, None)
        replies.add(rng.choice(cells), f"{i:016x}", reply, 1, 0.1, 200, i, i + 1)
    responses = replies.table(1)
    texts = responses.column("response_text").to_pylist()
    texts[:: max(1, size // 7)] = [None] * len(texts[:: max(1, size // 7)])  # null texts parse as empty ones
    return responses.set_column(
        responses.column_names.index("response_text"), "response_text", pa.array(texts, pa.string())
    )


def _row_by_row(responses: pa.Table) -> pa.Table:
    """The reference: every row on its own, as the stage read parts before it grouped them."""
    names = responses.column_names
    rows = []
    for row in responses.to_pylist():
        cell = PromptCell(
            language=row["language"],
            mode=row["mode"],
            questions=tuple(row["questions"]),
            framing=Framing(row["framing"], row["country"], row["age"], row["gender"]),
            option_order=tuple(row["option_order"]),
            reply_format=row["reply_format"],
        )
        text = row["response_text"] or ""
        if "option_labels" in names and row["option_labels"] == "letters":
            text = letters_as_positions(text)
        if "finish_reason" in names and is_provider_block(row["finish_reason"]):
            answers = blocked_result(cell).answers
        else:
            answers = CURRENT.parse(text, cell).answers
        rows += [
            AnswerRow(
                cell_key=row["cell_key"],
                question=a.question,
                option_id=a.option_id,
                status=a.status,
                hedged=a.hedged,
                displayed=a.displayed,
                parser_version=CURRENT.version,
            )
            for a in answers
        ]
    return table(rows, AnswerRow, {VERSION_KEY: CURRENT.version})


@pytest.mark.parametrize("size", [1, 100, 1000])
def test_grouped_answers_equal_the_row_by_row_parse(size: int) -> None:
    responses = _responses(size, seed=size)
    bulk = answers_table(responses)
    expected = _row_by_row(responses)
    assert bulk.schema == expected.schema and bulk.schema.metadata == expected.schema.metadata
    assert bulk.equals(expected)
    if size > 1:  # the batch holds what the grouping has to tell apart
        statuses = set(bulk.column("status").to_pylist())
        assert {"ok", "refusal"} <= statuses and len(statuses) >= 3
        assert set(bulk.column("cell_key").to_pylist()) == set(responses.column("cell_key").to_pylist())
        assert bulk.num_rows > size  # survey rows give one answer row per question


def test_grouped_answers_of_a_chunked_sliced_table_equal_the_row_by_row_parse() -> None:
    responses = _responses(600, seed=7)
    chunked = pa.concat_tables([responses.slice(0, 250), responses.slice(250)]).slice(40, 500)
    assert chunked.column("questions").num_chunks == 2
    assert answers_table(chunked).equals(_row_by_row(chunked))


def test_grouped_answers_of_a_table_without_the_optional_columns_equal_the_row_by_row_parse() -> None:
    responses = _responses(300, seed=8).select(list(CELL_COLUMNS))  # an older part: text and factors only
    assert answers_table(responses).equals(_row_by_row(responses))


def test_an_empty_table_has_no_answers() -> None:
    empty = answers_table(_responses(5, seed=1).slice(0, 0))
    assert empty.num_rows == 0 and empty.schema.metadata == {VERSION_KEY.encode(): CURRENT.version.encode()}


def test_rows_group_together_exactly_when_every_column_is_equal() -> None:
    # lists of integers with null elements, null and empty lists, a sliced child; strings and ints with nulls
    # (88 rows of 4 columns of 2-5 values each: equal and unequal pairs of every kind)
    values = pa.array([9, 9, 1, 2, 1, 2, None, 2, 1, None, 1, 2, 1, 2], pa.int16()).slice(2)
    lists = pa.ListArray.from_arrays(pa.array([0, 2, 4, 6, 8, 10, 10, 10, 12], pa.int32()), values)
    lists = pa.concat_arrays([lists, pa.array([None, [], [1, 2]], pa.list_(pa.int16()))] * 8)
    rng = random.Random(4)
    n = len(lists)
    data = pa.table(
        {
            "q": lists,  # a null element: coded through the elements' text
            "o": pa.array([rng.choice([None, [], [1, 2], [2, 1], [1]]) for _ in range(n)], pa.list_(pa.int16())),
            "s": pa.array([rng.choice(["x", None]) for _ in range(n)]),
            "i": pa.array([rng.choice([1, None]) for _ in range(n)], pa.int16()),
        }
    )
    rows = [tuple(tuple(v) if isinstance(v, list) else v for v in r.values()) for r in data.to_pylist()]
    first, group = _groups(data, ["q", "o", "s", "i"])
    assert 11 < len(first) < n - 11  # many rows equal, many not
    for a in range(n):
        for b in range(n):
            assert (group[a] == group[b]) == (rows[a] == rows[b]), (a, b)
    assert sorted(first.tolist()) == sorted({r: i for i, r in reversed(list(enumerate(rows)))}.values())
