"""The variance partition's cost at the report's three design sizes (1, ~100 and ~1,000 conditions).

    PYTHONPATH=. python -m benches.partition_bench [--permutations 999]

Prints per design the profiles available and used per scope, the permutations run and the seconds
``variance_partition`` took (the cost rule of runner/analyze/partition.py bounds the last whatever the design),
and the peak traced Python memory.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import polars as pl

from benches.report_designs import DESIGNS, answers
from runner.analyze.partition import variance_partition
from runner.analyze.run import AnalysisOptions, analysis_design
from runner.analyze.units import unit_array


def main() -> None:
    """Time the partition of each report design."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--permutations", type=int, default=999)
    args = parser.parse_args()
    for name in DESIGNS:
        lazy = answers(name).lazy()
        units = unit_array(lazy, analysis_design(lazy, AnalysisOptions()))
        tracemalloc.start()
        start = time.perf_counter()
        table = variance_partition(units, permutations=args.permutations, seed=1)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        scopes = (
            table.filter(pl.col("term") == "Total", pl.col("profile") == "items")
            .select("scope", "profiles_available", "profiles", "permutations")
            .rows()
        )
        print(f"{name}: {units.conditions.height} conditions, {seconds:.1f} s, peak {peak:.0f} MiB; {scopes}")


if __name__ == "__main__":
    main()
