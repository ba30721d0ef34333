"""Distribution cells that are exact or say what they are not: the drawn distribution at the request's temperature,
unlisted options bounded (status ``partial``), the policy that scores them, and llama.cpp's post-sampling shape.

The simulator is the known truth: its first-token alternatives are ``AnswerModel.distribution`` at temperature 1,
and its constrained reply is drawn from the same distribution at the request's temperature; ``top_logprobs`` small
truncates the list it returns, so partial cells happen on it as on a capped API.
"""

from __future__ import annotations

import io
import json
import math

import polars as pl
import pyarrow as pa
import pytest

from _runner_support import make_spec
from runner.analyze.load import load_answers
from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.data import load_scores
from runner.endpoints.sim.logprobs import first_token_logprobs
from runner.endpoints.sim.respondent import AnswerModel
from runner.endpoints.sim.server import SimServerThread
from runner.parse.answers import answers_table
from runner.parse.distribution import EXACT_TOLERANCE, scored_value, with_distributions
from runner.parse.policy import Policy
from runner.rundir import read_dataset
from runner.survey.cell import Framing, PromptCell
from runner.sweep.providers import ChatRequest, get_provider
from runner.sweep.session import run_sweep

TEMPERATURE = 0.7


def _sweep(path, top_logprobs: int, measurement: str | list[str] = "distribution"):
    with SimServerThread(SimConfig(seed=5)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": ["United States", "China", "Japan"],
                "questions": list(range(1, 25)),
                "seeds": [1, 2],
                "temperature": [TEMPERATURE],
                "shuffle_options": True,
                "constraint": "grammar",
                "measurement": measurement,
                "top_logprobs": top_logprobs,
            },
        )
        result = run_sweep(spec, path, stream=io.StringIO())
    assert result.failed == 0
    return load_answers(path).collect()


def _truth(row) -> tuple[float, ...]:
    return AnswerModel(load_scores(SimConfig().reference)).distribution(
        row["country"], row["question"], TEMPERATURE, 1.0
    )


def test_listed_options_give_the_distribution_drawn_at_the_requests_temperature(tmp_path):
    answers = _sweep(tmp_path / "run", 20)  # the simulator's 13 alternatives all fit: every cell exact
    assert answers.height == 3 * 24 * 2 and (answers["status"] == "ok").all()
    assert answers["option_bound"].is_null().all()
    worst = max(
        max(abs(a - b) for a, b in zip(row["option_probs"], _truth(row), strict=True))
        for row in answers.iter_rows(named=True)
    )
    assert worst < 1e-12  # p^(1/T) renormalised, undoing each cell's shuffled order


