"""The instrument files: content transcribed from CAT v1 Appendix A, structure, validation errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner.survey import instrument as inst
from runner.survey import paths

# CAT v1 Appendix A, copied verbatim into the repository (provenance: tests/data/papers/README.md).
PAPER = Path(__file__).parent / "data" / "papers" / "cat-paper-v1.appendix-a.txt"
SCALE_OF = {
    **dict.fromkeys(range(1, 15), "importance"),
    15: "frequency",
    16: "frequency",
    17: "prevention",
    18: "health",
    19: "pride",
    20: "frequency_reversed",
    **dict.fromkeys(range(21, 25), "agreement"),
}
# Prompt instructions the paper printed inside items; none may leak into item texts or intros.
INSTRUCTION_FRAGMENTS = (
    "no explanation",
    "Choose one",
    "不要解释",
    "选择一个",
    "bez vysvetlenia",
    "Vyberte",
    "جواب واحد",
    "1 2 3 4 5",
    "private life.",
    "私人生活",
    "súkromnom živote",
)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A private copy of data/ that tests may edit; caches are cleared around it."""
    shutil.copytree(paths.DATA_DIR, tmp_path / "data")
    monkeypatch.setattr(paths, "DATA_DIR", tmp_path / "data")
    inst.load_instrument.cache_clear()
    yield tmp_path / "data"
    inst.load_instrument.cache_clear()


def test_the_four_paper_languages_are_shipped():
    assert inst.languages() == ("ar", "en", "sk", "zh")


@pytest.mark.parametrize("language", ["ar", "en", "sk", "zh"])
def test_each_language_has_24_questions_on_the_vsm_scales(language):
    instrument = inst.load_instrument(language)
    assert sorted(instrument.questions) == list(range(1, 25))
    assert {n: q.scale for n, q in instrument.questions.items()} == SCALE_OF
    for question in instrument.questions.values():
        assert [o.id for o in question.options] == [1, 2, 3, 4, 5]
        assert len({o.label for o in question.options}) == 5
    assert [s.id for s in instrument.sections] == ["ideal_job", "private_life", "personal", "statements"]
    assert [len(s.questions) for s in instrument.sections] == [10, 4, 6, 4]
    assert instrument.sections[2].intro is None


@pytest.mark.parametrize("language", ["ar", "en", "sk", "zh"])
def test_prompt_instructions_are_kept_out_of_items(language):
    instrument = inst.load_instrument(language)
    texts = [q.text for q in instrument.questions.values()] + [s.intro for s in instrument.sections if s.intro]
    for text in texts:
        for fragment in INSTRUCTION_FRAGMENTS:
            assert fragment not in text, (language, text)
    provenance = instrument.provenance
    assert "Appendix A" in provenance["location"]
    assert any("10" in d for d in provenance["deviations"]) or language == "ar"


def test_scale_directions_follow_the_vsm():
    en = inst.load_instrument("en").questions
    assert en[16].label(1) == "always" and en[16].label(5) == "never"
    assert en[20].label(1) == "never" and en[20].label(5) == "always"  # reversed wording
    assert en[17].label(1) == "yes, always" and en[17].label(5) == "no, never"
    assert en[18].label(1) == "very good" and en[19].label(5) == "not proud at all"
    assert en[1].label(1) == "of utmost importance" and en[24].label(5) == "strongly disagree"
    assert inst.load_instrument("zh").questions[3].label(2) == "非常重要"
    assert inst.load_instrument("ar").questions[20].label(1) == "مطلقا"
    assert inst.load_instrument("sk").questions[22].label(4) == "nesúhlasím"
    assert en[10].text == "have chances for promotion"


@pytest.mark.parametrize("language", ["ar", "en", "sk", "zh"])
def test_texts_are_transcribed_from_the_paper(language):
    paper = PAPER.read_text(encoding="utf-8")
    instrument = inst.load_instrument(language)
    # Texts whose punctuation we normalised or from which we removed a deviation are checked by prefix.
    for question in instrument.questions.values():
        probe = question.text.rstrip(".?؟？ ")[:40]
        assert probe in paper, (language, question.number, probe)
        for option in question.options:
            assert option.label in paper, (language, question.number, option.label)
    for section in instrument.sections:
        if section.intro:
            assert section.intro.rstrip(":：")[:30] in paper, (language, section.id)


def test_adding_a_language_is_adding_a_file(data_dir):
    raw = json.loads((data_dir / "instrument" / "en.json").read_text())
    raw["language"] = "xx"
    raw["questions"]["1"]["text"] = "a new text"
    (data_dir / "instrument" / "xx.json").write_text(json.dumps(raw))
    assert "xx" in inst.languages()
    assert inst.load_instrument("xx").questions[1].text == "a new text"


def _break(data_dir: Path, edit) -> None:
    path = data_dir / "instrument" / "en.json"
    raw = json.loads(path.read_text())
    edit(raw)
    path.write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["questions"]["3"].update(scale="happiness"), r"questions\.3\.scale: unknown scale 'happiness'"),
        (lambda r: r["scales"]["health"].update(labels=["a", "b"]), r"scales\.health\.labels: expected a list of 5"),
        (lambda r: r["questions"].pop("24"), r"questions: must have keys '1'..'24'; missing \['24'\]"),
        (lambda r: r["questions"]["7"].update(text=""), r"questions\.7\.text: expected a non-empty string"),
        (lambda r: r["sections"][1].update(questions=[11, 12, 13]), r"sections: must list questions 1-24 once"),
        (lambda r: r.update(language="de"), r"language: must equal the file name's stem 'en'"),
        (lambda r: r["scales"]["pride"].update(aliases={"7": ["x"]}), r"scales\.pride\.aliases\.7"),
    ],
)
def test_malformed_files_are_reported_with_file_and_key(data_dir, edit, message):
    _break(data_dir, edit)
    with pytest.raises(inst.InstrumentError, match=message) as info:
        inst.load_instrument("en")
    assert str(data_dir / "instrument" / "en.json") in str(info.value)


def test_invalid_json_names_line_and_column(data_dir):
    (data_dir / "instrument" / "en.json").write_text('{\n  "language": "en",\n  oops\n}')
    with pytest.raises(inst.InstrumentError, match=r"en\.json: line 3, column 3: invalid JSON"):
        inst.load_instrument("en")


def test_unknown_language_lists_the_available_ones():
    with pytest.raises(inst.InstrumentError, match=r"no instrument for language 'de'.*available: ar, en, sk, zh"):
        inst.load_instrument("de")


def test_a_language_is_a_name_never_a_path(tmp_path, monkeypatch):
    from runner.errors import PromptError
    from runner.survey.prompts import load_templates

    outside = tmp_path / "outside.json"
    outside.write_text('{"language": "../outside"}')
    monkeypatch.setattr(paths, "DATA_DIR", tmp_path / "data")
    for language in ("../outside", "../../outside", "/tmp/outside", "en\x00", "en/../en", ".."):
        with pytest.raises(inst.InstrumentError, match="not a language name"):
            inst.load_instrument(language)
        with pytest.raises(PromptError, match="not a language name"):
            load_templates(language)
