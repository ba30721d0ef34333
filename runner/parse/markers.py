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
    "الاجابه",
    "الجواب",
    "اجابتي",
    "اختياري",
    "اختار",
    "اخترت",
    "odpoveď",
    "odpovedám",
    "vyberám",
    "volím",
    "hodnotím",
    "boxed{",  # LaTeX \boxed{3}: how math-tuned reasoning models mark their final answer
    # a persona's own language, answering an English prompt ("Antwort: drei", "Réponse : deux", "Ответ: 4")
    "antwort",
    "wähle",
    "réponse",
    "choisis",
    "respuesta",
    "elijo",
    "ответ",
    "выбираю",
    "答え",
    "選択",
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
    "option number",
    "number",
    "no.",
    "solid",
    "the",
    "of",
    "my",
    "je",
    "číslo",
    "možnosť",
    "si",
    "هي",
    "هو",
    "رقم",
    "الخيار",
    "选项",
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
# "2-3", "2 or 3"
BETWEEN = re.compile(r"\s*(?:-|~|/|or|and|to|až|alebo|a|或|到|至|和|او|الى|و)\s*([1-5])(?!\d|\.\d)")
# "2, 3" and a listed scale "1, 2, 3, 4, 5": a comma names both options only when the second number ends its
# phrase (a list goes on, a sentence or line ends); "2, 1 being too strong" answers 2 and says why not 1
COMMA_PAIR = re.compile(r"\s*,\s*([1-5])(?!\d|\.\d)(?=[ \t]*(?:[,;.)\]]|or\b|and\b|\n|$))")
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


# Where a reply concludes after weighing options ("Final answer: 3", "\boxed{3}", a last "Answer:" line, "最终答案",
# "الإجابة النهائية", "Konečná odpoveď"): the answer is read from the last such place on; what came before is
# the reasoning. Searched only when one of ``CONCLUSION_HINTS`` occurs (substring tests cost far less per character).
CONCLUSION = re.compile(
    r"final (?:answer|choice|rating|response|selection|decision)|\\boxed\{|"
    r"(?:^|\n)[ \t*#>_]*(?:my )?(?:answer|antwort|réponse|respuesta|ответ|odpoveď|الاجابه|答案|回答)[ \t*_]*[:：]|"
    r"最终(?:答案|选择|回答)|الاجابه النهائيه|الاختيار النهائي|(?:konečná|finálna|moja konečná) odpoveď"
)
CONCLUSION_HINTS = ("final", "boxed", "answer", "antwort", "réponse", "respuesta", "ответ", "odpoveď", "الاجابه",
                    "答案", "回答", "最终", "النهائي", "konečn", "finálna")  # fmt: skip
# A self-correction: the answer after it replaces the one before ("2… actually, on reflection, 3", "Wait, no — 2",
# "po zvážení 2", "仔细想想，3"). Searched only when one of ``REVISION_HINTS`` occurs.
REVISION = re.compile(
    r"(?<![\w'])(?:actually|on (?:second|further) thought|(?:up)?on (?:further )?reflection|"
    r"after (?:further |more )?(?:reflection|consideration|thinking)|wait|let me (?:revise|reconsider|correct)|"
    r"correction|i(?:'ll| will)? (?:change|revise) my answer|scratch that)\b|"
    r"仔细想想|再想想|重新考虑|更正|修正|بعد التفكير|بعد اعاده التفكير|تصحيح|"
    r"(?<!\w)(?:po zvážení|po úvahe|vlastne|oprava)(?!\w)"
)
REVISION_HINTS = ("actually", "thought", "reflection", "consideration", "thinking", "wait", "let me", "correction",
                  "my answer", "scratch", "想想", "重新考虑", "更正", "修正", "التفكير", "تصحيح", "po zvážení",
                  "po úvahe", "vlastne", "oprava")  # fmt: skip
# Others' answers, not the reply's own: "Actually, many would pick 4", "but most people say 2".
ATTRIBUTED = re.compile(
    r"(?<!\w)(?:many|most|some|other|others|people|everyone|they|someone|one)(?: \w+)? (?:would|might|could|may|will)"
    r"(?!\w)|人们|有些人|很多人|البعض|الكثيرون|mnohí|niektorí|ľudia"
)


def attributed(text: str, position: int) -> bool:
    """Whether the clause before ``position`` gives the answer to others ("many would pick 4", "some would say")."""
    lo = max(0, position - 48)
    clause = max(text.rfind(mark, lo, position) for mark in ".;!?\n,")
    return ATTRIBUTED.search(text, max(lo, clause + 1), position) is not None


# What may stand between a conclusion or revision and its answer ("Final answer: **3**", "answer is 3", "是3").
AFTER_MARKER = re.compile(r"[\s:：=*_#>\"'`(\[\-,.…—–]*(?:(?:is|would be|will be|=|是|为|هي|je)[\s:：*_\"'`(\[\-]*)?")

# Number words and ordinals, in the instrument languages and those a persona may answer in (on normalised text:
# "ثلاثة" is "ثلاثه"). A cardinal counts only where it is committed (cue, bold, the reply's start) and ends its
# phrase ("Answer: three.", "I'd rate it two"): "one of the most important", "three reasons" are no answers.
NUMBER_WORDS = {
    1: ("one", "eins", "un", "une", "uno", "una", "jeden", "jedna", "jedno", "один", "одна", "واحد"),
    2: ("two", "zwei", "deux", "dos", "dva", "dve", "два", "две", "اثنان", "اثنين"),
    3: ("three", "drei", "trois", "tres", "tri", "три", "ثلاثه"),
    4: ("four", "vier", "quatre", "cuatro", "štyri", "четыре", "اربعه"),
    5: ("five", "fünf", "cinq", "cinco", "päť", "пять", "خمسه"),
}