def test_truncated_alternatives_make_partial_cells_with_bounds_not_zeros(tmp_path):
    answers = _sweep(tmp_path / "run", 3)  # 3 of 13 alternatives: at least two options unlisted in every cell
    responses = {r["cell_key"]: r for r in read_dataset(tmp_path / "run", "responses").to_pylist()}
    model = AnswerModel(load_scores(SimConfig().reference))
    assert answers.height == 3 * 24 * 2 and (answers["status"] == "partial").all()
    for row in read_dataset(tmp_path / "run", "answers").to_pylist():
        response = responses[row["cell_key"]]
        row["country"] = response["country"]
        probs, bound = row["option_probs"], row["option_bound"]
        listed_tokens = {t["token"] for t in response["top_logprobs"]}
        # the simulator's full list, independently: which options have a listed token, and what each token weighs
        cell = PromptCell(
            "en", "item", (row["question"],), Framing("persona", row["country"]), tuple(response["option_order"])
        )
        full = first_token_logprobs(model, cell, row["country"], response["response_text"])
        assert [t["token"] for t in response["top_logprobs"]] == [t for t, _ in full[:3]]
        weight = {t: p ** (1 / TEMPERATURE) for t, p in full}
        by_option: dict[int, list[str]] = {}
        for position, option in enumerate(response["option_order"]):
            by_option[option] = [str(position + 1), f" {position + 1}"]
        listed = {o: [t for t in toks if t in listed_tokens] for o, toks in by_option.items()}
        assert [p is None for p in probs] == [not listed[o] for o in range(1, 6)]  # unknown, never 0
        total = sum(weight[t] for toks in listed.values() for t in toks)
        for option in range(1, 6):
            if listed[option]:
                assert probs[option - 1] == pytest.approx(sum(weight[t] for t in listed[option]) / total, abs=1e-12)
        # an unlisted token has at most the smallest listed alternative's probability, and at most what the list
        # leaves of 1; drawn at T
        u = min(min(p for _, p in full[:3]), 1.0 - sum(p for _, p in full[:3])) ** (1 / TEMPERATURE)
        assert bound == pytest.approx(u / (total + u), rel=1e-9)
        # the bound holds: no unlisted token is drawn with more than it (exact enumeration of the simulator's list)
        drawn_total = sum(weight[t] for toks in by_option.values() for t in toks)
        for option, toks in by_option.items():
            if not listed[option]:
                assert max(weight[t] for t in toks) / drawn_total <= bound + 1e-12
        # the reply's own parsed option is kept (the simulator's constrained reply is the bare number)
        assert row["option_id"] == response["option_order"][int(response["response_text"]) - 1]
    # scored: the reply's own option by default (an unbiased draw), or nothing with partial="drop"
    sample = answers.select(scored_value(Policy()))["scored"].to_list()
    assert sample == [float(o) for o in answers["option_id"]]
    assert answers.select(scored_value(Policy(partial="drop")))["scored"].is_null().all()
    neutral = answers.select(scored_value(Policy(partial="drop", unparseable="neutral")))["scored"]
    assert (neutral == 3.0).all()


def test_sample_scoring_of_partial_cells_is_unbiased_where_listed_renormalising_is_not(tmp_path):
    # against the planted truth: the mean answer over partial cells scored by their replies is within sampling
    # noise of the true mean at T, while renormalising over the listed options (the old zero-filling) misses each
    # cell's expected answer by 0.08 scale points on average (the sweep is seeded)
    answers = _sweep(tmp_path / "run", 3)
    truth = [sum((k + 1) * p for k, p in enumerate(_truth(row))) for row in answers.iter_rows(named=True)]
    listed = [
        sum((k + 1) * (p or 0.0) for k, p in enumerate(row["option_probs"])) for row in answers.iter_rows(named=True)
    ]
    sampled = answers["option_id"].cast(pl.Float64).to_list()
    n = len(truth)
    variance = sum(
        sum((k + 1 - m) ** 2 * p for k, p in enumerate(_truth(row)))
        for row, m in zip(answers.iter_rows(named=True), truth, strict=True)
    )
    se = math.sqrt(variance) / n
    assert abs(sum(sampled) / n - sum(truth) / n) < 4 * se
    assert sum(abs(a - b) for a, b in zip(listed, truth, strict=True)) / n > 0.05


LLAMA_SAMPLED_CHOICE = {  # llama.cpp's post-sampling shape under the digit grammar (measured with SmolLM2), abridged
    "finish_reason": "stop",
    "index": 0,
    "message": {"role": "assistant", "content": "4"},
    "logprobs": {
        "content": [
            {
                "id": 36,
                "token": "4",
                "bytes": [52],
                "prob": 0.142,
                "top_probs": [
                    {"id": 33, "token": "1", "bytes": [49], "prob": 0.674},
                    {"id": 36, "token": "4", "bytes": [52], "prob": 0.142},
                    {"id": 34, "token": "2", "bytes": [50], "prob": 0.087},
                    {"id": 35, "token": "3", "bytes": [51], "prob": 0.061},
                    {"id": 37, "token": "5", "bytes": [53], "prob": 0.036},
                ],
            }
        ]
    },
}


