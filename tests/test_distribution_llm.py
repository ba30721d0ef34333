"""The distribution measurement against the real llama.cpp server with SmolLM2-135M, through the whole runner.

llama.cpp reports the first token's top-k from the raw logits (before the grammar), so with the digit grammar the
renormalised option probabilities are the distribution the constrained reply is drawn from; the test checks the
stored shapes and numbers, never exact values (they differ between llama.cpp builds).
"""

from __future__ import annotations

import io
import math

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
    # constrained: the cell is ok whatever the raw mass (the grammar admits only option tokens)
    assert (with_probs["status"] == "ok").all()
    raw = read_dataset(tmp_path / "run", "responses", ["top_logprobs"]).column("top_logprobs").to_pylist()
    assert all(t is not None and len(t) == 20 for t in raw)  # the default top_logprobs, as llama.cpp returned them
