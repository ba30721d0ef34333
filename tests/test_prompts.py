"""Prompt building: exact messages, framing, shuffled options, reply formats, template hash, errors."""

from __future__ import annotations

import csv
import itertools
import json
import shutil

import pytest

from runner.survey import instrument as inst
from runner.survey import paths, prompts
from runner.survey.cell import Framing, PromptCell
from runner.survey.prompts import PromptError, build_messages, shuffled_order, template_hash

# The shipped reference set (a byte-for-byte copy of the shared data file, see its provenance.md).
HOFSTEDE = paths.DATA_DIR / "reference" / "hofstede_6d_2015.csv"
ALL = tuple(range(1, 25))


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A private copy of data/ that tests may edit; caches are cleared around it."""
    shutil.copytree(paths.DATA_DIR, tmp_path / "data")
    monkeypatch.setattr(paths, "DATA_DIR", tmp_path / "data")
    for cached in (inst.load_instrument, prompts.load_templates, prompts._render):
        cached.cache_clear()
    yield tmp_path / "data"
    for cached in (inst.load_instrument, prompts.load_templates, prompts._render):
        cached.cache_clear()


def test_item_prompt_is_exactly_as_specified():
    cell = PromptCell("en", "item", (1,))
    assert build_messages(cell) == [
        {"role": "system", "content": "Reply with the number of your answer only, with no explanation."},
        {
            "role": "user",
            "content": (
                "Answer the question below by choosing one of the following options.\n\n"
                "In choosing an ideal job, how important would it be to you to:\n"
                "have sufficient time for your personal or home life\n\n"
                "1 = of utmost importance\n2 = very important\n3 = of moderate importance\n"
                "4 = of little importance\n5 = of very little or no importance"
            ),
        },
    ]


def test_shuffled_positions_show_the_option_ids_text():
    order = (3, 5, 1, 4, 2)
    user = build_messages(PromptCell("en", "item", (18,), option_order=order))[-1]["content"]
    assert user.endswith("1 = fair\n2 = very poor\n3 = very good\n4 = poor\n5 = good")


@pytest.mark.parametrize(
    ("language", "country", "expected"),
    [
        ("en", "U.S.A.", "Act like you are someone from the United States and answer"),
        ("zh", "China", "请假装你是一位来自中国的人"),
        ("ar", "Saudi Arabia", "تصرّف كأنك شخص من المملكة العربية السعودية"),
        ("sk", "Slovak Rep", "Správajte sa ako človek zo Slovenska"),
    ],
)
def test_persona_names_the_country_in_the_prompt_language(language, country, expected):
    user = build_messages(PromptCell(language, "item", (5,), Framing("persona", country)))[-1]["content"]
    assert user.startswith(expected)


def test_identity_carries_nationality_age_and_gender():
    cell = PromptCell("en", "item", (5,), Framing("identity", "Japan", 45, "female"))
    assert build_messages(cell)[-1]["content"].startswith("Imagine you are a 45-year-old woman from Japan.")
    cell = PromptCell("zh", "item", (5,), Framing("identity", "Germany", 25, "male"))
    assert build_messages(cell)[-1]["content"].startswith("请想象你是一位来自德国的25岁男性。")


@pytest.mark.parametrize("language", ["ar", "en", "sk", "zh"])
def test_survey_lists_every_question_once_with_its_number(language):
    instrument = inst.load_instrument(language)
    user = build_messages(PromptCell(language, "survey", ALL))[-1]["content"]
    for number, question in instrument.questions.items():
        assert user.count(question.text) == 1, (number, question.text)
        assert f"\n{number}" in user
    for section in instrument.sections:
        if section.intro:
            assert section.intro in user
    # One options line per run of questions sharing a scale: 1-10, 11-14, 15-16, 17, 18, 19, 20, 21-24.
    assert user.count("1 = ") == 8


def test_reply_formats():
    item = PromptCell("en", "item", (2,), reply_format="json")
    assert '{"option_id": <the number of your answer>' in build_messages(item)[0]["content"]
    free = build_messages(PromptCell("en", "item", (2,), reply_format="free"))
    assert [m["role"] for m in free] == ["user"]
    fewshot = build_messages(PromptCell("en", "item", (2,), reply_format="fewshot"))
    assert fewshot[0]["content"].endswith("Example reply:\n2")
    survey = build_messages(PromptCell("en", "survey", ALL, reply_format="json"))
    assert '[{"question": <question number>' in survey[0]["content"]


def test_templates_agree_across_languages():
    names = [prompts.load_templates(lang) for lang in inst.languages()]
    for key in ("countries", "reply_formats", "genders"):
        assert len({tuple(sorted(t[key])) for t in names}) == 1, key


def test_country_keys_are_canonical_reference_names():
    with HOFSTEDE.open(encoding="utf-8") as handle:
        canonical = {row["country"] for row in csv.DictReader(handle, delimiter=";")}
    keys = set(prompts.load_templates("en")["countries"])
    assert keys <= canonical
    assert {"U.S.A.", "China", "Saudi Arabia", "Slovak Rep", "Arab countries", "Korea South", "South Africa"} <= keys


def test_shuffled_order_is_a_deterministic_uniform_permutation():
    orders = [shuffled_order(seed) for seed in range(3000)]
    assert all(sorted(o) == [1, 2, 3, 4, 5] for o in orders)
    assert orders == [shuffled_order(seed) for seed in range(3000)]
    assert shuffled_order(0) == (2, 5, 4, 3, 1)  # pinned: a change would silently reshuffle stored runs
    assert set(orders) == set(itertools.permutations(range(1, 6)))
    first = [o[0] for o in orders]
    assert all(500 < first.count(k) < 700 for k in range(1, 6))  # 600 expected each


def test_template_hash_tracks_exactly_the_texts_a_cell_uses(data_dir):
    q1 = PromptCell("en", "item", (1,))
    q2 = PromptCell("en", "item", (2,))
    before = template_hash(q1), template_hash(q2)
    assert template_hash(q1) == before[0] and before[0] != before[1]
    assert template_hash(PromptCell("en", "item", (1,), option_order=(5, 4, 3, 2, 1))) == before[0]
    assert template_hash(PromptCell("en", "item", (1,), reply_format="json")) != before[0]

    path = data_dir / "instrument" / "en.json"
    raw = json.loads(path.read_text())
    raw["questions"]["2"]["text"] = "have a boss you can respect"
    path.write_text(json.dumps(raw))
    inst.load_instrument.cache_clear()
    prompts._render.cache_clear()
    assert template_hash(q1) == before[0]
    assert template_hash(q2) != before[1]


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        (PromptCell("en", "item", (1, 2)), r"cell\.questions: item mode asks exactly one question"),
        (PromptCell("en", "item", (25,)), r"cell\.questions: \(25,\) must be question numbers 1-24"),
        (PromptCell("en", "item", (1,), option_order=(1, 2, 3, 4, 4)), r"cell\.option_order: .* not a permutation"),
        (PromptCell("en", "item", (1,), reply_format="xml"), r"cell\.reply_format: 'xml' unknown for 'en' \(known: "),
        (PromptCell("en", "item", (1,), Framing("persona", "Atlantis")), r"cell\.framing\.country: 'Atlantis'"),
        (PromptCell("en", "item", (1,), Framing("identity", "Japan", None, "male")), r"cell\.framing\.age"),
        (PromptCell("en", "item", (1,), Framing("identity", "Japan", 30, "robot")), r"cell\.framing\.gender"),
        (PromptCell("de", "item", (1,)), r"no prompt templates for language 'de'"),
    ],
)
def test_bad_cells_are_rejected_naming_the_field(cell, message):
    with pytest.raises(PromptError, match=message):
        build_messages(cell)


def test_missing_template_key_names_file_and_key(data_dir):
    path = data_dir / "prompts" / "en.json"
    raw = json.loads(path.read_text())
    del raw["instructions"]["item"]["persona"]
    path.write_text(json.dumps(raw))
    with pytest.raises(PromptError, match=r"prompts/en\.json: instructions\.item\.persona: missing"):
        build_messages(PromptCell("en", "item", (1,)))


def test_bad_placeholder_names_file_key_and_allowed_fields(data_dir):
    path = data_dir / "prompts" / "en.json"
    raw = json.loads(path.read_text())
    raw["instructions"]["item"]["persona"] = "Act like you are someone from {nation}."
    path.write_text(json.dumps(raw))
    with pytest.raises(
        PromptError,
        match=r"en\.json: instructions\.item\.persona: bad placeholder 'nation' "
        r"\(allowed for framing 'persona': \{country\}\)",
    ):
        build_messages(PromptCell("en", "item", (1,), Framing("persona", "Japan")))


@pytest.mark.parametrize("language", ["ar", "en", "sk", "zh"])
def test_every_template_renders_without_placeholders_left(language):
    templates = prompts.load_templates(language)
    framings = [Framing(), Framing("persona", "Saudi Arabia"), Framing("identity", "Brazil", 35, "female")]
    for mode, framing, reply_format in itertools.product(("item", "survey"), framings, templates["reply_formats"]):
        cell = PromptCell(language, mode, (17,) if mode == "item" else ALL, framing, (2, 4, 1, 5, 3), reply_format)
        messages = build_messages(cell)
        text = "\n".join(m["content"] for m in messages)
        assert "{country}" not in text and "{age}" not in text and "{gender}" not in text
        assert messages[-1]["role"] == "user" and all(m["content"].strip() for m in messages)
        if framing.kind != "none":
            assert templates["countries"][framing.country] in text
        if framing.kind == "identity":
            assert "35" in text and templates["genders"]["female"] in text