def test_llamacpp_grammar_requests_the_drawn_probabilities_and_reads_them_as_drawn():
    provider = get_provider("openai")
    messages = [{"role": "user", "content": "q"}]
    grammar = provider.call("http://x/v1", None, ChatRequest("m", messages, 1, 0.7, 1.0, 2, None, "grammar", 20)).body
    assert grammar["post_sampling_probs"] is True and grammar["top_k"] == 0 and grammar["min_p"] == 0.0
    for constraint in ("none", "choice", "json_schema"):  # only llama.cpp's grammar field says the server is llama.cpp
        body = provider.call("http://x/v1", None, ChatRequest("m", messages, 1, 0.7, 1.0, 2, None, constraint, 20)).body
        assert not {"post_sampling_probs", "top_k", "min_p"} & set(body)
    reply = provider.reply({"choices": [LLAMA_SAMPLED_CHOICE], "usage": {}})
    assert reply.logprobs_sampled is True
    assert [t for t, _ in reply.top_logprobs] == ["1", "4", "2", "3", "5"]
    assert [math.exp(lp) for _, lp in reply.top_logprobs] == pytest.approx([0.674, 0.142, 0.087, 0.061, 0.036])
    # read as drawn: no second temperature, all five listed and summing to 1 → exact, whatever the cell's T
    top = [{"token": t, "logprob": lp} for t, lp in reply.top_logprobs]
    responses = _germany_q18_reply(0.7, top, logprobs_sampled=[True])
    row = with_distributions(answers_table(responses), responses).to_pylist()[0]
    assert row["status"] == "ok" and row["option_id"] == 4 and row["option_bound"] is None
    assert row["option_probs"] == pytest.approx([0.674, 0.087, 0.061, 0.142, 0.036], abs=1e-3)
    assert EXACT_TOLERANCE == 1e-9


@pytest.mark.slow
def test_a_run_with_partial_cells_is_analysed_by_the_stated_policy(tmp_path):
    # end to end through analyze_run: the questions table scores partial cells by their replies (default) or
    # drops them; the summary records the rule; the baselines answer the same cells
    from runner.analyze.run import AnalysisOptions, analyze_run

    answers = _sweep(tmp_path / "run", 3, ["sample", "distribution"])  # sampled cells keep every dimension scored
    china7 = answers.filter((pl.col("country") == "China") & (pl.col("question") == 7))
    assert sorted(china7["status"]) == ["ok", "ok", "partial", "partial"]
    replies = china7.filter(pl.col("status") == "partial")["option_id"].cast(pl.Float64).mean()
    for partial, expected_n in (("sample", 2), ("drop", 0)):
        options = AnalysisOptions(n_resamples=20, permutations=0, baseline_replicates=5, policy=Policy(partial=partial))
        out = analyze_run(tmp_path / "run", options)
        questions = pl.read_parquet(out / "questions.parquet")
        cell = (pl.col("country") == "China") & (pl.col("question") == 7) & (pl.col("measurement") == "distribution")
        row = questions.filter(cell).row(0, named=True)
        assert row["n"] == expected_n and row["status_partial"] == 2
        if partial == "sample":  # the partial cells' own replies
            assert row["mean"] == pytest.approx(replies, abs=1e-12)
        summary = json.loads((out / "summary.json").read_text())
        assert summary["policy"]["partial"] == partial
        if partial == "sample":
            baselines = pl.read_parquet(out / "baselines.parquet")
            assert baselines.filter(pl.col("dimension") == "cat")["observed"].is_finite().all()
    # the report says how many answers were partial and by which rule the analysis (the last one: drop) scored them
    from runner.report.html import render_report

    page = render_report(tmp_path / "run").read_text()
    assert "144 distribution answer(s) are partial" in page
    assert "With partial = drop they are scored as unparseable answers" in page


