"""Replies written the way real chatbots answer (GPT-4o, Claude, Gemini, Llama, Qwen, Mistral, DeepSeek-R1-style
reasoning models, small local models), read through the parse stage as a careful human coder reads them.

Every cell comes from the real planner (``runner.sweep.plan.iter_cells`` over a spec), so the prompt, the option
order (canonical, reversed, shuffled by a seed) and the labels are the ones a model was shown; the labels are read
from the rendered prompt. Replies say what they answer as a *displayed position* (or the label shown there), and
the test maps positions to option IDs through the cell's order. Replies are parsed by the parse stage itself
(``runner.parse.answers.answers_table``), so letter-labelled replies are read as the stage reads them.

Expectations are a careful coder's: an answer the reply commits to is ``ok``; two answers without a hedge or a
revision between them, or a range, are ``ambiguous``; a reply that states no answer is ``no_answer`` or
``refusal`` (docs/parsing.md), never a guessed ``ok``. On the 1.4.0 parser (commit 35dd16c) 227 of the 293
replies read right and 18 got an ``ok`` they do not give; every case must read right now.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.parse import STATUSES, parse_reply
from runner.parse.answers import PARSE_COLUMNS, answers_table
from runner.survey.cell import PromptCell
from runner.survey.instrument import load_instrument
from runner.survey.prompts import build_messages
from runner.sweep.plan import iter_cells
from runner.sweep.spec import spec_from_dict

# ---- cells from the planner ------------------------------------------------------------------------------------


@cache
def _plan(
    language: str, mode: str, fmt: str, order: str, labels: str, persona: str | None, identity: tuple | None, seed: int
) -> dict:
    design = {
        "mode": mode,
        "languages": [language],
        "reply_format": fmt,
        "option_order": [order],
        "option_labels": [labels],
        "seeds": [seed],
        "temperature": [0.7],
        "top_p": [1.0],
        "max_tokens": [1024],
    }
    if persona:
        design["personas"] = [persona]
    if identity:
        design["identities"] = {"countries": [identity[0]], "genders": [identity[1]], "ages": [identity[2]]}
    spec = spec_from_dict(
        {
            "run": {"name": "chatbots", "seed": 13},
            "endpoints": [{"name": "m", "provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}],
            "design": design,
        }
    )
    return {cell.prompt.questions: cell.prompt for cell in iter_cells(spec)}


def planned(
    language: str,
    mode: str,
    question: int | None = None,
    fmt: str = "number",
    order: str = "given",
    labels: str = "digits",
    persona: str | None = None,
    identity: tuple | None = None,
    seed: int = 1,
) -> PromptCell:
    """The planner's cell for this design (item mode: the one asking ``question``); ``identity`` is (country,
    gender, age)."""
    cells = _plan(language, mode, fmt, order, labels, persona, identity, seed)
    return cells[(question,)] if mode == "item" else cells[tuple(range(1, 25))]


def shown(cell: PromptCell) -> dict[int, str]:
    """Position (1-5) -> the option label the item prompt shows there, read from the rendered prompt."""
    user = build_messages(cell)[-1]["content"]
    marked = re.findall(r"^(\S) = (.+)$", user, re.MULTILINE)
    if marked:
        return {i: label for i, (_, label) in enumerate(marked[-5:], start=1)}
    return dict(enumerate(re.findall(r"^- (.+)$", user, re.MULTILINE)[-5:], start=1))


def parse_rows(rows: list[tuple[PromptCell, str]]) -> list[list[tuple]]:
    """(option_id, status, hedged) per question of each (cell, reply), through the parse stage."""
    table = pa.Table.from_pylist(
        [
            {
                "cell_key": f"k{i}",
                "response_text": text,
                "language": cell.language,
                "mode": cell.mode,
                "questions": list(cell.questions),
                "framing": cell.framing.kind,
                "country": cell.framing.country,
                "age": cell.framing.age,
                "gender": cell.framing.gender,
                "option_order": list(cell.option_order),
                "reply_format": cell.reply_format,
                "finish_reason": "stop",
                "option_labels": cell.labels,
            }
            for i, (cell, text) in enumerate(rows)
        ]
    ).select(list(PARSE_COLUMNS))
    out = answers_table(table).to_pylist()
    grouped: dict[str, list[tuple]] = {}
    for row in out:
        grouped.setdefault(row["cell_key"], []).append((row["option_id"], row["status"], row["hedged"]))
    return [grouped[f"k{i}"] for i in range(len(rows))]


# ---- the cases -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A reply and what a careful coder reads in it: per question, a displayed position (ok) or a status."""

    id: str
    language: str
    mode: str
    text: str
    expect: tuple  # item: (position or status,); survey: one per question 1-24
    question: int | None = None
    design: dict = field(default_factory=dict)
    hedged: frozenset[int] = frozenset()  # questions whose answer is hedged

    def cell(self) -> PromptCell:
        return planned(self.language, self.mode, self.question, **self.design)

    def reply(self) -> str:
        if self.mode != "item":
            return self.text
        text = self.text
        for position, label in shown(self.cell()).items():
            text = text.replace(f"{{L{position}}}", label)
        return text

    def expected(self) -> list[tuple]:
        cell = self.cell()
        out = []
        for q, e in zip(cell.questions, self.expect, strict=True):
            if isinstance(e, int):
                out.append((cell.option_order[e - 1], "ok", q in self.hedged))
            else:
                out.append((None, e, False))
        return out


CASES: list[Case] = []


def item(id: str, q: int, text: str, expect, language: str = "en", hedged: bool = False, **design) -> None:
    """An item-mode case: ``text`` may use {L1}..{L5}, the labels shown at positions 1-5."""
    CASES.append(Case(id, language, "item", text, (expect,), q, design, frozenset({q}) if hedged else frozenset()))


