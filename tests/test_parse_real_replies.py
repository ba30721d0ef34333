"""Whole-survey and item replies in the styles real chatbots used (tests/data/real_replies, provenance in its
README): at least 98 % of cells parse as built and every refusal is flagged (issue 14, section 3)."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

from runner.parse import parse_reply
from runner.survey.cell import PromptCell

FOLDER = Path(__file__).parent / "data" / "real_replies"
ROWS = [json.loads(line) for line in (FOLDER / "replies.jsonl").read_text(encoding="utf-8").splitlines() if line]


def _parsed(row: dict) -> list[list]:
    cell = PromptCell(
        row["language"],
        row["mode"],
        tuple(row["questions"]),
        option_order=tuple(row["option_order"]),
        reply_format=row["reply_format"],
    )
    return [[a.question, a.option_id, a.status, a.hedged] for a in parse_reply(row["text"], cell).answers]


def test_the_corpus_is_what_its_builder_writes():
    spec = importlib.util.spec_from_file_location("real_replies_build", FOLDER / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build() == ROWS  # expectations come from construction, never from the parser


def test_the_corpus_covers_four_languages_both_modes_and_the_hard_styles():
    assert len(ROWS) >= 100
    assert Counter(r["language"] for r in ROWS).keys() == {"en", "zh", "ar", "sk"}
    assert {r["mode"] for r in ROWS} == {"item", "survey"}
    styles = {r["style"] for r in ROWS}
    assert {"restated_dotted_sections", "restated_numbered_sections", "refusal_survey", "refusal_item"} <= styles


def test_at_least_98_percent_of_cells_and_every_refusal():
    cells = right = refusals = flagged = 0
    wrong = []
    for row in ROWS:
        for got, expected in zip(_parsed(row), row["expected"], strict=True):
            cells += 1
            right += got == expected
            if got != expected:
                wrong.append((row["id"], row["style"], got, expected))
            if expected[2] == "refusal":
                refusals += 1
                flagged += got[2] == "refusal"
    assert right / cells >= 0.98, wrong[:10]
    assert flagged == refusals, [w for w in wrong if w[3][2] == "refusal"][:10]


def test_a_restated_questionnaire_is_not_read_by_its_section_numbers():
    # On 1a7a2cc: "3.1 ... (15): 4" gave nothing for items 15-24 and shifted answers onto items 3-8.
    row = next(r for r in ROWS if r["style"] == "restated_dotted_sections" and r["language"] == "en")
    assert _parsed(row) == row["expected"]


def test_refusals_without_the_usual_markers_are_flagged():
    cell = PromptCell("en", "item", (19,))
    for text in ("I do not feel comfortable answering that.", "Perhaps we could discuss something else?"):
        assert parse_reply(text, cell).answers[0].status == "refusal", text
    # a hedge is not a refusal: "perhaps" before an answer keeps the answer
    assert parse_reply("Perhaps a 2.", cell).answers[0].status == "ok"
