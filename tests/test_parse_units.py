"""Parser building blocks: normalisation, label matching, what is not an answer, survey numbering."""

from __future__ import annotations

import pytest

from runner.parse import parse_reply
from runner.parse.labels import matcher
from runner.parse.normalize import bare, normalize
from runner.survey.cell import PromptCell

ALL = tuple(range(1, 25))


def test_normalize_maps_digits_and_folds_arabic():
    assert normalize("٠١٢٣٤٥٦٧٨٩ ۰۱۲۳ ０１２３：（）") == "0123456789 0123 0123:()"
    assert normalize("جداً") == normalize("جدا")  # tanween dropped
    assert normalize("أوافق") == normalize("اوافق") == "اوافق"  # alef with hamza folded
    assert normalize("جيدة") == normalize("جيده")  # teh marbuta folded
    assert normalize("Veľmi DÔLEŽITÉ") == "veľmi dôležité"  # Slovak diacritics kept
    assert bare("**Disagree**.") == "disagree"


@pytest.mark.parametrize(
    ("language", "scale", "text", "expected"),
    [
        ("en", "agreement", "i strongly disagree", [5]),
        ("en", "agreement", "disagree, not agree", [4]),  # "agree" negated; "disagree" is not "agree"
        ("en", "importance", "not very important but of little importance", [4]),
        ("en", "frequency", "usually, or always", [2, 1]),
        ("zh", "agreement", "我不同意，而不是强烈不同意", [4]),  # second is negated by 不是
        ("zh", "importance", "非常不重要或无关紧要", [5]),
        ("ar", "agreement", normalize("أختلف بشدة"), [5]),
        ("sk", "agreement", "nesúhlasím", [4]),  # "súhlasím" inside it is not a match
        ("sk", "pride", "nie veľmi hrdý", [4]),
    ],
)
def test_labels_longest_first_whole_word_not_negated(language, scale, text, expected):
    assert [option for _, _, option in matcher(language, scale).find(text)] == expected


@pytest.mark.parametrize(
    ("text", "option", "status"),
    [
        ("On a scale from 1 to 5, 4.", 4, "ok"),
        ("Question 3: I'd say 2", 2, "ok"),
        ("Q12 -> 5", 5, "ok"),
        ("I'd give it 4 out of 5.", 4, "ok"),
        ("1 = of utmost importance, 2 = very important, 3 = of moderate importance. I pick 3.", 3, "ok"),
        ("I have worked 10 years; 2.", 2, "ok"),
        ("I'd say 2 or 3", None, "ambiguous"),
        ("Answer: 2. Answer: 4.", None, "ambiguous"),
        ("Answer: 2, or perhaps 4.", 2, "ok"),
        ("Answer: 66", None, "out_of_range"),
        ("Very important (2); for others it is of utmost importance.", 2, "ok"),
    ],
)
def test_what_counts_as_the_answer(text, option, status):
    answer = parse_reply(text, PromptCell("en", "item", (1,))).answers[0]
    assert (answer.option_id, answer.status) == (option, status)


def test_hedge_is_recorded_only_after_a_hedge_word():
    cell = PromptCell("en", "item", (1,))
    assert parse_reply("Answer: 2, or perhaps 4.", cell).answers[0].hedged
    assert not parse_reply("Answer: 2.", cell).answers[0].hedged


def test_survey_numbering_restarts_per_section():
    cell = PromptCell("en", "survey", ALL)
    blocks = [range(1, 11), range(1, 5), range(1, 7), range(1, 5)]
    answers = [(q % 5) + 1 for q in ALL]
    lines, it = [], iter(answers)
    for block in blocks:
        lines += [f"{n}. {next(it)}" for n in block] + [""]
    result = parse_reply("\n".join(lines), cell).answers
    assert [a.option_id for a in result] == answers


def test_survey_subset_and_json_keys():
    cell = PromptCell("en", "survey", (1, 2, 3), reply_format="json")
    result = parse_reply('{"answers": {"Q1": 2, "q2": {"option_id": 5}, "question_3": "agree"}}', cell).answers
    assert [(a.option_id, a.status) for a in result] == [(2, "ok"), (5, "ok"), (None, "invalid_format")]