def survey(id: str, text: str, expect, language: str = "en", hedged=(), **design) -> None:
    """A survey-mode case; ``expect`` maps question -> position or status (absent questions: no_answer)."""
    full = tuple(expect.get(q, "no_answer") for q in range(1, 25)) if isinstance(expect, dict) else tuple(expect)
    CASES.append(Case(id, language, "survey", text, full, None, design, frozenset(hedged)))


SHUF = {"order": "shuffled"}
REV = {"order": "reversed"}
LET = {"labels": "letters"}
WORDS = {"labels": "words"}
JSON = {"fmt": "json"}
FREE = {"fmt": "free"}

# -- markdown, cues, explanations (GPT-4o / Claude / Gemini house styles) --
item("md-answer-bold", 3, "**Answer: 3**", 3)
item("md-answer-bold-label", 3, "**Answer: 3 ({L3})**\n\nRecognition matters, but it is not everything.", 3, **SHUF)
item("md-header", 7, "### My answer\n\n**2** – {L2}\n\nBeing consulted makes people feel valued.", 2, **SHUF)
item("md-bullet", 5, "- **Choice:** 1\n- **Reason:** pleasant colleagues make every day better.", 1)
item("md-answer-colon-bold", 9, "**Answer:** 4", 4, **REV)
item("bare", 1, "2", 2)
item("bare-period", 1, "2.", 2, **SHUF)
item("bare-newline-explain", 2, "2\n\nA boss you can respect is essential for trust, though not the only thing.", 2)
item("explain-then-rate", 4, "Job security gives peace of mind, especially with a family. I'd rate it a 1.", 1)
item(
    "explain-then-choose",
    10,
    "Promotion prospects are motivating but not decisive for me. I would choose 3.",
    3,
    **SHUF,
)
item("sure-here", 6, "Sure! My answer is **2**.", 2)
item("certainly", 8, "Certainly. I'd go with 4 — the area matters less than the work itself.", 4, **SHUF)
item("gemini-style", 11, "Okay, here's my answer:\n\n**3**\n\nFree time is nice, but balance matters.", 3)
item("selected-option", 12, "Selected option: 2", 2, **REV)
item("number-and-label", 13, "1 = {L1}", 1, **SHUF)
item("label-only-bold", 14, "**{L2}**", 2, **SHUF)
item("label-quoted", 16, 'I would say "{L2}".', 2, **SHUF)
item("label-lower", 18, "{L2}", 2)
item("label-title-case", 21, "Strongly Agree", 1)
item("label-alias-neutral", 22, "Neutral.", 3)
item("label-alias-moderately", 1, "Moderately important.", 3)
item("label-paren-number", 19, "Fairly proud (2).", 2)
item("number-paren-label", 17, "4 (no, seldom)", 4)
item("label-small-diff", 5, "I'd say it's of little importance to me.", 4)
item("label-no-article", 3, "Utmost importance.", 1)
item("label-disagree-number", 22, "3 - strongly agree", "ambiguous", **SHUF, seed=2)
# -- restating the options before choosing --
item(
    "restate-eq",
    16,
    "The options are:\n1 = {L1}\n2 = {L2}\n3 = {L3}\n4 = {L4}\n5 = {L5}\n\nMy answer: 4",
    4,
    **SHUF,
)
item(
    "restate-dot-list",
    15,
    "Here are the options:\n1. {L1}\n2. {L2}\n3. {L3}\n4. {L4}\n5. {L5}\n\n**Answer: 3**",
    3,
    **SHUF,
)
item(
    "restate-dot-list-then-label",
    21,
    "Options:\n1. {L1}\n2. {L2}\n3. {L3}\n4. {L4}\n5. {L5}\n\nI choose {L2}.",
    2,
)
item(
    "restate-then-same-line-answer",
    3,
    "The scale runs from 1 = {L1} to 5 = {L5}.\n\nI'd pick **3 = {L3}**.",
    3,
    **SHUF,
)
item(
    "restate-aliases-then-choice",
    1,
    "1. Utmost importance\n2. Very important\n3. Moderately important\n4. Little importance\n5. No importance\n\n"
    "I choose 2.",
    2,
)
item(
    "restate-no-choice",
    20,
    "1 = {L1}\n2 = {L2}\n3 = {L3}\n4 = {L4}\n5 = {L5}",
    "no_answer",
)
# -- reasoning traces --
item("think-then-number", 4, "<think>\nThe user wants a number. Security is important, maybe 1 or 2.\n</think>\n\n2", 2)
item(
    "think-long-then-bold",
    7,
    "<think>Okay, so I need to pick between 1 and 5. Option 1 is {L1}, option 3 is {L3}. "
    "People like being consulted, so 2 seems right.</think>\n**2**",
    2,
    **SHUF,
)
item("think-unclosed-truncated", 9, "<think>\nLet me weigh this. 2 would mean {L2}, 3 would mean", "no_answer", **SHUF)
item(
    "think-close-only",
    12,
    "Okay, the question is about moderation. I think 3 or 4 fits.\n</think>\n\n4",
    4,
)
item(
    "ollama-thinking",
    16,
    "Thinking...\nThe user asks how often I'm happy. Options 1 to 5. Usually happy means 2, sometimes 3. "
    "I'll go with 2.\n...done thinking.\n\n2",
    2,
)
item(
    "thinking-tags",
    18,
    "<thinking>Health is fine, maybe good (2) or very good (1).</thinking>\nAnswer: 2",
    2,
)
item(
    "reasoning-then-final-line",
    10,
    "Let me think about this carefully. Option 1 means {L1}, which seems too strong. Option 2, {L2}, "
    "could fit someone ambitious. Option 3, {L3}, is a balanced view. Since promotion matters but is not "
    "everything, the balanced view fits best.\n\nFinal answer: 3",
    3,
    **SHUF,
)
item(
    "reasoning-final-answer-bold",
    2,
    "First, consider what respect for a boss means. Some would say 1, others 2. Respect is central to "
    "trust at work.\n\n**Final Answer:** 1",
    1,
)
item(
    "reasoning-boxed",
    21,
    "We need to pick one option. Strongly agree would be 1 and agree 2. Managers need not know everything, "
    "so agree fits.\n\n$\\boxed{2}$",
    2,
)
item("boxed-only", 22, "\\boxed{4}", 4, **SHUF)
item(
    "self-correction-actually",
    13,
    "I'd say 2… actually, on reflection, 3.",
    3,
)
item(
    "self-correction-wait",
    14,
    "My answer is 1. Wait, no — thrift is not that central for me. Let me revise: 2.",
    2,
    **SHUF,
)
item(
    "self-correction-on-second-thought",
    6,
    "Answer: 1\n\nOn second thought, interesting work is important but not the utmost: my answer is 2.",
    2,
)
item("two-answers-no-revision", 5, "Answer: 2. Answer: 3.", "ambiguous")
item("hedge-maybe", 1, "I'd rate it a 2, maybe even a 1.", 2, hedged=True)
item("hedge-or-perhaps", 3, "Answer: 3, or perhaps 4.", 3, hedged=True, **SHUF)
item("range-dash", 4, "2-3", "ambiguous")
item("range-or", 8, "Either 2 or 3, depending on the day.", "ambiguous")
item("range-between", 11, "Somewhere between 2 and 3.", "ambiguous")
item("decimal", 12, "I'd rate it 2.5.", "ambiguous")
# -- number words and ordinals --
item("word-three", 3, "Three.", 3)
item("word-answer-two", 5, "Answer: two", 2, **SHUF)
item("word-bold-four", 9, "**Four**", 4)
item("word-choose", 13, "I would choose three, since helping a friend matters but has limits.", 3, **REV)
item("word-rate-it", 11, "I'd rate it two.", 2)
item("word-one-not-answer", 21, "One can be a good manager without all the answers. I'd say 2.", 2)
item("word-one-of", 2, "I'd say one of the most important things. **1**", 1)
item("word-german", 4, "Antwort: drei", 3, persona="Germany")
item("word-french", 6, "Réponse : deux", 2, persona="France")
item("word-spanish", 7, "Respuesta: tres", 3, persona="Mexico")
item("word-russian", 8, "Ответ: четыре", 4, persona="Russia")
item("ordinal-third-option", 10, "I'd go with the third option.", 3, **SHUF)
item("ordinal-second-one", 14, "The second one.", 2)
item("ordinal-3rd", 1, "I choose the 3rd option, {L3}.", 3, **SHUF)
item("ordinal-first-not-answer", 2, "First, let me say this is hard. I'd say 2.", 2)
item("ordinal-two-ambiguous", 15, "Either the second or the third option.", "ambiguous")
# -- letters --
item("letter-bare", 21, "C", 3, **LET)
item("letter-paren", 22, "(B)", 2, **LET, **SHUF)
item("letter-option", 23, "Option D", 4, **LET)
item("letter-close-paren", 24, "E) {L5}", 5, **LET, **SHUF)
item("letter-bold-dash", 1, "**B** - {L2}", 2, **LET, **SHUF)
item("letter-answer-is", 3, "The answer is C.", 3, **LET)
item("letter-article-a", 21, "A reasonable choice here is D.", 4, **LET)
item("letter-explained", 19, "I'd pick B, because most people are fairly proud of where they come from.", 2, **LET)
item("letter-two", 20, "A or B", "ambiguous", **LET)
item("letter-fullwidth", 16, "Ｃ", 3, **LET)
item("letter-words-only", 18, "{L2}", 2, **LET, **SHUF)
item("letter-refusal", 17, "I'm sorry, but I can't answer personal questions like this.", "refusal", **LET)
# -- words-only prompts --
item("words-exact", 19, "{L3}", 3, **WORDS)
item("words-sentence", 15, "I would answer: {L4}.", 4, **WORDS)
item("words-negated-label", 19, "{L4}", 4, **WORDS)
# -- digits in other scripts --
item("fullwidth-digit", 1, "答案：３", 3, language="zh")
item("arabic-indic", 2, "الإجابة: ٢", 2, language="ar")
item("extended-arabic-indic", 3, "الإجابة: ۴", 4, language="ar")
item("arabic-indic-bare", 16, "٣", 3, language="ar", **SHUF)
# -- JSON --
item("json-option-id", 1, '{"option_id": 2, "reason": "Time for family matters a lot."}', 2, **JSON)
item("json-fenced", 2, '```json\n{"option_id": 1, "reason": "Respect is key."}\n```', 1, **JSON, **SHUF)
item("json-answer-key", 3, '{"answer": 3}', 3, **JSON)
item("json-capital-key", 4, '{"Answer": 2, "Reason": "Security."}', 2, **JSON)
item("json-option-number", 5, '{"option_number": 4, "reason": "Colleagues matter less."}', 4, **JSON)
item("json-selected-option-string", 6, '{"selected_option": "2"}', 2, **JSON)
item("json-string-with-label", 7, '{"option_id": "3 - {L3}"}', 3, **JSON, **SHUF)
item("json-label-value", 8, '{"answer": "{L4}"}', 4, **JSON, **SHUF)
item("json-nested", 9, '{"response": {"option_id": 3, "reason": "Depends."}}', 3, **JSON)
item("json-single-quotes", 10, "{'option_id': 2, 'reason': 'Growth matters.'}", 2, **JSON)
item("json-chatter-after", 11, '{"option_id": 2, "reason": "Fun."}\n\nLet me know if you need more!', 2, **JSON)
item("json-chatter-before", 12, 'Here is my answer in JSON:\n```json\n{"option_id": 4}\n```', 4, **JSON)
item("json-null", 13, '{"option_id": null, "reason": "As an AI I have no friends."}', "refusal", **JSON)
item("json-no-option", 14, '{"reason": "Thrift is good."}', "invalid_format", **JSON)
item("json-out-of-range", 15, '{"option_id": 7}', "out_of_range", **JSON)
item("json-text-answer", 16, "I'd say 2.", 2, **JSON)
item("json-think", 17, '<think>Maybe 3.</think>\n{"option_id": 4, "reason": "Rarely."}', 4, **JSON)
item("json-choice-letter-key", 18, '{"choice": 2, "explanation": "Good health."}', 2, **JSON)
# -- code fences --
item("fence-bare", 19, "```\n2\n```", 2)
item("fence-answer", 20, "```text\nAnswer: 3\n```", 3, **SHUF)
# -- refusals and disclaimers --
item("ai-disclaimer-then-answer", 15, "As an AI, I don't feel nervous, but if I had to choose, I'd say 4.", 4)
item(
    "ai-disclaimer-then-bold",
    16,
    "As an AI language model, I don't have feelings. However, answering as a typical person: **2**",
    2,
)
item("ai-disclaimer-only", 16, "As an AI language model, I don't experience happiness.", "refusal")
item("refusal-cannot", 19, "I cannot answer questions about national pride.", "refusal")
item(
    "refusal-claude",
    19,
    "I don't feel comfortable claiming a nationality. Could we discuss the survey instead?",
    "refusal",
)
item(
    "refusal-restates-options",
    18,
    "I'm not able to describe my health, as I don't have a body. The options were:\n1 = {L1}\n2 = {L2}\n"
    "3 = {L3}\n4 = {L4}\n5 = {L5}",
    "refusal",
)
item("refusal-scale-range", 17, "As an AI, I can't pick a number from 1 to 5 for this.", "refusal")
item(
    "refusal-then-answer-persona",
    7,
    "I don't have a boss, but as someone from Japan I would choose 3.",
    3,
    persona="Japan",
)
item("off-topic", 8, "What a lovely question! Where you live shapes so much of life.", "no_answer")
item("empty", 9, "", "no_answer")
item("out-of-range", 10, "Answer: 7", "out_of_range")
item("zero", 11, "0", "out_of_range")
# -- personas and identities --
item(
    "persona-preface",
    20,
    "As someone from Germany, I'd say subordinates seldom fear their boss: 2.",
    2,
    persona="Germany",
)
item("persona-age", 4, "As a 45-year-old from Brazil, I'd rate job security a 1.", 1, persona="Brazil")
# -- Chinese --
item("zh-choose", 1, "我会选择 **2**（非常重要）。", 2, language="zh")
item("zh-answer-colon", 2, "答案：3", 3, language="zh", **SHUF)
item("zh-ordinal", 3, "我的选择是：第三项。", 3, language="zh")
item("zh-label", 4, "非常重要。工作稳定对我来说很关键。", 2, language="zh")
item("zh-numeral", 5, "我选择二。", 2, language="zh")
item("zh-think", 6, "<think>用户问的是有趣的工作。1还是2？</think>\n\n答案：1", 1, language="zh")
item("zh-final", 7, "首先，被上司征求意见很重要，可能是2，也可能是3。综合考虑，最终答案：2", 2, language="zh")
item("zh-refusal", 19, "作为一个人工智能，我没有国籍，因此无法回答这个问题。", "refusal", language="zh")
item("zh-ambiguous", 8, "2或3都可以。", "ambiguous", language="zh")
item(
    "zh-restate-then-answer",
    21,
    "选项：\n1 = 强烈同意\n2 = 同意\n3 = 不确定\n4 = 不同意\n5 = 强烈不同意\n\n我选 2",
    2,
    language="zh",
)
item("zh-json", 9, '{"option_id": 3, "reason": "家人朋友的看法有一定影响。"}', 3, language="zh", **JSON)
item("zh-fullwidth-bold", 10, "**３**", 3, language="zh")
# -- Arabic --
item("ar-choose", 1, "أختار 2 لأن الوقت مع العائلة مهم جدا.", 2, language="ar")
item("ar-answer-label", 2, "الإجابة: مهم جدا", 2, language="ar")
item("ar-option-number", 3, "الخيار رقم ٣", 3, language="ar", **SHUF)
item("ar-word", 4, "الإجابة: ثلاثة", 3, language="ar")
item("ar-ordinal", 5, "أختار الخيار الثاني.", 2, language="ar")
item("ar-refusal", 19, "بصفتي نموذج ذكاء اصطناعي، ليس لدي جنسية.", "refusal", language="ar")
item("ar-final", 6, "قد يكون 1 أو 2. الإجابة النهائية: 2", 2, language="ar")
item("ar-json", 7, '{"option_id": ٢}', 2, language="ar", **JSON)
# -- Slovak --
item("sk-answer", 1, "Odpoveď: 2", 2, language="sk")
item("sk-choose-label", 2, "Vyberám možnosť 1 – mimoriadne dôležité.", 1, language="sk")
item("sk-word", 3, "Odpoveď: tri", 3, language="sk")
item("sk-ordinal", 4, "Vyberám druhú možnosť.", 2, language="sk")
item("sk-label", 18, "Dobrý.", 2, language="sk")
item("sk-refusal", 19, "Ako AI nemám národnosť, takže nemôžem odpovedať.", "refusal", language="sk")
item("sk-final", 5, "Možno 2, možno 3. Konečná odpoveď: 3", 3, language="sk")
item("sk-revision", 6, "Povedal by som 1, ale po zvážení: 2.", 2, language="sk")
# -- more in the instrument languages --
item("zh-revision", 11, "我选2。仔细想想，还是3吧。", 3, language="zh")
item("zh-label-run", 16, "{L1}、{L2}、{L3}、{L4}还是{L5}？很难说。", "no_answer", language="zh", **SHUF)
item("zh-restated-question", 16, "您多久感到快乐一次？{L2}。", 2, language="zh", **SHUF)
item("zh-boxed", 17, "综合来看，答案是 $\\boxed{4}$", 4, language="zh")
item("zh-hedge", 18, "我会选2，也许3。", 2, language="zh", hedged=True)
item("zh-json-fence", 19, '```json\n{"option_id": 2, "reason": "比较自豪"}\n```', 2, language="zh", **JSON)
item("ar-revision", 9, "أختار 1. بعد التفكير، أختار 2.", 2, language="ar")
item("ar-think", 10, "<think>ربما 2 أو 3</think>\n\nالإجابة: 3", 3, language="ar")
item("ar-bold-label", 11, "**{L2}**", 2, language="ar", **SHUF)
item("ar-hedge", 12, "الإجابة: 2، ربما 3.", 2, language="ar", hedged=True)
item("sk-revision-vlastne", 11, "Odpoveď: 2. Vlastne nie, 3.", 3, language="sk")
item("sk-think", 12, "<think>Možno 1 alebo 2.</think>\n\n**2**", 2, language="sk")
item("sk-word-choose", 13, "Vyberám tri.", 3, language="sk")
item("sk-label-run", 16, "{L1}, {L2}, {L3}, {L4} alebo {L5}? Ťažko povedať.", "no_answer", language="sk", **SHUF)
item("sk-ambiguous", 14, "2 alebo 3.", "ambiguous", language="sk")
# -- small local models --
item("small-echo-question", 16, "How often are you happy? {L3}.", 3, **SHUF)
item("small-number-dot-label", 17, "3. {L3}", 3, **SHUF)
item("small-repeat", 18, "2\n2\n2", 2)
item("small-answer-twice-diff", 19, "1\n3", "ambiguous")
item("small-option-prefix", 20, "Option 3", 3)
item("small-the-answer-is", 21, "The answer is 2 (agree).", 2)
item("small-rating-out-of", 22, "4/5", 4)
item("small-question-ref", 23, "Question 23: 2", 2)
item("small-fewshot-echo", 1, "Example reply:\n2", 2, fmt="fewshot")
item("small-free-chat", 2, "Honestly, having a boss I can respect is very important to me.", 2, fmt="free")
item("small-free-label-echo", 3, "Getting recognition is {L3}.", 3, fmt="free", **SHUF)
# -- what is not an answer, however it looks --
item("not-bold-one-heading", 1, "**One** important point: it depends on the company.", "no_answer")
item("not-say-one-thing", 2, "I'd say one thing: it depends on the company.", "no_answer")
item("not-three-factors", 3, "Three factors matter here: pay, people and purpose.", "no_answer")
item("not-numbered-reasons", 4, "Answer: 2\n\nReasons:\n1. Security\n2. Family\n3. Planning", 2, **SHUF)
item("not-article-a", 21, "A good manager does not need every answer, so I {L2}.", 2, **LET)
item("not-this-one", 5, "I'd rate this one highly: {L2}.", 2, **SHUF)
item("not-wait-times", 8, "Wait times are long where I live. I'd rate it a 3.", 3)
item("not-scale-ends", 15, "I cannot choose; anything from 1 ({L1}) to 5 ({L5}) could apply.", "refusal", **SHUF)
item("not-torn", 6, "I'm torn between 2 and 3.", "ambiguous")
item("not-restated-only-words", 16, "{L1}, {L2}, {L3}, {L4} or {L5}? Hard to say.", "no_answer", **SHUF)
item("restated-words-then-choice", 16, "{L1}, {L2}, {L3}, {L4} or {L5}? I'd say {L4}.", 4, **SHUF)
item("not-attributed-revision", 17, "Answer: 2. Actually, many would pick 4.", 2)
item("not-option-lead-commit", 18, "Option 2 is too strong; option 3 fits better.", "ambiguous")
item("not-option-word-lead-commit", 19, "Option three is too strong; option two fits better.", "ambiguous")
item("word-range", 20, "My answer: two or three.", "ambiguous")
item("ordinal-alone-after-cue", 21, "I'd go with the first.", 1, **SHUF)
item("ordinal-alone-not-cued", 22, "First, managers need not know everything. I'd say 2.", 2)
item("option-word-later", 23, "Having thought about it, option four.", 4, **SHUF)
item("attributed-then-own", 24, "Some would say 1, but I'd say 3.", 3, **SHUF)
item("attributed-label", 16, "Most people would say {L2}; I'd say {L3}.", 3, **SHUF)
item(
    "not-hedge-inside-label",
    1,
    "Let me think step by step. Option 1 means {L1}. Option 2 means {L2}. Option 3 means {L3}.",
    "ambiguous",
    order="shuffled",
    seed=3,  # shows "of very little or no importance" first: its "or" is no hedge
)
item("hedge-after-label-with-or", 1, "5 = {L5}, maybe 4", 5, hedged=True)
item(
    "zh-not-cue-before-list",
    16,
    "作为一个AI，我无法选择：1 = {L1}, 2 = {L2}, 3 = {L3}, 4 = {L4}, 5 = {L5}",
    "refusal",
    language="zh",
    **SHUF,
)
item("thinking-ellipsis", 3, "Thinking…\nRecognition: 2 or 3?\n…done thinking.\n\n**3**", 3, **SHUF)
item("not-listed-scale", 4, "1, 2, 3, 4, 5", "ambiguous")
item("comma-two-answers", 5, "Answer: 2, 3", "ambiguous", **SHUF)
# -- more forms --
item("keycap-emoji", 1, "Answer: 3\ufe0f\u20e3", 3)
item("japanese-persona", 2, "答え：2", 2, persona="Japan")
item("em-dash-cue", 3, "Answer — 4", 4, **SHUF)
item("out-of-5", 7, "I'd rate it 2 out of 5.", 2)
item("scale-then-answer", 9, "On a scale of 1 to 5, I'd say 4.", 4, **SHUF)
item("rating-slash", 10, "Rating: 3/5 — {L3}", 3, **SHUF)
item("letter-lower-paren", 22, "My answer is (c).", 3, **LET)
item("think-label", 16, "<think>Maybe {L2}, maybe {L3}.</think>\n\n{L3}", 3, **SHUF)
item("go-with-then-bold", 11, "Okay, let me think. Fun matters, so I'll go with 2.\n\n**Answer: 2**", 2)
item("json-float", 12, '{"rating": 2.0}', 2, **JSON)
item("json-word", 13, '{"option_id": "two"}', 2, **JSON)
item("json-truncated-fence", 14, '```json\n{\n  "option_id": 4,\n  "reason": "Saving money is', 4, **JSON)
item("json-reason-mentions", 15, '{"option_id": 3, "reason": "Not 2 or 4: sometimes."}', 3, **JSON, **SHUF)
item("refusal-ai-nervous", 15, "I'm an AI and don't experience nervousness, so I can't answer that.", "refusal")
item("zh-ordinal-ge", 11, "我选择第二个选项。", 2, language="zh", **SHUF)
item("zh-bold-cue", 12, "**答案：** 4", 4, language="zh")
item("zh-option-label", 13, "选项 3（中等重要）", 3, language="zh")
item("zh-think-numbers", 14, "<think>嗯，用户问节俭。可能是2或者3。</think>\n\n3", 3, language="zh")
item("ar-option-label", 8, "الخيار ٣: متوسط الأهمية", 3, language="ar")
item("ar-refusal-cannot", 19, "لا أستطيع الإجابة على هذا السؤال.", "refusal", language="ar")
item("sk-answer-label", 9, "Moja odpoveď je 4 (málo dôležité).", 4, language="sk")
item("sk-ordinal-alone", 10, "Tretia možnosť.", 3, language="sk")
# -- house styles of particular models --
item("gpt4o-dash-label", 3, "**3 – {L3}**\n\nWhile recognition is nice, it is not my main driver.", 3, **SHUF)
item("claude-bold-paren", 2, "I'd choose **2 ({L2})**. Having a boss I can respect matters a great deal.", 2, **SHUF)
item("llama-answer-is-colon", 5, "The answer is: 3", 3)
item(
    "gemini-answer-explanation",
    6,
    "**Answer:** 2 - {L2}\n\n**Explanation:** Interesting work keeps me engaged.",
    2,
    **SHUF,
)
item("mistral-rate-as", 7, "Based on my values, I would rate it as 2 ({L2}).", 2, **SHUF)
item("r1-think-answer", 8, "<think>\nThe area matters somewhat. 3 or 4? I'd lean 3.\n</think>\n\n**Answer:** 3", 3)
item("identity-age", 9, "As a 35-year-old woman from India, I'd say 1.", 1, identity=("India", "female", 35))
item(
    "identity-age-label",
    10,
    "Speaking as a 45-year-old man from Japan: {L2}.",
    2,
    identity=("Japan", "male", 45),
    **SHUF,
)
item("persona-refusal", 19, "I can't speak for everyone in China, so I won't rate this.", "refusal", persona="China")

