"""The verbalized measurement against the real llama.cpp server with SmolLM2-135M, through the whole runner.

A 135M model states probabilities poorly, so the test checks what hofcat promises of any model: every verbalized
cell is stored and parsed to a row with a status (never a traceback), and under llama.cpp's grammar for the
probability object (runner/survey/constrained.py) every reply is an object with one number in [0, 1] per shown
label, so what is left to judge is its sum.
"""

from __future__ import annotations

import io

import polars as pl
import pytest

from _runner_support import make_spec
from runner.analyze.load import load_answers
from runner.endpoints.llm import LocalLLM
from runner.parse.verbalized import VERBALIZED_STATUSES
from runner.rundir import read_dataset
from runner.sweep.session import run_sweep

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_smollm2_verbalized_cells_store_a_row_with_a_status(tmp_path):
    with LocalLLM(model="smollm2", slots=2, ctx_per_slot=1024) as llm:
        spec = make_spec(
            llm.base_url,
            endpoint={"name": "local", "model": llm.model_name, "max_concurrency": 4, "timeout_s": 120.0},
            design={
                "personas": ["United States", "China"],
                "questions": [1, 2, 3, 4, 5, 6],
                "seeds": [1],
                "temperature": [0.7],
                "max_tokens": 128,
                "constraint": ["none", "grammar"],
                "measurement": "verbalized",
            },
        )
        result = run_sweep(spec, tmp_path / "run", stream=io.StringIO())
    assert result.stored == 2 * 6 * 2 and result.failed == 0
    answers = load_answers(tmp_path / "run").collect()
    assert answers.height == 24 and set(answers["status"]) <= set(VERBALIZED_STATUSES)
    constrained = answers.filter(pl.col("constraint") == "grammar")
    # the grammar admits exactly the object: only its sum can make a reply unusable
    assert set(constrained["status"]) <= {"ok", "bad_sum", "zero_sum"}, constrained["status"].to_list()
    for row in answers.filter(pl.col("status") == "ok").iter_rows(named=True):
        assert abs(sum(row["option_probs"]) - 1.0) < 1e-9 and 1 <= row["option_id"] <= 5
    texts = read_dataset(tmp_path / "run", "responses", ["response_text"]).column(0).to_pylist()
    assert all(isinstance(t, str) for t in texts)  # the raw replies are kept beside their parse
