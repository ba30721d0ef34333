"""Survey replies: all asked questions answered in one reply, as a list (numbered or not) or as JSON.

Each list entry is aligned to a question by what it says, not by the first number on its line (see
``_from_list``): an explicit question reference ("Q15", "(15)", "第15题"), the item text it restates
(``runner.parse.echo``), the reply's own "section.item" numbering ("3.1"), or its list number. Numbering may
restart per section, as the prompts of the CAT papers did (1-10, 1-4, 1-6, 1-4; GPT-4 sample in CAT v2
Appendix I): when a number is below the previous one, the entries continue with the next instrument section not
yet begun (or the section a header line named); the same question answered twice differently is ambiguous.
Restated scale lines and section titles are not entries. Questions without an entry stay ``no_answer``. A reply
that lists the answers alone ("2, 1, 3, …") is read in question order where it holds one per question asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from runner.parse import markers
from runner.parse.echo import echo_index
from runner.parse.item import Context, context, from_json_object, from_json_value, parse_item
from runner.parse.jsonreply import first_json
from runner.parse.normalize import normalize, without_reasoning
from runner.parse.result import Answer
from runner.survey.cell import PromptCell
from runner.survey.instrument import load_instrument

_QUESTION_WORD = r"(?:question|q|item|otázka|otázke|č\.|问题|题|السؤال|سؤال|#)"
# An entry's leading number: "1.", "1)", "**1.**", "| 1 |", "١-", "Q1:", "(15)", "第1题", or "3.1" (section.item).
_LINE_NUMBER = re.compile(
    rf"[ \t>*_#•|\-]*(?:{_QUESTION_WORD}\s*)?"
    r"(?:(\d{1,2})\.(\d{1,2})(?=[\s.):*]|$)|[(\[](\d{1,2})[)\]]|第\s*(\d{1,2})\s*[题個个]"
    r"|(\d{1,2})\s*(?:\*\*)?\s*(?:[.):|\-](?!\d)|(?=\*\*)))"
    r"[ \t]*(.*)$"
)
_MARKUP = " \t>*_#•|-"  # what may stand before an entry's number ("**1.**", "| 1 |", "- 1.")
_EXPLICIT = re.compile(rf"[ \t>*_#•|\-]*{_QUESTION_WORD}\s*\d")
# A question named inside an entry: "(15)", "[Q15]", "(item 15)", "Q15", "question 15", "第15题".
_REFERENCE = re.compile(
    rf"[(\[]\s*{_QUESTION_WORD}?\s*(\d{{1,2}})\s*[)\]]"
    r"|(?<!\w)(?:question|q|item|otázka|السؤال|سؤال|问题)\s*#?\s*(\d{1,2})(?!\d)|第\s*(\d{1,2})\s*[题題]"
)
# A header naming a section by number: "Section 3", "Part 2", "Časť 3", "القسم 3", "第3部分", "第三部分".
_SECTION_WORD = re.compile(
    r"(?:section|part|časť|oddiel|sekcia|القسم|الجزء)\s*(\d)(?!\d)|第\s*([1-4一二三四])\s*(?:部分|节|節)"
)
_LETTER = re.compile(r"[^\W\d_]")
_LOOSE = 0.3  # share of the named question's text that marks its restatement, where the entry's number named it
_SCALE_POINT = re.compile(r"(?<!\d)[1-5]\s*(?:=|-(?=\s*[^\W\d]))")
_DIGIT = re.compile(r"\d")
_INLINE = re.compile(r"(?<!\d)(\d{1,2})\s*[.):=]\s*(\d)(?!\d)")
# The answers alone, in question order: "2, 1, 3, …", "2 1 3 …", "2; 1; 3" (one-digit values, one separator kind).
_SEQUENCE = re.compile(r"(?<![\w.])\d(?!\w|\.\d)(?:(?:[ \t]*[,;，、،][ \t]*|[ \t]+)\d(?!\w|\.\d))+")
# Keys that hold a JSON survey's answers ({"answers": [...]}, {"responses": {...}}).
_CONTAINERS = ("answers", "responses", "results", "survey", "items", "questions", "data")
# Only at the start of a whitespace run: "\s+" retried at every position of a long run was quadratic.
_INLINE_START = re.compile(r"(?<!\s)\s+(?=\d{1,2}\s*[.)]\s*\d(?!\d))")
_QUESTION_KEY = re.compile(r"\D*(\d{1,2})$")
# A header that opens the reply's final list after it reasoned through the questions ("**Final answers:**",
# "My answers:", "最终答案：", "الإجابات النهائية:", "Konečné odpovede:"); the list after the last one is read, where
# it answers at least half the questions asked. Looked for in the last ``_FINAL_REACH`` characters.
_FINAL_LIST = re.compile(
    r"(?:^|\n)[ \t*#>_]*(?:(?:my )?final (?:answers?|responses?)|my answers|summary|最终答案|最终回答|"
    r"الاجابات النهائيه|konečné odpovede)[ \t*_]*[:：]?[ \t*_]*(?=\n)"
)
_FINAL_HINT = re.compile(r"final|my answers|summary|最终|النهائيه|konečné")
_FINAL_REACH = 65_536


def parse_survey(text: str, cell: PromptCell) -> tuple[Answer, ...]:
    """One answer per question in ``cell.questions`` (in that order) from a survey reply."""
    t = without_reasoning(normalize(text))
    contexts = {q: context(cell.language, q, cell.option_order, cell.reply_format) for q in cell.questions}
    found: dict[int, Answer] = {}
    final = _FINAL_LIST.search(t, max(0, len(t) - _FINAL_REACH)) if _FINAL_HINT.search(t) else None
    if final is not None:  # "Final answers:" after reasoning through the questions: the list from there on
        last = final
        for last in _FINAL_LIST.finditer(t, final.start()):  # noqa: B007 - the last one is wanted
            pass
        found = _answers(t[last.end() :], cell, contexts)
        if 2 * len(found) < len(cell.questions):
            found = {}
    if not found:
        found = _answers(t, cell, contexts)
    if not found:
        status = "refusal" if markers.REFUSAL.search(t) else "no_answer"
        return tuple(Answer(q, None, status) for q in cell.questions)
    return tuple(found.get(q) or Answer(q, None, "no_answer") for q in cell.questions)


def _answers(t: str, cell: PromptCell, contexts: dict[int, Context]) -> dict[int, Answer]:
    """The answers a (normalised) survey reply states: JSON, else a list."""
    found: dict[int, Answer] = {}
    if "[" in t or "{" in t:
        found = _from_json(t, contexts)
    return found or _from_list(t, cell, contexts)


def _record(found: dict[int, Answer], answer: Answer) -> None:
    """Keep the first answer to a question; a later, different answer to it makes it ambiguous. An entry that
    says nothing (a restated question, a section title) is no answer and is not recorded."""
    if answer.status == "no_answer":
        return
    earlier = found.get(answer.question)
    if earlier is None:
        found[answer.question] = answer
    elif earlier.option_id != answer.option_id or earlier.status != answer.status:
        found[answer.question] = Answer(answer.question, None, "ambiguous")


def _from_json(t: str, contexts: dict[int, Context]) -> dict[int, Answer]:
    value = first_json(t, "[") if "[" in t and ("{" not in t or t.index("[") < t.index("{")) else None
    if value is None:
        value = first_json(t, "{")
    if isinstance(value, dict) and not any(_QUESTION_KEY.match(str(key)) for key in value):
        inner = next((value[k] for k in _CONTAINERS if isinstance(value.get(k), (list, dict))), None)
        if inner is None:
            nested = [v for v in value.values() if isinstance(v, (list, dict))]
            inner = nested[0] if len(nested) == 1 else None
        value = inner if inner is not None else value
    found: dict[int, Answer] = {}
    asked = list(contexts)
    if isinstance(value, list):
        for index, item in enumerate(value):
            question = _json_question(item, index, asked)
            if question in contexts:
                ctx = contexts[question]
                answer = from_json_object(item, t, ctx) if isinstance(item, dict) else from_json_value(item, t, ctx)
                _record(found, answer)
    elif isinstance(value, dict):
        for key, item in value.items():
            match = _QUESTION_KEY.match(str(key))
            if match and int(match.group(1)) in contexts:
                ctx = contexts[int(match.group(1))]
                answer = from_json_object(item, t, ctx) if isinstance(item, dict) else from_json_value(item, t, ctx)
                _record(found, answer)
    return found


def _json_question(item: object, index: int, asked: list[int]) -> int | None:
    if isinstance(item, dict):
        for key in ("question", "question_id", "q", "number", "item"):
            value = item.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str):
                match = _QUESTION_KEY.match(value)
                if match:
                    return int(match.group(1))
    return asked[index] if index < len(asked) else None


def _from_list(t: str, cell: PromptCell, contexts: dict[int, Context]) -> dict[int, Answer]:
    """Answers of a list reply, each aligned to its question by what the line says, not by its first number.

    In order of trust: an explicit question reference ("Q15", "(15)", "第15题"; a bracketed number up to 5 only
    where it equals the question the entry's position gives), the question whose text the line restates
    (``runner.parse.echo``), the reply's own "section.item" numbering ("3.1" is the first asked item of the third
    section), and the list number, read as the question number or, where numbering restarts, as a position in
    the next section not yet begun (or the section a header line just named).
    """
    lines = []
    for line in t.splitlines():  # "1. 2 2. 3 3. 1 ...": a list written on one line is one entry per line
        lines += (
            _INLINE_START.sub("\n", line).splitlines() if len(line) > 8 and len(_INLINE.findall(line)) > 1 else [line]
        )
    asked = frozenset(cell.questions)
    layout = _layout(cell.language, cell.questions)
    index = echo_index(cell.language)
    found: dict[int, Answer] = {}
    state = _Numbering()
    bare: list[str] = []
    numbered = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        match = _LINE_NUMBER.match(line)
        content = match.group(6) if match else line
        terse = len(content.strip()) <= 3  # "1. 2", "2": no header, reference or echo to look for (fast path)
        if not terse:
            if _is_scale(line):
                continue
            header = _SECTION_WORD.search(line[:80])
            section = index.section(line) if header is None and not _DIGIT.search(line) else None
            if header is not None:
                numeral = header.group(1) or header.group(2)
                section = int(numeral) - 1 if numeral.isascii() else "一二三四".index(numeral)
            if section is not None and 0 <= section < len(layout.sections) and not _has_answer_after(line, header):
                state.section = section
                continue
        question = None
        if match:
            numbered += 1
            question = state.question(match, layout)
        echo = None
        if not terse:
            question, content = _by_reference(content, question, asked)
            echo = index.find(content, asked)
        if echo is not None and (question is None or (question != echo.question and echo.coverage >= 0.8)):
            question = echo.question
            state.follow(question, match, layout)
        if question is None or question not in asked:
            if not match:
                bare.append(line)
            continue
        state.highest = max(state.highest, question)
        if echo is None and not terse and _LETTER.search(content):
            echo = index.restated(content, question)  # a looser restatement of the question the entry names
            echo = echo if echo is not None and echo.coverage >= _LOOSE else None
        if echo is not None and echo.question == question:
            after = content[echo.end :]
            content = after if _DIGIT.search(after) or len(after.strip()) > 2 else content[: echo.start] + after
        elif layout.echoes[question] in content:
            content = content.replace(layout.echoes[question], " ")
        answer = parse_item(content, contexts[question])
        while answer.status == "no_answer" and i < len(lines) and lines[i].strip() and not _starts_entry(lines[i]):
            answer = parse_item(lines[i], contexts[question])  # the answer on the next line ("Answer: 2")
            i += 1
        _record(found, answer)
    if not found and not numbered:
        short = [line for line in bare if line.strip()]
        if len(short) == len(cell.questions) and all(len(line.strip()) <= 3 for line in short):
            for question, line in zip(cell.questions, short, strict=True):  # bare answers, one per line
                _record(found, parse_item(line, contexts[question]))
        else:
            for m in _INLINE.finditer(t):
                if int(m.group(1)) in asked:
                    _record(found, parse_item(m.group(2), contexts[int(m.group(1))]))
        if not found:
            _from_sequence(t, cell, contexts, found)
    return found


def _from_sequence(t: str, cell: PromptCell, contexts: dict[int, Context], found: dict[int, Answer]) -> None:
    """Record a reply that lists the answers alone, in question order ("2, 1, 3, …"): only where exactly one
    such run holds exactly one value per question asked (a shorter one cannot say which question it skipped)."""
    runs = [m.group() for m in _SEQUENCE.finditer(t)]
    full = [run for run in runs if len(_DIGIT.findall(run)) == len(cell.questions)]
    if len(full) != 1 or len(runs) > 2:
        return
    for question, value in zip(cell.questions, _DIGIT.findall(full[0]), strict=True):
        _record(found, parse_item(value, contexts[question]))


class _Numbering:
    """How the reply numbers its entries so far: the offset of its list numbers, and the section it is in."""

    __slots__ = ("base", "highest", "previous", "section")

    def __init__(self) -> None:
        self.base, self.previous, self.highest = 0, 0, 0
        self.section: int | None = None  # set by a header line, consumed by the next plain list number

    def question(self, match: re.Match[str], layout: _Layout) -> int | None:
        """The question an entry's leading number gives (None where it gives none)."""
        dotted, item, bracketed, chinese, plain = match.group(1, 2, 3, 4, 5)
        if dotted:  # "3.1": the reply's own section numbering
            section, position = int(dotted) - 1, int(item)
            if 0 <= section < len(layout.sections) and 1 <= position <= len(layout.sections[section]):
                self.section = None
                return layout.sections[section][position - 1]
            return None
        if bracketed or chinese:
            return int(bracketed or chinese)  # "(15)", "第15题": the number
        start = match.start(5)
        if start and match.string[:start].strip(_MARKUP) and _EXPLICIT.match(match.string):
            return int(plain)  # "Q15", "Question 15": the number
        number = int(plain)
        if self.section is not None:  # a header named the section: a number in it is global, else a position
            members = layout.sections[self.section]
            self.base = 0 if members[0] <= number <= members[-1] else members[0] - 1
            self.section = None
        elif number < self.previous and number <= self.highest:  # restarted: go on with the next section
            following = next((s[0] for s in layout.sections if s[0] > self.highest), None)
            if following is None:
                return None
            self.base = following - 1
        self.previous = number
        if self.base and self.base + number > layout.last and self.highest < number <= layout.last:
            self.base = 0  # "15." after a restarted block: the list went back to the questions' own numbers
        return self.base + number

    def follow(self, question: int, match: re.Match[str] | None, layout: _Layout) -> None:
        """Re-anchor plain list numbers on ``question``, which the entry's content showed it answers."""
        if match and match.group(5) and not match.group(1):
            self.base = question - int(match.group(5))


