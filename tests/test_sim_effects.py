"""Planted design-factor effects of the simulator (runner/endpoints/sim/effects.py): sizes, determinism, the wire.

The position bias is checked against the softmax of the documented logits computed here with numpy; level shifts
against their stated standard deviation; the server's replies and log-probabilities against the respondent's
planted distribution.
"""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest

from runner.endpoints.sim import AnswerModel, SimConfig, SimConfigError, SimServerThread
from runner.endpoints.sim.data import load_scores
from runner.endpoints.sim.effects import level_shifts, planted, position_logits
from runner.endpoints.sim.respondent import _solve_theta
from runner.survey.cell import Framing, PromptCell


def _cell(**changes) -> PromptCell:
    return PromptCell(
        **{"language": "en", "mode": "item", "questions": (7,), "framing": Framing("persona", "China"), **changes}
    )


@pytest.fixture(scope="module")
def model() -> AnswerModel:
    return AnswerModel(load_scores("hofstede-2015"), signal=2.0, spread=1.0)


@pytest.mark.parametrize("bias", [-1.0, 0.5, 2.0])
@pytest.mark.parametrize("order", [(1, 2, 3, 4, 5), (5, 4, 3, 2, 1), (3, 1, 5, 2, 4)])
def test_position_bias_adds_its_logit_per_displayed_position(model, bias, order):
    effects = planted(0, bias, {}, _cell(option_order=order), "m", False)
    got = np.array(model.distribution("China", 7, 1.0, 1.0, effects))
    theta = _solve_theta(model.target_mean("China", 7), 1.0)
    k = np.arange(1, 6)
    position = np.array([order.index(i) + 1 for i in k])
    logits = theta * (k - 3) - (k - 3) ** 2 / 2.0 + bias * (position - 3)
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_a_recency_bias_raises_answers_in_the_given_order_and_lowers_them_reversed(model):
    plain = model.expected_mean("China", 7)
    given = planted(0, 1.0, {}, _cell(), "m", False)
    backwards = planted(0, 1.0, {}, _cell(option_order=(5, 4, 3, 2, 1)), "m", False)
    mean = lambda effects: float(np.dot(np.arange(1, 6), model.distribution("China", 7, 1.0, 1.0, effects)))  # noqa: E731
    assert mean(given) > plain + 0.3 and mean(backwards) < plain - 0.3


def test_level_shifts_have_the_stated_spread_and_are_reproducible():
    shifts = np.array([level_shifts(3, "language", f"l{i}", 0.4) for i in range(400)])
    assert shifts.shape == (400, 24)
    assert shifts.std() == pytest.approx(0.4, rel=0.05) and abs(shifts.mean()) < 0.02
    assert level_shifts(3, "language", "l0", 0.4) == tuple(shifts[0])
    assert level_shifts(4, "language", "l0", 0.4) != tuple(shifts[0])  # another server seed, other shifts


def test_a_planted_language_effect_moves_each_question_by_its_shift(model):
    effects = planted(5, 0.0, {"language": 0.3}, _cell(language="zh"), "m", False)
    assert effects is not None
    shift = level_shifts(5, "language", "zh", 0.3)
    for q in (2, 7, 15):
        theta = _solve_theta(min(max(model.target_mean("China", q) + shift[q - 1], 1.1), 4.9), 1.0)
        expected = model.distribution("China", q, 1.0, 1.0)  # unshifted …
        assert model.distribution("China", q, 1.0, 1.0, effects) != expected  # … differs from the shifted one
        k = np.arange(1, 6)
        logits = theta * (k - 3) - (k - 3) ** 2 / 2.0
        np.testing.assert_allclose(
            model.distribution("China", q, 1.0, 1.0, effects), np.exp(logits) / np.exp(logits).sum(), rtol=1e-12
        )


def test_nothing_planted_is_the_unchanged_fast_path():
    assert planted(0, 0.0, {}, _cell(), "m", False) is None
    assert planted(0, 0.0, {"model": 0.0}, _cell(), "m", False) is None
    assert position_logits(0.5, (1, 2, 3, 4, 5)) == (-1.0, -0.5, 0.0, 0.5, 1.0)


@pytest.mark.parametrize(
    ("changes", "knob"),
    [({"effects": {"colour": 0.2}}, "effects"), ({"effects": {"language": -1.0}}, "effects[language]"),
     ({"position_bias": float("nan")}, "position_bias"), ({"position_bias": 1e308}, "position_bias")],
)  # fmt: skip
def test_bad_planted_effects_are_refused_by_name(changes, knob):
    with pytest.raises(SimConfigError, match=rf"sim config {knob.replace('[', '.').replace(']', '.')}"):
        SimConfig(**changes)


def test_serve_sim_effect_options_parse_or_fail_in_one_line():
    from runner.commands.serve_sim import effect_sizes

    assert effect_sizes(["language=0.3", "model=1"]) == {"language": 0.3, "model": 1.0}
    for bad in ("language", "language=big"):
        with pytest.raises(SimConfigError, match="--effect"):
            effect_sizes([bad])
    with pytest.raises(SimConfigError, match="given twice"):  # not the last one silently winning
        effect_sizes(["language=0.1", "language = 0.2"])


def test_a_verbalized_request_is_its_own_measurement_level():
    from runner.endpoints.sim.effects import factor_levels

    verbalized = _cell(reply_format="verbalized")
    assert factor_levels(verbalized, "m", logprobs=False)["measurement"] == "verbalized"
    assert factor_levels(verbalized, "m", logprobs=True)["measurement"] == "verbalized"
    assert factor_levels(_cell(), "m", logprobs=True)["measurement"] == "distribution"
    assert factor_levels(_cell(), "m", logprobs=False)["measurement"] == "sample"


def test_the_server_answers_and_serves_logprobs_with_the_planted_position_bias(model):
    """Over the wire: the first-token log-probabilities of an item prompt are the planted distribution."""
    from runner.survey.prompts import build_messages

    cell = _cell(option_order=(5, 4, 3, 2, 1))
    with SimServerThread(SimConfig(seed=1, position_bias=1.5)) as sim:
        body = {"model": "sim-1", "messages": build_messages(cell), "logprobs": True, "top_logprobs": 20, "seed": 1}
        request = urllib.request.Request(
            sim.base_url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            first = json.loads(reply.read())["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    probs = {t["token"]: np.exp(t["logprob"]) for t in first}
    shown = np.array([probs[str(p)] + probs[f" {p}"] for p in range(1, 6)])  # displayed positions 1…5
    truth = model.distribution("China", 7, 1.0, 1.0, planted(1, 1.5, {}, cell, "sim-1", True))
    np.testing.assert_allclose(shown / shown.sum(), [truth[i - 1] for i in cell.option_order], rtol=1e-9)
