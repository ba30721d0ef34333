"""Phrases that give numbers and labels their meaning in a reply, in every instrument language.

All patterns run on ``normalize``d text (lower-case, ASCII digits, Arabic folded: "الإجابة" is written
"الاجابة" here). A new instrument language adds its phrases to each list.
"""

from __future__ import annotations

import re

# Words right before an answer that commit to it: "Answer: 3", "I'd rate it a 2", "我选择3", "الاجابة: 3".
_CUES = (
    r"answer|answers|reply|response|choice|option|rating|rate|rated|choose|chose|choosing|select|selected|"
    r"selecting|pick|picked|go with|going with|say|opt for|score|give it|vote|"
    r"答案|回答|选择|选|我选|评分|打分|选项|"
    r"الاجابه|الاجابة|الجواب|اجابتي|اختياري|اختار|اخترت|الخيار|"
    r"odpoveď|odpoveď je|odpovedám|vyberám|vyberám si|volím|hodnotím|možnosť"
)
_FILLERS = (
    r"it|this|that|as|a|an|is|be|would be|will be|at|with|option|number|a solid|solid|the|of|my|"
    r"je|číslo|možnosť|هي|هو|رقم|الخيار|是|为|第|个"
)
CUE_BEFORE = re.compile(rf"(?:^|[^\w])(?:{_CUES})(?:[\s:=\-*\"'(#]*(?:{_FILLERS})(?![\w]))*[\s:=\-*\"'(#,]*$")

# Between a first answer and a different later one: the later one is a hedge, not a second answer.
HEDGE = re.compile(
    r"\b(?:maybe|perhaps|possibly|might|could|or|if not|even|though|although|but|leaning)\b|"
    r"也许|或许|可能|甚至|或者|或|不过|但|"
    r"ربما|او|قد|حتى|لكن|"
    r"\b(?:možno|alebo|prípadne|dokonca|či|ale)\b"
)

# Refusals and AI disclaimers. Only consulted when no answer was found: a disclaimer followed by an answer
# ("As an AI I have no preferences, but I'd choose 3") is an answer.
REFUSAL = re.compile(
    r"as an ai|an ai (?:language )?model|language model|i don't have personal|i do not have personal|"
    r"i don't have (?:feelings|preferences|opinions|a nationality)|i do not have (?:feelings|preferences|opinions)|"
    r"i cannot (?:answer|provide|choose|express|have)|i can't (?:answer|provide|choose)|i'm unable|i am unable|"
    r"i'm not able|i am not able|not appropriate for me|i must decline|i won't answer|"
    r"作为一个?人工智能|作为一个?ai|语言模型|我没有个人|没有个人(?:的)?(?:偏好|感受|观点|喜好)|我无法|我不能回答|无法回答|没有(?:情感|感情)|"
    r"بصفتي|كنموذج|نموذج لغوي|ذكاء اصطناعي|ليس لدي|لا املك|لا استطيع|لا يمكنني|"
    r"ako (?:ai|umelá inteligencia|jazykový model)|jazykový model|nemám osobné|nemôžem|nedokážem|nemám (?:preferencie|názor|pocity)"
)

# Spans whose numbers are not answers: the scale's range ("1 to 5", "1-5", "من 1 الى 5", "1到5"), a scale's
# denominator ("4/5", "4 out of 5": the 5), and references to question numbers ("Question 3", "Q3", "第3题").
NOT_ANSWERS = re.compile(
    r"(?:between|from|od|من|从)?\s*(?<!\d)1\s*(?:-|~|to|through|and|až|do|a|到|至|الى|و)\s*5(?!\d)|"
    r"(?<=\d)\s*(?:/|out of|z|من اصل|من)\s*5(?!\d)|"
    r"(?:question|otázka|otázku|otázke|problem|السؤال|سؤال|问题)\s*(?:#|č\.|no\.|number)?\s*\d+|"
    r"\bq\s*\d+|第\s*\d+\s*[题個个问]"
)
# "2-3", "2 or 3", "2 až 3": a range between two options is not one answer.
BETWEEN = re.compile(r"(?<![\d.])([1-5])\s*(?:-|~|/|or|and|to|až|alebo|a|或|到|至|和|او|الى|و)\s*([1-5])(?!\d|\.\d)")
# Candidate numbers: 1-3 digit integers or decimals, not glued to Latin letters ("Q1", "1st") or other digits.
NUMBER = re.compile(r"(?<![0-9a-z\u00c0-\u024f.,])(\d{1,3})(?:\.(\d+))?(?![0-9a-z\u00c0-\u024f%]|\.\d)")
