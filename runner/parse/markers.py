"""Phrases that give numbers and labels their meaning in a reply, in every instrument language.

All patterns run on ``normalize``d text (lower-case, ASCII digits, Arabic folded: "الإجابة" is written
"الاجابه" here). A new instrument language adds its phrases to the word lists.

Speed: a regex alternation of words scanned over a whole reply costs time per character and per word, so
context is checked only around each candidate number or label. What must stand *before* a candidate is
matched on the reversed text in front of it (``ends_with``): one anchored attempt instead of a scan.
"""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")
_SEPARATORS = r"[\s:=\-*\"'(#,]*"

# Words right before an answer that commit to it: "Answer: 3", "I'd rate it a 2", "我选择3", "الاجابه: 3".
CUES = (
    "answer",
    "answers",
    "reply",
    "response",
    "choice",
    "option",
    "rating",
    "rate",
    "rated",
    "choose",
    "chose",
    "choosing",
    "select",
    "selected",
    "selecting",
    "pick",
    "picked",
    "go with",
    "going with",
    "say",
    "opt for",
    "score",
    "give it",
    "vote",
    "答案",
    "回答",
    "选择",
    "选",
    "评分",
    "打分",
    "选项",
    "الاجابه",
    "الجواب",
    "اجابتي",
    "اختياري",
    "اختار",
    "اخترت",
    "الخيار",
    "odpoveď",
    "odpovedám",
    "vyberám",
    "volím",
    "hodnotím",
    "možnosť",
)
# Words allowed between a cue and the answer: "rate *it a* 2", "answer *is* 3", "答案*是*3".
FILLERS = (
    "it",
    "this",
    "that",
    "as",
    "a",
    "an",
    "is",
    "be",
    "would be",
    "will be",
    "at",
    "with",
    "option",
    "number",
    "solid",
    "the",
    "of",
    "my",
    "je",
    "číslo",
    "si",
    "هي",
    "هو",
    "رقم",
    "是",
    "为",
    "第",
    "个",
)
# Words that negate the label after them: "not very important", "不是非常重要", "ليس مهم جدا".
NEGATIONS = ("not", "n't", "nie", "ne", "nie je", "ليس", "غير", "لست", "不", "不是", "并不", "没有")
# Words before a number that make it a question reference: "Question 3", "Q 3", "第3题", "السؤال 3".
QUESTION_WORDS = ("question", "q", "otázka", "otázku", "otázke", "otázky", "السؤال", "سؤال", "问题")
QUESTION_AFTER = re.compile(r"\s*[题題问]")  # "第3题": question 3 (but "第3个选项" is the third option)


def _alternation(words: tuple[str, ...]) -> str:
    """Reversed words as one alternation, longest first; non-CJK words must start at a word boundary."""
    parts = []
    for word in sorted(words, key=len, reverse=True):
        part = re.escape(word[::-1])
        parts.append(part if _CJK.search(word) else part + r"(?!\w)")
    return "(?:" + "|".join(parts) + ")"


_CUE_BEFORE = re.compile(rf"{_SEPARATORS}(?:{_alternation(FILLERS)}{_SEPARATORS})*{_alternation(CUES)}")
_NEGATION_BEFORE = re.compile(rf"\s*{_alternation(NEGATIONS)}")
_QUESTION_BEFORE = re.compile(rf"\s*(?:#|\.č|\.on)?\s*{_alternation(QUESTION_WORDS)}")
_DENOMINATOR_BEFORE = re.compile(r"\s*(?:/|fo tuo|z|لصا نم|نم)\s*\d")
_ECHO_BEFORE = re.compile(r"\s*=\s*\d")


def ends_with(pattern: re.Pattern[str], text: str, position: int, width: int = 32) -> bool:
    """Whether the ``width`` characters of ``text`` before ``position`` end with what reversed ``pattern`` matches."""
    return pattern.match(text[max(0, position - width) : position][::-1]) is not None


