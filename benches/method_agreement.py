"""Agreement between measurement methods on the simulator: the null (one distribution for every method) and a
planted miscalibration of the verbalized one.

    python -m benches.method_agreement [--seeds 12] [--verbalized-temperature 1.0] [--verbalized-noise 0.0]

``hofcat serve-sim --seed 2`` answers six personas × 24 items × two option orders × ``--seeds`` seeds at
temperature 1 with all three measurements (sample, distribution, verbalized), swept by ``run_sweep`` and analysed
by ``analyze_run`` (50 resamples, 199 permutations). Printed: per method pair the mean total variation, mean noise
floor and mean Jensen–Shannon divergence over the cells, and how many of the statistic comparisons
(``method_conclusions``) have ``conclusions_differ`` and ``significance_differs``. The numbers in docs/analysis.md
("Agreement between measurement methods") and benches/RESULTS.md come from this script.
"""

from __future__ import annotations

import argparse
import io
import tempfile
from pathlib import Path

import polars as pl

from runner.analyze.run import AnalysisOptions, analyze_run
from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.server import SimServerThread
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec

PERSONAS = ["United States", "China", "Japan", "Germany", "Brazil", "India"]
SPEC = """
[run]
name = "method-agreement"
seed = 7
[[endpoints]]
name = "sim"
provider = "openai"
base_url = "{url}"
model = "sim-1"
max_concurrency = 16
[design]
personas = {personas}
questions = {questions}
seeds = {seeds}
temperature = [1.0]
option_order = ["given", "reversed"]
measurement = ["sample", "distribution", "verbalized"]
"""


def measure(seeds: int, config: SimConfig, out: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per-pair means of TV / floor / JS, the conclusions table) of one simulated sweep into ``out``."""
    with SimServerThread(config) as sim:
        text = SPEC.format(
            url=sim.base_url,
            personas=str(PERSONAS).replace("'", '"'),
            questions=list(range(1, 25)),
            seeds=list(range(1, seeds + 1)),
        )
        run_sweep(parse_spec(text, source="method-agreement"), out, stream=io.StringIO())
    analysis = analyze_run(out, AnalysisOptions(n_resamples=50, permutations=199, baseline_replicates=10))
    divergence = pl.read_parquet(analysis / "method_divergence.parquet")
    means = (
        divergence.group_by("method_a", "method_b")
        .agg(pl.col("tv").mean(), pl.col("tv_floor").mean(), pl.col("js").mean(), pl.len().alias("cells"))
        .sort("method_a", "method_b")
    )
    return means, pl.read_parquet(analysis / "method_conclusions.parquet")


def main() -> None:
    """Run the measurement the options describe and print it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--verbalized-temperature", type=float, default=1.0)
    parser.add_argument("--verbalized-noise", type=float, default=0.0)
    args = parser.parse_args()
    config = SimConfig(
        seed=2, verbalized_temperature=args.verbalized_temperature, verbalized_noise=args.verbalized_noise
    )
    with tempfile.TemporaryDirectory(prefix="hofcat-methods-") as tmp:
        means, conclusions = measure(args.seeds, config, Path(tmp) / "run")
    with pl.Config(tbl_rows=20, tbl_cols=10):
        print(means)
    print(
        f"conclusions_differ {conclusions['conclusions_differ'].sum()} of {conclusions.height}; "
        f"significance_differs {conclusions['significance_differs'].sum()} of {conclusions.height}"
    )


if __name__ == "__main__":
    main()
