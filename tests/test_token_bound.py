"""The plan's input-token bound holds against the real tokenizer: SmolLM2 behind llama.cpp's server, every
instrument language, item and survey mode (the server reports the prompt tokens it counted)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from _runner_support import make_spec
from runner.endpoints.llm import LocalLLM
from runner.rundir import read_dataset
from runner.sweep.accounting import input_bound, plan_summary
from runner.sweep.session import run_sweep

pytestmark = [pytest.mark.llm, pytest.mark.slow]

LANGUAGES = ["en", "zh", "ar", "sk"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bound") / "run"
    with LocalLLM(model="smollm2", slots=2, ctx_per_slot=4096) as llm:
        design = {
            "mode": ["item", "survey"],
            "languages": LANGUAGES,
            "personas": ["China", "Slovakia"],
            "no_persona": True,
            "questions": [1, 5, 12, 19, 24],
            "seeds": [1],
            "temperature": [0.0],
            "max_tokens": 4,
        }
        spec = make_spec(llm.base_url, endpoint={"model": llm.model_name, "timeout_s": 120.0}, design=design)
        result = run_sweep(spec, out)
        assert result.failed == 0 and result.stored == spec_cells(spec)
    return spec, out


def spec_cells(spec) -> int:
    return plan_summary(spec)["cells"]


def test_every_cell_takes_at_most_its_bound_and_the_run_at_most_the_plan(run):
    spec, out = run
    responses = pl.from_arrow(read_dataset(out, "responses", ["prompt_hash", "input_tokens", "language", "mode"]))
    prompts = pl.from_arrow(read_dataset(out, "prompts"))
    bounds = {h: input_bound(json.loads(m)) for h, m in prompts.iter_rows()}
    assert responses["input_tokens"].null_count() == 0  # llama.cpp reports prompt_tokens
    for prompt_hash, used, language, mode in responses.iter_rows():
        assert used <= bounds[prompt_hash], (language, mode, used, bounds[prompt_hash])
    summary = plan_summary(spec)["endpoints"]["sim"]
    assert responses["input_tokens"].sum() <= summary["input_tokens_max"]
    # and the bound is not vacuous: within a small factor of what the tokenizer counted, in every language
    ratio = (
        responses.with_columns(bound=pl.col("prompt_hash").replace_strict(bounds, return_dtype=pl.Int64))
        .group_by("language")
        .agg((pl.col("bound").sum() / pl.col("input_tokens").sum()).alias("ratio"))
    )
    assert set(ratio["language"]) == set(LANGUAGES)
    assert ratio["ratio"].is_between(1.0, 8.0).all(), ratio
