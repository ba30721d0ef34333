"""Reading a prompt as a model would: which language, questions, persona, option order and reply format.

The reader knows the wording of every language in ``data/instrument`` and ``data/prompts`` and matches the
prompt's lines against it; it never needs the ``PromptCell`` that produced the prompt. All lookup tables are
built once (question lines, option blocks in every order, instruction patterns, reply-format instructions), so
reading a prompt is a few dictionary lookups, and repeated prompts hit a cache.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from runner.survey.cell import CANONICAL_ORDER, LETTERS, Framing, PromptCell, position_marks

Messages = tuple[tuple[str, str], ...]


class TemplateReader:
    """Reads prompts worded with hofcat's instrument and prompt templates, in any of ``languages``."""

    def __init__(self, languages: Iterable[str] | None = None) -> None:
        from runner.survey.instrument import languages as instrument_languages
        from runner.survey.instrument import load_instrument
        from runner.survey.prompts import load_templates

        self._system: dict[str, tuple[str, str, str]] = {}  # instruction text → (language, mode, format)
        self._label_kinds: dict[str, str] = {}  # letter / words instruction text → option_labels
        self._lines: dict[str, tuple[str, int]] = {}  # question line → (language, question)
        # (language, question) → options block → order; questions on one scale share the inner dict. Keyed by
        # question because two scales can hold the same labels in reverse (always…never, never…always).
        self._options: dict[tuple[str, int], dict[str, tuple[int, ...]]] = {}
        self._instructions: list[tuple[str, str, str, re.Pattern[str]]] = []  # (language, mode, framing, pattern)
        self._countries: dict[tuple[str, str], str] = {}  # (language, shown name) → country key
        self._genders: dict[tuple[str, str], str] = {}
        self._labels: dict[tuple[str, int], tuple[str, ...]] = {}
        for language in languages or instrument_languages():
            instrument = load_instrument(language)
            templates = load_templates(language)
            layout = templates["layout"]
            blocks: dict[tuple[str, ...], dict[str, tuple[int, ...]]] = {}
            for name, body in templates["reply_formats"].items():
                for mode, text in body.items():
                    if text.strip():
                        self._system.setdefault(text.strip(), (language, mode, name))
            for number, question in instrument.questions.items():
                self._lines[question.text.strip()] = (language, number)
                self._lines[layout["question_line"].format(number=number, text=question.text).strip()] = (
                    language,
                    number,
                )
                labels = tuple(question.label(i) for i in CANONICAL_ORDER)
                self._labels[(language, number)] = labels
                self._options[(language, number)] = blocks.get(labels) or blocks.setdefault(
                    labels, _option_blocks(labels, layout)
                )
            for labels, body in templates.get("reply_labels", {}).items():  # "reply with the letter / the words"
                for mode, text in body.items():
                    self._system.setdefault(text.strip(), (language, mode, "number"))
                    self._label_kinds.setdefault(text.strip(), labels)
            if "verbalized" in templates:  # the verbalized measurement's instruction: read as reply format "verbalized"
                for kind in ("digits", "letters"):
                    text = verbalized_system(templates["verbalized"], kind)
                    self._system.setdefault(text, (language, "item", "verbalized"))
                    self._label_kinds.setdefault(text, kind)
            for mode, framings in templates["instructions"].items():
                for framing, text in framings.items():
                    self._instructions.append((language, mode, framing, _pattern(text)))
            self._countries.update({((language, shown)): key for key, shown in templates["countries"].items()})
            self._genders.update({((language, shown)): key for key, shown in templates["genders"].items()})

    def labels(self, language: str, question: int) -> tuple[str, ...] | None:
        """Option texts of ``question`` in option-ID order, in ``language``; None when unknown."""
        return self._labels.get((language, question))

    def read(self, messages: Messages) -> PromptCell | None:
        """The cell ``messages`` ask, or None when no VSM13 question appears in them."""
        return self._read(messages)

    @lru_cache(maxsize=16_384)  # noqa: B019 - one reader per server; the cache lives as long as it does
    def _read(self, messages: Messages) -> PromptCell | None:
        system = "\n".join(c for r, c in messages if r in ("system", "developer")).strip()
        user = "\n".join(c for r, c in messages if r == "user")
        found = [self._lines[line.strip()] for line in user.splitlines() if line.strip() in self._lines]
        if not found:
            return None
        language = Counter(lang for lang, _ in found).most_common(1)[0][0]
        questions = tuple(sorted({q for lang, q in found if lang == language}))
        order = self._option_order(user, language, questions[0])
        formatted = self._system.get(system)
        if formatted:
            reply_format = formatted[2]
        else:
            reply_format = "json" if "json" in system.casefold() else ("number" if system else "free")
        # The instruction says "the question below" or "the questions below": it decides the mode; without a
        # known instruction, the reply-format instruction or the number of questions does.
        instructed = self._instruction(user.strip().split("\n\n", 1)[0].strip(), language)
        if instructed is not None:
            mode, framing = instructed
        else:
            mode = formatted[1] if formatted else ("item" if len(questions) == 1 else "survey")
            framing = Framing()
        labels = self._label_kinds.get(system, "digits")
        return PromptCell(language, mode, questions, framing, order, reply_format, labels)  # type: ignore[arg-type]

    def _option_order(self, user: str, language: str, question: int) -> tuple[int, ...]:
        """The displayed order of ``question``'s options (one order per prompt); canonical when not shown."""
        blocks = self._options[(language, question)]
        for block in itertools.chain(user.split("\n\n"), user.splitlines()):
            order = blocks.get(block.strip())
            if order is not None:
                return order
        return CANONICAL_ORDER

    def _instruction(self, instruction: str, language: str) -> tuple[str, Framing] | None:
        """(mode, framing) of the first matching instruction template; None when none matches."""
        for lang, mode, framing, pattern in self._instructions:
            if lang != language:
                continue
            match = pattern.fullmatch(instruction)
            if match is None:
                continue
            groups = match.groupdict()
            country = self._countries.get((language, groups.get("country", "")))
            if framing == "none" or country is None:
                return mode, Framing()
            if framing == "identity":
                age = groups.get("age", "")
                gender = self._genders.get((language, groups.get("gender", "")))
                return mode, Framing("identity", country, int(age) if age.isdigit() else None, gender)
            return mode, Framing("persona", country)
        return None


