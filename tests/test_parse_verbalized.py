"""The verbalized measurement: reading a stated probability object (every status), hostile replies, the spec
factor and its keys, the prompt and constraints, and the whole path against the simulator (known truth)."""

from __future__ import annotations

import io
import json
import math
import re
import time

import polars as pl
import pyarrow as pa
import pytest

from _runner_support import make_spec
from runner.analyze.load import load_answers
from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.data import load_scores
from runner.endpoints.sim.respondent import AnswerModel
from runner.endpoints.sim.server import SimServerThread
from runner.errors import SpecError
from runner.parse.answers import answers_table
from runner.parse.distribution import scored_value
from runner.parse.verbalized import SUM_TOLERANCE, VERBALIZED_STATUSES, read_verbalized, with_verbalized
from runner.survey.cell import PromptCell
from runner.survey.constrained import constrained_request_fields, verbalized_grammar, verbalized_schema
from runner.survey.prompts import build_messages
from runner.sweep.plan import iter_cells
from runner.sweep.providers import get_provider
from runner.sweep.request import request_for
from runner.sweep.session import run_sweep

LETTERS = ("A", "B", "C", "D", "E")

# ---- reading one reply -------------------------------------------------------------------------------------


def test_a_stated_object_is_renormalised_into_canonical_order():
    # position 1 shows option 3, position 3 shows option 1: the keys are positions, the result option IDs
    reading = read_verbalized('{"1": 0.5, "2": 0.2, "3": 0.1, "4": 0.1, "5": 0.05}', (3, 2, 1, 4, 5))
    assert reading.status == "ok"
    assert reading.stated_sum == pytest.approx(0.95)
    assert reading.probs == pytest.approx((0.1 / 0.95, 0.2 / 0.95, 0.5 / 0.95, 0.1 / 0.95, 0.05 / 0.95))
    assert math.fsum(reading.probs) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"1": 10, "2": 20, "3": 40, "4": 20, "5": 10}\n```\nThese are my estimates.',  # percentages
        'Sure! {"probabilities": {"1": 0.1, "2": 0.2, "3": 0.4, "4": 0.2, "5": 0.1}}',  # one wrapper
        '{" 1": 0.1, "(2)": 0.2, "3.": 0.4, "４": 0.2, "5": 0.1}',  # label spellings fold as first tokens do
    ],
)
def test_common_spellings_read_as_the_same_distribution(text):
    reading = read_verbalized(text)
    assert reading.status == "ok" and reading.probs == pytest.approx((0.1, 0.2, 0.4, 0.2, 0.1))


def test_letter_keys_name_the_shown_positions():
    reading = read_verbalized('{"a": 0.7, "B": 0.3, "C": 0, "D": 0, "E": 0}', (5, 4, 3, 2, 1), LETTERS)
    assert reading.status == "ok" and reading.probs == pytest.approx((0.0, 0.0, 0.0, 0.3, 0.7))


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("As an AI, I do not have personal preferences, so I cannot answer this question.", "refusal"),
        ("I think 3 is most likely.", "invalid_format"),
        ('{"1": 0.2, "2": 0.2, "3": 0.2, "4": 0.2, "6": 0.2}', "invalid_format"),  # a key that names no option
        ('{"1": 0.2, "1": 0.3, "2": 0.1, "3": 0.2, "4": 0.2}', "invalid_format"),  # the same option twice
        ('{"1": "20%", "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "invalid_format"),  # not a number
        ('{"1": true, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "invalid_format"),
        ('{"1": null, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "invalid_format"),
        ('{"1": {"p": 0.2}, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "invalid_format"),  # nested
        ('{"a": {"b": {"1": 1, "2": 0, "3": 0, "4": 0, "5": 0}}}', "invalid_format"),  # nested past one wrapper
        ('{"<b>1</b>": 0.2, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "invalid_format"),  # markup in a key
        ('{"1": 0.2, "2": 0.2, "3": 0.2', "invalid_format"),  # cut short
        ('{"1": NaN, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "out_of_range"),
        ('{"1": Infinity, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "out_of_range"),
        ('{"1": 1e999, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "out_of_range"),
        ('{"1": -0.2, "2": 0.4, "3": 0.4, "4": 0.2, "5": 0.2}', "out_of_range"),
        ('{"1": 150, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}', "out_of_range"),  # above 1, not percentages
        ('{"1": 30, "2": 30, "3": 30, "4": 30, "5": 30}', "out_of_range"),  # "percentages" summing to 150
        ('{"1": 0.5, "2": 0.5}', "missing_options"),
        ('{"1": 0, "2": 0, "3": 0, "4": 0, "5": 0}', "zero_sum"),
        ('{"1": 0.3, "2": 0.3, "3": 0.3, "4": 0.3, "5": 0.3}', "bad_sum"),
        ('{"1": 0.1, "2": 0.1, "3": 0.1, "4": 0.1, "5": 0.1}', "bad_sum"),
    ],
)
def test_every_unusable_reply_ends_as_its_status(text, status):
    reading = read_verbalized(text)
    assert reading.status == status and reading.status in VERBALIZED_STATUSES
    assert (reading.probs is None) == (status != "bad_sum")  # never a guessed distribution


def test_a_sum_within_the_tolerance_is_ok_and_beyond_it_is_not():
    inside = 1.0 + SUM_TOLERANCE * 0.99
    outside = 1.0 + SUM_TOLERANCE * 1.01
    for total, status in ((inside, "ok"), (outside, "bad_sum")):
        values = [total * share for share in (0.1, 0.2, 0.4, 0.2, 0.1)]
        reading = read_verbalized(json.dumps(dict(zip("12345", values, strict=True))))
        assert reading.status == status and reading.stated_sum == pytest.approx(total)


def test_a_stated_negative_zero_is_the_probability_zero_not_a_signed_zero():
    reading = read_verbalized('{"1": -0.0, "2": 0.25, "3": 0.25, "4": 0.25, "5": 0.25}')
    assert reading.status == "ok" and reading.probs == (0.0, 0.25, 0.25, 0.25, 0.25)
    assert math.copysign(1.0, reading.probs[0]) == 1.0
    assert read_verbalized('{"1": -0.0, "2": -0, "3": 0, "4": 0, "5": 0}').status == "zero_sum"


def test_a_provider_block_is_a_refusal_whatever_the_text():
    text = '{"1": 0.1, "2": 0.2, "3": 0.4, "4": 0.2, "5": 0.1}'
    assert read_verbalized(text, finish_reason="content_filter").status == "refusal"


@pytest.mark.parametrize(
    "text",
    [
        "{" * 100_000,  # nested past the decoder's recursion limit
        '{"1": ' + "9" * 100_000 + "}",  # an integer too long to convert
        "x" * 1_000_000 + '{"1": 0.2, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2}',  # 1 MB before the object
        '{"1": 0.2, "2": 0.2, "3": 0.2, "4": 0.2, "5": 0.2, "note": "' + "y" * 1_000_000 + '"}',
        json.dumps({str(i): 0.001 for i in range(50_000)}),  # 50,000 keys
    ],
)
def test_hostile_replies_end_as_statuses_quickly(text):
    started = time.process_time()
    reading = read_verbalized(text)
    assert reading.status == "invalid_format" and reading.probs is None
    assert time.process_time() - started < 5.0  # CPU time, not wall time: a busy machine does not fail it


# ---- the answers table -------------------------------------------------------------------------------------


def _responses(texts: list[str], order=(1, 2, 3, 4, 5), labels="digits") -> pa.Table:
    n = len(texts)
    return pa.table(
        {
            "cell_key": [f"k{i}" for i in range(n)],
            "response_text": texts,
            "language": ["en"] * n,
            "mode": ["item"] * n,
            "questions": [[4]] * n,
            "framing": ["none"] * n,
            "country": [None] * n,
            "age": pa.array([None] * n, pa.int16()),
            "gender": [None] * n,
            "option_order": [list(order)] * n,
            "reply_format": ["number"] * n,
            "finish_reason": ["stop"] * n,
            "option_labels": [labels] * n,
            "measurement": ["verbalized"] * n,
        }
    )


def test_verbalized_rows_fill_option_probs_and_their_point_answer():
    texts = [
        '{"1": 0.1, "2": 0.2, "3": 0.4, "4": 0.2, "5": 0.1}',
        '{"1": 0.4, "2": 0.4, "3": 0.1, "4": 0.05, "5": 0.05}',  # a tie: the lower option ID
        '{"1": 0.5, "2": 0.5}',
    ]
    responses = _responses(texts, order=(5, 4, 3, 2, 1))
    table = with_verbalized(answers_table(responses), responses)
    rows = table.to_pylist()
    assert [r["status"] for r in rows] == ["ok", "ok", "missing_options"]
    assert rows[0]["option_probs"] == pytest.approx([0.1, 0.2, 0.4, 0.2, 0.1][::-1])
    assert rows[0]["option_id"] == 3 and rows[0]["displayed"] == 3
    assert rows[1]["option_id"] == 4 and rows[1]["displayed"] == 2  # options 4 and 5 tie: 4, shown second
    assert rows[2]["option_id"] is None and rows[2]["option_probs"] is None
    assert rows[0]["stated_sum"] == pytest.approx(1.0)
    # scored like the distribution measurement: the expected option under option_probs
    frame = pl.from_arrow(table).with_columns(pl.lit(4, pl.Int16).alias("question"))
    scored = frame.select(scored_value()).to_series().to_list()
    assert scored[0] == pytest.approx(sum(k * p for k, p in zip(range(1, 6), rows[0]["option_probs"], strict=True)))
    assert scored[2] is None


def test_other_measurements_pass_through_unchanged():
    responses = _responses(['{"1": 1, "2": 0, "3": 0, "4": 0, "5": 0}']).set_column(
        13, "measurement", pa.array(["sample"])
    )
    answers = answers_table(responses)
    assert with_verbalized(answers, responses).equals(answers)


# ---- spec, prompt, keys and constraints ----------------------------------------------------------------------


def test_the_prompt_asks_for_an_object_keyed_by_the_shown_labels():
    cell = PromptCell("en", "item", (4,), option_order=(2, 1, 3, 4, 5), labels="letters")
    system, user = build_messages(cell, "verbalized")
    assert system["role"] == "system" and '{"A": <probability>, "B": <probability>' in system["content"]
    assert user == build_messages(PromptCell("en", "item", (4,), option_order=(2, 1, 3, 4, 5), labels="letters"))[1]
    for language in ("zh", "ar", "sk"):
        shown = build_messages(PromptCell(language, "item", (4,)), "verbalized")[0]["content"]
        assert re.search(r'\{"1": <[^>]+>, "2"', shown)


def test_the_spec_refuses_what_the_verbalized_measurement_cannot_ask():
    base = {"measurement": ["sample", "verbalized"]}
    for extra, named in (
        ({"mode": "survey"}, "design.measurement"),
        ({"option_labels": "words"}, "design.option_labels"),
        ({"constraint": "choice"}, "design.constraint"),
        ({"reply_format": "free"}, "design.measurement"),
        ({"max_tokens": 8}, "design.max_tokens"),
    ):
        with pytest.raises(SpecError, match=re.escape(named)):
            make_spec("http://127.0.0.1:1/v1", design={**base, **extra})


def test_verbalized_cells_have_their_own_keys_and_send_the_verbalized_prompt():
    plain = {c.key for c in iter_cells(make_spec("http://127.0.0.1:1/v1"))}
    spec = make_spec("http://127.0.0.1:1/v1", design={"measurement": ["sample", "verbalized"]})
    cells = list(iter_cells(spec))
    sample = [c for c in cells if c.sampling.measurement == "sample"]
    verbal = [c for c in cells if c.sampling.measurement == "verbalized"]
    assert {c.key for c in sample} == plain and len(verbal) == len(sample)
    assert not {c.key for c in verbal} & plain
    request = request_for(verbal[0])
    assert "probability" in request.messages[0]["content"] and request.verbalized == ("1", "2", "3", "4", "5")
    assert request.top_logprobs == 0


def test_constraints_admit_the_probability_object():
    labels = ("1", "2", "3", "4", "5")
    schema = verbalized_schema(labels)
    assert schema["required"] == list(labels) and schema["additionalProperties"] is False
    fields = constrained_request_fields("json_schema", labels)
    assert fields["response_format"]["json_schema"]["schema"] == schema
    grammar = constrained_request_fields("grammar", labels)["grammar"]
    assert grammar == verbalized_grammar(labels) and '"\\"5\\": " prob' in grammar
    # an OpenAI-compatible body carries them; a sample cell keeps the answer schema
    spec = make_spec("http://127.0.0.1:1/v1", design={"measurement": "verbalized", "constraint": "grammar"})
    call = get_provider("openai").call("http://127.0.0.1:1/v1", None, request_for(next(iter_cells(spec))))
    assert json.loads(call.data)["grammar"] == grammar
    assert constrained_request_fields("json_schema")["response_format"]["json_schema"]["name"] == "vsm_answer"


# ---- against the simulator -------------------------------------------------------------------------------


@pytest.mark.slow
def test_simulator_verbalized_cells_state_the_planted_truth_and_malformed_ones_get_statuses(tmp_path):
    config = SimConfig(seed=5, verbalized_malformed_rate=0.3)
    with SimServerThread(config) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "questions": list(range(1, 13)),
                "seeds": [1, 2],
                "temperature": [1.0],
                "measurement": "verbalized",
            },
        )
        result = run_sweep(spec, tmp_path / "run", stream=io.StringIO())
    assert result.failed == 0
    answers = load_answers(tmp_path / "run").collect()
    counts = dict(answers.group_by("status").len().iter_rows())
    assert set(counts) <= {"ok", "invalid_format", "missing_options"} and counts["ok"] >= 0.5 * answers.height
    assert counts.get("invalid_format", 0) + counts.get("missing_options", 0) > 0
    model = AnswerModel(load_scores(config.reference), signal=config.signal, spread=config.spread)
    for row in answers.filter(pl.col("status") == "ok").iter_rows(named=True):
        truth = model.distribution(row["country"], row["question"], 1.0, 1.0)
        assert row["option_probs"] == pytest.approx(truth, abs=1e-3)  # four decimals stated


# ---- the simulator's statements ----------------------------------------------------------------------------


def test_stated_distribution_plants_miscalibration_and_seeded_noise():
    from runner.endpoints.sim.seeding import Draws
    from runner.endpoints.sim.verbalized import stated_distribution

    truth = (0.1, 0.2, 0.4, 0.2, 0.1)
    assert stated_distribution(truth, 1.0, 0.0, Draws(1)) == pytest.approx(truth, abs=1e-15)
    sharp = stated_distribution(truth, 0.5, 0.0, Draws(1))  # p^2, renormalised
    assert sharp == pytest.approx([p * p / sum(q * q for q in truth) for p in truth], abs=1e-15)
    noisy = stated_distribution(truth, 1.0, 0.5, Draws(1, "k"))
    assert noisy == stated_distribution(truth, 1.0, 0.5, Draws(1, "k"))  # the same request states the same
    assert noisy != pytest.approx(truth, abs=1e-3) and math.fsum(noisy) == pytest.approx(1.0)
    assert stated_distribution((0.0, 0.5, 0.5, 0.0, 0.0), 0.7, 0.5, Draws(2))[0] == 0.0  # impossible stays so


def test_serve_sim_options_reach_the_config_and_bad_values_are_refused():
    import argparse

    from runner.commands.serve_sim import add_arguments, config_from_args
    from runner.endpoints.sim.config import SimConfigError

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = ["--verbalized-temperature", "0.5", "--verbalized-noise", "0.2", "--verbalized-malformed-rate", "0.1"]
    config = config_from_args(parser.parse_args(args))
    assert (config.verbalized_temperature, config.verbalized_noise, config.verbalized_malformed_rate) == (0.5, 0.2, 0.1)
    for bad in (["--verbalized-temperature", "0"], ["--verbalized-noise", "nan"], ["--verbalized-malformed-rate", "2"]):
        with pytest.raises(SimConfigError):
            config_from_args(parser.parse_args(bad))


def test_the_plans_input_bound_holds_for_the_longer_verbalized_prompt():
    from runner.sweep.accounting import plan_summary

    spec = make_spec("http://127.0.0.1:1/v1", design={"measurement": ["sample", "verbalized"], "reply_format": "json"})
    cells = list(iter_cells(spec))
    sent = sum(sum(len(m["content"].encode()) for m in request_for(c).messages) for c in cells)
    assert plan_summary(spec)["endpoints"]["sim"]["input_tokens_max"] >= sent  # bytes bound tokens


@pytest.mark.slow
def test_malformed_verbalized_cells_are_never_sent_to_an_extractor(tmp_path):
    from runner.api import extract_answers

    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5, verbalized_malformed_rate=0.5)) as sim:
        spec = make_spec(
            sim.base_url, design={"questions": [1, 2, 3, 4], "seeds": [1, 2], "measurement": ["sample", "verbalized"]}
        )
        assert run_sweep(spec, run, stream=io.StringIO()).failed == 0
        answers = load_answers(run).collect()
        unusable = answers.filter((pl.col("measurement") == "verbalized") & (pl.col("status") == "invalid_format"))
        ambiguous = answers.filter((pl.col("measurement") == "sample") & (pl.col("status") == "ambiguous"))
        assert unusable.height > 0 and ambiguous.height > 0
        result = extract_answers(run, spec.endpoints[0], statuses=("ambiguous", "invalid_format"), constraint="grammar")
    sample_unusable = answers.filter(
        (pl.col("measurement") == "sample") & pl.col("status").is_in(["ambiguous", "invalid_format"])
    )
    assert result.eligible == sample_unusable.height  # a stated distribution has no one option to restate