def test_survey_refusal_marks_every_question():
    result = parse_reply("Ako jazykový model nemám osobné preferencie.", PromptCell("sk", "survey", ALL))
    assert {a.status for a in result.answers} == {"refusal"} and len(result.answers) == 24


def test_item_answers_are_shared_immutable_values():
    cell = PromptCell("en", "item", (7,))
    first, second = parse_reply("3", cell).answers[0], parse_reply("Answer: 3", cell).answers[0]
    assert first == second
    with pytest.raises(AttributeError):
        first.option_id = 4  # type: ignore[misc]


def test_parenthesised_numbers_in_survey_entries():
    cell = PromptCell("en", "survey", ALL)
    text = "1. (3) of moderate importance\n2. (2) very important\n3. (11) 4"
    result = parse_reply(text, cell).by_question()
    assert (result[1].option_id, result[2].option_id) == (3, 2)  # answers in parentheses stay answers
    assert (result[11].option_id, result[3].status) == (4, "no_answer")  # (11) cannot be an answer: a question


@pytest.mark.parametrize("text", ['{"response": 4}', '{"selected_option": "4"}', '{"value": 4.0}'])
def test_json_option_field_names(text):
    assert parse_reply(text, PromptCell("en", "item", (1,), reply_format="json")).answers[0].option_id == 4


def _survey(text: str, language: str = "en") -> dict[int, tuple[int | None, str]]:
    answers = parse_reply(text, PromptCell(language, "survey", ALL)).answers
    return {a.question: (a.option_id, a.status) for a in answers if a.status != "no_answer"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the reply's own section numbering and the item number in parentheses after the restated item
        (
            (
                "**Section 3 – About you**\n3.1 How often do you feel nervous or tense? (15): 4 – seldom\n"
                "3.2 How often are you happy? (16): 2"
            ),
            {15: (4, "ok"), 16: (2, "ok")},
        ),
        # a numbered section title is not an answer; "(17)" names the question
        (
            "3. About you:\n   (17) Do other people prevent you? — 3\n   (18) State of health — 2",
            {17: (3, "ok"), 18: (2, "ok")},
        ),
        # the restated item holds a label word ("often"): only what follows the restated text is the answer
        ("16. How often are you happy? Often", {16: (2, "ok")}),
        ("- How often do you feel nervous or tense: 5", {15: (5, "ok")}),
        # a header naming the section anchors the restarted numbering
        ("Part 2: Private life\n1. 4\n2. 5", {11: (4, "ok"), 12: (5, "ok")}),
        # a question mentioned in an answer's chatter does not move the answer
        ("1. 2 (important, as question 3 also says)\n2. 3\n3. 4", {1: (2, "ok"), 2: (3, "ok"), 3: (4, "ok")}),
        ("Answers:\n1) 2 2) 3 3) 4", {1: (2, "ok"), 2: (3, "ok"), 3: (4, "ok")}),
        # a restated scale line is not an entry
        ("1 = always, 2 = usually, 3 = sometimes, 4 = seldom, 5 = never\n15. 3", {15: (3, "ok")}),
        ("19. I'd prefer not to answer this one.\n20. 3", {19: (None, "refusal"), 20: (3, "ok")}),
    ],
)
def test_survey_entries_are_aligned_by_content(text, expected):
    assert _survey(text) == expected


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        # a block restarting at 1, then the list back on the questions' own numbers
        ("en", "Private life:\n1. 2\n2. 3\n\n**Questions 15-20:**\n15. Nervous? — 4\n16. Happy? — 2",
         {1: (2, "ok"), 2: (3, "ok"), 15: (4, "ok"), 16: (2, "ok")}),
        # section headers in Chinese numerals anchor restarted numbering
        ("zh", "第一部分：\n1. 2\n第二部分：\n1. 3\n第三部分：\n1. 您多久感到紧张？ 4（很少）",
         {1: (2, "ok"), 11: (3, "ok"), 15: (4, "ok")}),
        # a loose restatement of the named question ("často" is a label word) is not the answer
        ("sk", "Otázka 15 (ako často sa cítite nervózny): 3\nOtázka 19: Necítim sa pohodlne odpovedať.",
         {15: (3, "ok"), 19: (None, "refusal")}),
    ],
)  # fmt: skip
def test_survey_headers_and_restatements_in_every_language(language, text, expected):
    assert _survey(text, language) == expected
