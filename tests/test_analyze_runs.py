"""`hofcat analyze RUN1 RUN2 --out DIR`: two real runs (item and survey mode) analysed as one design."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _runner_support import make_spec
from runner import AnalysisOptions, analyze_runs, run_sweep
from runner.cli import main
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.errors import InputError
from runner.rundir import RunDir

OPTIONS = AnalysisOptions(n_resamples=50, permutations=19, seed=2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("runs")
    design = {"personas": ["China", "Slovakia", "Japan"], "questions": list(range(1, 25)), "seeds": [1, 2, 3]}
    with SimServerThread(SimConfig(seed=9)) as sim:
        item = make_spec(sim.base_url, run={"name": "item-run"}, design={**design, "mode": "item"})
        survey = make_spec(sim.base_url, run={"name": "survey-run"}, design={**design, "mode": "survey"})
        run_sweep(item, base / "item")
        run_sweep(survey, base / "survey")
    return base / "item", base / "survey"


@pytest.mark.slow
def test_two_runs_are_one_design_with_the_run_as_a_factor(runs, tmp_path):
    out = analyze_runs(list(runs), tmp_path / "both", OPTIONS)
    summary = json.loads((out / "summary.json").read_text())
    assert "run" in summary["design"]["factors"]
    assert [r["label"] for r in summary["runs"]] == ["item-run", "survey-run"]
    cat = pl.read_parquet(out / "cat.parquet")
    assert set(cat["run"]) == {"item-run", "survey-run"}
    singles = []
    for run in runs:
        assert main(["analyze", str(run), "--resamples", "50", "--permutations", "19", "--seed", "2"]) == 0
        singles.append(pl.read_parquet(run / "analysis" / "questions.parquet"))
    combined = pl.read_parquet(out / "questions.parquet")
    assert combined.height == sum(s.height for s in singles)
    # the per-question means of each run are unchanged by analysing it beside another
    for run_label, single in zip(("item-run", "survey-run"), singles, strict=True):
        mine = combined.filter(pl.col("run") == run_label).sort("temperature", "country", "question")
        assert mine["mean"].to_list() == single.sort("temperature", "country", "question")["mean"].to_list()
    assert main(["report", str(tmp_path / "both")]) == 0
    page = (tmp_path / "both" / "report" / "index.html").read_text()
    assert "run item-run" in page and "run survey-run" in page


def test_incomparable_runs_are_refused_unless_allowed(runs, tmp_path, capsys):
    item, survey = runs
    manifest = json.loads((survey / "manifest.json").read_text())
    changed = tmp_path / "survey-other-parser"
    changed.mkdir()
    for sub in ("responses", "answers", "failures", "prompts"):
        (changed / sub).mkdir()
        for f in (survey / sub).glob("*.parquet"):
            (changed / sub / f.name).write_bytes(f.read_bytes())
    (changed / "manifest.json").write_text(json.dumps({**manifest, "parser_version": "0.0-old"}))
    with pytest.raises(InputError, match="differ in parser version"):
        analyze_runs([item, changed], tmp_path / "mixed", OPTIONS)
    out = analyze_runs([item, changed], tmp_path / "mixed", OPTIONS, allow_mixed=True)
    assert "parser version" in json.loads((out / "summary.json").read_text())["differences_allowed"][0]
    # the same prompt factors but another instrument text: refused, naming the factors
    other = tmp_path / "item-other-text"
    (other / "responses").mkdir(parents=True)
    for sub in ("answers", "failures", "prompts"):
        (other / sub).mkdir()
        for f in (item / sub).glob("*.parquet"):
            (other / sub / f.name).write_bytes(f.read_bytes())
    for f in (item / "responses").glob("*.parquet"):
        table = pq.read_table(f)
        hashes = table.column("template_hash").to_pylist()
        table = table.set_column(
            table.schema.get_field_index("template_hash"),
            "template_hash",
            pa.array([h[::-1] for h in hashes]),
        )
        pq.write_table(table, other / "responses" / f.name)
    (other / "manifest.json").write_text((item / "manifest.json").read_text())
    with pytest.raises(InputError, match="different instrument text for language=en, mode=item"):
        analyze_runs([item, other], tmp_path / "text", OPTIONS)
    # the command: one line, exit 2, for refusals and for several runs without --out
    assert main(["analyze", str(item), str(changed), "--out", str(tmp_path / "cli")]) == 2
    assert main(["analyze", str(item), str(survey)]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["analyze", str(item), str(survey), "--out", str(item)]) == 2
    assert RunDir(item).manifest.is_file()