def verbalized_system(body: dict[str, str], labels: str) -> str:
    """The verbalized instruction as a prompt with ``labels`` shows it (runner.survey.prompts)."""
    from runner.survey.prompts import verbalized_example

    return body["item"].replace("{example}", verbalized_example(position_marks(labels) or (), body["value"])).strip()


def _option_blocks(labels: tuple[str, ...], layout: dict[str, str]) -> dict[str, tuple[int, ...]]:
    """Every way the prompt can show options with ``labels`` (each order, item and survey joins) → order."""
    out: dict[str, tuple[int, ...]] = {}
    for order in itertools.permutations(CANONICAL_ORDER):
        shown = [layout["option"].format(position=p, label=labels[i - 1]) for p, i in enumerate(order, 1)]
        for join in (layout["option_join_item"], layout["option_join_survey"]):
            out[join.join(shown).strip()] = order
        # option_labels letters ("A = …") and words ("- …"), item prompts only
        lettered = [
            layout["option"].format(position=m, label=labels[i - 1]) for m, i in zip(LETTERS, order, strict=True)
        ]
        out[layout["option_join_item"].join(lettered).strip()] = order
        if "option_words" in layout:
            worded = [layout["option_words"].format(label=labels[i - 1]) for i in order]
            out[layout["option_join_item"].join(worded).strip()] = order
    return out


def _pattern(template: str) -> re.Pattern[str]:
    """A regex matching ``template`` with {country}, {gender} and {age} as named groups."""
    pattern = re.escape(template.strip())
    for name, group in (("country", r"(?P<country>.+?)"), ("gender", r"(?P<gender>.+?)"), ("age", r"(?P<age>\d+)")):
        pattern = pattern.replace(re.escape("{" + name + "}"), group)
    return re.compile(pattern, re.DOTALL)
