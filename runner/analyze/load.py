"""A run directory's parsed answers as one LazyFrame with the design factors beside each answer.

The store keeps answers (``cell_key, question, option_id, status, …``) apart from responses (one row per cell
with its factors); this joins them on ``cell_key``, part by part. Two derived columns make the design explicit:
``shuffled`` (the cell's options were shuffled) and ``country`` for no-persona cells, taken
from the prompt language (``data/reference/language_countries.csv``, the papers' convention); those cells' language
becomes ``native`` so that the languages' countries are ranked together (the papers' model-level comparison).
"""

from __future__ import annotations

import contextlib
import csv
import re
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from runner.errors import InputError, RunDirError
from runner.rundir import RunDir, part_columns, part_pairs, read_part, unique_cells
from runner.survey.reference import REFERENCE_DIR

__all__ = ["BATCH_ROWS", "language_countries", "load_answers"]

BATCH_ROWS = 1 << 14  # answers joined and derived at once (the load's working set follows this, not the run)

# Response columns that the answers need: everything else in responses is bookkeeping or the reply itself.
RESPONSE_FACTORS = (
    "endpoint",
    "model",
    "language",
    "mode",
    "framing",
    "country",
    "age",
    "gender",
    "reply_format",
    "seed",
    "temperature",
    "top_p",
    "max_tokens",
    "constraint",
    "measurement",
    "option_labels",
    "option_order",
    "shuffle_seed",
)


def language_countries() -> dict[str, str]:
    """Prompt language code → the country a no-persona answer in it is compared with."""
    with (REFERENCE_DIR / "language_countries.csv").open(newline="", encoding="utf-8") as fh:
        return {row["language"]: row["country"] for row in csv.DictReader(fh)}


def _parquet(folder: Path) -> pl.LazyFrame:
    """All Parquet parts of a dataset folder."""
    return pl.scan_parquet(folder / "*.parquet")


def load_answers(run_dir: str | Path, *, keep_keys: bool = False, spool: str | Path | None = None) -> pl.LazyFrame:
    """Answers joined with their cell's factors (a run directory), or a single answers table that has them.

    ``keep_keys`` keeps ``cell_key`` (the analysis drops it: it needs only the factors). ``spool``: a folder
    (existing, empty, kept by the caller while the frame is used) that receives each joined part as Parquet;
    the frame then scans those files, so collecting it with the streaming engine holds about one part, not the
    run. Without ``spool`` the joined parts are held in memory.
    """
    root = Path(run_dir)
    found = part_pairs(root)
    unparsed = [p.responses for p in found if p.answers is None]
    if unparsed:  # dropping them would silently lose those cells from the analysis
        where = f"{unparsed[0].parent.name}/{unparsed[0].name}"
        more = f" (and {len(unparsed) - 1} more)" if len(unparsed) > 1 else ""
        raise RunDirError(
            f"part {where}{more} has no answers part; run `hofcat reparse {root}` (`hofcat analyze` does it itself)"
        )
    pairs = [(p.answers, p.responses) for p in found if p.answers is not None]
    if pairs:
        unique_cells(root)  # a cell two writers stored would be counted twice
        return _joined_by_part(pairs, keep_keys, None if spool is None else Path(spool))
    answers = RunDir(root).dataset("answers")
    for candidate in (answers, root / "answers.parquet"):
        if candidate.is_dir() and any(candidate.glob("*.parquet")):
            return _derive(_parquet(candidate))
        if candidate.is_file():
            return _derive(pl.scan_parquet(candidate))
    raise InputError(f"{root}: no parsed-answers dataset (looked for answers/ with responses/, or answers.parquet)")


@contextlib.contextmanager
def system_errors(what: str) -> Iterator[None]:
    """Turn a failure of the system under polars (a full disk, a read-only or vanished folder: polars raises
    them as ``ComputeError`` or ``OSError`` naming ``os error N``) into the one-line ``RunDirError`` ``what: why``;
    any other polars error stays what it is (a bug to see)."""
    try:
        yield
    except pl.exceptions.PolarsError as exc:
        line = next(iter(str(exc).splitlines()), "")
        if not (found := _OS_ERROR.search(str(exc))):
            raise
        raise RunDirError(f"{what}: {found.group(1).strip() or line}") from None
    except OSError as exc:
        raise RunDirError(f"{what}: {exc.strerror or exc}" + (f" ({exc.filename})" if exc.filename else "")) from None


_OS_ERROR = re.compile(r"([^:\n]*)\(os error \d+\)")


