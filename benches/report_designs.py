"""Three study designs for the report at scale — 1, ~100 and ~1,000 conditions — as analysed run directories.

Answers are drawn vectorised (numpy, one call per design) with a country-specific tilt, so that a 1,000-condition
run directory takes seconds to build; the analysis and the report run through the real CLI. Used by
tests/test_report_scale.py and benches/report_bench.py.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import polars as pl

from runner.cli import main

COUNTRIES = ("U.S.A.", "China", "Japan", "Germany", "Brazil", "India")

# name -> (factor levels crossed, countries, seeds); "medium" adds a temperature only the local model used
DESIGNS: dict[str, dict] = {
    "one": {"factors": {}, "countries": COUNTRIES[:4], "seeds": 4},
    "medium": {
        "factors": {
            "model": ("sim-small", "sim-large", "local"),
            "language": ("en", "zh"),
            "framing": ("persona", "none"),
            "temperature": (0.0, 1.0),
            "top_p": (0.5, 1.0),
            "reply_format": ("number", "json"),
        },
        "countries": COUNTRIES,
        "seeds": 2,
    },
    "large": {
        "factors": {
            "model": ("sim-small", "sim-medium", "sim-large", "local"),
            "language": ("en", "zh", "de", "native"),
            "framing": ("persona", "none"),
            "temperature": (0.0, 0.5, 1.0, 1.5),
            "top_p": (0.5, 1.0),
            "reply_format": ("number", "json"),
            "measurement": ("sample", "distribution"),
        },
        "countries": COUNTRIES,
        "seeds": 2,
    },
}


def conditions(name: str) -> list[dict]:
    """The design's conditions (factor → level); "medium" also has the local model at temperature 0.7."""
    spec = DESIGNS[name]["factors"]
    combos = [dict(zip(spec, values, strict=True)) for values in itertools.product(*spec.values())]
    if name == "medium":  # a level only one model used: no other panel may show it
        combos += [{**c, "temperature": 0.7} for c in combos if c["model"] == "local" and c["temperature"] == 0.0]
    return combos


def answers(name: str, seed: int = 0) -> pl.DataFrame:
    """Parsed answers of design ``name``: one row per condition × country × seed × question."""
    design = DESIGNS[name]
    combos = conditions(name) or [{}]
    countries, seeds = design["countries"], design["seeds"]
    rng = np.random.default_rng(seed)
    n_c, n_k = len(combos), len(countries)
    tilt = rng.uniform(-1.2, 1.2, size=(n_k, 24))  # what the country shifts, shared by every condition
    shift = rng.normal(0, 0.4, size=(n_c, 1, 1, 24))  # what each condition adds
    noise = rng.normal(0, 0.8, size=(n_c, n_k, seeds, 24))
    values = np.clip(np.rint(3 + tilt[None, :, None, :] + shift + noise), 1, 5).astype(np.int64)
    c, k, s, q = (a.ravel() for a in np.indices(values.shape))
    frame = pl.DataFrame(
        {
            "country": np.asarray(countries)[k],
            "seed": s + 1,
            "question": q + 1,
            "option_id": values.ravel(),
            "status": np.where(rng.random(values.size) < 0.01, "refusal", "ok"),
        }
    )
    frame = frame.with_columns(
        option_id=pl.when(pl.col("status") == "ok").then(pl.col("option_id")),
        cell_key=pl.format("c{}-{}-{}-{}", pl.Series(c), pl.col("country"), pl.col("seed"), pl.col("question")),
    )
    for factor in combos[0]:
        levels = pl.Series([combo[factor] for combo in combos])
        frame = frame.with_columns(levels.gather(pl.Series(c)).alias(factor))
    return frame


def analysed(root: Path, name: str, *, report: bool = True) -> Path:
    """``root`` as an analysed (and reported) run directory of design ``name``."""
    (root / "answers").mkdir(parents=True)
    answers(name).write_parquet(root / "answers" / "part-000001.parquet")
    args = ["analyze", str(root), "--resamples", "50", "--permutations", "19", "--seed", "1"]
    assert main(args) == 0
    if report:
        assert main(["report", str(root)]) == 0
    return root
