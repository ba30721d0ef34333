"""How tight the plan's input-token bound is: bound ÷ tokens the real tokenizer counted, per language and mode.

Run: ``python -m benches.token_bound``. Starts SmolLM2-135M behind llama.cpp's server (``hofcat serve-llm``'s
model), sweeps every instrument language in item and survey mode with two personas and no persona, and
compares each cell's bound (``runner.sweep.accounting.input_bound``: UTF-8 bytes + template tokens) with the
``prompt_tokens`` the server reported. The bound must hold on every cell (checked); the ratio says how much a
cost preview built on it overstates.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl

from runner.endpoints.llm import LocalLLM
from runner.rundir import read_dataset
from runner.sweep.accounting import input_bound, input_estimate
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec

SPEC = """
[run]
name = "token-bound"
[[endpoints]]
name = "llm"
provider = "openai"
base_url = "{base_url}"
model = "{model}"
timeout_s = 300
max_concurrency = 2
[design]
mode = ["item", "survey"]
languages = ["en", "zh", "ar", "sk"]
personas = ["China", "Slovakia"]
no_persona = true
seeds = [1]
temperature = [0.0]
max_tokens = 2
"""


def main() -> None:
    """Sweep, check the bound on every cell, print bound ÷ actual and estimate ÷ actual per language and mode."""
    with tempfile.TemporaryDirectory() as tmp, LocalLLM(model="smollm2", slots=2, ctx_per_slot=4096) as llm:
        spec = parse_spec(SPEC.format(base_url=llm.base_url, model=llm.model_name), source="benches/token_bound")
        run_sweep(spec, Path(tmp) / "run")
        responses = pl.from_arrow(
            read_dataset(Path(tmp) / "run", "responses", ["prompt_hash", "input_tokens", "language", "mode"])
        )
        stored = read_dataset(Path(tmp) / "run", "prompts").to_pylist()
        prompts = {row["prompt_hash"]: json.loads(row["messages_json"]) for row in stored}
    frame = responses.with_columns(
        bound=pl.col("prompt_hash").replace_strict({h: input_bound(m) for h, m in prompts.items()}),
        estimate=pl.col("prompt_hash").replace_strict({h: input_estimate(m) for h, m in prompts.items()}),
    )
    assert (frame["input_tokens"] <= frame["bound"]).all(), "the bound failed on a cell"
    table = (
        frame.group_by("language", "mode")
        .agg(
            pl.len().alias("cells"),
            (pl.col("bound").sum() / pl.col("input_tokens").sum()).round(2).alias("bound / actual"),
            (pl.col("estimate").sum() / pl.col("input_tokens").sum()).round(2).alias("estimate / actual"),
            (pl.col("bound") / pl.col("input_tokens")).min().round(2).alias("tightest cell"),
        )
        .sort("language", "mode")
    )
    print(f"{frame.height} cells; the bound held on every one")
    print(table)


if __name__ == "__main__":
    main()
