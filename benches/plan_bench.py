"""How fast ``hofcat plan`` counts: arithmetic over factor sizes vs expanding every cell, back to back.

``python -m benches.plan_bench [--seeds N]``: one spec (1 endpoint, 4 personas, 24 questions, N seeds, 3
temperatures), planned both ways in the same process: ``plan_summary`` (arithmetic, what ``hofcat plan``
does) and the expansion the planner did before (``iter_cells`` + ``prompt_estimate`` per cell). Prints
cells, both times, the ratio, the expansion's cells/s and the load; then the arithmetic time of a
10^9-cell spec. Both ways must give the same numbers (checked).
"""

from __future__ import annotations

import argparse
import os
import time

from runner.sweep.spec import parse_spec

SPEC = """
[run]
name = "bench"
[[endpoints]]
name = "e"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[design]
personas = ["United States", "China", "Saudi Arabia", "Slovakia"]
seeds = {seeds}
temperature = [0.0, 0.5, 1.0]
max_tokens = {max_tokens}
"""


def main() -> None:
    """Time both ways on one spec, then the arithmetic on a 10^9-cell spec; print the ratio and the load."""
    from runner.sweep.accounting import plan_summary
    from runner.sweep.plan import iter_cells
    from runner.sweep.request import prompt_estimate

    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=700, help="seeds of the expanded spec (288 cells each)")
    args = parser.parse_args()
    spec = parse_spec(SPEC.format(seeds=list(range(args.seeds)), max_tokens=[64]))
    plan_summary(parse_spec(SPEC.format(seeds=[1], max_tokens=[64])))  # imports and template caches, untimed
    started = time.perf_counter()
    summary = plan_summary(spec)
    arithmetic = time.perf_counter() - started
    started = time.perf_counter()
    cells = tokens_in = tokens_out = 0
    for cell in iter_cells(spec):
        cells += 1
        tokens_in += prompt_estimate(cell.prompt)
        tokens_out += cell.sampling.max_tokens
    expanded = time.perf_counter() - started
    e = summary["endpoints"]["e"]
    assert (e["cells"], e["input_tokens_estimate"], e["output_tokens_max"]) == (cells, tokens_in, tokens_out)
    print(
        f"{cells} cells: arithmetic {arithmetic:.3f} s, expansion {expanded:.2f} s ({cells / expanded:,.0f} cells/s), "
        f"ratio {expanded / arithmetic:,.0f}x; load_1m {os.getloadavg()[0]:.1f}"
    )
    huge = parse_spec(SPEC.format(seeds=list(range(50_000)), max_tokens=list(range(16, 86))))
    started = time.perf_counter()
    summary = plan_summary(huge)
    print(f"{summary['cells']:,} cells: arithmetic {time.perf_counter() - started:.3f} s (spec parsed beforehand)")


if __name__ == "__main__":
    main()
