"""The distribution measurement: token → option mapping, providers' log-probability shapes, the spec factor and
its keys, the K-sample fallback, and the whole path against the simulator (known truth)."""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from _runner_support import make_spec
from runner.analyze.load import load_answers
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.analyze.tables import question_table
from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.logprobs import LEAK
from runner.endpoints.sim.respondent import AnswerModel
from runner.endpoints.sim.server import SimServerThread
from runner.errors import SpecError
from runner.parse.distribution import MIN_OPTION_MASS, option_distribution, scored_value, token_label
from runner.rundir import read_dataset, read_manifest
from runner.sweep.plan import count_cells, iter_cells, measurement_fallback
from runner.sweep.providers import ChatRequest, get_provider
from runner.sweep.session import run_sweep

# ---- tokens → options ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "label"),
    [("3", "3"), (" 3", "3"), ("\u25813", "3"), ("\u01203", "3"), ("３", "3"), ("٣", "3"), ("(3", "3"), ("B", "b")],
)
def test_token_label_folds_tokenizer_spellings(token, label):
    assert token_label(token) == label


def test_option_distribution_sums_spellings_and_undoes_the_display_order():
    # displayed position 1 shows option 5, position 2 option 4, ... (reversed); "1" and " 1" are one label
    top = [("1", math.log(0.5)), (" 1", math.log(0.1)), ("2", math.log(0.2)), ("The", math.log(0.15))]
    probs, mass, bound = option_distribution(top, (5, 4, 3, 2, 1))
    assert mass == pytest.approx(0.8)
    # options 1-3 were not listed: unknown (None), each at most u / (0.8 + u) with u = min(0.1, 1 - 0.95)
    assert probs[:3] == (None, None, None) and probs[3:] == pytest.approx((0.25, 0.75))
    assert bound == pytest.approx(0.05 / 0.85)


def test_option_distribution_letters_and_exact_labels():
    letters = option_distribution([("b", math.log(0.6)), (" C", math.log(0.3))], labels=("A", "B", "C", "D", "E"))
    assert letters.probs[1:3] == pytest.approx((2 / 3, 1 / 3)) and letters.probs[::3] == (None, None)
    assert letters.bound == pytest.approx(0.1 / 1.0)  # u = 1 - 0.9 (below the smallest listed, 0.3)
    # a token counts only when it spells a whole label: words-only prompts have no distribution (the spec refuses
    # them), so a first word ("very", "of") is never read as the option it starts
    words = ("of utmost importance", "very important", "of moderate importance", "of little importance", "no")
    probs, mass, _ = option_distribution([("very", -1.0), ("of", -1.0), (" no", -2.0)], labels=words)
    assert mass == pytest.approx(math.exp(-2))
    assert probs == (None, None, None, None, 1.0)


def test_no_option_token_gives_no_probabilities():
    assert option_distribution([("I", -0.1), ("The", -2.5)]) == (None, 0.0, None)


@pytest.mark.parametrize("temperature", [0.3, 0.7, 1.0, 1.6])
def test_all_options_listed_give_the_distribution_drawn_at_the_temperature(temperature):
    # a 12-token vocabulary: the five digits, a spaced "3" and six prose tokens; drawing under a digit grammar
    # picks token t with probability p_t^(1/T) over the option tokens (exact enumeration, scipy's softmax)
    from scipy.special import softmax

    vocab = ["1", "2", "3", " 3", "4", "5", "I", "The", "As", "In", "We", "A"]
    logp = np.log(softmax(np.array([-1.0, -3.2, -0.4, -2.9, -4.1, -6.5, 0.8, 0.1, -0.5, -1.2, -2.0, -3.3])))
    top = sorted(zip(vocab, logp.tolist(), strict=True), key=lambda t: -t[1])
    reading = option_distribution(top[:8], temperature=temperature)  # "2", "4" and "5" are not in the top 8
    drawn = softmax(logp[:6] / temperature)
    truth = [drawn[0], drawn[1], drawn[2] + drawn[3], drawn[4], drawn[5]]
    full = option_distribution(top, temperature=temperature)  # every token listed: exact
    assert full.bound is None and full.probs == pytest.approx(truth, abs=1e-12)
    assert full.mass == pytest.approx(float(np.exp(logp[:6]).sum()), abs=1e-12)
    # truncated to the top 8: options 2, 4 and 5 are bounded (never 0), options 1 and 3 renormalised between them
    assert [p is None for p in reading.probs] == [False, True, False, True, True]
    assert max(truth[1], truth[3], truth[4]) <= reading.bound < 1.0
    assert [reading.probs[0], reading.probs[2]] == pytest.approx(
        [truth[0] / (truth[0] + truth[2]), truth[2] / (truth[0] + truth[2])], abs=1e-12
    )


