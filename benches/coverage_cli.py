"""Null exclusion and coverage of the tau / CAT intervals through the command line: real sweeps, real analyses.

Run: ``python -m benches.coverage_cli [--regime null|weak] [--replicates 12] [--seeds 5]``. Each replicate starts
the simulator (``SimServerThread``, the server ``hofcat serve-sim`` runs, on 127.0.0.1) with its own seed — for
*null* with ``signal`` 0, for *weak* with signal 0.5 and a reference CSV of scores drawn uniformly in 15–85 (a
truth unrelated to Hofstede's) — then runs ``hofcat run`` (8 personas, survey mode, temperature 1) and
``hofcat analyze`` as subprocesses, and reads ``analysis/kendall.parquet`` and ``cat.parquet``. The truth is tau
between the simulator's expected indices (``AnswerModel.expected_indices``) and Hofstede 2015. Printed: intervals
excluding 0, exact p ≤ 0.05, coverage of the truth (weak), mean width. The in-process grid is benches/coverage.py.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.respondent import AnswerModel
from runner.endpoints.sim.server import SimServerThread
from runner.score.ranking import rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.reference import load_reference

COUNTRIES = ("U.S.A.", "China", "Germany", "Japan", "Mexico", "Nigeria", "India", "Brazil")
SIGNAL = {"null": 0.0, "weak": 0.5}
SPEC = """[run]
name = "coverage-cli"
seed = {seed}
reference = "hofstede-2015"

[[endpoints]]
name = "sim"
provider = "openai"
base_url = "{url}"
model = "sim-1"
requests_per_minute = 100000
tokens_per_minute = 100000000
max_concurrency = 32

[design]
mode = "survey"
languages = ["en"]
personas = [{personas}]
reply_format = "number"
seeds = [{seeds}]
temperature = [1.0]
top_p = [1.0]
max_tokens = 400
"""


def replicate(regime: str, r: int, seeds: int, folder: Path) -> dict[str, float]:
    """One sweep + analysis through the CLI → counts for this replicate."""
    rng = np.random.default_rng(r)
    reference = "hofstede-2015"
    table: dict[str, dict[str, float]] = {}
    if regime == "weak":
        scores = rng.uniform(15, 85, (len(COUNTRIES), len(DIMENSIONS)))
        reference = str(folder / "truth.csv")
        lines = ["country," + ",".join(DIMENSIONS)] + [
            f"{c}," + ",".join(f"{v:.1f}" for v in row) for c, row in zip(COUNTRIES, scores, strict=True)
        ]
        Path(reference).write_text("\n".join(lines) + "\n")
        table = {
            c: dict(zip(DIMENSIONS, map(float, row), strict=True)) for c, row in zip(COUNTRIES, scores, strict=True)
        }
    config = SimConfig(seed=r, signal=SIGNAL[regime], reference=reference)
    run = folder / "run"
    with SimServerThread(config) as sim:
        spec = SPEC.format(
            seed=r,
            url=sim.base_url,
            personas=", ".join(f'"{c}"' for c in COUNTRIES),
            seeds=", ".join(str(s) for s in range(1, seeds + 1)),
        )
        (folder / "spec.toml").write_text(spec)
        cli = [sys.executable, "-m", "runner.cli"]
        subprocess.run([*cli, "run", str(folder / "spec.toml"), "--out", str(run)], check=True, capture_output=True)
    subprocess.run([*cli, "analyze", str(run), "--permutations", "999"], check=True, capture_output=True)
    kendall = pl.read_parquet(run / "analysis" / "kendall.parquet")
    cat = pl.read_parquet(run / "analysis" / "cat.parquet")
    names = list(cat["countries"][0])
    model = AnswerModel(table, signal=SIGNAL[regime])  # the truth the simulator answered from
    out = {
        "taus": kendall.height,
        "tau_excl": int(((kendall["ci_low"] > 0) | (kendall["ci_high"] < 0)).sum()),
        "tau_p": int((kendall["kendall_p"] <= 0.05).sum()),
        "cat_excl": int((cat["ci_low"][0] > 0) or (cat["ci_high"][0] < 0)),
        "cat_p": int(cat["cat_p"][0] <= 0.05),
        "width": float((kendall["ci_high"] - kendall["ci_low"]).mean()),
    }
    if regime == "weak":
        expected = np.array([[model.expected_indices(c)[d] for d in DIMENSIONS] for c in names])
        truth = rank_agreement(expected[None], load_reference("hofstede-2015").matrix(names))
        tau = dict(zip(DIMENSIONS, truth.kendall[0], strict=True))
        out["tau_cov"] = sum(
            int(row["ci_low"] - 1e-12 <= tau[row["dimension"]] <= row["ci_high"] + 1e-12)
            for row in kendall.iter_rows(named=True)
        )
        out["cat_cov"] = int(cat["ci_low"][0] - 1e-12 <= truth.cat_score[0] <= cat["ci_high"][0] + 1e-12)
    return out


def main() -> None:
    """Print the totals over the replicates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regime", choices=sorted(SIGNAL), default="null")
    parser.add_argument("--replicates", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    totals: dict[str, float] = {}
    for r in range(1, args.replicates + 1):
        with tempfile.TemporaryDirectory(prefix="hofcat-coverage-cli-") as folder:
            row = replicate(args.regime, r, args.seeds, Path(folder))
        print(r, row, flush=True)
        for key, value in row.items():
            totals[key] = totals.get(key, 0) + value
    n = args.replicates
    print(
        f"{args.regime}: {totals['tau_excl']}/{totals['taus']} tau and {totals['cat_excl']}/{n} CAT intervals "
        f"exclude 0; exact p ≤ 0.05: {totals['tau_p']}/{totals['taus']} tau, {totals['cat_p']}/{n} CAT; "
        f"mean tau width {totals['width'] / n:.2f}"
        + (
            f"; coverage tau {totals['tau_cov']}/{totals['taus']}, CAT {totals['cat_cov']}/{n}"
            if "tau_cov" in totals
            else ""
        )
    )


if __name__ == "__main__":
    main()
