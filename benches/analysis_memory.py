"""Peak memory and time of ``hofcat analyze`` on a synthetic run of about 1,000,000 answers (store layout).

Run: ``python -m benches.analysis_memory [--answers N] [--keep DIR]``. The run directory is written in the
store's layout (responses/ + answers/ parts, one answer per item-mode cell). Each measurement runs in a fresh
child process and reports its peak RSS (``ru_maxrss``):

- ``hofcat analyze`` (bootstrap 1000 resamples, 999 permutations, set measures capped at 1000 respondents per set);
- the peer: reading the same answers joined with their cells eagerly into memory (``polars.read_parquet`` +
  join), which any analysis that materialises the run must at least do.

Correctness first: the analysis' CAT scores are recomputed from the eagerly loaded table with ``hofcat score``'s
path (per-question means → indices → tau) and must agree.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

COUNTRIES = ("U.S.A.", "China", "France", "Germany", "Brazil", "India", "Singapore", "Japan", "South Africa")
TEMPERATURES = (0.0, 0.3, 0.7, 1.0)
TOP_PS = (0.25, 0.5, 0.75, 1.0)


def write_run(root: Path, answers: int, *, parts: int = 10, seed: int = 0) -> int:
    """A synthetic run directory with about ``answers`` answers; returns the exact count."""
    rng = np.random.default_rng(seed)
    cells_per_seed = len(TEMPERATURES) * len(TOP_PS) * len(COUNTRIES) * 24
    seeds = max(1, round(answers / cells_per_seed))
    t, p, k, s, q = (
        a.ravel()
        for a in np.meshgrid(
            np.arange(len(TEMPERATURES)),
            np.arange(len(TOP_PS)),
            np.arange(len(COUNTRIES)),
            np.arange(1, seeds + 1),
            np.arange(1, 25),
            indexing="ij",
        )
    )
    n = t.size
    tilt = rng.uniform(-1.2, 1.2, size=(len(COUNTRIES), 24))
    noise = rng.normal(0, 0.4 + np.array(TEMPERATURES)[t], size=n)
    option = np.clip(np.rint(3 + tilt[k, q - 1] + noise), 1, 5).astype(np.int16)
    refused = rng.random(n) < 0.03
    keys = np.char.add("c", np.arange(n).astype(str))
    responses = pl.DataFrame(
        {
            "cell_key": keys,
            "endpoint": "bench",
            "provider": "openai",
            "model": "bench-1",
            "language": "en",
            "mode": "item",
            "question": q.astype(np.int16),
            "framing": "persona",
            "country": np.array(COUNTRIES)[k],
            "age": pl.Series([None] * n, dtype=pl.Int16),
            "gender": pl.Series([None] * n, dtype=pl.String),
            "option_order": [[1, 2, 3, 4, 5]] * n,
            "reply_format": "number",
            "seed": s.astype(np.int64),
            "temperature": np.array(TEMPERATURES)[t],
            "top_p": np.array(TOP_PS)[p],
            "max_tokens": np.full(n, 16, dtype=np.int32),
            "response_text": np.where(refused, "As an AI, I do not have personal preferences.", option.astype(str)),
        }
    )
    answers_frame = pl.DataFrame(
        {
            "cell_key": keys,
            "question": q.astype(np.int16),
            "option_id": pl.Series(np.where(refused, 0, option)).cast(pl.Int16).replace(0, None),
            "status": np.where(refused, "refusal", "ok"),
            "hedged": np.zeros(n, dtype=bool),
            "displayed": pl.Series(option).cast(pl.Int16),
            "parser_version": "bench",
        }
    )
    for name, frame in (("responses", responses), ("answers", answers_frame)):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i, chunk in enumerate(frame.iter_slices(-(-n // parts)), start=1):
            chunk.write_parquet(root / name / f"part-{i:06d}.parquet")
    (root / "manifest.json").write_text(json.dumps({"format": "hofcat-run/1", "reference": "hofstede-2015"}))
    return n


CHILD_WRITE = """
import sys
from benches.analysis_memory import write_run
from pathlib import Path
print(write_run(Path(sys.argv[1]), {answers}))
"""
CHILD_ANALYZE = """
import sys, resource, time
from runner.analyze.run import AnalysisOptions, analyze_run
t = time.perf_counter()
analyze_run(sys.argv[1], AnalysisOptions())
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
CHILD_EAGER = """
import sys, resource, time
import polars as pl
t = time.perf_counter()
a = pl.read_parquet(sys.argv[1] + "/answers/*.parquet")
r = pl.read_parquet(sys.argv[1] + "/responses/*.parquet")
joined = a.join(r.drop("question"), on="cell_key")
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, joined.height)
"""


def child(code: str, run: Path) -> list[float]:
    """Run ``code`` in a fresh interpreter; its printed numbers (seconds, peak RSS in KiB, …)."""
    out = subprocess.run(
        [sys.executable, "-c", code, str(run)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return [float(x) for x in out.stdout.split()]


def check(run: Path) -> float:
    """Largest |CAT(analysis) − CAT(score path on eagerly loaded means)| over conditions."""
    from runner.score.cat import score_means
    from runner.score.means_file import MeansTable
    from runner.survey.reference import load_reference

    a = pl.read_parquet(run / "answers" / "*.parquet").join(
        pl.read_parquet(run / "responses" / "*.parquet").drop("question"), on="cell_key"
    )
    means = (
        a.filter(pl.col("status") == "ok")
        .group_by("temperature", "top_p", "country", "question")
        .agg(pl.col("option_id").cast(pl.Float64).mean())
    )
    cat = pl.read_parquet(run / "analysis" / "cat.parquet")
    reference = load_reference("hofstede-2015")
    worst = 0.0
    for row in cat.iter_rows(named=True):
        sub = means.filter((pl.col("temperature") == row["temperature"]) & (pl.col("top_p") == row["top_p"]))
        block = np.array(
            [
                [
                    sub.filter((pl.col("country") == c) & (pl.col("question") == qq))["option_id"][0]
                    for qq in range(1, 25)
                ]
                for c in row["countries"]
            ]
        )
        table = MeansTable(("g",), (tuple(row["countries"]),), (block,), (block,), (block,), "bench")
        expected = score_means(table, reference)["groups"][0]["cat_score"]
        worst = max(worst, abs(expected - row["cat_score"]))
    return worst


def main() -> None:
    """Write the run, check, then measure both children back to back."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, default=None, help="write the run here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.keep or Path(tmp) / "run"
        # Every step runs in its own interpreter: Linux carries the peak RSS across fork/exec, so a parent
        # holding the generated data would inflate the children's figures.
        n = int(child(CHILD_WRITE.format(answers=args.answers), run)[0])
        seconds, rss_kib = child(CHILD_ANALYZE, run)
        e_seconds, e_rss_kib, rows = child(CHILD_EAGER, run)
        assert rows == n
        worst = check(run)
        assert worst < 1e-9, f"analysis CAT differs from the score path by {worst}"
        print(f"wrote {n} answers")
        print(f"correct: CAT equals the score path (max |diff| {worst:.1e})")
        print(f"hofcat analyze: {seconds:.1f} s, peak RSS {rss_kib / 1024:.0f} MiB")
        print(f"eager load + join (peer): {e_seconds:.1f} s, peak RSS {e_rss_kib / 1024:.0f} MiB")
        print(f"ratio analyze / eager peak RSS: {rss_kib / e_rss_kib:.2f}")


if __name__ == "__main__":
    main()
