"""Round trip: build the prompt, answer option k in the form the prompt displays it, parse back k."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.parse import parse_reply
from runner.survey.cell import Framing, PromptCell
from runner.survey.instrument import languages, load_instrument
from runner.survey.prompts import build_messages, load_templates

ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
WRAPPERS = {
    "en": ["{x}", "Answer: {x}", "**{x}**", "I'd rate it {x}.", "My answer is {x}, for what it's worth."],
    "zh": ["{x}", "答案：{x}", "我选择{x}。", "**{x}**"],
    "ar": ["{x}", "الإجابة: {x}", "أختار {x}.", "**{x}**"],
    "sk": ["{x}", "Odpoveď: {x}", "Vyberám {x}.", "**{x}**"],
}


@st.composite
def cells(draw, mode: str) -> PromptCell:
    """Any renderable cell: language, question(s), framing, option order and reply format."""
    language = draw(st.sampled_from(languages()))
    templates = load_templates(language)
    kind = draw(st.sampled_from(["none", "persona", "identity"]))
    country = draw(st.sampled_from(sorted(templates["countries"])))
    framing = {
        "none": Framing(),
        "persona": Framing("persona", country),
        "identity": Framing(
            "identity", country, draw(st.sampled_from([25, 35, 45])), draw(st.sampled_from(["male", "female"]))
        ),
    }[kind]
    questions = (draw(st.integers(1, 24)),) if mode == "item" else tuple(range(1, 25))
    order = tuple(draw(st.permutations([1, 2, 3, 4, 5])))
    reply_format = draw(st.sampled_from(sorted(templates["reply_formats"])))
    return PromptCell(language, mode, questions, framing, order, reply_format)


def displayed_options(cell: PromptCell, question: int) -> dict[int, str]:
    """Position -> label as the built prompt shows them for ``question`` (read from the message text)."""
    user = build_messages(cell)[-1]["content"]
    text = load_instrument(cell.language).questions[question].text
    if cell.mode == "item":
        block = user[user.index(text) + len(text) :]
        return {int(p): label for p, label in re.findall(r"^(\d) = (.+)$", block, re.MULTILINE)}
    # survey: a group's options line stands above its questions after a section intro, else below them.
    lines = user.splitlines()
    index = next(i for i, line in enumerate(lines) if line.endswith(text))
    above = load_instrument(cell.language).section_of(question).intro is not None
    steps = range(index - 1, -1, -1) if above else range(index + 1, len(lines))
    line = next(lines[i] for i in steps if lines[i].startswith("1 = "))
    parts = re.split(r"(?:, |，|، )?(\d) = ", line)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def render(cell: PromptCell, question: int, k: int, form: str, wrapper: str) -> str:
    """The answer to ``question`` choosing option ID ``k`` in the displayed ``form``."""
    position = cell.option_order.index(k) + 1
    if form == "label":
        return wrapper.format(x=displayed_options(cell, question)[position])
    if form == "english_label":  # a model answering a translated prompt in English names the option itself
        return wrapper.format(x=load_instrument("en").questions[question].label(k))
    digits = {
        "ascii": str(position),
        "arabic": str(position).translate(ARABIC_INDIC),
        "fullwidth": str(position).translate(FULL_WIDTH),
    }[form]
    return wrapper.format(x=digits)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(data=st.data(), cell=cells("item"))
def test_item_round_trip(data, cell):
    question = cell.questions[0]
    k = data.draw(st.integers(1, 5))
    form = data.draw(st.sampled_from(["ascii", "arabic", "fullwidth", "label", "english_label"]))
    if cell.reply_format == "json" and data.draw(st.booleans()):
        position = cell.option_order.index(k) + 1
        reply = json.dumps({"option_id": position, "reason": "..."}, ensure_ascii=False)
    else:
        reply = render(cell, question, k, form, data.draw(st.sampled_from(WRAPPERS[cell.language])))
    answer = parse_reply(reply, cell).answers[0]
    assert (answer.option_id, answer.status) == (k, "ok"), reply
    assert answer.displayed == cell.option_order.index(k) + 1


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(data=st.data(), cell=cells("survey"))
def test_survey_round_trip(data, cell):
    chosen = data.draw(st.lists(st.integers(1, 5), min_size=24, max_size=24))
    form = data.draw(st.sampled_from(["ascii", "arabic", "label", "json"]))
    if form == "json":
        lines = [
            json.dumps(
                [
                    {"question": q, "option_id": cell.option_order.index(k) + 1, "reason": "..."}
                    for q, k in zip(cell.questions, chosen)
                ],
                ensure_ascii=False,
            )
        ]
    else:
        lines = [f"{q}. {render(cell, q, k, form, '{x}')}" for q, k in zip(cell.questions, chosen)]
    answers = parse_reply("\n".join(lines), cell).answers
    assert [(a.option_id, a.status) for a in answers] == [(k, "ok") for k in chosen], "\n".join(lines)


REPLY_PIECES = st.sampled_from(
    [
        "1",
        "2",
        "3",
        "4",
        "5",
        "7",
        "0",
        "2.5",
        "٣",
        "３",
        "三",
        " or ",
        " maybe ",
        "Answer:",
        "**",
        "{",
        "}",
        '"option_id":',
        "[",
        "]",
        "\n",
        "1. ",
        "2) ",
        "(11) ",
        "very important",
        "strongly disagree",
        "非常重要",
        "不同意",
        "أوافق",
        "súhlasím",
        "As an AI",
        "<think>",
        "</think>",
        "1 to 5",
        "4/5",
        "Q3",
        "第3题",
        "= ",
        "|",
        "N/A",
        " ",
    ]
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    cell=st.one_of(cells("item"), cells("survey")),
    text=st.one_of(st.text(max_size=300), st.lists(REPLY_PIECES, max_size=40).map("".join)),
)
def test_any_text_parses_to_well_formed_answers(cell, text):
    result = parse_reply(text, cell)
    assert [a.question for a in result.answers] == list(cell.questions)
    for answer in result.answers:
        assert answer.status in ("ok", "refusal", "no_answer", "ambiguous", "out_of_range", "invalid_format")
        assert (answer.option_id is not None) == (answer.status == "ok")
        assert answer.option_id is None or cell.option_order[answer.displayed - 1] == answer.option_id
        assert not answer.hedged or answer.status == "ok"
    assert parse_reply(text, cell) == result  # deterministic
