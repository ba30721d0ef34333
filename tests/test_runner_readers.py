"""The run directory's datasets read as-is with polars, pyarrow, DuckDB and pandas, with the documented schema."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow.dataset as ds
import pytest

from _runner_support import make_spec
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import ANSWER_SCHEMA, PROMPT_SCHEMA, RESPONSE_SCHEMA
from runner.sweep.session import run_sweep

SCHEMAS = {"responses": RESPONSE_SCHEMA, "answers": ANSWER_SCHEMA, "prompts": PROMPT_SCHEMA}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("readers") / "run"
    with SimServerThread(SimConfig(seed=1, refusal_rate=0.2)) as sim:
        spec = make_spec(
            sim.base_url,
            run={"batch_rows": 7},
            design={"mode": "survey", "seeds": [1, 2, 3], "personas": ["China", "Japan", "Mexico"]},
        )
        assert run_sweep(spec, out, live=False).stored == 18
    return out


@pytest.mark.parametrize("dataset", ["responses", "answers", "prompts"])
def test_every_reader_reads_the_same_rows(run_dir: Path, dataset: str) -> None:
    folder = run_dir / dataset
    assert len(list(folder.glob("part-*.parquet"))) >= (3 if dataset != "prompts" else 1)
    arrow = ds.dataset(folder, format="parquet").to_table()
    assert arrow.schema.remove_metadata() == SCHEMAS[dataset]
    polars = pl.read_parquet(folder / "*.parquet")
    duck = duckdb.sql(f"select * from read_parquet('{folder}/*.parquet')").arrow()
    if hasattr(duck, "read_all"):
        duck = duck.read_all()
    pandas = pd.read_parquet(folder)
    key = arrow.schema.names[0]
    expected = sorted(arrow.column(key).to_pylist())
    assert sorted(polars[key].to_list()) == expected
    assert sorted(duck.column(key).to_pylist()) == expected
    assert sorted(pandas[key].tolist()) == expected
    assert polars.columns == duck.column_names == list(pandas.columns) == arrow.schema.names


def test_answers_join_responses_on_cell_key(run_dir: Path) -> None:
    joined = duckdb.sql(f"""
        select r.country, a.question, a.option_id, a.status
        from read_parquet('{run_dir}/responses/*.parquet') r
        join read_parquet('{run_dir}/answers/*.parquet') a using (cell_key)""").fetchall()
    assert len(joined) == 18 * 6  # survey mode: six questions per cell
    assert {row[3] for row in joined} <= {"ok", "refusal", "no_answer", "ambiguous", "out_of_range", "invalid_format"}
    assert {row[3] for row in joined} >= {"ok", "refusal"}
    assert all(row[2] in (1, 2, 3, 4, 5) for row in joined if row[3] == "ok")


def test_docs_list_every_column(run_dir: Path) -> None:
    root = Path(__file__).resolve().parent.parent  # the schema tables live in the README (moved from docs/runner.md)
    docs = (root / "README.md").read_text() + (root / "docs" / "runner.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", docs, flags=re.MULTILINE))
    for schema in SCHEMAS.values():
        assert set(schema.names) <= documented