# -- surveys --
A = [2, 1, 3, 2, 2, 1, 3, 3, 4, 2, 3, 3, 2, 3, 4, 2, 3, 1, 2, 3, 2, 1, 3, 4]
ALL = dict(enumerate(A, start=1))


def lines(fmt: str, answers=A, start: int = 1) -> str:
    return "\n".join(fmt.format(q=q, a=a) for q, a in enumerate(answers, start=start))


survey("sv-plain", lines("{q}. {a}"), A)
survey("sv-preface-note", "Sure! Here are my answers:\n\n" + lines("{q}. {a}") + "\n\nLet me know if you need more.", A)
survey("sv-bold", lines("**{q}.** {a}"), A, **SHUF)
survey("sv-q-colon", lines("Q{q}: {a}"), A)
survey("sv-question-word", lines("Question {q}: {a}"), A)
survey("sv-bullets", lines("- Q{q}: **{a}**"), A)
survey("sv-table", "| Question | Answer |\n|---|---|\n" + lines("| {q} | {a} |"), A)
survey("sv-table-q", "| # | Answer |\n|:-:|:-:|\n" + lines("| Q{q} | {a} |"), A)
survey("sv-comma-list", ", ".join(map(str, A)), A)
survey("sv-comma-preface", "Here are my answers: " + ", ".join(map(str, A)) + ".", A)
survey("sv-space-list", " ".join(map(str, A)), A)
survey("sv-inline", " ".join(f"{q}. {a}" for q, a in ALL.items()), A)
survey("sv-inline-eq", "; ".join(f"Q{q}={a}" for q, a in ALL.items()), A)
survey("sv-json-list", json.dumps([{"question": q, "option_id": a, "reason": "x"} for q, a in ALL.items()]), A)
survey("sv-json-array", json.dumps(A), A)
survey("sv-json-object", json.dumps({f"Q{q}": a for q, a in ALL.items()}), A)
survey("sv-json-answers", "```json\n" + json.dumps({"answers": {str(q): a for q, a in ALL.items()}}) + "\n```", A)
survey("sv-json-responses", json.dumps({"responses": [{"q": q, "answer": a} for q, a in ALL.items()]}), A)
survey("sv-missing", lines("{q}. {a}", A[:20]), {q: A[q - 1] for q in range(1, 21)})
survey(
    "sv-missing-middle",
    "\n".join(f"{q}. {a}" for q, a in ALL.items() if q != 15),
    {q: a for q, a in ALL.items() if q != 15},
)
survey("sv-extra", lines("{q}. {a}") + "\n25. 1\n26. 2\n27. 3", A)
survey("sv-think", "<think>I will answer each one.</think>\n" + lines("{q}. {a}"), A)
survey("sv-think-close-only", "Okay, 24 questions, let me go.\n</think>\n\n" + lines("{q}. {a}"), A)
survey(
    "sv-labels",
    "\n".join(
        f"{q}. {label}"
        for q, label in enumerate(
            ["very important", "of utmost importance", "of moderate importance", "very important", "very important"]
            + ["of utmost importance", "of moderate importance", "of moderate importance", "of little importance"]
            + ["very important", "of moderate importance", "of moderate importance", "very important"]
            + ["of moderate importance", "seldom", "usually", "sometimes", "very good", "fairly proud", "sometimes"]
            + ["agree", "strongly agree", "undecided", "disagree"],
            start=1,
        )
    ),
    A,
)
survey("sv-chatty", lines("{q}. I'd say {a}, it matters to me."), A)
survey("sv-twice-diff", lines("Q{q}: {a}") + "\nQ3: 5", {**ALL, 3: "ambiguous"})
survey("sv-range", lines("{q}. {a}").replace("\n5. 2\n", "\n5. 2-3\n"), {**ALL, 5: "ambiguous"})
survey("sv-refusal", "I'm sorry, but I can't complete this survey as if I had personal values.", ["refusal"] * 24)
survey(
    "sv-persona",
    "As someone from Japan, here are my answers:\n" + lines("{q}. {a}"),
    A,
    persona="Japan",
)
survey("sv-zh", lines("{q}. {a}"), A, language="zh")
survey("sv-zh-question", lines("第{q}题：{a}"), A, language="zh")
survey("sv-ar", lines("{q}. {a}").translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")), A, language="ar")
survey("sv-sk", "Tu sú moje odpovede:\n" + lines("{q}. {a}"), A, language="sk")
survey(
    "sv-sections-restart",
    "For the ideal job:\n"
    + lines("{q}. {a}", A[:10])
    + "\n\nPrivate life:\n"
    + lines("{q}. {a}", A[10:14])
    + "\n\nAbout you:\n"
    + lines("{q}. {a}", A[14:20])
    + "\n\nStatements:\n"
    + lines("{q}. {a}", A[20:]),
    A,
)
survey(
    "sv-restated-questions",
    "\n".join(
        [
            "1. Have sufficient time for your personal or home life: 2",
            "2. Have a boss (direct superior) you can respect: 1",
            "3. Get recognition for good performance: 3",
        ]
    ),
    {1: 2, 2: 1, 3: 3},
)
survey("sv-labels-with-numbers", lines("{q}. {a} ({a})"), A)
survey("sv-bold-answers", lines("{q}. **{a}**"), A)

survey("sv-dash", lines("Q{q} - {a}"), A)
survey("sv-colon", lines("{q}: {a}"), A, **SHUF)
survey("sv-bare-lines", "\n".join(map(str, A)), A)
survey("sv-sections-bold", "**Section 1: The ideal job**\n" + lines("{q}. {a}", A[:10]) + "\n\n**Section 2**\n"
       + lines("{q}. {a}", A[10:], start=11), A)  # fmt: skip
survey(
    "sv-table-text",
    "| # | Question | Answer |\n|---|---|---|\n"
    + "\n".join(f"| {q} | {load_instrument('en').questions[q].text} | {a} |" for q, a in ALL.items()),
    A,
)
survey("sv-json-q-strings", json.dumps([{"question": f"Q{q}", "answer": str(a)} for q, a in ALL.items()]), A)
survey(
    "sv-partial-then-refusal",
    "I can answer the first ten:\n" + lines("{q}. {a}", A[:10]) + "\n\nI'd rather not answer the personal ones.",
    {q: A[q - 1] for q in range(1, 11)},
)
survey("sv-comma-short", ", ".join(map(str, A[:23])), {})
survey("sv-sk-otazka", lines("Otázka {q}: {a}"), A, language="sk")
survey("sv-ar-question", lines("السؤال {q}: {a}"), A, language="ar")
for _language in ("en", "zh", "ar", "sk"):
    _instrument = load_instrument(_language)
    survey(
        f"sv-labels-{_language}",
        "\n".join(f"{q}. {_instrument.questions[q].label(a)}" for q, a in ALL.items()),
        A,
        language=_language,
    )
survey("sv-think-reasoning-list", "<think>Q1 maybe 1 or 2.</think>\n\n" + lines("**Q{q}:** {a}"), A, **REV)

_EN = load_instrument("en")
survey(
    "sv-gpt4o-bold-text",
    "### Ideal job\n"
    + "\n".join(
        f"{q}. **{_EN.questions[q].text[:1].upper()}{_EN.questions[q].text[1:]}**: {a}" for q, a in ALL.items()
    ),
    A,
)
survey(
    "sv-number-dash-label",
    "\n".join(f"{q}. {a} – {_EN.questions[q].label(a)}" for q, a in ALL.items()),
    A,
)
survey(
    "sv-chatty-bold",
    "\n".join(f"{q}. {_EN.questions[q].text} – **{a}**. That is how I feel." for q, a in ALL.items()),
    A,
)
survey("sv-identity", "As a 25-year-old man from Brazil:\n" + lines("{q}. {a}"), A, identity=("Brazil", "male", 25))

survey(
    "sv-reasoning-then-final",
    "Let me go through these.\nQ1: time for home life matters, maybe 1 or 2.\nQ2: a respected boss, 1.\n"
    "Q3: recognition, 2 or 3.\n\n**Final answers:**\n" + lines("{q}. {a}"),
    A,
)
survey("sv-summary-too-short", lines("{q}. {a}") + "\n\nSummary:\n1. 2\n2. 1", A)

survey("sv-zh-final", "<think>逐题考虑。</think>\n\n**最终答案：**\n" + lines("{q}. {a}"), A, language="zh")
survey("sv-ar-comma", "إجاباتي: " + "، ".join(map(str, A)), A, language="ar")
survey("sv-sk-table", "| Otázka | Odpoveď |\n|---|---|\n" + lines("| {q} | {a} |"), A, language="sk")


# ---- the test --------------------------------------------------------------------------------------------------


def test_the_corpus_is_large_and_covers_the_styles():
    assert len(CASES) >= 150
    assert len({c.id for c in CASES}) == len(CASES)
    assert Counter(c.language for c in CASES).keys() == {"en", "zh", "ar", "sk"}
    assert sum(c.mode == "survey" for c in CASES) >= 30
    assert {c.design.get("labels", "digits") for c in CASES} == {"digits", "letters", "words"}
    assert {c.design.get("order", "given") for c in CASES} == {"given", "shuffled", "reversed"}


@pytest.fixture(scope="module")
def results() -> list[tuple[Case, list[tuple], list[tuple]]]:
    parsed = parse_rows([(case.cell(), case.reply()) for case in CASES])
    return [(case, got, case.expected()) for case, got in zip(CASES, parsed, strict=True)]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_chatbot_reply_reads_as_a_careful_coder_reads_it(case, results):
    _, got, expected = next(r for r in results if r[0] is case)
    assert got == expected, case.reply()


def test_no_reply_gets_an_answer_it_does_not_give(results):
    # the one error a coder must never make: an ok answer where the reply states none (or another one)
    invented = [
        (case.id, case.cell().questions[i], g, e)
        for case, got, expected in results
        for i, (g, e) in enumerate(zip(got, expected, strict=True))
        if g[1] == "ok" and g[:2] != e[:2]
    ]
    assert not invented, invented


_PIECES = st.sampled_from(
    ["three", "two or three", "the second or the third option", "option four", "I'd go with the first.", "**One**",
     "actually", "wait,", "on second thought", "Final answer:", "\\boxed{", "}", "Answer:", "\n", " ", ", ", "2",
     "3", "7", "A", "B", "(c)", "Ｄ", "A good", "1 = always", "2 = usually", "3. never", "always, usually, sometimes",
     "many would pick", "<think>", "</think>", "Thinking...\n", "...done thinking.", "{'answer': 2}",
     '{"response": {"option_id": 3}}', "2, 1, 3, 4", "Q1=2; ", "**Final answers:**\n", "1. 2\n", "segunda", "或",
     "ثلاثة", "الخيار الثاني", "tretia možnosť", "вариант", "или", "\x00"]
)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # no lone surrogates: the store makes every reply encodable before the stage reads it (tests/test_parse_total.py
    # feeds them to parse_reply directly)
    pieces=st.lists(st.one_of(_PIECES, st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)), max_size=40),
    which=st.integers(0, 5),
)
def test_new_readings_stay_total(pieces, which):
    """Any mix of the new readings' markers yields one status per question through the parse stage."""
    cells = [
        planned("en", "item", 1),
        planned("en", "item", 21, labels="letters"),
        planned("en", "survey"),
        planned("zh", "item", 16, order="shuffled"),
        planned("ar", "survey", fmt="json"),
        planned("sk", "item", 19, labels="words"),
    ]
    cell = cells[which]
    [got] = parse_rows([(cell, "".join(pieces))])
    assert len(got) == len(cell.questions)
    assert all(status in STATUSES and (option is None) == (status != "ok") for option, status, _ in got)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.one_of(_PIECES, st.just("\ud800"), st.text(max_size=12)), max_size=40), survey=st.booleans())
