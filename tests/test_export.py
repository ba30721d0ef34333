"""`hofcat export`: one tidy table of a real run against the simulator, read back by polars, DuckDB and pandas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

from _runner_support import make_spec
from runner import export_run, run_sweep
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset, read_manifest


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Item and survey cells, personas and a no-persona framing in two languages, refusals and chatty replies."""
    out = tmp_path_factory.mktemp("export") / "run"
    with SimServerThread(SimConfig(seed=5, refusal_rate=0.1, chatty_rate=0.2)) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": ["China", "Slovakia"],
                "no_persona": True,
                "languages": ["en", "zh"],
                "questions": [1, 2, 15],
                "seeds": [1, 2],
                "temperature": [0.7],
            },
        )
        run_sweep(spec, out)
    return out


def _answers_total(run_dir: Path) -> int:
    return read_dataset(run_dir, "answers", ["cell_key"]).num_rows


@pytest.mark.slow
def test_one_row_per_answer_with_factors_run_identity_and_country(run_dir, tmp_path):
    result = export_run(run_dir, tmp_path / "tidy.parquet")
    table = pl.read_parquet(result.path)
    assert result.rows == table.height == _answers_total(run_dir) > 0
    manifest = read_manifest(run_dir)
    assert table["run_name"].unique().to_list() == [manifest["run_name"]]
    assert table["run_id"].unique().to_list() == [manifest["run_id"]] and len(manifest["run_id"]) == 32
    assert table["spec_hash"].unique().to_list() == [manifest["spec_hash"]]
    assert table["session"].unique().to_list() == [1]
    for column in ("endpoint", "model", "question", "country", "language", "framing", "seed", "temperature"):
        assert column in table.columns, column
    assert "response_text" not in table.columns  # the reply text stays in responses/
    # the snapshot the server reported, beside the model name sent
    assert table["served_model"].unique().to_list() == ["sim-1"]
    assert all(f.startswith("hofcat-sim-") for f in table["system_fingerprint"])
    # no-persona cells get the country their prompt language stands for, and say so; the language stays as asked
    none = table.filter(pl.col("framing") == "none")
    assert none.height > 0
    assert dict(none.select("language", "country").unique().iter_rows()) == {"en": "U.S.A.", "zh": "China"}
    assert none["country_source"].unique().to_list() == ["language"]
    personas = table.filter(pl.col("framing") != "none")
    assert set(personas["country"]) == {"China", "Slovak Rep"}  # canonical reference names
    assert personas["country_source"].unique().to_list() == ["persona"]
    # every answer keeps its own status and option, joined to the right cell
    answers = pl.read_parquet(run_dir / "answers" / "*.parquet")
    joined = answers.select("cell_key", "question", "option_id", "status").sort("cell_key", "question")
    assert table.select("cell_key", "question", "option_id", "status").sort("cell_key", "question").equals(joined)
    responses = pl.read_parquet(run_dir / "responses" / "*.parquet").select("cell_key", "seed", "language")
    back = table.select("cell_key", "seed", "language").unique().sort("cell_key")
    assert back.equals(responses.filter(pl.col("cell_key").is_in(back["cell_key"].implode())).sort("cell_key"))


def test_polars_duckdb_and_pandas_read_the_same_rows_and_types(run_dir, tmp_path):
    path = export_run(run_dir, tmp_path / "tidy.parquet").path
    frame = pl.read_parquet(path)
    via_duckdb = duckdb.sql(f"select * from read_parquet('{path}')").pl()
    via_pandas = pd.read_parquet(path)
    assert via_duckdb.height == len(via_pandas) == frame.height
    assert list(via_pandas.columns) == frame.columns == via_duckdb.columns
    assert frame["question"].dtype == pl.Int16 and frame["seed"].dtype == pl.Int64
    assert str(via_pandas["temperature"].dtype) == "float64"


def test_csv_round_trips_the_numbers(run_dir, tmp_path):
    parquet = pl.read_parquet(export_run(run_dir, tmp_path / "t.parquet").path)
    csv = pl.read_csv(export_run(run_dir, tmp_path / "t.csv", "csv").path, infer_schema_length=None)
    assert csv.height == parquet.height
    for column in ("question", "option_id", "seed", "temperature", "input_tokens"):
        assert csv[column].cast(pl.Float64).equals(parquet[column].cast(pl.Float64), null_equal=True), column
    assert csv["option_order"][0] == "[" + ", ".join(map(str, parquet["option_order"][0])) + "]"


