"""Build ``replies.jsonl``: whole-survey and item replies in the styles real chatbots used, with known answers.

Run from the repository root: ``.venv/bin/python tests/data/real_replies/build.py``. Every reply is constructed
(seeded, deterministic) from a style below and an answer drawn per question, so the expected parse is the
answer the reply was built to state, never the parser's output. See README.md in this folder for provenance.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from runner.survey.instrument import load_instrument

OUT = Path(__file__).with_name("replies.jsonl")
LANGUAGES = ("en", "zh", "ar", "sk")
ALL = tuple(range(1, 25))

PREFACE = {
    "en": ["Alright, here are my answers:", "Sure! Here are my responses:", "Here is how I would answer:"],
    "zh": ["好的，以下是我的回答：", "以下是我的答案：", "当然，我的回答如下："],
    "ar": ["حسنا، إليك إجاباتي:", "إليك إجاباتي على الاستبيان:", "فيما يلي إجاباتي:"],
    "sk": ["Dobre, tu sú moje odpovede:", "Tu sú moje odpovede:", "Odpovedal by som takto:"],
}
NOTE = {
    "en": "Note: These are fictional responses and should not be taken as a representation of any real person.",
    "zh": "注意：这些是虚构的回答，不代表任何真实个人的偏好。",
    "ar": "ملاحظة: هذه إجابات افتراضية ولا تمثل آراء أي شخص حقيقي.",
    "sk": "Poznámka: Toto sú fiktívne odpovede, ktoré nepredstavujú názory žiadnej skutočnej osoby.",
}
SECTION_TITLES = {
    "en": ["For the ideal job:", "For the private life:", "About you:", "For the statements:"],
    "zh": ["关于理想工作：", "关于私人生活：", "关于您自己：", "关于陈述："],
    "ar": ["بالنسبة للوظيفة المثالية:", "بالنسبة للحياة الخاصة:", "عنك:", "بالنسبة للعبارات:"],
    "sk": ["Pri ideálnej práci:", "V súkromnom živote:", "O Vás:", "Tvrdenia:"],
}
SECTION_WORD = {"en": "Section", "zh": "第{n}部分", "ar": "القسم", "sk": "Časť"}
CUE = {
    "en": ["I'd rate it a {d}.", "I'd say {d}.", "My answer: {d}.", "I would choose {d}."],
    "zh": ["我会选择{d}。", "我的答案是{d}。", "我选{d}。"],
    "ar": ["أختار {d}.", "إجابتي هي {d}.", "الإجابة: {d}."],
    "sk": ["Vyberám {d}.", "Moja odpoveď je {d}.", "Odpoveď: {d}."],
}
CHATTER = {
    "en": [
        "Hey there! As someone from the United States, I'd say this matters to me, you know?",
        "Honestly, this is something I think about quite a lot.",
        "Good question! It really depends on the day, but overall",
    ],
    "zh": ["这是个好问题！作为一个普通人，我觉得", "说实话，我经常考虑这个问题。", "总的来说，"],
    "ar": ["سؤال جيد! بشكل عام أعتقد أن", "بصراحة، أفكر في هذا كثيرا.", "بشكل عام،"],
    "sk": ["Dobrá otázka! Celkovo si myslím, že", "Úprimne, o tomto premýšľam dosť často.", "Celkovo vzaté,"],
}
# Refusals worded without the usual "as an AI" markers (Claude 2 style, CAT v1 Section 3 notes that Claude 2
# refused in many scenarios), and the usual ones, per language.
REFUSALS = {
    "en": [
        (
            "I do not feel comfortable providing personal opinions on these topics or pretending to have a nationality."
            " Perhaps we could have a thoughtful discussion about workplace values instead?"
        ),
        (
            "I'd rather not answer this survey as if I were a person. Perhaps we could talk about what the survey"
            " measures?"
        ),
        "I apologize, but I don't think I should speculate about how someone from another country would feel.",
        "I'm not comfortable role-playing a nationality for a values questionnaire.",
        "Thank you for the question. I must respectfully decline to rate this, since I have no personal life.",
        "As an AI language model, I don't have personal preferences or feelings.",
    ],
    "zh": [
        "我不太方便回答这些涉及个人价值观的问题。也许我们可以聊聊这份问卷想测量什么？",
        "抱歉，我不能代表任何国家的人来作答。",
        "我宁愿不以某个国家的人的身份来回答这份问卷。",
        "作为一个人工智能，我没有个人偏好，因此无法回答。",
        "我觉得不太合适回答这个问题，我们可以换个话题吗？",
    ],
    "ar": [
        "لا أشعر بالارتياح للإجابة عن هذه الأسئلة الشخصية. ربما يمكننا مناقشة ما يقيسه هذا الاستبيان بدلا من ذلك؟",
        "أعتذر، لكنني أفضل عدم التظاهر بأنني شخص من بلد معين.",
        "ليس من المناسب أن أجيب عن هذا السؤال نيابة عن شخص حقيقي.",
        "بصفتي نموذج ذكاء اصطناعي، ليس لدي تفضيلات شخصية.",
        "عذرا، لا أرغب في الإجابة عن هذا السؤال.",
    ],
    "sk": [
        (
            "Necítim sa pohodlne odpovedať na tieto osobné otázky. Možno by sme mohli namiesto toho diskutovať o tom,"
            " čo dotazník meria?"
        ),
        "Ospravedlňujem sa, ale radšej nebudem predstierať, že som z určitej krajiny.",
        "Nie je vhodné, aby som odpovedal v mene skutočného človeka.",
        "Ako AI nemám osobné preferencie, takže nemôžem odpovedať.",
        "Prepáčte, na túto otázku nechcem odpovedať.",
    ],
}
PARTIAL_REFUSAL = {
    "en": "I'd prefer not to answer this one.",
    "zh": "这个问题我不太方便回答。",
    "ar": "أفضل عدم الإجابة عن هذا السؤال.",
    "sk": "Na túto otázku radšej nebudem odpovedať.",
}


def _instrument(language: str):
    return load_instrument(language)


def _label(language: str, question: int, option: int) -> str:
    return _instrument(language).questions[question].label(option)


def _text(language: str, question: int) -> str:
    return _instrument(language).questions[question].text


def _sections(language: str) -> list[tuple[int, ...]]:
    return [s.questions for s in _instrument(language).sections]


def _ok(answers: dict[int, int]) -> list[list]:
    return [[q, answers[q], "ok", False] for q in ALL]


def survey_bare(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    lines = [rng.choice(PREFACE[lang]), ""] + [f"{q}. {answers[q]}" for q in ALL]
    return "\n".join(lines)


def survey_gpt4_sections(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    """CAT v2 Appendix I.2: numbering restarts per block, with block titles and a closing note."""
    out = [rng.choice(PREFACE[lang]), ""]
    blocks = [(0, range(1, 11)), (1, range(11, 15)), (2, range(15, 21)), (3, range(21, 25))]
    for title, questions in blocks:
        if title is not None:
            out += [SECTION_TITLES[lang][title], ""]
        out += [f"{i}. {answers[q]}" for i, q in enumerate(questions, start=1)] + [""]
    out.append(NOTE[lang])
    return "\n".join(out)


def _section_header(lang: str, n: int, title: str) -> str:
    word = SECTION_WORD[lang]
    head = word.format(n=n) if "{n}" in word else f"{word} {n}"
    return f"**{head} – {title.rstrip(':：')}**"


def survey_restated_dotted(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    """The questionnaire restated with its own section numbering ("3.1") and item numbers in parentheses."""
    out = [rng.choice(PREFACE[lang]), ""]
    for s, questions in enumerate(_sections(lang), start=1):
        out.append(_section_header(lang, s, SECTION_TITLES[lang][s - 1]))
        for i, q in enumerate(questions, start=1):
            out.append(f"{s}.{i} {_text(lang, q).rstrip('?？؟:')} ({q}): {answers[q]} – {_label(lang, q, answers[q])}")
        out.append("")
    return "\n".join(out)


def survey_restated_sections(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    """Sections numbered 1-4 as list entries, items under them with their number in parentheses first."""
    out = [rng.choice(PREFACE[lang]), ""]
    for s, questions in enumerate(_sections(lang), start=1):
        out.append(f"{s}. {SECTION_TITLES[lang][s - 1]}")
        out += [f"   ({q}) {_text(lang, q)} — {answers[q]} ({_label(lang, q, answers[q])})" for q in questions]
        out.append("")
    return "\n".join(out)


def survey_restated_trailing(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    """Per-section numbering 1..n, the item text, then "(Q15)" and the answer as a label only."""
    out = [rng.choice(PREFACE[lang]), ""]
    for s, questions in enumerate(_sections(lang), start=1):
        out.append(_section_header(lang, s, SECTION_TITLES[lang][s - 1]))
        for i, q in enumerate(questions, start=1):
            out.append(f"{i}. {_text(lang, q).rstrip('?？؟:')} (Q{q}) → {_label(lang, q, answers[q])}")
        out.append("")
    return "\n".join(out)


def survey_echo_labels(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    """Each item restated with its global number, the answer as a label after a dash."""
    out = [rng.choice(PREFACE[lang]), ""]
    out += [f"{q}. {_text(lang, q)} - {_label(lang, q, answers[q])}" for q in ALL]
    return "\n".join(out)


def survey_table(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    head = {"en": "| # | Question | Answer |", "zh": "| # | 问题 | 答案 |", "ar": "| # | السؤال | الإجابة |"}
    out = [rng.choice(PREFACE[lang]), "", head.get(lang, "| # | Otázka | Odpoveď |"), "|---|---|---|"]
    out += [f"| {q} | {_text(lang, q)} | {answers[q]} ({_label(lang, q, answers[q])}) |" for q in ALL]
    return "\n".join(out)


def survey_unnumbered_echo(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    """No numbers at all: each item restated, the answer on the same line after a colon."""
    out = [rng.choice(PREFACE[lang]), ""]
    out += [f"- {_text(lang, q).rstrip('?？؟:')}: {answers[q]}" for q in ALL]
    return "\n".join(out)


def survey_llama(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    """CAT v2 Appendix I.3: one chatty paragraph per question, "Question N:" first."""
    word = {"en": "Question {q}:", "zh": "第{q}题：", "ar": "السؤال {q}:", "sk": "Otázka {q}:"}[lang]
    out = []
    for q in ALL:
        cue = rng.choice(CUE[lang]).format(d=answers[q])
        out.append(f"{word.format(q=q)} {rng.choice(CHATTER[lang])} {cue}")
        out.append("")
    return "\n".join(out)


def survey_restated_with_scales(lang: str, rng: random.Random, answers: dict[int, int]) -> str:
    """The whole prompt restated, scale lines included, each item followed by "→ N" (the answer)."""
    out = [rng.choice(PREFACE[lang]), ""]
    for s, questions in enumerate(_sections(lang), start=1):
        q0 = questions[0]
        scale = ", ".join(f"{o} = {_label(lang, q0, o)}" for o in range(1, 6))
        out += [_section_header(lang, s, SECTION_TITLES[lang][s - 1]), scale]
        out += [f"{i}. {_text(lang, q)} → {answers[q]}" for i, q in enumerate(questions, start=1)] + [""]
    return "\n".join(out)


SURVEY_STYLES = {
    "gpt35_bare_list": survey_bare,
    "gpt4_section_restarts": survey_gpt4_sections,
    "restated_dotted_sections": survey_restated_dotted,
    "restated_numbered_sections": survey_restated_sections,
    "restated_trailing_q_label": survey_restated_trailing,
    "echo_with_labels": survey_echo_labels,
    "markdown_table": survey_table,
    "unnumbered_echo": survey_unnumbered_echo,
    "llama_chatty": survey_llama,
    "restated_with_scales": survey_restated_with_scales,
}


def item_reply(lang: str, rng: random.Random, question: int, option: int, style: str) -> str:
    label = _label(lang, question, option)
    if style == "chatty_cue":
        return f"{rng.choice(CHATTER[lang])} {rng.choice(CUE[lang]).format(d=option)}"
    if style == "bold_label":
        return f"**{label}**"
    if style == "number_dash_label":
        return f"{option} - {label}"
    if style == "json_reason":
        return json.dumps({"option_id": option, "reason": rng.choice(CHATTER[lang])}, ensure_ascii=False)
    if style == "hedged_cue":
        other = option + 1 if option < 5 else option - 1
        hedge = {"en": "maybe even", "zh": "也许", "ar": "ربما", "sk": "možno"}[lang]
        return f"{rng.choice(CHATTER[lang])} {rng.choice(CUE[lang]).format(d=option)} {hedge} {other}."
    if style == "echo_then_label":
        return f"{_text(lang, question)}\n\n{label}."
    raise ValueError(style)


ITEM_STYLES = ("chatty_cue", "bold_label", "number_dash_label", "json_reason", "echo_then_label", "hedged_cue")


def build() -> list[dict]:
    rng = random.Random(20261201)
    rows: list[dict] = []

    def add(lang, mode, questions, style, text, expected, reply_format="number"):
        rows.append(
            {
                "id": f"real-{len(rows) + 1:03d}",
                "language": lang,
                "mode": mode,
                "questions": list(questions),
                "option_order": [1, 2, 3, 4, 5],
                "reply_format": reply_format,
                "style": style,
                "text": text,
                "expected": expected,
            }
        )

    for lang in LANGUAGES:
        for style, make in SURVEY_STYLES.items():
            answers = {q: rng.randint(1, 5) for q in ALL}
            add(lang, "survey", ALL, style, make(lang, rng, answers), _ok(answers))
        for text in REFUSALS[lang]:
            add(lang, "survey", ALL, "refusal_survey", text, [[q, None, "refusal", False] for q in ALL])
        order = rng.sample(range(1, 6), 5)  # shuffled options: the list states displayed positions
        answers = {q: rng.randint(1, 5) for q in ALL}
        add(lang, "survey", ALL, "shuffled_bare_list", survey_bare(lang, rng, answers), _ok(answers))
        rows[-1]["option_order"] = order
        rows[-1]["expected"] = [[q, order[answers[q] - 1], "ok", False] for q in ALL]
        answers = {q: rng.randint(1, 5) for q in ALL}
        lines = [f"{q}. {PARTIAL_REFUSAL[lang] if q == 19 else answers[q]}" for q in ALL]
        expected = [[q, None, "refusal", False] if q == 19 else [q, answers[q], "ok", False] for q in ALL]
        add(lang, "survey", ALL, "partial_refusal", "\n".join(lines), expected)
        for style in ITEM_STYLES:
            for _ in range(2):
                question, option = rng.randint(1, 24), rng.randint(1, 5)
                reply_format = "json" if style == "json_reason" else "free"
                text = item_reply(lang, rng, question, option, style)
                expected = [[question, option, "ok", style == "hedged_cue"]]
                add(lang, "item", (question,), style, text, expected, reply_format)
        for text in REFUSALS[lang]:
            question = rng.randint(1, 24)
            add(lang, "item", (question,), "refusal_item", text, [[question, None, "refusal", False]], "free")
    return rows


if __name__ == "__main__":
    built = build()
    with OUT.open("w", encoding="utf-8") as handle:
        for row in built:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(built)} replies -> {OUT}")