def _by_reference(content: str, question: int | None, asked: frozenset[int]) -> tuple[int | None, str]:
    """The question an explicit reference in ``content`` names, and ``content`` without it."""
    for ref in _REFERENCE.finditer(content):
        named = int(ref.group(1) or ref.group(2) or ref.group(3))
        # "(15)" or "Q15" names a question; "(2)" does only where it is the question the position gives:
        # "3. (2) very important" keeps its (2) as the answer.
        bracketed = ref.group(1) is not None
        if not bracketed and question is not None and ref.start() > 3:
            continue  # "2 (as question 3 also says)": a mention in the answer's chatter, not the entry's question
        if named in asked and (not bracketed or named > 5 or named == question):
            return named, content[: ref.start()] + " " + content[ref.end() :]
    return question, content


def _has_answer_after(line: str, header: re.Match[str] | None) -> bool:
    """Whether a header-like line also carries an answer after its section number ("Part 1: 3")."""
    rest = line[header.end() :] if header is not None else line
    return bool(re.search(r"[:\-]\s*\d\s*$", rest))


def _is_scale(line: str) -> bool:
    """A restated scale ("1 = of utmost importance, 2 = very important, ...", "1-always 2-usually ...")."""
    return len(_SCALE_POINT.findall(line)) >= 3


def _starts_entry(line: str) -> bool:
    return _LINE_NUMBER.match(line) is not None or _REFERENCE.search(line) is not None


@dataclass(frozen=True, slots=True)
class _Layout:
    """The asked questions of each section, in order, and each question's normalised text (to drop echoes)."""

    sections: tuple[tuple[int, ...], ...]
    echoes: dict[int, str]
    last: int  # the highest question asked


@lru_cache(maxsize=256)
def _layout(language: str, questions: tuple[int, ...]) -> _Layout:
    """The layout of ``questions`` asked in ``language``."""
    instrument = load_instrument(language)
    asked = set(questions)
    sections = tuple(
        tuple(q for q in s.questions if q in asked) for s in instrument.sections if any(q in asked for q in s.questions)
    )
    echoes = {q: normalize(instrument.questions[q].text).rstrip("?.:") for q in questions}
    return _Layout(sections, echoes, max(questions))