def test_the_bound_holds_for_every_truncation_and_temperature():
    # exact enumeration over random vocabularies: each unlisted option's drawn probability is at most the bound,
    # and each listed option's lies between its renormalised share shrunk by the bounds and that share
    from scipy.special import softmax

    rng = np.random.default_rng(7)
    vocab = ["1", "2", "3", "4", "5", *(f"w{i}" for i in range(25))]
    checked = 0
    for _ in range(300):
        logp = np.log(softmax(rng.normal(0.0, 2.5, len(vocab))))
        k = int(rng.integers(2, 20))
        temperature = float(rng.choice([0.0, 0.25, 0.7, 1.0, 1.5]))
        top = sorted(zip(vocab, logp.tolist(), strict=True), key=lambda t: -t[1])[:k]
        reading = option_distribution(top, temperature=temperature)
        if reading.probs is None:
            assert not any(t in "12345" for t, _ in top)
            continue
        if temperature == 0.0:
            drawn = np.zeros(5)
            drawn[int(np.argmax(logp[:5]))] = 1.0
        else:
            drawn = softmax(logp[:5] / temperature)
        missing = [i for i, p in enumerate(reading.probs) if p is None]
        if reading.bound is None:  # exact: listed shares equal the truth, unlisted ones are ≤ 1e-9 each
            assert list(reading.probs) == pytest.approx(drawn.tolist(), abs=1e-8)
            continue
        checked += 1
        assert missing and all(drawn[i] <= reading.bound + 1e-12 for i in missing)
        n_missing = len(missing)
        for i, p in enumerate(reading.probs):
            if p is not None:
                ratio = reading.bound / (1.0 - reading.bound) if reading.bound < 1.0 else math.inf
                assert p / (1.0 + n_missing * ratio) - 1e-12 <= drawn[i] <= p + 1e-12
    assert checked > 100


# ---- providers ---------------------------------------------------------------------------------------------


LLAMA_CHOICE = {  # the shape llama.cpp's server returns (measured with SmolLM2), abridged
    "finish_reason": "length",
    "index": 0,
    "message": {"role": "assistant", "content": "4"},
    "logprobs": {
        "content": [
            {
                "id": 36,
                "token": "4",
                "bytes": [52],
                "logprob": -3.47,
                "top_logprobs": [
                    {"id": 33, "token": "1", "bytes": [49], "logprob": -1.47},
                    {"id": 788, "token": "In", "bytes": [73, 110], "logprob": -2.76},
                    {"id": 36, "token": "4", "bytes": [52], "logprob": -3.47},
                ],
            }
        ]
    },
}


def test_openai_provider_asks_for_and_reads_top_logprobs():
    provider = get_provider("openai")
    request = ChatRequest("m", [{"role": "user", "content": "q"}], 1, 1.0, 1.0, 4, top_logprobs=7)
    body = provider.call("http://x/v1", None, request).body
    assert body["logprobs"] is True and body["top_logprobs"] == 7
    plain = provider.call("http://x/v1", None, ChatRequest("m", [{"role": "user", "content": "q"}], 1, 1.0, 1.0, 4))
    assert "logprobs" not in plain.body
    reply = provider.reply({"choices": [LLAMA_CHOICE], "usage": {}})
    assert reply.text == "4"
    assert reply.top_logprobs == (("1", -1.47), ("In", -2.76), ("4", -3.47))
    assert provider.reply({"choices": [{"message": {"content": "4"}, "logprobs": None}]}).top_logprobs is None


def test_gemini_provider_asks_for_and_reads_logprobs():
    provider = get_provider("gemini")
    request = ChatRequest("g", [{"role": "user", "content": "q"}], None, 1.0, 1.0, 4, top_logprobs=5)
    config = provider.call("http://x/v1beta", None, request).body["generationConfig"]
    assert config["responseLogprobs"] is True and config["logprobs"] == 5
    body = {
        "candidates": [
            {
                "content": {"parts": [{"text": "2"}]},
                "finishReason": "STOP",
                "logprobsResult": {
                    "topCandidates": [{"candidates": [{"token": "2", "logProbability": -0.2}, {"token": "3"}]}],
                    "chosenCandidates": [{"token": "2", "logProbability": -0.2}],
                },
            }
        ]
    }
    assert provider.reply(body).top_logprobs == (("2", -0.2),)  # the entry without a number is skipped


# ---- spec, keys, fallback ----------------------------------------------------------------------------------


