"""The parser benchmark runs (once, as a test: pytest-benchmark is disabled by default) and checks first."""

from __future__ import annotations

import pytest

from benches import parse_bench
from runner.parse import parse_reply


def test_bench_checks_correctness_before_timing():
    rows = parse_bench.load()
    parse_bench.check(rows)  # the whole corpus parses as expected
    text, cell, expected = rows[0]
    wrong = [[expected[0][0], 5 if expected[0][1] != 5 else 4, "ok", False]]
    with pytest.raises(AssertionError):
        parse_bench.check([(text, cell, wrong)])


def test_bench_reports_rates_and_the_peer_ratio(capsys):
    result = parse_bench.main(["--seconds", "0.01"])
    assert set(result) == {
        "item_replies_per_s",
        "terse_item_replies_per_s",
        "survey_replies_per_s",
        "naive_item_replies_per_s",
        "naive_over_parser",
    }
    assert all(value > 0 for value in result.values())
    assert "naive regex" in capsys.readouterr().out


def test_parse_corpus_items(benchmark):
    items = [row for row in parse_bench.load() if row[1].mode == "item"]
    answers = benchmark(lambda: [parse_reply(text, cell).answers[0].option_id for text, cell, _ in items])
    assert answers == [expected[0][1] for _, _, expected in items]
