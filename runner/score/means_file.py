"""Reading and checking a long per-question means CSV: ``group,country,question,mean[,std,n]``.

Every problem is reported with the file, line, column and what was expected, and the first problem stops
the read (a means file is small: one row per group × country × question). A mean may be missing — an empty
field, ``NA``, ``N/A`` or ``Data Not Available`` (as the CAT v2 paper prints Llama 2's Q19) — and is then NaN:
the dimensions that need it are not scored for that country (``score_means`` reports them), the rest are.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.errors import InputFileError, UnknownCountryError
from runner.survey.csvtext import read_csv_text
from runner.survey.dimensions import QUESTIONS
from runner.survey.reference import ReferenceSet

__all__ = ["MeansTable", "read_means"]

REQUIRED = ("group", "country", "question", "mean")
OPTIONAL = ("std", "n")
MISSING = ("", "na", "n/a", "data not available")  # spellings of a missing mean (compared lower-case)


@dataclass(frozen=True, eq=False)
class MeansTable:
    """Validated means: ``means[g, k, q-1]`` for group ``groups[g]``, country ``countries[g][k]``."""

    groups: tuple[str, ...]
    countries: tuple[tuple[str, ...], ...]  # per group, canonical names in order of first appearance
    means: tuple[np.ndarray, ...]  # per group, (K_g, 24) floats in [1, 5]; NaN = missing (``MISSING``)
    std: tuple[np.ndarray, ...]  # per group, (K_g, 24), NaN where not given
    n: tuple[np.ndarray, ...]  # per group, (K_g, 24), NaN where not given
    path: str


def read_means(path: str | Path, reference: ReferenceSet) -> MeansTable:
    """Read and validate ``path``; countries resolve (aliases allowed) against ``reference``."""
    path = Path(path)
    if not path.is_file():  # a folder or a FIFO exists: "no such file" would send the user looking elsewhere
        problem = "is not a regular file" if path.exists() else "no such file"
        raise InputFileError(path, None, None, problem, "a CSV group,country,question,mean[,std,n]")
    cells: dict[str, dict[str, dict[int, tuple[float, float, float, int]]]] = {}
    reader = csv.reader(io.StringIO(read_csv_text(path, max_bytes=MAX_BYTES, expected="a means CSV"), newline=""))
    try:
        header = [h.strip().lower() for h in next(reader, [])]
        _check_header(path, header)
        col = {name: header.index(name) for name in header}
        for line, raw in enumerate(reader, start=2):
            if not any(field.strip() for field in raw):
                continue
            if len(raw) != len(header):
                raise InputFileError(path, line, None, f"{len(raw)} fields", f"{len(header)} fields as in the header")
            row = {name: raw[i].strip() for name, i in col.items()}
            group = row["group"]
            if not group:
                raise InputFileError(path, line, "group", "empty group name", "a non-empty label")
            try:
                country = reference.resolve(row["country"])
            except UnknownCountryError as exc:
                raise InputFileError(
                    path, line, "country", str(exc), f"a country of reference {reference.name!r}"
                ) from None
            question = _question(path, line, row["question"])
            mean = (
                math.nan
                if row["mean"].lower() in MISSING
                else _float(path, line, "mean", row["mean"], low=1.0, high=5.0, expected="a number in [1, 5] or NA")
            )
            std = _float(path, line, "std", row.get("std", ""), low=0.0, expected="a number ≥ 0 or empty")
            n = _float(path, line, "n", row.get("n", ""), low=1.0, expected="a whole number ≥ 1 or empty", whole=True)
            per_country = cells.setdefault(group, {}).setdefault(country, {})
            if question in per_country:
                raise InputFileError(
                    path,
                    line,
                    "question",
                    f"group {group!r}, country {country!r}, question {question} already given "
                    f"on line {per_country[question][3]}",
                    "one row per group, country and question",
                )
            per_country[question] = (mean, std, n, line)
    except csv.Error as exc:  # a field over the csv module's limit, a stray quote: located, one line
        raise InputFileError(path, reader.line_num, None, f"not a readable CSV row ({exc})") from None
    if not cells:
        raise InputFileError(path, None, None, "no data rows", "at least one group with 24 questions per country")
    return _assemble(path, cells)


MAX_BYTES = 64 * 2**20  # a means file holds one short row per group × country × question


def _check_header(path: Path, header: list[str]) -> None:
    """Required columns present, nothing unknown, nothing twice."""
    allowed = REQUIRED + OPTIONAL
    for i, name in enumerate(header):
        if name not in allowed:
            raise InputFileError(path, 1, name or f"#{i + 1}", "unknown column", f"columns {', '.join(allowed)}")
        if header.index(name) != i:
            raise InputFileError(path, 1, name, "column given twice")
    for name in REQUIRED:
        if name not in header:
            raise InputFileError(path, 1, name, "missing column", "header group,country,question,mean[,std,n]")


def _question(path: Path, line: int, text: str) -> int:
    """A question number 1–24."""
    try:
        q = int(text)
    except ValueError:
        raise InputFileError(
            path, line, "question", f"{text!r} is not a whole number", "a question number 1–24"
        ) from None
    if q not in QUESTIONS:
        raise InputFileError(path, line, "question", f"{q} is outside 1–24", "a question number 1–24")
    return q


def _float(
    path: Path,
    line: int,
    column: str,
    text: str,
    *,
    low: float,
    high: float = math.inf,
    expected: str,
    whole: bool = False,
) -> float:
    """A number in [low, high]; an empty optional field (std, n) is NaN."""
    if column != "mean" and text == "":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise InputFileError(path, line, column, f"{text!r} is not a number", expected) from None
    if not (low <= value <= high) or (whole and not value.is_integer()):
        raise InputFileError(path, line, column, f"{text} is out of range", expected)
    return value


def _assemble(path: Path, cells: dict[str, dict[str, dict[int, tuple[float, float, float, int]]]]) -> MeansTable:
    """Dense per-group arrays; a group × country lacking any of the 24 questions is an error."""
    groups, countries, means, stds, ns = [], [], [], [], []
    for group, per_group in cells.items():
        for country, qs in per_group.items():
            missing = [q for q in QUESTIONS if q not in qs]
            if missing:
                first = min(v[3] for v in qs.values())
                raise InputFileError(
                    path,
                    first,
                    "question",
                    f"group {group!r}, country {country!r} lacks question(s) {missing}",
                    "all 24 questions for every group and country",
                )
        names = tuple(per_group)
        block = np.array([[per_group[c][q][:3] for q in QUESTIONS] for c in names], dtype=np.float64)
        groups.append(group)
        countries.append(names)
        means.append(block[..., 0])
        stds.append(block[..., 1])
        ns.append(block[..., 2])
    return MeansTable(tuple(groups), tuple(countries), tuple(means), tuple(stds), tuple(ns), str(path))
