"""``analyze_runs``: several run directories analysed as one design, with the run as a factor.

Item and survey sweeps, or two sweeps months apart, are compared without concatenating files by hand. Runs are
comparable only when the same instrument text reached the models and the same parser and reference read and
score their answers; anything else is refused, naming the difference, unless the caller allows it (and the
summary records that it did).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from runner.analyze.load import load_answers
from runner.analyze.run import AnalysisOptions, analyze_answers, use_extractions, write_analysis
from runner.errors import InputError
from runner.parse.stage import update_answers
from runner.rundir import RunWriter, read_dataset, read_manifest

__all__ = ["analyze_runs", "run_differences"]

# The prompt factors under which two runs must have sent the same template text.
_PROMPT_KEYS = ("language", "mode", "framing", "reply_format")


def _templates(run_dir: Path) -> dict[tuple, set[str]]:
    """(language, mode, framing, reply format) → the template hashes the run sent under it."""
    table = pl.from_arrow(read_dataset(run_dir, "responses", [*_PROMPT_KEYS, "template_hash"]))
    assert isinstance(table, pl.DataFrame)
    out: dict[tuple, set[str]] = {}
    for *key, template in table.unique().iter_rows():
        out.setdefault(tuple(key), set()).add(template)
    return out


def run_differences(run_dirs: Sequence[Path], manifests: Sequence[dict[str, Any]]) -> list[str]:
    """What makes the runs incomparable: parser, reference or instrument text that differs (empty if none)."""
    problems = []
    first = manifests[0]
    for run_dir, manifest in zip(run_dirs[1:], manifests[1:], strict=True):
        for key, what in (("parser_version", "parser version"), ("reference", "reference")):
            if manifest.get(key) != first.get(key):
                problems.append(
                    f"{run_dirs[0]} and {run_dir} differ in {what}: {first.get(key)} vs {manifest.get(key)}"
                )
    seen: dict[tuple, tuple[Path, set[str]]] = {}
    for run_dir in run_dirs:
        for key, templates in _templates(run_dir).items():
            if key in seen and seen[key][1] != templates:
                label = ", ".join(f"{k}={v}" for k, v in zip(_PROMPT_KEYS, key, strict=True))
                problems.append(f"{seen[key][0]} and {run_dir} sent different instrument text for {label}")
            seen.setdefault(key, (run_dir, templates))
    return problems


def _labels(run_dirs: Sequence[Path], manifests: Sequence[dict[str, Any]]) -> list[str]:
    """Each run's label: its ``run.name``, or its directory where two runs share a name."""
    names = [str(m.get("run_name") or d.name) for d, m in zip(run_dirs, manifests, strict=True)]
    if len(set(names)) < len(names):
        names = [str(d) for d in run_dirs]
    return names


def analyze_runs(
    run_dirs: Sequence[str | Path], out: str | Path, options: AnalysisOptions, *, allow_mixed: bool = False
) -> Path:
    """Analyse several runs as one design with a ``run`` factor, into ``out/analysis``; that folder's path.

    ``out`` must not be one of the runs (nor any run directory); ``hofcat report OUT`` then renders it.
    """
    roots = [Path(r) for r in run_dirs]
    if len(roots) < 2:
        raise InputError("analyze: give two or more run directories to analyse together (or one, without --out)")
    if len({r.resolve() for r in roots}) < len(roots):
        raise InputError("analyze: the same run directory is given twice")
    target = Path(out)
    if (target / "manifest.json").exists():
        raise InputError(f"{target}: is a run directory; --out names a new folder for the combined analysis")
    manifests = [read_manifest(r) for r in roots]
    problems = run_differences(roots, manifests)
    if problems and not allow_mixed:
        raise InputError(f"{problems[0]} ({len(problems)} difference(s)); pass --allow-mixed to analyse them anyway")
    labels = _labels(roots, manifests)
    frames, extractions = [], []
    for root, label in zip(roots, labels, strict=True):
        with RunWriter.attach(root) as writer:  # parse what a crash left unparsed, and read a consistent state
            update_answers(writer)
            answers, extraction = use_extractions(load_answers(root, keep_keys=options.extracted), root, options)
            frames.append(answers.with_columns(run=pl.lit(label)).collect())
            extractions.append(extraction)
    answers = pl.concat(frames, how="diagonal_relaxed").lazy()
    references = {m.get("reference") for m in manifests}
    if options.reference is None:
        options = replace(options, reference=references.pop() if len(references) == 1 else "hofstede-2015")
    tables, summary = analyze_answers(answers, options)
    summary["runs"] = [
        {
            "label": label,
            "run_dir": str(root),
            "run_name": m.get("run_name"),
            "spec_hash": m.get("spec_hash"),
            "parser_version": m.get("parser_version"),
            "reference": m.get("reference"),
            **({"extractions": e} if e is not None else {}),
        }
        for root, label, m, e in zip(roots, labels, manifests, extractions, strict=True)
    ]
    summary["differences_allowed"] = problems
    target.mkdir(parents=True, exist_ok=True)
    with RunWriter.attach(target) as writer:
        return write_analysis(writer, tables, summary)