def _documented_key(cell) -> str:
    """cell_key recomputed from docs/runner.md's recipe, independent of the planner's code."""
    e, p, s, f = cell.endpoint, cell.prompt, cell.sampling, cell.prompt.framing
    head = [e.name, e.provider, e.model, p.language, p.mode, list(p.questions), f.kind, f.country, f.age, f.gender]
    head += [list(p.option_order), p.reply_format, cell.template_hash]
    if p.labels != "digits":
        head.append(p.labels)
    head += [s.seed, s.temperature, s.top_p, s.max_tokens]
    if s.constraint != "none":
        head.append(s.constraint)
    if s.measurement != "sample":
        head += [s.measurement, s.top_logprobs] + ([] if s.draw is None else [s.draw])
    return hashlib.sha256(json.dumps(head, separators=(",", ":")).encode()).hexdigest()[:32]


def test_measurement_at_its_default_keeps_the_keys_of_specs_without_it():
    plain = list(iter_cells(make_spec("http://127.0.0.1:1/v1")))
    explicit = list(iter_cells(make_spec("http://127.0.0.1:1/v1", design={"measurement": "sample"})))
    assert [c.key for c in plain] == [c.key for c in explicit] == [_documented_key(c) for c in plain]
    both = list(iter_cells(make_spec("http://127.0.0.1:1/v1", design={"measurement": ["sample", "distribution"]})))
    assert (
        len(both)
        == 2 * len(plain)
        == count_cells(make_spec("http://127.0.0.1:1/v1", design={"measurement": ["sample", "distribution"]}))
    )
    assert {c.key for c in both if c.sampling.measurement == "sample"} == {c.key for c in plain}
    assert all(c.key == _documented_key(c) for c in both)
    assert {c.sampling.top_logprobs for c in both if c.sampling.measurement == "distribution"} == {20}


def test_distribution_is_refused_where_the_first_token_is_no_answer():
    with pytest.raises(SpecError, match=r"design\.measurement = 'distribution': must be \"sample\" in survey mode"):
        make_spec("http://x/v1", design={"mode": "survey", "measurement": "distribution"})
    with pytest.raises(SpecError, match="reply_format 'json'"):
        make_spec("http://x/v1", design={"reply_format": "json", "measurement": "distribution"})
    with pytest.raises(SpecError, match=r"design\.top_logprobs = 21: must be an integer 1-20"):
        make_spec("http://x/v1", design={"measurement": "distribution", "top_logprobs": 21})


def test_anthropic_distribution_falls_back_to_k_samples_and_says_so():
    spec = make_spec(
        "https://api.anthropic.com/v1",
        endpoint={"provider": "anthropic", "model": "claude"},
        design={"measurement": "distribution", "samples_per_cell": 4},
    )
    cells = list(iter_cells(spec))
    assert len(cells) == count_cells(spec) == 4 * len(list(iter_cells(make_spec("http://x/v1"))))
    assert len({c.key for c in cells}) == len(cells)
    assert {c.sampling.draw for c in cells} == {0, 1, 2, 3} and {c.sampling.top_logprobs for c in cells} == {0}
    assert "4 sampled replies per distribution cell" in measurement_fallback(spec)["sim"]


# ---- the simulator, end to end ----------------------------------------------------------------------------

PERSONAS = ["United States", "China", "Japan", "Germany"]


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist") / "run"
    with SimServerThread(SimConfig(seed=3)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": PERSONAS,
                "questions": list(range(1, 25)),
                "seeds": [1, 2, 3],
                "temperature": [1.0],
                "shuffle_options": True,
                "measurement": ["sample", "distribution"],
                "top_logprobs": 20,
            },
        )
        result = run_sweep(spec, out, stream=io.StringIO())
    assert result.stored == 2 * 4 * 24 * 3 and result.failed == 0
    return out


@pytest.mark.slow
def test_simulator_distributions_recover_the_planted_truth(sim_run):
    answers = load_answers(sim_run).filter(pl.col("measurement") == "distribution").collect()
    assert answers.height == 4 * 24 * 3
    assert (answers["status"] == "ok").all()
    model = AnswerModel(_reference_scores())
    distances = []
    for row in answers.iter_rows(named=True):
        truth = model.distribution(row["country"], row["question"], 1.0, 1.0)
        distances.append(0.5 * sum(abs(a - b) for a, b in zip(row["option_probs"], truth, strict=True)))
        assert abs(math.fsum(row["option_probs"]) - 1.0) < 1e-9
        assert row["option_mass"] == pytest.approx(1.0 - LEAK, abs=1e-9)
    assert sum(distances) / len(distances) < 0.02
    # the stored raw top-k is what they came from
    responses = read_dataset(sim_run, "responses", ["measurement", "top_logprobs"]).to_pylist()
    stored = [r["top_logprobs"] for r in responses if r["measurement"] == "distribution"]
    assert all(len(t) == 13 and {"token", "logprob"} <= set(t[0]) for t in stored)  # 10 option + 3 other tokens