def _spaced(words: str) -> tuple[str, ...]:
    """The space-separated words of ``words``."""
    return tuple(words.split())


ORDINAL_WORDS = {
    1: _spaced("first 1st erste ersten première premier primera primer prvá prvú prvý первый первую"),
    2: _spaced("second 2nd zweite zweiten deuxième segunda segundo druhá druhú druhý второй вторую"),
    3: _spaced("third 3rd dritte dritten troisième tercera tercero tretia tretiu tretí третий третью"),
    4: _spaced("fourth 4th vierte vierten quatrième cuarta cuarto štvrtá štvrtú štvrtý четвёртый четвертый четвертую"),
    5: _spaced("fifth 5th fünfte fünften cinquième quinta quinto piata piatu piaty пятый пятую"),
}
# What an ordinal names: "the third option", "the second one", "druhú možnosť", "третий вариант".
_ORDINAL_NOUNS = _spaced(
    "option choice answer one alternative möglichkeit antwort réponse opción opcion respuesta možnosť možnosti "
    "odpoveď вариант ответ"
)
_ARABIC_ORDINALS = ("الاول", "الثاني", "الثالث", "الرابع", "الخامس")
_LETTER_EDGE_BEFORE = r"(?<![^\W\d_])"
_LETTER_EDGE_AFTER = r"(?![^\W\d_])"


def _words(table: dict[int, tuple[str, ...]]) -> str:
    return "|".join(sorted({re.escape(w) for ws in table.values() for w in ws}, key=len, reverse=True))


_JOIN = r"\s*(?:,|/|-|–|or|and|to|oder|ou|o|alebo|или|或)\s*"
SPELLED = re.compile(
    # 1: cardinals ending their phrase ("three.", "two or three"); 2: ordinals with their noun ("the third option",
    # "the second or the third option"); 3: Arabic ordinals after the noun; 4: an ordinal alone ending a sentence
    # ("I'd go with the first.": counted only after a cue); 5: any other cardinal ("option three is", named)
    rf"{_LETTER_EDGE_BEFORE}(?:((?:{_words(NUMBER_WORDS)})(?:{_JOIN}(?:{_words(NUMBER_WORDS)}))?)"
    rf"(?=[*_]*[ \t]*(?:$|\n|[.,;:!?)\]\"'`(\-—–=]))|"
    rf"(?:the\s+)?((?:{_words(ORDINAL_WORDS)})(?:{_JOIN}(?:the\s+)?(?:{_words(ORDINAL_WORDS)}))*)"
    rf"\s+(?:{'|'.join(_ORDINAL_NOUNS)}){_LETTER_EDGE_AFTER}|"
    rf"(?:الخيار|الاختيار|الاجابه)\s+({'|'.join(_ARABIC_ORDINALS)}){_LETTER_EDGE_AFTER}|"
    rf"(?:the\s+)?({_words(ORDINAL_WORDS)})(?=[*_]*[ \t]*(?:$|\n|[.!;)]))|"
    rf"({_words(NUMBER_WORDS)}){_LETTER_EDGE_AFTER})"  # 5: any cardinal (counted only after an option noun)
)
# splits "two or three", "second or the third" into their words
JOINED = re.compile(r"\s*(?:[,/\-–]|(?<!\w)(?:or|and|to|oder|ou|o|alebo|или)(?!\w))\s*(?:the\s+)?")
# An option noun right before a cardinal names the option ("option three", "možnosť tri"): a candidate anywhere.
OPTION_BEFORE = re.compile(
    rf"\s*(?:{_alternation(('number', 'no.', '#', 'رقم', 'číslo'))}\s*)?"
    rf"{_alternation(('option', 'choice', 'možnosť', 'možnosti', 'الخيار', '选项', 'вариант', 'opción'))}"
)
# Substrings one of which any match of ``SPELLED`` holds: tested first (C-level scans cost far less than the regex).
_ALL_SPELLED = sorted(
    {w for t in (NUMBER_WORDS, ORDINAL_WORDS) for ws in t.values() for w in ws} | set(_ARABIC_ORDINALS)
)
SPELLED_HINTS = tuple(w for w in _ALL_SPELLED if not any(o != w and o in w for o in _ALL_SPELLED))
SPELLED_SET = frozenset(_ALL_SPELLED)  # for a short reply: its words against these (one findall, one set test)
WORD = re.compile(r"[^\W_]+")
SPELLED_VALUE = {w: k for table in (NUMBER_WORDS, ORDINAL_WORDS) for k, ws in table.items() for w in ws}
SPELLED_VALUE.update({w: k for k, w in enumerate(_ARABIC_ORDINALS, start=1)})


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
    r"(?:not|n't) (?:appropriate for me|feel comfortable|(?:in a position|able) to (?:answer|provide|say|speak))|"
    r"w(?:ouldn't|ould not) (?:be )?appropriate|is(?:n't| not) appropriate|"
    r"uncomfortable (?:answering|providing|sharing|choosing|rating|speculating)|"
    r"perhaps we (?:could|can)|maybe we (?:could|can)|could we (?:discuss|talk)|"
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
