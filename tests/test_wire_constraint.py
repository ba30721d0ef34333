"""Constrained decoding as a design factor: spec, plan keys, request bodies, stored column, simulator, llama.cpp."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import polars as pl
import pytest

from _runner_support import check_run_dir, make_spec, spec_text
from runner.analyze.design import infer_design, varying
from runner.analyze.load import load_answers
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.errors import SpecError
from runner.rundir import read_dataset
from runner.survey.constrained import DIGIT_GRAMMAR, constrained_request_fields
from runner.sweep.accounting import plan_summary
from runner.sweep.plan import factor_counts, iter_cells
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec
from test_runner_providers import ShapeServer

URL = "http://127.0.0.1:9/v1"


def test_a_spec_without_constraint_keeps_its_cell_keys() -> None:
    design = {"reply_format": ["number", "json"], "top_p": [0.5, 1.0]}
    plain = make_spec(URL, design=design)
    explicit = make_spec(URL, design={**design, "constraint": "none"})
    assert plain.design.constraints == ("none",)
    keys = [c.key for c in iter_cells(plain)]
    assert keys == [c.key for c in iter_cells(explicit)]
    # Computed with the code before constraints existed (commit c047a35): stored runs must keep resuming.
    assert hashlib.sha256("".join(keys).encode()).hexdigest()[:16] == "b5229a8c58e090ae"


def test_constraint_is_a_factor_of_the_plan_and_of_the_key() -> None:
    spec = make_spec(URL, design={"constraint": ["none", "grammar"], "reply_format": ["number", "fewshot"]})
    counts = factor_counts(spec)
    assert counts["constraints"] == 2
    cells = list(iter_cells(spec))
    assert len(cells) == len({c.key for c in cells}) == 2 * 2 * 6 * 2 * 2 * 2
    by_kind = {k: {c.key for c in cells if c.sampling.constraint == k} for k in ("none", "grammar")}
    assert len(by_kind["none"]) == len(by_kind["grammar"]) == len(cells) // 2
    assert not by_kind["none"] & by_kind["grammar"]
    assert by_kind["none"] <= {
        c.key for c in iter_cells(make_spec(URL, design={"reply_format": ["number", "fewshot"]}))
    }
    assert plan_summary(spec)["factors"]["constraints"] == 2


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            {"design": {"constraint": "regex"}},
            "test-spec: design.constraint = 'regex': must be one of none, grammar, json_schema",
        ),
        ({"design": {"constraint": []}}, "design.constraint = []: must be a non-empty list"),
        (
            {"design": {"constraint": "grammar", "reply_format": "json"}},
            (
                "design.constraint = 'grammar': must be \"none\" with reply_format 'json' ('grammar' produces "
                "only reply_format 'number' or 'fewshot')"
            ),
        ),
        (
            {"design": {"constraint": "json_schema"}},
            (
                "design.constraint = 'json_schema': must be \"none\" with reply_format 'number' ('json_schema' "
                "produces only reply_format 'json')"
            ),
        ),
        (
            {"design": {"constraint": "grammar", "mode": "survey"}},
            "design.constraint = 'grammar': must be \"none\" in survey mode",
        ),
        (
            {"endpoint": {"provider": "anthropic"}, "design": {"constraint": ["none", "grammar"]}},
            "endpoints[0].provider = 'anthropic': must be openai when design.constraint includes 'grammar'",
        ),
        (
            {"endpoint": {"provider": "gemini"}, "design": {"constraint": "json_schema", "reply_format": "json"}},
            "endpoints[0].provider = 'gemini': must be openai when design.constraint includes 'json_schema'",
        ),
    ],
)
def test_constraint_errors_are_located(change: dict, needle: str) -> None:
    with pytest.raises(SpecError) as err:
        make_spec(URL, **change)
    assert needle in str(err.value)


def test_openai_requests_carry_the_constraint_fields_and_rows_record_it(tmp_path: Path) -> None:
    with ShapeServer("openai") as server:
        spec = make_spec(
            server.base_url,
            design={
                "personas": ["China"],
                "questions": [1, 2],
                "seeds": [1],
                "temperature": [0.0],
                "reply_format": ["json"],
                "constraint": ["none", "json_schema"],
            },
        )
        result = run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
        spec_g = make_spec(
            server.base_url,
            design={
                "personas": ["China"],
                "questions": [3],
                "seeds": [1],
                "temperature": [0.0],
                "constraint": "grammar",
            },
        )
        run_sweep(spec_g, tmp_path / "run-g", live=False, stream=io.StringIO())
    rows = check_run_dir(tmp_path / "run", spec)
    assert result.stored == 4 and sorted(r["constraint"] for r in rows.values()) == ["json_schema"] * 2 + ["none"] * 2
    bodies = [r["body"] for r in server.requests]
    schema = constrained_request_fields("json_schema")["response_format"]
    with_schema = [b for b in bodies if "response_format" in b]
    # Every fifth attempt is a 429 and is retried with the same body, so compare sets of requests.
    assert {json.dumps(b["response_format"], sort_keys=True) for b in with_schema} == {
        json.dumps(schema, sort_keys=True)
    }
    free = [b for b in bodies if "response_format" not in b and "grammar" not in b]
    assert {b["messages"][-1]["content"] for b in with_schema} == {b["messages"][-1]["content"] for b in free}
    assert len({b["messages"][-1]["content"] for b in free}) == 2
    assert all("grammar" not in b for b in with_schema)
    grammar = [b for b in bodies if "grammar" in b]
    assert grammar and all(b["grammar"] == DIGIT_GRAMMAR and "response_format" not in b for b in grammar)
    assert read_dataset(tmp_path / "run-g", "responses")["constraint"].to_pylist() == ["grammar"]


def test_the_simulator_answers_grammar_requests_with_a_bare_digit(tmp_path: Path) -> None:
    # Every free reply is chatty or a refusal; a grammar-constrained one cannot be, so it parses 100 % ok.
    with SimServerThread(SimConfig(seed=5, chatty_rate=0.7, refusal_rate=0.3)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": ["China", "Japan"],
                "questions": [1, 2, 3, 4],
                "seeds": [1, 2],
                "temperature": [1.0],
                "constraint": ["none", "grammar"],
            },
        )
        run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
        grammar_replies = [e.reply for e in sim.log if e.reply and e.reply.strip().isdigit()]
    answers = load_answers(tmp_path / "run").collect()
    ok = answers.group_by("constraint").agg((pl.col("status") == "ok").mean().alias("ok")).sort("constraint")
    assert ok["constraint"].to_list() == ["grammar", "none"]
    assert ok["ok"][0] == 1.0 and ok["ok"][1] < 0.8
    responses = read_dataset(tmp_path / "run", "responses").to_pylist()
    assert all(
        r["response_text"] in "12345" and len(r["response_text"]) == 1
        for r in responses
        if r["constraint"] == "grammar"
    )
    assert len(grammar_replies) >= 16
    design = infer_design(answers.columns)
    assert "constraint" in design.factors
    assert "constraint" in varying(answers.lazy(), design.factors)


def test_the_simulator_answers_json_schema_requests_in_json(tmp_path: Path) -> None:
    with SimServerThread(SimConfig(seed=5)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": ["China"],
                "questions": [1, 2],
                "seeds": [1],
                "temperature": [0.0],
                "reply_format": "json",
                "constraint": "json_schema",
            },
        )
        run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
    responses = read_dataset(tmp_path / "run", "responses").to_pylist()
    assert len(responses) == 2
    for r in responses:
        reply = json.loads(r["response_text"])
        assert set(reply) == {"option_id", "reason"} and 1 <= reply["option_id"] <= 5


@pytest.mark.llm
@pytest.mark.slow
def test_a_grammar_sweep_on_llama_cpp_parses_every_reply(tmp_path: Path) -> None:
    from runner.endpoints.llm import LocalLLM

    with LocalLLM(model="smollm2", slots=2, ctx_per_slot=1024) as llm:
        spec = parse_spec(
            spec_text(
                llm.base_url,
                endpoint={"model": llm.model_name, "timeout_s": 60.0, "max_retries": 2},
                design={
                    "personas": ["China"],
                    "questions": [1, 2, 3, 4],
                    "seeds": [1, 2],
                    "temperature": [0.7],
                    "reply_format": "number",
                    "constraint": "grammar",
                    "max_tokens": 2,
                },
            ),
            source="llm-spec",
        )
        result = run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
    assert result.stored == 8 and result.failed == 0
    statuses = read_dataset(tmp_path / "run", "answers")["status"].to_pylist()
    assert statuses == ["ok"] * 8


def test_parts_written_before_the_constraint_column_still_read(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    runs = {}
    with SimServerThread(SimConfig(seed=5)) as sim:
        for name, question in (("old", 1), ("new", 2)):
            runs[name] = tmp_path / name
            spec = make_spec(
                sim.base_url,
                design={"personas": ["China"], "questions": [question], "seeds": [1], "temperature": [0.0]},
            )
            run_sweep(spec, runs[name], live=False, stream=io.StringIO())
    # "old" as written before constraints existed (no constraint column), then a newer part beside it.
    [old_part] = sorted((runs["old"] / "responses").glob("part-*.parquet"))
    pq.write_table(pq.read_table(old_part).drop_columns(["constraint"]), old_part)
    for dataset in ("responses", "answers"):
        [new_part] = sorted((runs["new"] / dataset).glob("part-*.parquet"))
        (runs["old"] / dataset / "part-000009.parquet").write_bytes(new_part.read_bytes())
    table = read_dataset(runs["old"], "responses")
    assert sorted(zip(table["question"].to_pylist(), table["constraint"].to_pylist())) == [(1, None), (2, "none")]
    answers = load_answers(runs["old"]).collect().sort("question")
    assert answers["question"].to_list() == [1, 2] and answers["constraint"].to_list() == ["none", "none"]
