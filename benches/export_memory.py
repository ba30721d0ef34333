"""Peak memory and time of ``hofcat export`` on a synthetic run of about 1,000,000 answers (store layout).

Run: ``python -m benches.export_memory [--answers N] [--parts P]``. The run directory is the one
``benches.analysis_memory`` writes (responses/ + answers/ parts, one answer per item-mode cell). Each step runs
in a fresh interpreter and reports its peak RSS (``ru_maxrss``):

- ``hofcat export`` to Parquet and to CSV (one part pair in memory at a time);
- the peer: reading the answers joined with their cells eagerly into memory (``polars.read_parquet`` + join)
  and writing that table, which is what an export that materialises the run does.

Correctness first: the exported file has one row per answer and the same (cell, question, option) triples.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import polars as pl

from benches.analysis_memory import child

CHILD_WRITE = """
import sys
from benches.analysis_memory import write_run
from pathlib import Path
print(write_run(Path(sys.argv[1]), {answers}, parts={parts}))
"""
CHILD_EXPORT = """
import sys, resource, time
from runner.export.tidy import export_run
t = time.perf_counter()
result = export_run(sys.argv[1], sys.argv[1] + "/tidy.{fmt}", "{fmt}")
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, result.rows)
"""
CHILD_EAGER = """
import sys, resource, time
import polars as pl
t = time.perf_counter()
a = pl.read_parquet(sys.argv[1] + "/answers/*.parquet")
r = pl.read_parquet(sys.argv[1] + "/responses/*.parquet")
joined = a.join(r.drop("question", "response_text"), on="cell_key")
joined.write_parquet(sys.argv[1] + "/eager.parquet")
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, joined.height)
"""


def main() -> None:
    """Write the run, export it both ways, run the peer, check, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1_000_000)
    parser.add_argument("--parts", type=int, default=100, help="part pairs the run is stored in")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        n = int(child(CHILD_WRITE.format(answers=args.answers, parts=args.parts), run)[0])
        figures = {fmt: child(CHILD_EXPORT.format(fmt=fmt), run) for fmt in ("parquet", "csv")}
        e_seconds, e_rss, e_rows = child(CHILD_EAGER, run)
        for fmt, (_, _, rows) in figures.items():
            assert rows == n == e_rows, (fmt, rows, n, e_rows)
        key = ["cell_key", "question", "option_id"]
        tidy = pl.read_parquet(run / "tidy.parquet", columns=key).sort(key)
        eager = pl.read_parquet(run / "eager.parquet", columns=key).sort(key)
        assert tidy.equals(eager), "the export's (cell, question, option) triples differ from the eager join"
        print(f"wrote {n} answers in {args.parts} part pairs; export equals the eager join")
        for fmt, (seconds, rss, _) in figures.items():
            print(f"hofcat export --format {fmt}: {seconds:.1f} s, peak RSS {rss / 1024:.0f} MiB")
        print(f"eager load + join + write (peer): {e_seconds:.1f} s, peak RSS {e_rss / 1024:.0f} MiB")
        print(f"ratio export (parquet) / eager peak RSS: {figures['parquet'][1] / e_rss:.2f}")


if __name__ == "__main__":
    main()
