"""The analysis' memory follows a batch of answers, not the run, and its results are those of the in-memory path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from benches.analysis_memory import write_run
from runner.analyze.baselines import ORDER_CODE, baseline_tables
from runner.analyze.design import Design
from runner.analyze.load import load_answers
from runner.analyze.run import AnalysisOptions, analyze_answers, analyze_run
from runner.analyze.units import unit_array
from runner.survey.reference import load_reference

ROOT = Path(__file__).resolve().parent.parent


def mixed_answers() -> pl.LazyFrame:
    """Two conditions × 5 countries × 6 seeds; one or two option orders per question; every third seed answers
    with distributions, the others sample; 5 % refusals."""
    rng = np.random.default_rng(7)
    orders = (12345, 54321, 31524)
    rows = []
    for cond in ("a", "b"):
        for country in ("U.S.A.", "China", "Japan", "Germany", "France"):
            tilt = rng.uniform(-1, 1, 24)
            for seed in range(1, 7):
                for q in range(1, 25):
                    for code in rng.choice(orders, size=int(rng.integers(1, 3)), replace=False):
                        probs = rng.dirichlet(np.full(5, 2.0)) if seed % 3 == 0 else None
                        option = int(np.clip(np.rint(3 + tilt[q - 1] + rng.normal(0, 0.7)), 1, 5))
                        rows.append(
                            {
                                "cond": cond,
                                "country": country,
                                "seed": seed,
                                "question": q,
                                "option_id": option,
                                "status": "ok" if rng.random() > 0.05 else "refusal",
                                ORDER_CODE: int(code),
                                "option_probs": None if probs is None else probs.tolist(),
                            }
                        )
    schema = {ORDER_CODE: pl.Int32, "option_probs": pl.List(pl.Float64)}
    return pl.DataFrame(rows, schema_overrides=schema).lazy()


def test_baselines_equal_the_per_answer_computation():
    # Golden numbers from the per-answer implementation (commit 583a3c6) on the same answers: the grouped
    # computation draws the same multinomials in the same order, so the baseline scores are equal; the position
    # shares differ from it only in the float summation order (≤ 1e-12)
    answers = mixed_answers()
    design = Design(("cond",), ("seed",))
    units = unit_array(answers, design)
    out = baseline_tables(answers, units, design, load_reference("hofstede-2015"), {}, replicates=50, seed=3)
    bias = out["position_bias"].sort("cond")
    assert bias["n_answers"].to_list() == [1023, 1029]
    expected_shares = [
        [0.1644367603002121, 0.18271954518250436, 0.2517053716648644, 0.25388597918085604, 0.14725234367156317],
        [0.17688233629986075, 0.17399258469838316, 0.28180502547412134, 0.21862120781907832, 0.14869884570855638],
    ]
    np.testing.assert_allclose(bias.select("p1", "p2", "p3", "p4", "p5").to_numpy(), expected_shares, rtol=1e-12)
    cat = out["baselines"].filter(pl.col("dimension") == "cat").sort("baseline", "cond")
    # each baseline CAT score is now the exact mean of its taus rounded once (runner/score/ranking.py): three golden
    # numbers moved in the last digit (0.30220759220056126 → …12, −0.04177727726813705 → …06, …)
    assert cat.select("baseline", "cond", "baseline_mean", "baseline_q95").rows() == [
        ("position", "a", -0.020558481559887744, 0.22135468796041985),
        ("position", "b", 0.07895610993501713, 0.3022075922005612),
        ("uniform", "a", -0.04177727726813706, 0.27444444444444444),
        ("uniform", "b", 0.007156425651503996, 0.2704068812132625),
    ]


@pytest.mark.slow
def test_spooled_analysis_equals_the_in_memory_one(tmp_path):
    run = tmp_path / "run"
    n = write_run(run, 5_000, parts=3, shape="seeds")
    options = AnalysisOptions(n_resamples=100, permutations=99, baseline_replicates=20, reference="hofstede-2015")
    in_memory, summary = analyze_answers(load_answers(run), options)
    folder = analyze_run(run, options)  # spools the joined answers and streams every step from the files
    assert {p.stem for p in folder.glob("*.parquet")} == set(in_memory)
    for name, table in in_memory.items():
        spooled = pl.read_parquet(folder / f"{name}.parquet")
        if name == "questions":  # std: polars' float reduction order; status columns: order of appearance
            assert_frame_equal(spooled, table, check_column_order=False, rel_tol=1e-12, abs_tol=1e-12)
        else:
            assert_frame_equal(spooled, table, check_exact=True)
    got = json.loads((folder / "summary.json").read_text())
    for key in ("cat", "error_percentage", "answers", "conditions", "countries", "design", "warnings"):
        assert got[key] == json.loads(json.dumps(summary[key], default=str)), key
    assert summary["answers"] == n


# VmHWM, not ru_maxrss: the child's ru_maxrss starts at the forking pytest process's peak
CHILD = """
import sys, tempfile
from runner.analyze.load import load_answers
with tempfile.TemporaryDirectory() as spool:
    frame = load_answers(sys.argv[1], spool=spool if sys.argv[2] == "spool" else None)
    frame.select("seed").sum().collect(engine="streaming")
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) / 1024)
"""


def _peak_mib(run: Path, mode: str) -> float:
    """Peak RSS (MiB) of a fresh interpreter loading ``run`` (``spool`` or in memory) and summing a column."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(run), mode], check=True, capture_output=True, text=True, cwd=ROOT
    )
    return float(out.stdout.split()[-1])


@pytest.mark.slow
def test_load_memory_follows_the_batch_not_the_run(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    write_run(small, 100_000, parts=4, shape="seeds")  # parts of ~25,000 answers
    write_run(large, 400_000, parts=16, shape="seeds")  # four times the run, the same parts
    spooled = _peak_mib(large, "spool") - _peak_mib(small, "spool")
    in_memory = _peak_mib(large, "memory") - _peak_mib(small, "memory")
    assert spooled < 25, f"spooled load grew {spooled:.0f} MiB for 300,000 more answers"
    assert in_memory > spooled + 25, (in_memory, spooled)  # the measurement can tell the two apart


@pytest.mark.slow
def test_analyze_command_takes_points_embedding_and_permutation_blocks(tmp_path, capsys):
    from runner.cli import main

    run = tmp_path / "run"
    write_run(run, 2_000, parts=2, shape="tiny")  # 2 temperatures × 4 countries × 21 seeds
    argv = ["analyze", str(run), "--resamples", "20", "--permutations", "19", "--reference", "hofstede-2015"]
    assert main([*argv, "--points", "seed", "--embedding", "items", "--permutation-blocks", "none"]) == 0
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert (summary["points"], summary["embedding"], summary["permutations"]["blocks"]) == ("seed", "items", None)
    tests = pl.read_parquet(run / "analysis" / "factor_tests.parquet")
    assert tests.height > 0 and set(tests["blocks"]) == {"none"}
    respondents = pl.read_parquet(run / "analysis" / "respondents.parquet")
    assert main(argv) == 0  # the defaults: one point per identity, permuted within country
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert (summary["points"], summary["embedding"], summary["permutations"]["blocks"]) == (
        "identity",
        "vsm",
        "country",
    )
    assert set(pl.read_parquet(run / "analysis" / "factor_tests.parquet")["blocks"]) == {"country"}
    # one point per seed vs one per country × identity (no identity columns: per country) in each of 2 sets
    assert respondents.height > pl.read_parquet(run / "analysis" / "respondents.parquet").height == 2 * 4
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*argv, "--permutation-blocks", "seed"])
    assert "--permutation-blocks" in capsys.readouterr().err
