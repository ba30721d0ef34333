"""Peak memory and time of ``hofcat analyze`` on a synthetic run of about 1,000,000 answers (store layout).

Run: ``python -m benches.analysis_memory [--answers N] [--shape grid|conditions|seeds|tiny] [--keep DIR]``. The run
directory is written in the store's layout (responses/ + answers/ parts, one answer per item-mode cell). Shapes:
``grid`` (default; 16 conditions = 4 temperatures × 4 top_p, 9 countries, the seeds that make N answers),
``conditions`` (few seeds × many conditions: 256 conditions = 16 × 16, 8 countries, about 20 seeds),
``seeds`` (thousands of seeds × one condition: 9 countries) and ``tiny`` (2 temperatures × 4 countries, for
tests). Each measurement runs in a fresh child process and reports its peak RSS (``ru_maxrss``):

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
# shape → (temperatures, top_ps, countries)
SHAPES = {
    "grid": (TEMPERATURES, TOP_PS, COUNTRIES),
    "conditions": (
        tuple(np.round(np.linspace(0.0, 1.5, 16), 4)),
        tuple(np.round(np.linspace(0.1, 1.0, 16), 4)),
        COUNTRIES[:8],
    ),
    "seeds": ((0.7,), (1.0,), COUNTRIES),
    "tiny": ((0.3, 1.0), (1.0,), COUNTRIES[:4]),  # for tests: 2 conditions × 4 countries
}


def write_run(root: Path, answers: int, *, parts: int = 10, seed: int = 0, shape: str = "grid") -> int:
    """A synthetic run directory with about ``answers`` answers in ``shape`` (``SHAPES``); returns the exact count."""
    temperatures, top_ps, countries = SHAPES[shape]
    rng = np.random.default_rng(seed)
    cells_per_seed = len(temperatures) * len(top_ps) * len(countries) * 24
    seeds = max(1, round(answers / cells_per_seed))
    t, p, k, s, q = (
        a.ravel()
        for a in np.meshgrid(
            np.arange(len(temperatures)),
            np.arange(len(top_ps)),
            np.arange(len(countries)),
            np.arange(1, seeds + 1),
            np.arange(1, 25),
            indexing="ij",
        )
    )
    n = t.size
    tilt = rng.uniform(-1.2, 1.2, size=(len(countries), 24))
    noise = rng.normal(0, 0.4 + np.array(temperatures)[t], size=n)
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
            "country": np.array(countries)[k],
            "age": pl.Series([None] * n, dtype=pl.Int16),
            "gender": pl.Series([None] * n, dtype=pl.String),
            "option_order": [[1, 2, 3, 4, 5]] * n,
            "reply_format": "number",
            "seed": s.astype(np.int64),
            "temperature": np.array(temperatures)[t],
            "top_p": np.array(top_ps)[p],
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
print(write_run(Path(sys.argv[1]), {answers}, shape={shape!r}))
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
    """Largest |CAT(analysis) − CAT(score path on eagerly loaded means)| over conditions.

    The score path is ``hofcat score``'s: per-question means → ``indices_from_means`` → ``rank_agreement``.
    """
    from runner.score.indices import indices_from_means
    from runner.score.ranking import rank_agreement
    from runner.survey.reference import load_reference

    a = pl.read_parquet(run / "answers" / "*.parquet").join(
        pl.read_parquet(run / "responses" / "*.parquet").drop("question"), on="cell_key"
    )
    cat = pl.read_parquet(run / "analysis" / "cat.parquet")
    factors = [f for f in ("temperature", "top_p") if f in cat.columns]  # a single-condition run has none
    means = (
        a.filter(pl.col("status") == "ok")
        .group_by(*factors, "country", "question")
        .agg(pl.col("option_id").cast(pl.Float64).mean())
    )
    vectors: dict[tuple, np.ndarray] = {}
    for key, part in means.group_by(*factors, "country"):
        v = np.full(24, np.nan)
        v[part["question"].to_numpy() - 1] = part["option_id"].to_numpy()
        vectors[key] = v
    reference = load_reference("hofstede-2015")
    worst = 0.0
    for row in cat.iter_rows(named=True):
        block = np.stack([vectors[(*(row[f] for f in factors), c)] for c in row["countries"]])
        ranked = rank_agreement(indices_from_means(block)[None], reference.matrix(row["countries"]))
        worst = max(worst, abs(float(ranked.cat_score[0]) - row["cat_score"]))
    return worst


def main() -> None:
    """Write the run, check, then measure both children back to back."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1_000_000)
    parser.add_argument("--shape", choices=tuple(SHAPES), default="grid", help="run shape (module docstring)")
    parser.add_argument("--keep", type=Path, default=None, help="write the run here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.keep or Path(tmp) / "run"
        # Every step runs in its own interpreter: Linux carries the peak RSS across fork/exec, so a parent
        # holding the generated data would inflate the children's figures.
        n = int(child(CHILD_WRITE.format(answers=args.answers, shape=args.shape), run)[0])
        seconds, rss_kib = child(CHILD_ANALYZE, run)
        e_seconds, e_rss_kib, rows = child(CHILD_EAGER, run)
        assert rows == n
        worst = check(run)
        assert worst < 1e-9, f"analysis CAT differs from the score path by {worst}"
        print(f"wrote {n} answers (shape {args.shape})")
        print(f"correct: CAT equals the score path (max |diff| {worst:.1e})")
        print(f"hofcat analyze: {seconds:.1f} s, peak RSS {rss_kib / 1024:.0f} MiB")
        print(f"eager load + join (peer): {e_seconds:.1f} s, peak RSS {e_rss_kib / 1024:.0f} MiB")
        print(f"ratio analyze / eager peak RSS: {rss_kib / e_rss_kib:.2f}")


if __name__ == "__main__":
    main()