def test_default_target_is_inside_the_run_and_survives_reading(run_dir):
    result = export_run(run_dir)
    assert result.path == run_dir / "export" / "answers.parquet"
    assert pq.read_metadata(result.path).num_rows == result.rows
    assert not list((run_dir / "export").glob(".*"))  # no temp file left beside it


@pytest.mark.slow
def test_command_errors_are_one_line(run_dir, tmp_path):
    hofcat = [sys.executable, "-m", "runner.cli"]
    ok = subprocess.run(
        [*hofcat, "export", str(run_dir), "--out", str(tmp_path / "x.csv"), "--format", "csv"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == str(tmp_path / "x.csv")
    for args in (["export", str(tmp_path)], ["export", str(run_dir), "--out", str(tmp_path)]):
        bad = subprocess.run([*hofcat, *args], capture_output=True, text=True)
        assert bad.returncode == 2, bad
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_the_readme_reading_examples_run_as_written(run_dir):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert "RUN_DIR/export/answers.parquet" in block and "RUN_DIR/failures" in block
    export_run(run_dir)
    assert not list((run_dir / "failures").glob("*.parquet"))  # the empty folder the examples must survive
    scope: dict = {}
    exec(compile(block.replace("RUN_DIR", str(run_dir)), "README.md", "exec"), scope)
    total = _answers_total(run_dir)
    assert scope["tidy"].height == len(scope["frame"]) == scope["joined"].height == total
    assert scope["means"]["n"].sum() == scope["tidy"].filter(pl.col("status") == "ok").height
    assert scope["failures"].num_rows == 0


def test_the_readme_duckdb_means_are_the_analysis_means_for_distribution_cells(tmp_path):
    """The README's DuckDB query averages a distribution cell's expected option, as the analysis does, not its
    modal option_id (issue 26): its means equal analysis/questions.parquet's."""
    from runner.analyze.run import AnalysisOptions, analyze_run

    with SimServerThread(SimConfig(seed=8)) as sim:
        design = {"measurement": "distribution", "personas": ["China", "Slovakia"], "questions": [1, 2, 3]}
        run_sweep(make_spec(sim.base_url, design={**design, "seeds": [1, 2], "temperature": [1.0]}), tmp_path / "r")
    run_dir = tmp_path / "r"
    analyze_run(run_dir, AnalysisOptions(n_resamples=10, permutations=9))
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    export_run(run_dir)
    scope: dict = {}
    exec(compile(block.replace("RUN_DIR", str(run_dir)), "README.md", "exec"), scope)
    ours = scope["means"].sort("country", "question")
    theirs = pl.read_parquet(run_dir / "analysis" / "questions.parquet").sort("country", "question")
    assert ours["n"].to_list() == theirs["n"].to_list() == [2] * 6  # two seeds each
    assert np.allclose(ours["mean"].cast(pl.Float64).to_numpy(), theirs["mean"].to_numpy(), rtol=0, atol=1e-12)
    modal = scope["tidy"].group_by("country", "question").agg(pl.col("option_id").mean()).sort("country", "question")
    assert not np.allclose(modal["option_id"].to_numpy(), theirs["mean"].to_numpy())  # what the old query gave


@pytest.mark.slow
def test_each_answer_names_the_session_that_sent_it(tmp_path):
    from runner.sweep.plan import select
    from runner.sweep.session import run_sweep as run_session

    with SimServerThread(SimConfig(seed=6)) as sim:
        spec = make_spec(sim.base_url, design={"personas": ["China"], "questions": [1, 2, 3, 4], "seeds": [1, 2]})
        run_session(spec, tmp_path / "run", selection=select(spec, limit=3))  # a pilot, then the rest
        run_session(spec, tmp_path / "run")
    table = pl.read_parquet(export_run(tmp_path / "run").path)
    assert table.group_by("session").agg(pl.col("cell_key").n_unique()).sort("session").rows() == [(1, 3), (2, 13)]


@pytest.mark.slow
def test_a_part_whose_keys_changed_is_refused_not_exported(run_dir, tmp_path):
    """The export reads parts through the run directory's reader: a changed key fails naming the part."""
    import shutil

    import pyarrow as pa

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    part = min((copy / "responses").glob("part-*.parquet"))
    data = pq.read_table(part)
    keys = data.column("cell_key").to_pylist()
    keys[0] = keys[0][::-1]  # same metadata (the digest of the old keys), another key
    pq.write_table(data.set_column(data.schema.get_field_index("cell_key"), "cell_key", pa.array(keys)), part)
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "export", str(copy), "--out", str(tmp_path / "x.parquet")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{part.name} is corrupt (checksum mismatch): cell_key digest" in done.stderr
    assert not (tmp_path / "x.parquet").exists()