def test_a_run_whose_every_answer_the_policy_drops_is_analysed_without_a_traceback(tmp_path):
    # every cell partial and --partial drop: nothing is scored; the analysis says so (no country ranked) instead
    # of failing on the empty CAT table
    from runner.analyze.run import AnalysisOptions, analyze_run

    _sweep(tmp_path / "run", 3)
    options = AnalysisOptions(n_resamples=20, permutations=0, baseline_replicates=5, policy=Policy(partial="drop"))
    summary = json.loads((analyze_run(tmp_path / "run", options) / "summary.json").read_text())
    assert summary["cat"] == [] and summary["policy"]["partial"] == "drop"
    assert [w["kind"] for w in summary["warnings"]] == ["few_countries"]


# llama.cpp's raw top 20 for Q18 with a Germany persona under the digit grammar (SmolLM2, measured): one digit
# listed; a top-100 request put the others at "4" -5.273, "2" -5.730, "3" -6.155, "5" -6.619
GERMANY_Q18_TOP20 = [
    ("I", -2.494), ("Al", -2.612), ("Die", -3.018), ("1", -3.502), ("All", -3.54), ("The", -3.555), ("This", -3.62),
    ("D", -3.668), ("Z", -3.737), ("F", -3.818), ("In", -3.855), ("To", -4.028), ("W", -4.086), ("A", -4.327),
    ("S", -4.332), ("H", -4.418), ("Germany", -4.488), ("Me", -4.488), ("Ben", -4.501), ("B", -4.591),
]  # fmt: skip
GERMANY_Q18_UNLISTED = {2: -5.730, 3: -6.155, 4: -5.273, 5: -6.619}


def _germany_q18_reply(temperature: float, top_logprobs: list[dict], **extra: list) -> pa.Table:
    """One stored reply '4' to Q18 by a Germany persona under llama.cpp's digit grammar, with its alternatives."""
    return pa.table(
        {
            "cell_key": ["k"],
            "response_text": ["4"],
            "language": ["en"],
            "mode": ["item"],
            "questions": [[18]],
            "framing": ["persona"],
            "country": ["Germany"],
            "age": pa.array([None], pa.int16()),
            "gender": pa.array([None], pa.string()),
            "option_order": [[1, 2, 3, 4, 5]],
            "reply_format": ["number"],
            "measurement": ["distribution"],
            "constraint": ["grammar"],
            "temperature": [temperature],
            **extra,
            "top_logprobs": [top_logprobs],
        }
    )


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_a_stored_raw_top_20_is_reparsed_as_partial_with_a_bound_the_real_tail_respects(temperature):
    # a run stored before 1.6.0 (raw log-probabilities, no logprobs_sampled column) is read at its temperature:
    # option 1 is all that is listed, so the cell is partial — not [1, 0, 0, 0, 0] — and each unlisted digit's
    # drawn probability (from the measured tail) is within the bound
    responses = _germany_q18_reply(temperature, [{"token": t, "logprob": lp} for t, lp in GERMANY_Q18_TOP20])
    row = with_distributions(answers_table(responses), responses).to_pylist()[0]
    assert row["status"] == "partial" and row["option_id"] == 4  # the reply's own answer, kept
    assert row["option_probs"] == [1.0, None, None, None, None]
    listed = sum(math.exp(lp) for _, lp in GERMANY_Q18_TOP20)
    u = min(math.exp(-4.591), 1.0 - listed) ** (1 / temperature)
    w1 = math.exp(-3.502) ** (1 / temperature)
    assert row["option_bound"] == pytest.approx(u / (w1 + u), rel=1e-9)
    weights = {1: w1} | {o: math.exp(lp) ** (1 / temperature) for o, lp in GERMANY_Q18_UNLISTED.items()}
    drawn = {o: w / sum(weights.values()) for o, w in weights.items()}
    assert all(drawn[o] <= row["option_bound"] for o in GERMANY_Q18_UNLISTED)
    assert drawn[1] < row["option_probs"][0]  # the listed share is an upper bound on the true one
