"""From a ``PromptCell`` to the exact chat messages sent, and the hash of the templates that made them.

Pure and deterministic: the same cell and the same data files give the same messages. All wording lives in
``data/instrument/<lang>.json`` (items, scales, intros) and ``data/prompts/<lang>.json`` (instructions,
framing, layout, reply formats, localized country names); see docs/instrument.md.

Message shape: ``[{"role": "system", ...}, {"role": "user", ...}]``. The system message carries the
reply-format instruction and is left out when that instruction is empty (reply format ``free``).
"""

from __future__ import annotations

import hashlib
import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from runner.errors import PromptError
from runner.survey import paths
from runner.survey.cell import CANONICAL_ORDER, PromptCell, position_marks
from runner.survey.instrument import Instrument, load_instrument
from runner.survey.vocab import FRAMINGS, MODES, OPTION_LABELS, QUESTIONS

_LAYOUT_KEYS = ("option", "option_join_item", "option_join_survey", "question_line")


def prompts_dir() -> Path:
    """The folder holding one ``<language>.json`` of prompt templates per language."""
    return paths.DATA_DIR / "prompts"


@cache
def load_templates(language: str) -> dict[str, Any]:
    """The validated prompt templates of ``language``; errors name the file and key."""
    path = paths.language_file(prompts_dir(), language)
    if path is None or not path.is_file():
        where = f"{path} does not exist" if path else "not a language name (letters, digits, - and _)"
        raise PromptError(f"no prompt templates for language {language!r}: {where}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PromptError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from None

    def need(obj: Any, key: str, where: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise PromptError(f"{path}: {where}{key}: missing")
        return obj[key]

    if raw.get("language") != language:
        raise PromptError(
            f"{path}: language: must equal the file name's stem {language!r}, got {raw.get('language')!r}"
        )
    instructions = need(raw, "instructions", "")
    for mode in MODES:
        for framing in FRAMINGS:
            if not isinstance(need(need(instructions, mode, "instructions."), framing, f"instructions.{mode}."), str):
                raise PromptError(f"{path}: instructions.{mode}.{framing}: expected a string")
    for key in _LAYOUT_KEYS:
        if not isinstance(need(need(raw, "layout", ""), key, "layout."), str):
            raise PromptError(f"{path}: layout.{key}: expected a string")
    for name, body in need(raw, "reply_formats", "").items():
        for mode in MODES:
            if not isinstance(need(body, mode, f"reply_formats.{name}."), str):
                raise PromptError(f"{path}: reply_formats.{name}.{mode}: expected a string")
    for key in ("genders", "countries"):
        if not isinstance(need(raw, key, ""), dict):
            raise PromptError(f"{path}: {key}: expected an object")
    if "verbalized" in raw:  # the verbalized measurement's instruction (optional: a language without it refuses it)
        for key in ("item", "value"):
            if not isinstance(need(raw["verbalized"], key, "verbalized."), str):
                raise PromptError(f"{path}: verbalized.{key}: expected a string")
        if "{example}" not in raw["verbalized"]["item"]:
            raise PromptError(f"{path}: verbalized.item: must hold the placeholder {{example}}")
    return raw


def shuffled_order(seed: int) -> tuple[int, ...]:
    """A deterministic permutation of option IDs 1-5 from an integer seed (same on every platform/version)."""
    order = list(CANONICAL_ORDER)
    # Fisher-Yates driven by SHA-256, so the permutation never depends on Python's random module version.
    for i in range(len(order) - 1, 0, -1):
        digest = hashlib.sha256(f"hofcat-option-order:{seed}:{i}".encode()).digest()
        j = int.from_bytes(digest[:8], "big") % (i + 1)
        order[i], order[j] = order[j], order[i]
    return tuple(order)


def build_messages(cell: PromptCell, measurement: str = "sample") -> list[dict[str, str]]:
    """The chat messages (system if any, then user) for ``cell``, as fresh dicts of role and content; with
    ``measurement`` "verbalized" the system message asks for each option's probability (``verbalized_example``)."""
    messages = _render(cell)[0] if measurement != "verbalized" else _verbalized(cell)
    return [{"role": role, "content": content} for role, content in messages]


def verbalized_example(labels: tuple[str, ...], value: str) -> str:
    """The JSON object the verbalized instruction shows: each label a key, ``value`` (a placeholder) each value."""
    return "{" + ", ".join(f"{json.dumps(label)}: {value}" for label in labels) + "}"


@cache
def verbalized_templates_hash() -> str:
    """16 hex digits of SHA-256 over every language's verbalized templates: part of a verbalized cell's key, so
    that rewording the instruction makes new cells (the prompt cell's own template hash does not cover it)."""
    from runner.survey.instrument import languages

    used = {lang: load_templates(lang).get("verbalized") for lang in sorted(languages())}
    return hashlib.sha256(json.dumps(used, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


@lru_cache(maxsize=8192)
def _verbalized(cell: PromptCell) -> tuple[tuple[str, str], ...]:
    """``cell``'s messages with the verbalized instruction as the system message (item mode, shown labels)."""
    messages, _ = _render(cell)
    templates = load_templates(cell.language)
    marks = position_marks(cell.labels)
    where = prompts_dir() / (cell.language + ".json")
    if "verbalized" not in templates:
        raise PromptError(f"{where}: verbalized: missing (the language has no verbalized measurement)")
    if cell.mode != "item" or marks is None:
        raise PromptError(f"cell: the verbalized measurement needs item mode and shown labels, got {cell.mode!r}")
    body = templates["verbalized"]
    system = body["item"].replace("{example}", verbalized_example(marks, body["value"]))
    return (("system", system), *((r, c) for r, c in messages if r != "system"))


def template_hash(cell: PromptCell) -> str:
    """A 16-hex-digit SHA-256 digest of every template text ``cell`` uses (instrument and prompt files)."""
    _, used = _render(cell)
    return hashlib.sha256(json.dumps(used, ensure_ascii=False).encode()).hexdigest()[:16]


def validate_cell(cell: PromptCell, measurement: str = "sample") -> None:
    """Raise ``PromptError`` naming the field when ``cell`` cannot be rendered (for ``measurement``)."""
    _render(cell) if measurement != "verbalized" else _verbalized(cell)


@lru_cache(maxsize=8192)
def _render(cell: PromptCell) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    templates = load_templates(cell.language)
    instrument = load_instrument(cell.language)
    _check(cell, templates)
    used: dict[str, str] = {}

    def take(key: str, text: str) -> str:
        used[key] = text
        return text

    framing = cell.framing
    fields: dict[str, str] = {}
    if framing.kind != "none":
        fields["country"] = take(f"countries.{framing.country}", templates["countries"][framing.country])
    if framing.kind == "identity":
        fields["gender"] = take(f"genders.{framing.gender}", templates["genders"][framing.gender])
        fields["age"] = str(framing.age)
    key = f"instructions.{cell.mode}.{framing.kind}"
    try:
        instruction = take(key, templates["instructions"][cell.mode][framing.kind]).format(**fields)
    except (KeyError, IndexError, ValueError) as exc:
        allowed = ", ".join("{" + name + "}" for name in fields) or "none"
        raise PromptError(
            f"{prompts_dir() / (cell.language + '.json')}: {key}: bad placeholder {exc} "
            f"(allowed for framing {framing.kind!r}: {allowed})"
        ) from None
    layout = {key: take(f"layout.{key}", templates["layout"][key]) for key in _LAYOUT_KEYS}
    if cell.labels == "words":  # options shown by their words alone (a bias control)
        layout["option_words"] = take("layout.option_words", templates["layout"]["option_words"])
    if cell.mode == "item":
        body = _item_body(instrument, cell, layout, take)
    else:
        body = _survey_body(instrument, cell, layout, take)
    if cell.labels != "digits":  # "reply with the letter / the words of your answer" instead of the number
        key = f"reply_labels.{cell.labels}.{cell.mode}"
        system = take(key, templates["reply_labels"][cell.labels][cell.mode])
    else:
        system = take(
            f"reply_formats.{cell.reply_format}.{cell.mode}", templates["reply_formats"][cell.reply_format][cell.mode]
        )
    messages = ((("system", system),) if system else ()) + (("user", f"{instruction}\n\n{body}"),)
    return messages, tuple(sorted(used.items()))


def _check(cell: PromptCell, templates: dict[str, Any]) -> None:
    if cell.mode not in MODES:
        raise PromptError(f"cell.mode: {cell.mode!r} is not one of {', '.join(MODES)}")
    if not cell.questions or any(q not in QUESTIONS for q in cell.questions):
        raise PromptError(f"cell.questions: {cell.questions!r} must be question numbers 1-24")
    if len(set(cell.questions)) != len(cell.questions) or list(cell.questions) != sorted(cell.questions):
        raise PromptError(f"cell.questions: {cell.questions!r} must be distinct and ascending")
    if cell.mode == "item" and len(cell.questions) != 1:
        raise PromptError(f"cell.questions: item mode asks exactly one question, got {cell.questions!r}")
    if cell.labels not in OPTION_LABELS:
        raise PromptError(f"cell.labels: {cell.labels!r} is not one of {', '.join(OPTION_LABELS)}")
    if cell.labels != "digits" and (cell.mode != "item" or cell.reply_format != "number"):
        raise PromptError(
            f"cell.labels: {cell.labels!r} needs item mode and reply_format 'number' "
            f"(got {cell.mode!r}, {cell.reply_format!r}); the other formats ask for the option's number"
        )
    if sorted(cell.option_order) != list(CANONICAL_ORDER):
        raise PromptError(f"cell.option_order: {cell.option_order!r} is not a permutation of 1-5")
    if cell.reply_format not in templates["reply_formats"]:
        known = ", ".join(sorted(templates["reply_formats"]))
        raise PromptError(f"cell.reply_format: {cell.reply_format!r} unknown for {cell.language!r} (known: {known})")
    framing = cell.framing
    if framing.kind not in FRAMINGS:
        raise PromptError(f"cell.framing.kind: {framing.kind!r} is not one of {', '.join(FRAMINGS)}")
    if framing.kind != "none" and framing.country not in templates["countries"]:
        known = ", ".join(sorted(templates["countries"]))
        raise PromptError(
            f"cell.framing.country: {framing.country!r} has no {cell.language!r} name "
            f"(data/prompts/{cell.language}.json countries: {known})"
        )
    if framing.kind == "identity":
        if not isinstance(framing.age, int) or not 0 < framing.age < 130:
            raise PromptError(f"cell.framing.age: {framing.age!r} must be an integer number of years")
        if framing.gender not in templates["genders"]:
            raise PromptError(
                f"cell.framing.gender: {framing.gender!r} is not one of {', '.join(sorted(templates['genders']))}"
            )


def _options(instrument: Instrument, number: int, cell: PromptCell, layout: dict[str, str], take, join: str) -> str:
    question = instrument.questions[number]
    marks = position_marks(cell.labels)
    lines = []
    for position, option_id in enumerate(cell.option_order, start=1):
        label = take(f"scales.{question.scale}.{option_id}", question.label(option_id))
        if marks is None:
            lines.append(layout["option_words"].format(label=label))
        else:
            lines.append(layout["option"].format(position=marks[position - 1], label=label))
    return join.join(lines)


def _item_body(instrument: Instrument, cell: PromptCell, layout: dict[str, str], take) -> str:
    number = cell.questions[0]
    question = instrument.questions[number]
    parts = []
    intro = instrument.section_of(number).intro
    if intro:
        parts.append(take(f"intro.{number}", intro) + "\n")
    parts.append(take(f"question.{number}", question.text) + "\n\n")
    parts.append(_options(instrument, number, cell, layout, take, layout["option_join_item"]))
    return "".join(parts)


def _survey_body(instrument: Instrument, cell: PromptCell, layout: dict[str, str], take) -> str:
    blocks = []
    asked = set(cell.questions)
    for section in instrument.sections:
        numbers = [n for n in section.questions if n in asked]
        if not numbers:
            continue
        lines = [take(f"intro.{section.id}", section.intro)] if section.intro else []
        # Consecutive questions on the same scale share one options line: after the intro when the section
        # has one (the intro leads into the scale), else after the group's last question.
        groups: list[list[int]] = []
        for number in numbers:
            if groups and instrument.questions[groups[-1][-1]].scale == instrument.questions[number].scale:
                groups[-1].append(number)
            else:
                groups.append([number])
        for group in groups:
            options = _options(instrument, group[0], cell, layout, take, layout["option_join_survey"])
            questions = [
                layout["question_line"].format(number=n, text=take(f"question.{n}", instrument.questions[n].text))
                for n in group
            ]
            lines.extend([options, *questions] if section.intro else [*questions, options])
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
