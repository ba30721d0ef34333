"""The parse corpus: hand-written replies in en/zh/ar/sk and the published CAT v2 samples, each with the
parse a careful human reads in it (tests/data/parse_corpus/*.jsonl)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from runner.parse import parse_reply
from runner.survey.cell import PromptCell

CORPUS_DIR = Path(__file__).parent / "data" / "parse_corpus"
# CAT v2 Appendix I, copied verbatim into the repository (provenance: tests/data/papers/README.md).
PAPER = Path(__file__).parent / "data" / "papers" / "cat-paper-v2.appendix-i.txt"


def load_corpus() -> list[dict]:
    """Every corpus row, in file order."""
    rows = []
    for path in sorted(CORPUS_DIR.glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            rows.extend(json.loads(line) for line in handle if line.strip())
    return rows


def cell_of(row: dict) -> PromptCell:
    """The cell a corpus row's reply answered."""
    return PromptCell(
        row["language"],
        row["mode"],
        tuple(row["questions"]),
        option_order=tuple(row["option_order"]),
        reply_format=row["reply_format"],
    )


CORPUS = load_corpus()


@pytest.mark.parametrize("row", CORPUS, ids=[row["id"] for row in CORPUS])
def test_corpus_reply_parses_as_expected(row):
    result = parse_reply(row["text"], cell_of(row))
    got = [[a.question, a.option_id, a.status, a.hedged] for a in result.answers]
    assert got == row["expected"], row.get("note", "")


def test_corpus_covers_what_the_issue_lists():
    assert len(CORPUS) >= 150
    assert Counter(row["language"] for row in CORPUS).keys() == {"en", "zh", "ar", "sk"}
    assert all(n >= 25 for n in Counter(row["language"] for row in CORPUS).values())
    statuses = Counter(e[2] for row in CORPUS for e in row["expected"])
    assert set(statuses) == {"ok", "refusal", "no_answer", "ambiguous", "out_of_range", "invalid_format"}
    assert sum(row["mode"] == "survey" for row in CORPUS) >= 20
    assert sum(row["option_order"] != [1, 2, 3, 4, 5] for row in CORPUS) >= 10
    assert sum(any(e[3] for e in row["expected"]) for row in CORPUS) >= 8  # hedges
    for language in ("en", "zh", "ar", "sk"):
        assert any(row["language"] == language and e[2] == "refusal" for row in CORPUS for e in row["expected"])


def test_raw_text_is_not_modified():
    for row in CORPUS[:50]:
        text = row["text"]
        copy = "".join(text)
        parse_reply(text, cell_of(row))
        assert text == copy


def test_paper_samples_are_verbatim():
    squash = lambda s: re.sub(r"\s+", " ", s).strip()  # noqa: E731
    paper = squash(PAPER.read_text(encoding="utf-8"))
    samples = [row for row in CORPUS if row["id"].startswith("paper_samples")]
    assert len(samples) == 8
    for row in samples:
        assert squash(row["text"]) in paper, row["id"]
