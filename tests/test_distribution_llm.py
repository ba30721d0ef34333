"""The distribution measurement against the real llama.cpp server with SmolLM2-135M, through the whole runner.

With the digit grammar hofcat asks llama.cpp for its post-sampling probabilities (no truncation sampler): the
stored option probabilities are the distribution the constrained reply is drawn from at the cell's temperature. The
test checks them against an independent reading of the same prompt: the raw log-probabilities of the server's
top 200 alternatives (every digit among them), drawn at that temperature (p^(1/T) over the five digit tokens).
"""

from __future__ import annotations

import io
import json
import math
import urllib.request

import polars as pl
import pytest

from _runner_support import make_spec
from runner.analyze.load import load_answers
from runner.endpoints.llm import LocalLLM
from runner.parse.distribution import MIN_OPTION_MASS
from runner.rundir import read_dataset
from runner.sweep.session import run_sweep

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_smollm2_distribution_cells_have_option_probabilities(tmp_path):
    with LocalLLM(model="smollm2", slots=2, ctx_per_slot=1024) as llm:
        spec = make_spec(
            llm.base_url,
            endpoint={"name": "local", "model": llm.model_name, "max_concurrency": 4, "timeout_s": 120.0},
            design={
                "personas": ["United States", "China"],
                "questions": list(range(1, 13)),
                "seeds": [1],
                "temperature": [0.7],
                "max_tokens": 2,
                "constraint": "grammar",
                "measurement": "distribution",
            },
        )
        result = run_sweep(spec, tmp_path / "run", stream=io.StringIO())
    assert result.stored == 24 and result.failed == 0
    answers = load_answers(tmp_path / "run").collect()
    with_probs = answers.filter(pl.col("option_probs").is_not_null())
    assert with_probs.height >= 0.95 * answers.height
    for row in with_probs.iter_rows(named=True):
        assert len(row["option_probs"]) == 5 and all(0.0 <= p <= 1.0 for p in row["option_probs"])
        assert 0.0 < row["option_mass"] <= 1.0
        if row["option_mass"] >= MIN_OPTION_MASS:
            assert abs(math.fsum(row["option_probs"]) - 1.0) < 1e-9
    # constrained: the cell is ok whatever the raw mass (the grammar admits only option tokens), and no option is
    # at exactly 0 (parser 1.5.0 zeroed every digit outside the raw top 20: 21 of 48 demo cells)
    assert (with_probs["status"] == "ok").all()
    assert all(p > 0.0 for probs in with_probs["option_probs"].to_list() for p in probs)
    stored = read_dataset(tmp_path / "run", "responses", ["logprobs_sampled"]).column(0).to_pylist()
    assert all(stored)  # llama.cpp's post-sampling probabilities, not raw logits


def test_smollm2_low_mass_cell_is_the_distribution_drawn_under_the_grammar(tmp_path):
    # Q18 with a Germany persona: the digits hold ~4 % of the raw mass and four are outside the raw top 20 (the
    # parser before 1.6.0 stored [1, 0, 0, 0, 0]); every option must now be a positive probability equal to the
    # raw logits' digits drawn at T = 0.7
    temperature = 0.7
    with LocalLLM(model="smollm2", slots=1, ctx_per_slot=1024) as llm:
        spec = make_spec(
            llm.base_url,
            endpoint={"name": "local", "model": llm.model_name, "max_concurrency": 1, "timeout_s": 120.0},
            design={
                "personas": ["Germany"],
                "questions": [18],
                "seeds": [1],
                "temperature": [temperature],
                "max_tokens": 2,
                "constraint": "grammar",
                "measurement": "distribution",
            },
        )
        run_sweep(spec, tmp_path / "run", stream=io.StringIO())
        messages = json.loads(read_dataset(tmp_path / "run", "prompts").column("messages_json")[0].as_py())
        body = {"model": llm.model_name, "messages": messages, "max_tokens": 1, "temperature": 1.0, "seed": 1}
        body |= {"grammar": "root ::= [1-5]", "logprobs": True, "top_logprobs": 200}
        request = urllib.request.Request(
            f"{llm.base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as reply:
            raw = json.loads(reply.read())["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    row = load_answers(tmp_path / "run").collect().row(0, named=True)
    digits = {t["token"]: t["logprob"] for t in raw if t["token"] in ("1", "2", "3", "4", "5")}
    assert len(digits) == 5 and math.fsum(math.exp(lp) for lp in digits.values()) < 0.2  # a low-mass cell
    weights = [math.exp(digits[d] / temperature) for d in ("1", "2", "3", "4", "5")]
    expected = [w / math.fsum(weights) for w in weights]
    assert row["status"] == "ok" and row["option_bound"] is None
    assert all(p > 0.0 for p in row["option_probs"])  # no option silently at zero
    # the cached and the fresh prompt's logits differ by llama.cpp's numerical noise (measured: up to ~0.04)
    assert max(abs(a - b) for a, b in zip(row["option_probs"], expected, strict=True)) < 0.06
