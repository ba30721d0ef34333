"""The simulator reads every prompt the real prompt builder can make back into the cell that made it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.endpoints.sim.data import load_reader
from runner.survey.cell import Framing, PromptCell
from runner.survey.instrument import languages
from runner.survey.prompts import build_messages, load_templates


@st.composite
def cells(draw: st.DrawFn) -> PromptCell:
    language = draw(st.sampled_from(languages()))
    templates = load_templates(language)
    mode = draw(st.sampled_from(["item", "survey"]))
    if mode == "item":
        questions: tuple[int, ...] = (draw(st.integers(1, 24)),)
    else:
        questions = tuple(sorted(draw(st.sets(st.integers(1, 24), min_size=1, max_size=24))))
    kind = draw(st.sampled_from(["none", "persona", "identity"]))
    country = draw(st.sampled_from(sorted(templates["countries"])))
    framing = {
        "none": Framing(),
        "persona": Framing("persona", country),
        "identity": Framing(
            "identity", country, draw(st.integers(18, 90)), draw(st.sampled_from(sorted(templates["genders"])))
        ),
    }[kind]
    order = tuple(draw(st.permutations([1, 2, 3, 4, 5])))
    reply_format = draw(st.sampled_from(sorted(templates["reply_formats"])))
    return PromptCell(language, mode, questions, framing, order, reply_format)  # type: ignore[arg-type]


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(cells())
def test_reading_a_built_prompt_gives_back_its_cell(cell: PromptCell) -> None:
    messages = tuple((m["role"], m["content"]) for m in build_messages(cell))
    assert load_reader().read(messages) == cell


def test_text_that_asks_no_question_reads_as_none() -> None:
    reader = load_reader()
    assert reader.read((("user", "Tell me a joke about statisticians."),)) is None
    assert reader.read((("system", "Reply in JSON."), ("user", ""))) is None