def _joined_part(answer_path: Path, response_path: Path, keep_keys: bool) -> Iterator[pl.DataFrame]:
    """Answers part N joined with responses part N, ``BATCH_ROWS`` answers at a time: the answer columns, the
    cell's factors and the derived ones.

    Both parts are read through the run directory's reader, which verifies them (``RunDirError`` naming a
    corrupt one); only the columns the analysis uses are read (no reply text). The join is an Arrow ``take`` of
    each answer's cell row (as ``runner.export`` does); the derived columns are computed per batch, so the
    polars working set follows the batch, not the part.
    """
    have = part_columns(response_path)
    cells = read_part(response_path, [c for c in ("cell_key", *RESPONSE_FACTORS) if c in have], "cell_key")
    probs = [c for c in ("option_probs", "option_mass") if c in part_columns(answer_path)]  # distribution
    answers = read_part(answer_path, ["cell_key", "question", "option_id", "status", *probs], "cell_key")
    row = pc.index_in(answers.column("cell_key"), value_set=cells.column("cell_key"))  # null: cell not found
    factors = cells.drop_columns(["cell_key"])
    for start in range(0, max(len(answers), 1), BATCH_ROWS):
        batch = answers.slice(start, BATCH_ROWS)
        taken = factors.take(row.slice(start, BATCH_ROWS))
        for name in taken.column_names:
            batch = batch.append_column(name, taken.column(name))
        part = _derive(pl.from_arrow(batch).lazy())
        yield (part if keep_keys else part.drop("cell_key")).collect()


def _joined_by_part(pairs: list[tuple[Path, Path]], keep_keys: bool, spool: Path | None) -> pl.LazyFrame:
    """Join answers/part-N with responses/part-N one part at a time, keeping only the slim result.

    The parse stage writes answers part N from responses part N, so the join never needs more than one part
    in memory; the result holds a few numbers and short labels per answer (no reply text). With ``spool`` each
    joined batch goes to ``spool/part-N-M.parquet`` at once and the frame scans them: a million answers held
    in memory cost ≈ 200 MiB (and the allocators keep much of each part's join), their files a few MiB.
    """
    slim: list[pl.DataFrame | pl.LazyFrame] = []
    for i, (answer_path, response_path) in enumerate(pairs, start=1):
        for j, part in enumerate(_joined_part(answer_path, response_path, keep_keys)):
            if spool is None:
                slim.append(part)
            else:
                target = spool / f"part-{i:06d}-{j:04d}.parquet"
                part.write_parquet(target)
                slim.append(pl.scan_parquet(target))
        pa.default_memory_pool().release_unused()  # Arrow's allocator keeps a part's buffers otherwise
    # diagonal: parts written before the constraint column existed get it as null, which means "none"
    joined = pl.concat(slim, how="diagonal_relaxed").lazy()
    names = joined.collect_schema().names()
    if "constraint" in names:
        joined = joined.with_columns(pl.col("constraint").fill_null("none"))
    if "measurement" in names:  # parts from before the distribution measurement sampled
        joined = joined.with_columns(pl.col("measurement").fill_null("sample"))
    if "option_labels" in names:  # parts from before the labels factor showed digits
        joined = joined.with_columns(pl.col("option_labels").fill_null("digits"))
    return joined


def _derive(lazy: pl.LazyFrame) -> pl.LazyFrame:
    """``shuffled`` (the design asked for shuffling); ``country`` from ``language`` where no persona gave one.

    A cell was shuffled when it has a ``shuffle_seed`` — not when its order differs from 1–5, since a random
    order is sometimes the canonical one and would split a shuffled condition in two.
    """
    names = lazy.collect_schema().names()
    if "option_order" in names:  # kept compactly for the baselines' position respondent (runner/analyze/baselines)
        from runner.analyze.baselines import order_code_expr

        lazy = lazy.with_columns(order_code_expr())
    if "shuffle_seed" in names and "option_order" in names:  # design.option_order = "reversed": fixed 5…1
        backwards = pl.lit([5, 4, 3, 2, 1], dtype=pl.List(pl.Int64))
        lazy = lazy.with_columns(
            reversed=pl.col("shuffle_seed").is_null() & (pl.col("option_order").cast(pl.List(pl.Int64)) == backwards)
        )
    if "shuffle_seed" in names:
        lazy = lazy.with_columns(shuffled=pl.col("shuffle_seed").is_not_null()).drop(
            [c for c in ("shuffle_seed", "option_order") if c in names]
        )
    elif "option_order" in names:
        canonical = pl.lit([1, 2, 3, 4, 5], dtype=pl.List(pl.Int64))
        lazy = lazy.with_columns(shuffled=pl.col("option_order").cast(pl.List(pl.Int64)) != canonical).drop(
            "option_order"
        )
    if "language" in names:
        mapped = pl.col("language").replace_strict(language_countries(), default=None, return_dtype=pl.String)
        if "country" not in names:
            lazy = lazy.with_columns(country=pl.lit(None, dtype=pl.String))
        # No persona: the language stands for its country, and the condition is "each country in its native
        # language" (the papers' model-level comparison), so the languages must rank together, not apart.
        lazy = lazy.with_columns(
            country=pl.coalesce(pl.col("country"), mapped),
            language=pl.when(pl.col("country").is_null()).then(pl.lit("native")).otherwise(pl.col("language")),
        )
    return lazy
