"""How long ``hofcat report`` takes and how large its page is at 1, ~100 and ~1,000 conditions.

``python -m benches.report_bench [--designs one,medium,large] [--out DIR]``: builds each design of
benches/report_designs.py (vectorised answers, then ``hofcat analyze``), times ``hofcat report`` on it in this
process, and prints conditions, report seconds (wall and this process' CPU), the page's size and the whole report folder's size, with the load.
Target (issue 25): the 1,000-condition report in under 60 s, its page under 10 MB.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from benches.report_designs import analysed, conditions
from runner.cli import main as cli


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    """Build, analyse and report each design; print one line per design."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--designs", default="one,medium,large")
    parser.add_argument("--out", default=None, help="where the run directories go (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        print("design  conditions  analyze_s  report_s  report_cpu_s  page_MB  report_dir_MB  load(1,5,15)")
        for name in args.designs.split(","):
            root = out / name
            start = time.perf_counter()
            analysed(root, name, report=False)
            analysis = time.perf_counter() - start
            start, cpu = time.perf_counter(), time.process_time()
            assert cli(["report", str(root)]) == 0
            report, report_cpu = time.perf_counter() - start, time.process_time() - cpu
            page = (root / "report" / "index.html").stat().st_size / 1e6
            folder = _size(root / "report") / 1e6
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            n = len(conditions(name)) or 1
            print(
                f"{name:7s} {n:10d} {analysis:10.1f} {report:9.1f} {report_cpu:13.1f} {page:8.2f} {folder:14.2f}  {load}",
                flush=True,
            )


if __name__ == "__main__":
    main()