def committed_by_cue(text: str, position: int) -> bool:
    """A cue ("answer:", "I'd rate it a", "我选择") stands right before ``position``."""
    return ends_with(_CUE_BEFORE, text, position, 40)


def negated(text: str, position: int) -> bool:
    """A negation ("not", "不是", "ليس") stands right before ``position``."""
    return ends_with(_NEGATION_BEFORE, text, position, 10)


def question_reference(text: str, position: int) -> bool:
    """The number at ``position`` names a question ("Question 3", "Q 3", "第3题")."""
    return ends_with(_QUESTION_BEFORE, text, position, 16)


def denominator(text: str, position: int) -> bool:
    """The number at ``position`` is a scale's top ("4/5", "4 out of 5": the 5)."""
    return ends_with(_DENOMINATOR_BEFORE, text, position, 12)


def after_echo_sign(text: str, position: int) -> bool:
    """``position`` follows "N =" (a label in an echoed scale)."""
    return ends_with(_ECHO_BEFORE, text, position, 6)


# Matched right after a number (``.match(text, end)``):
RANGE_TO_5 = re.compile(r"\s*(?:-|~|to|through|and|až|do|a|到|至|الى|و)\s*5(?!\d)")  # "1 to 5": the scale
OUT_OF_5 = re.compile(r"\s*(?:/|out of|z|من اصل|من)\s*5(?!\d)")  # "4/5", "4 z 5": a rating out of five
BETWEEN = re.compile(r"\s*(?:-|~|/|or|and|to|až|alebo|a|或|到|至|和|او|الى|و)\s*([1-5])(?!\d|\.\d)")  # "2-3"
ECHO_SIGN = re.compile(r"\s*=")

# Candidate numbers: 1-3 digit integers or decimals, not glued to Latin letters ("Q1", "1st") or other digits.
NUMBER = re.compile(r"(?<![0-9a-z\u00c0-\u024f.,])(\d{1,3})(?:\.(\d+))?(?![0-9a-z\u00c0-\u024f%]|\.\d)")

# Between a first answer and a different later one: the later one is a hedge, not a second answer. The words
# carry no leading \b, which keeps the regex engine from skipping ahead by first character (a 5 MB reply took
# 0.6 s instead of 0.02 s); ``hedge_end`` checks that boundary itself.
_HEDGE_SCAN = re.compile(
    r"(?:maybe|perhaps|possibly|might|could|or|if not|even|though|although|but|leaning)\b|"
    r"也许|或许|可能|甚至|或者|或|不过|但|"
    r"ربما|او|قد|حتى|لكن|"
    r"(?:možno|alebo|prípadne|dokonca|či|ale)\b"
)


def hedge_end(text: str, position: int) -> int:
    """Where the first hedge word at or after ``position`` ends; ``len(text) + 1`` when there is none."""
    match = _HEDGE_SCAN.search(text, position)
    while match is not None:
        start = match.start()
        before = text[start - 1] if start else " "
        # Latin hedge words need a word boundary before them, as "\b" gave ("color" holds no "or").
        if not ("a" <= text[start] <= "z" or text[start] == "č") or not (before.isalnum() or before == "_"):
            return match.end()
        match = _HEDGE_SCAN.search(text, start + 1)
    return len(text) + 1


