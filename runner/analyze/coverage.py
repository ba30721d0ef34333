"""What thin data lets an analysis compute: the caveats a reader sees before any number.

A pilot (``--limit``), an interrupted run, one seed, one country, a few questions, only refusals or only
failures are all analysable: every table is written, with rows where something could be computed. These
functions say, in one line each, what could not be computed and why, and what would make it computable. The
analysis stores them in ``summary.json`` (``caveats``, ``completeness``); ``hofcat analyze`` prints them and the
report lists them first among its caveats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runner.analyze.units import UnitArray
from runner.rundir import part_columns, part_pairs, read_part, stored_key_columns
from runner.score.indices import WEIGHTS
from runner.survey.dimensions import DIMENSIONS
from runner.survey.models import is_requested_model

__all__ = ["completeness", "completeness_caveat", "data_caveats", "served_caveat", "served_models"]


def completeness(run_dir: str | Path, manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """Planned cells (the manifest's plan), cells replied, cells failed for good, and cells without an outcome
    (``missing``) of a run directory; None without a manifest (a bare answers table)."""
    if not manifest or not isinstance((manifest.get("plan") or {}).get("cells"), int):
        return None
    responses, failures = stored_key_columns(run_dir)
    replied = len(responses)  # a cell is stored once: its key is unique across the responses dataset
    failed = len(pc.unique(failures)) if len(failures) else 0
    if failed and replied:  # a failed cell retried and stored later is not failed for good
        failed -= int(pc.sum(pc.is_in(pc.unique(failures), value_set=pa.concat_arrays(responses.chunks))).as_py())
    planned = int(manifest["plan"]["cells"])
    return {"planned": planned, "replied": replied, "failed": failed, "missing": max(planned - replied - failed, 0)}


def completeness_caveat(done: dict[str, Any] | None, run_dir: str | Path) -> list[str]:
    """One line when the run has cells without an outcome (a ``--limit`` pilot or an unfinished run)."""
    if done is None or not done["missing"]:
        return []
    return [
        (
            f"incomplete run: {done['replied'] + done['failed']:,} of the plan's {done['planned']:,} cells have an "
            f"outcome ({done['replied']:,} replied, {done['failed']:,} failed) — a --limit pilot or an unfinished run; "
            f"every number here describes those cells only; `hofcat run SPEC --out {run_dir}` sends the other "
            f"{done['missing']:,}"
        )
    ]


def data_caveats(units: UnitArray, statuses: dict[str, int]) -> list[str]:
    """What the answers cannot support: nothing stored, nothing scored, dimensions without their questions, no
    interval from a single unit per country. ``statuses``: answer count per parse status."""
    total = sum(statuses.values())
    if total == 0:
        return ["no replies stored: no answer to analyse (`hofcat status RUN` lists the failures)"]
    scored = np.isfinite(units.values)
    if not scored.any():
        counts = ", ".join(f"{s} {n:,}" for s, n in sorted(statuses.items(), key=lambda item: -item[1]))
        return [
            (
                f"none of the {total:,} answers is scored under the parse policy ({counts}): no question "
                "means, indices, tau or CAT; `--unparseable neutral` scores them as 3, `hofcat extract` restates "
                "ambiguous ones"
            )
        ]
    notes = []
    answered = scored.any(axis=(0, 1, 2))  # (24,) questions some unit answered
    needs = WEIGHTS != 0  # (24, 6): the questions each dimension's index uses
    lacking = [d for j, d in enumerate(DIMENSIONS) if not answered[needs[:, j]].all()]
    if lacking:
        missing = sorted({q + 1 for j, d in enumerate(DIMENSIONS) if d in lacking for q in np.flatnonzero(needs[:, j])})
        notes.append(
            f"{', '.join(d.upper() for d in lacking)}: no index (their questions "
            f"{', '.join(f'Q{q}' for q in missing if not answered[q - 1])} have no scored answer), so no tau for them"
        )
    per_country = units.present().sum(axis=2)  # (C, K) units that answered
    if per_country.max() == 1:
        notes.append(
            "one unit per country (one seed, no identities): index scores have no standard error, so tau and CAT "
            "get no interval (docs/analysis.md, Uncertainty); more seeds give one"
        )
    return notes


def served_models(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Per endpoint: the model the spec asked for (``requested``) and the models its replies said answered them
    (``served``: name → replies; ``unreported`` counts replies that named none), from the stored responses.

    Read part by part, three short columns at a time: memory follows a part, not the run."""
    out: dict[str, dict[str, Any]] = {}
    for pair in part_pairs(run_dir):
        if "served_model" not in part_columns(pair.responses):
            continue  # parts from before the column: nothing reported
        table = read_part(pair.responses, ["endpoint", "model", "served_model"], "cell_key")
        counts = table.group_by(["endpoint", "model", "served_model"], use_threads=False).aggregate([([], "count_all")])
        for endpoint, model, served, n in zip(*(counts.column(i).to_pylist() for i in range(4)), strict=True):
            entry = out.setdefault(endpoint, {"requested": model, "served": {}, "unreported": 0})
            if served is None:
                entry["unreported"] += n
            else:
                entry["served"][served] = entry["served"].get(served, 0) + n
    return out


def served_caveat(served: dict[str, dict[str, Any]]) -> list[str]:
    """One line per endpoint some of whose replies name a model other than the one asked for (or a snapshot of it,
    ``runner.survey.models``): a run stored before hofcat compared them, or one whose spec accepted them."""
    notes = []
    for endpoint, entry in sorted(served.items()):
        names = entry["served"]
        if any(not is_requested_model(entry["requested"], name) for name in names):
            listed = ", ".join(f"{name} ({n:,} replies)" for name, n in sorted(names.items()))
            notes.append(f"endpoint {endpoint}: asked for model {entry['requested']}, replies name {listed}")
    return notes