def test_a_sweep_mixes_both_measurements_as_a_factor(sim_run):
    analysis = analyze_run(sim_run, AnalysisOptions(n_resamples=200))
    cat = pl.read_parquet(analysis / "cat.parquet").sort("measurement")
    assert cat["measurement"].to_list() == ["distribution", "sample"]
    width = (cat["ci_high"] - cat["ci_low"]).to_list()
    assert width[0] < width[1]  # the distribution's interval is narrower than the samples' on the same cells
    questions = pl.read_parquet(analysis / "questions.parquet").filter(pl.col("measurement") == "distribution")
    # exact answer variance: the truth's own variance (all units see the same distribution up to the order)
    model = AnswerModel(_reference_scores())
    row = questions.filter((pl.col("country") == "China") & (pl.col("question") == 7)).row(0, named=True)
    truth = model.distribution("China", 7, 1.0, 1.0)
    mean = sum((k + 1) * p for k, p in enumerate(truth))
    assert row["mean"] == pytest.approx(mean, abs=1e-9)
    assert row["var_exact"] == pytest.approx(sum((k + 1 - mean) ** 2 * p for k, p in enumerate(truth)), abs=1e-9)


def test_prose_replies_are_low_mass_not_renormalised(tmp_path):
    with SimServerThread(SimConfig(seed=1, chatty_rate=1.0)) as sim:
        spec = make_spec(
            sim.base_url,
            design={"questions": [1, 2], "seeds": [1], "temperature": [1.0], "measurement": "distribution"},
        )
        run_sweep(spec, tmp_path / "run", stream=io.StringIO())
    answers = load_answers(tmp_path / "run").collect()
    assert set(answers["status"]) == {"low_mass"} and answers["option_probs"].is_null().all()
    assert answers["option_mass"].to_list() == [0.0] * answers.height
    manifest = read_manifest(tmp_path / "run")
    assert manifest["measurement_fallback"] == {}


def test_scored_value_is_the_expected_option_and_low_mass_is_not_scored():
    frame = pl.DataFrame(
        {
            "question": [1, 1, 15],
            "status": ["ok", "low_mass", "ok"],
            "option_id": [2, None, 1],
            "option_probs": [[0.5, 0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]],
        }
    )
    from runner.parse.policy import Policy

    assert frame.select(scored_value())["scored"].to_list() == [1.5, None, 1.0]
    pinned = frame.select(scored_value(Policy(health_items="neutral")))["scored"].to_list()
    assert pinned == [1.5, None, 3.0]
    assert MIN_OPTION_MASS == 0.5


def test_question_table_exact_variance_of_mixed_cells():
    frame = pl.DataFrame(
        {
            "country": ["A", "A"],
            "question": [1, 1],
            "status": ["ok", "ok"],
            "option_id": [1, 3],
            "option_probs": [[1.0, 0.0, 0.0, 0.0, 0.0], None],  # a distribution cell (always 1), a sample (3)
        },
        schema_overrides={"option_probs": pl.List(pl.Float64)},
    ).lazy()
    row = question_table(frame, []).collect().row(0, named=True)
    assert row["mean"] == 2.0 and row["var_exact"] == pytest.approx(1.0)


def _reference_scores():
    from runner.endpoints.sim.data import load_scores  # the table the simulator answers from

    return load_scores(SimConfig().reference)


def test_arrow_type_of_raw_top_k():
    from runner.rundir.schema import RESPONSE_SCHEMA

    assert RESPONSE_SCHEMA.field("top_logprobs").type == pa.list_(
        pa.struct([("token", pa.string()), ("logprob", pa.float64())])
    )


def test_vllm_choice_constraint_goes_on_the_wire_and_constrains_the_simulator(tmp_path):
    provider = get_provider("openai")
    request = ChatRequest("m", [{"role": "user", "content": "q"}], 1, 1.0, 1.0, 2, constraint="choice")
    assert provider.call("http://x/v1", None, request).body["guided_choice"] == ["1", "2", "3", "4", "5"]
    with pytest.raises(SpecError, match="constraint 'choice'"):
        make_spec("http://x/v1", design={"constraint": "choice", "option_labels": "letters"})
    with SimServerThread(SimConfig(seed=1, chatty_rate=1.0)) as sim:  # chatty, unless constrained
        spec = make_spec(
            sim.base_url,
            design={"questions": [1, 2], "seeds": [1], "constraint": "choice", "measurement": "distribution"},
        )
        run_sweep(spec, tmp_path / "run", stream=io.StringIO())
    answers = load_answers(tmp_path / "run").collect()
    assert (answers["status"] == "ok").all() and answers["option_probs"].is_not_null().all()