# Refusals and AI disclaimers, by meaning rather than one fixed phrase: declining ("I'd rather not", "I must
# decline"), discomfort ("I do not feel comfortable"), inability ("I cannot", "I'm unable"), no self to answer
# from ("as an AI", "I don't have personal opinions"), unsuitability ("it wouldn't be appropriate"), and
# redirection instead of an answer ("Perhaps we could discuss ...", "Instead, I can ..."), in each instrument
# language. Only consulted when no answer was found: a disclaimer followed by an answer ("As an AI I have no
# preferences, but I'd choose 3") is an answer, and "perhaps" before a number is a hedge, not a refusal.
REFUSAL = re.compile(
    # English (alternatives grouped by first letter: the regex engine then tries few of them per position)
    r"a(?:s an ai|n ai (?:language )?model)|language model|let's (?:instead|discuss|talk about)|"
    r"i(?:'m| am) (?:just |only )?an? (?:ai|assistant|machine)|"
    r"i (?:don't|do not) have (?:personal|feelings|preferences|opinions|a nationality|a (?:job|boss|body|life))|"
    r"i (?:cannot|can't|can ?not) (?:answer|provide|choose|express|have|give|share|pick|select|respond|take part|"
    r"participate|complete|fill)|"
    r"i(?:'m| am) (?:unable|not able|not comfortable|uncomfortable|(?:sorry|afraid),? but i)|"
    r"i (?:must (?:respectfully )?|respectfully |politely )?decline|"
    r"i (?:won't|will not) (?:answer|provide|choose|respond|take|share|pick|rate|fill)|"
    r"i(?:'d| would) (?:rather not|prefer not|be happy to (?:discuss|talk|help|explain))|i prefer not to|"
    r"i (?:don't|do not) (?:think|believe) i (?:should|can) (?:answer|provide|choose|respond|speculate)|"
    r"i apologi[sz]e,? but|instead,? (?:i|we) (?:could|can)|"
    r"not (?:appropriate for me|feel comfortable|(?:in a position|able) to (?:answer|provide|say|speak))|"
    r"w(?:ouldn't|ould not) (?:be )?appropriate|is(?:n't| not) appropriate|"
    r"uncomfortable (?:answering|providing|sharing|choosing|rating|speculating)|"
    r"perhaps we (?:could|can)|maybe we (?:could|can)|"
    # Chinese
    r"作为一个?人工智能|作为一个?ai|作为(?:一个)?(?:语言模型|ai助手|人工智能助手|助手)|语言模型|我没有个人|"
    r"没有个人(?:的)?(?:偏好|感受|观点|喜好|意见|经历)|我(?:并)?没有(?:情感|感情|国籍|偏好|观点|工作|身体)|"
    r"我无法|我不能(?:回答|提供|选择|代表)|无法回答|无法(?:提供|选择|作答|给出)|不便(?:回答|作答|提供)|"
    r"我不(?:太)?方便|不太?(?:合适|适合)(?:回答|作答|由我)|我不太?愿意|我(?:宁愿|宁可)不|"
    r"我(?:感到|觉得)?不(?:太)?舒服|也许我们可以|或许我们可以|不如我们可以|我们可以(?:换|聊|讨论)|抱歉[，,]?(?:但)?我|"
    r"对不起[，,]?(?:但)?我|我不是人类|我只是一个?(?:ai|程序|模型|助手)|"
    # Arabic (normalised: alef, yeh and teh marbuta folded)
    r"بصفتي|كنموذج|نموذج لغوي|ذكاء اصطناعي|ليس لدي|لا املك|لا استطيع|لا يمكنني|لا اشعر بالارتياح|"
    r"لست مرتاحا|لا ارغب|افضل عدم|افضل الا|ليس من المناسب|لن اجيب|ربما يمكننا|لعلنا|بدلا من ذلك(?:،|,)? "
    r"(?:يمكنني|يمكننا)|اعتذر|انا اسف|عذرا(?:،|,)? (?:لا|لكن)|لست انسانا|لست شخصا|"
    # Slovak
    r"ako (?:ai|umelá inteligencia|jazykový model)|jazykový model|nemám osobné|nemôžem|nedokážem|"
    r"nemám (?:preferencie|názor|názory|pocity|národnosť|vlastné)|necítim sa (?:pohodlne|komfortne)|"
    r"nie je mi (?:príjemné|pohodlné)|radšej (?:nebudem|by som ne)|nechcem (?:odpovedať|odpovedat|vyberať)|"
    r"nie je (?:vhodné|primerané)|možno by sme mohli|azda by sme mohli|namiesto toho (?:môžem|môžeme|by sme)|"
    r"ospravedlňujem sa|prepáčte|nie som (?:človek|osoba)|som (?:len )?(?:ai|umelá inteligencia|jazykový model)"
)