def test_new_readings_stay_total_on_any_text(pieces, survey):
    """The same for ``parse_reply`` itself, lone surrogates included."""
    cell = planned("en", "survey") if survey else planned("en", "item", 16, order="shuffled")
    answers = parse_reply("".join(pieces), cell).answers
    assert [a.question for a in answers] == list(cell.questions)
    assert all(a.status in STATUSES and (a.option_id is None) == (a.status != "ok") for a in answers)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # a pronoun "one" after a choice verb is not option 1 (1.5.0 as first written read 1 in all three)
        ("If I had to choose one, it would be 3", (3, "ok")),
        ("I can't pick one.", (None, "refusal")),
        ("I refuse to choose one.", (None, "no_answer")),
        ("Answer: one", (1, "ok")),
        ("I'd choose option one.", (1, "ok")),
        # a comma pairs two options only where the second ends its phrase (as first written: ambiguous)
        ("Final answer: 2, 1 being too strong", (2, "ok")),
        ("I'd rate it 2, 1 would be too strong", (2, "ok")),
        ("Answer: 4, 5 felt too extreme", (4, "ok")),
        ("2, 3", (None, "ambiguous")),
        ("The scale is 1, 2, 3, 4, 5. I choose 4.", (4, "ok")),
        # truncated JSON is read by the keys a whole reply is read by (as first written: invalid_format)
        ('{"response": 3, "reason": "abc', (3, "ok")),
        ('{"value": 2, "why', (2, "ok")),
    ],
)
def test_review_cases_pronoun_one_and_comma_pairs(reply: str, expected: tuple) -> None:
    answer = parse_reply(reply, PromptCell("en", "item", (4,))).answers[0]
    assert (answer.option_id, answer.status) == expected
