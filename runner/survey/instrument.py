"""The VSM 2013 instrument as data: questions 1-24, their answer scales and section intros, per language.

Each language is one JSON file ``data/instrument/<code>.json`` (format in docs/instrument.md); adding a
language is adding a file. Files are validated on load and every error names the file and the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from runner.errors import InstrumentError
from runner.survey import paths
from runner.survey.vocab import QUESTIONS

OPTION_IDS: tuple[int, ...] = (1, 2, 3, 4, 5)
HEALTH_QUESTIONS: tuple[int, ...] = (15, 18)  # the items some designs pin to the neutral answer 3


@dataclass(frozen=True, slots=True)
class Option:
    """One answer option: its ID (1-5, also the raw score) and its label in the instrument language."""

    id: int
    label: str


@dataclass(frozen=True, slots=True)
class Question:
    """One VSM 2013 item: number 1-24, text, scale name and its five options in ID order."""

    number: int
    text: str
    scale: str
    options: tuple[Option, ...]
    # Extra phrasings that mean an option (parser only, never shown): option ID -> phrasings.
    aliases: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def label(self, option_id: int) -> str:
        """The label of option ``option_id`` (1-5)."""
        return self.options[option_id - 1].label


@dataclass(frozen=True, slots=True)
class Section:
    """A block of consecutive questions sharing an intro ("In choosing an ideal job, ..."); intro may be None."""

    id: str
    intro: str | None
    questions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Instrument:
    """The 24 questions of one language, their sections and where the text came from."""

    language: str
    name: str
    questions: dict[int, Question]
    sections: tuple[Section, ...]
    provenance: dict[str, Any]
    path: Path

    def section_of(self, number: int) -> Section:
        """The section holding question ``number``."""
        for section in self.sections:
            if number in section.questions:
                return section
        raise KeyError(number)


def instrument_dir() -> Path:
    """The folder holding one ``<language>.json`` per instrument language."""
    return paths.DATA_DIR / "instrument"


def languages() -> tuple[str, ...]:
    """Codes of the instrument languages present in data/instrument/, sorted."""
    return tuple(sorted(p.stem for p in instrument_dir().glob("*.json")))


@cache
def load_instrument(language: str) -> Instrument:
    """The validated instrument for ``language`` (a file stem in data/instrument/); cached per process."""
    path = paths.language_file(instrument_dir(), language)
    if path is None or not path.is_file():
        known = ", ".join(languages()) or "none"
        where = f"{path} does not exist" if path else "not a language name (letters, digits, - and _)"
        raise InstrumentError(f"no instrument for language {language!r}: {where} (available: {known})")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InstrumentError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from None
    return _build(raw, path, language)


def _fail(path: Path, key: str, message: str) -> InstrumentError:
    return InstrumentError(f"{path}: {key}: {message}")


def _text(value: Any, path: Path, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, key, f"expected a non-empty string, got {value!r}")
    return value


def _mapping(value: Any, path: Path, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, key, f"expected an object, got {type(value).__name__}")
    return value


def _build(raw: Any, path: Path, language: str) -> Instrument:
    raw = _mapping(raw, path, "(top level)")
    if raw.get("language") != language:
        raise _fail(path, "language", f"must equal the file name's stem {language!r}, got {raw.get('language')!r}")
    name = _text(raw.get("name"), path, "name")
    provenance = _mapping(raw.get("provenance"), path, "provenance")
    for key in ("source", "location"):
        _text(provenance.get(key), path, f"provenance.{key}")
    scales = _scales(_mapping(raw.get("scales"), path, "scales"), path)
    questions = _questions(_mapping(raw.get("questions"), path, "questions"), scales, path)
    sections = _sections(raw.get("sections"), path)
    return Instrument(language, name, questions, sections, provenance, path)


def _scales(raw: dict[str, Any], path: Path) -> dict[str, tuple[tuple[Option, ...], tuple]]:
    scales = {}
    for scale, body in raw.items():
        body = _mapping(body, path, f"scales.{scale}")
        labels = body.get("labels")
        if not isinstance(labels, list) or len(labels) != len(OPTION_IDS):
            raise _fail(path, f"scales.{scale}.labels", f"expected a list of {len(OPTION_IDS)} labels (options 1-5)")
        options = tuple(
            Option(i, _text(label, path, f"scales.{scale}.labels[{i - 1}]"))
            for i, label in zip(OPTION_IDS, labels, strict=True)
        )
        aliases = []
        for option_key, phrases in _mapping(body.get("aliases", {}), path, f"scales.{scale}.aliases").items():
            if option_key not in {str(i) for i in OPTION_IDS}:
                raise _fail(path, f"scales.{scale}.aliases.{option_key}", "option keys must be '1'..'5'")
            if not isinstance(phrases, list):
                raise _fail(path, f"scales.{scale}.aliases.{option_key}", "expected a list of strings")
            texts = tuple(_text(p, path, f"scales.{scale}.aliases.{option_key}[{j}]") for j, p in enumerate(phrases))
            aliases.append((int(option_key), texts))
        scales[scale] = (options, tuple(sorted(aliases)))
    return scales


def _questions(raw: dict[str, Any], scales: dict, path: Path) -> dict[int, Question]:
    expected = {str(n) for n in QUESTIONS}
    if set(raw) != expected:
        missing = sorted(expected - set(raw), key=int)
        extra = sorted(set(raw) - expected)
        raise _fail(path, "questions", f"must have keys '1'..'24'; missing {missing}, unexpected {extra}")
    questions = {}
    for key in sorted(raw, key=int):
        body = _mapping(raw[key], path, f"questions.{key}")
        scale = body.get("scale")
        if scale not in scales:
            raise _fail(path, f"questions.{key}.scale", f"unknown scale {scale!r} (defined: {', '.join(scales)})")
        options, aliases = scales[scale]
        questions[int(key)] = Question(
            int(key), _text(body.get("text"), path, f"questions.{key}.text"), scale, options, aliases
        )
    return questions


def _sections(raw: Any, path: Path) -> tuple[Section, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail(path, "sections", "expected a non-empty list")
    sections, seen = [], []
    for i, body in enumerate(raw):
        body = _mapping(body, path, f"sections[{i}]")
        intro = body.get("intro")
        if intro is not None:
            _text(intro, path, f"sections[{i}].intro")
        numbers = body.get("questions")
        if not isinstance(numbers, list) or not numbers or not all(isinstance(n, int) for n in numbers):
            raise _fail(path, f"sections[{i}].questions", "expected a non-empty list of question numbers")
        sections.append(Section(_text(body.get("id"), path, f"sections[{i}].id"), intro, tuple(numbers)))
        seen.extend(numbers)
    if seen != list(QUESTIONS):
        raise _fail(path, "sections", "must list questions 1-24 once each, in order, across the sections")
    return tuple(sections)
