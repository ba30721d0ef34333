"""Next-token log-probabilities served from the simulator's known truth (``logprobs: true, top_logprobs: k``).

For an item prompt the first reply token is the displayed label (digit or letter) of the chosen option, so its
distribution is the respondent's answer distribution (``AnswerModel.distribution``) laid out by displayed position. Like
OpenAI's and llama.cpp's (default) log-probabilities these are the model's own, at temperature 1 and before
nucleus truncation, whatever the request's sampling parameters: the sampled reply still follows them.

The probability mass is spread the way a real tokenizer spreads it, so that clients must map tokens robustly:
``LEAK`` goes to tokens that start prose ("I", "The", "As"), and ``SPACED_SHARE`` of each option's probability
sits on its space-prefixed spelling (" 3" beside "3"). The truth a client should recover is therefore
``AnswerModel.distribution(country, question, 1, 1)`` with option mass ``1 - LEAK``. Survey prompts and JSON
replies (whose first token is not an option) get the reply's first character with probability 1.
"""

from __future__ import annotations

import json
import math

from runner.endpoints.sim.effects import Planted
from runner.endpoints.sim.respondent import AnswerModel
from runner.survey.cell import PromptCell, position_marks

__all__ = ["LEAK", "SPACED_SHARE", "first_token_logprobs", "logprobs_json"]

LEAK = 0.04  # probability of tokens that are no option label
SPACED_SHARE = 0.1  # share of each option's probability on its " n" spelling
_LEAK_TOKENS = (("I", 0.5), ("The", 0.3), ("As", 0.2))
_DIGIT_FIRST = ("number", "fewshot", "free")  # reply formats whose first token is the displayed number


def first_token_logprobs(
    model: AnswerModel, cell: PromptCell, country: str | None, text: str, effects: Planted | None = None
) -> list[tuple[str, float]]:
    """Every first-token alternative as (token, probability), most likely first (ties: token text); ``effects``:
    the request's planted design-factor effects (runner/endpoints/sim/effects.py), None for none."""
    marks = position_marks(cell.labels)
    if cell.mode != "item" or cell.reply_format not in _DIGIT_FIRST or marks is None:
        return [(text[:1] or " ", 1.0)]
    truth = model.distribution(country, cell.questions[0], 1.0, 1.0, effects)
    pairs: list[tuple[str, float]] = []
    for mark, option_id in zip(marks, cell.option_order, strict=True):
        p = truth[option_id - 1] * (1.0 - LEAK)
        pairs.append((mark, p * (1.0 - SPACED_SHARE)))
        pairs.append((f" {mark}", p * SPACED_SHARE))
    pairs.extend((token, LEAK * share) for token, share in _LEAK_TOKENS)
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))


def logprobs_json(
    model: AnswerModel,
    cell: PromptCell | None,
    country: str | None,
    text: str,
    top_logprobs: int,
    effects: Planted | None = None,
) -> str:
    """The ``choices[0].logprobs`` JSON value of an OpenAI chat completion: the first token and its top-k."""
    alternatives = (
        [(text[:1] or " ", 1.0)] if cell is None else first_token_logprobs(model, cell, country, text, effects)
    )
    chosen = text[:1] or " "
    lookup = dict(alternatives)
    top = [{"token": t, "logprob": _log(p), "bytes": list(t.encode())} for t, p in alternatives[:top_logprobs]]
    first = {
        "token": chosen,
        "logprob": _log(lookup.get(chosen, 0.0)),
        "bytes": list(chosen.encode()),
        "top_logprobs": top,
    }
    return json.dumps({"content": [first], "refusal": None}, ensure_ascii=False)


def _log(p: float) -> float:
    """Natural log; -9999 for 0 (JSON has no -inf; OpenAI reports -9999.0 for impossible tokens)."""
    return math.log(p) if p > 0.0 else -9999.0
