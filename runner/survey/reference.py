"""Named reference score sets (Hofstede's country scores and revisions) and country-name aliases.

A reference set maps canonical country names to the six dimension scores (floats, NaN = no published score).
Shipped sets are declared in ``data/reference/sets.toml``; a user may instead pass a CSV
``country,pdi,idv,mas,uai,lto,ivr``. Country names resolve case-insensitively through
``data/reference/country_aliases.csv`` and Hofstede's country codes.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from runner.errors import InputFileError, UnknownCountryError, UnknownReferenceError
from runner.survey.csvtext import read_csv_text
from runner.survey.dimensions import DIMENSIONS
from runner.survey.paths import DATA_DIR

if TYPE_CHECKING:  # polars is imported where a table is made: the sweep imports this module, never polars
    import polars as pl

__all__ = [
    "DIMENSIONS",
    "ReferenceSet",
    "canonical_countries",
    "load_reference",
    "reference_names",
    "resolve_country",
]

REFERENCE_DIR = DATA_DIR / "reference"
_MISSING = {"", "#null!", "na", "nan", "null", "none"}
MAX_REFERENCE_BYTES = 16 * 2**20  # one short row per country: a few KB in practice
_HOFSTEDE_COLUMNS = {"pdi": "pdi", "idv": "idv", "mas": "mas", "uai": "uai", "lto": "ltowvs", "ivr": "ivr"}


@dataclass(frozen=True)
class ReferenceSet:
    """Country scores of one named reference: ``values[i, j]`` is country ``countries[i]`` on DIMENSIONS[j]."""

    name: str
    countries: tuple[str, ...]
    values: np.ndarray  # (n_countries, 6) float64, NaN where no score is published
    description: str = ""
    sources: tuple[str, ...] = ()  # files read, in order (later rows replace earlier ones per country)
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {c: i for i, c in enumerate(self.countries)})

    def knows(self, name: str) -> bool:
        """Whether ``name`` resolves to a country of this set (``resolve`` would not raise)."""
        try:
            self.resolve(name)
        except UnknownCountryError:
            return False
        return True

    def resolve(self, name: str) -> str:
        """The name of ``name`` in this set: its own spelling first, then the global aliases."""
        if name in self._index:
            return name
        key = _normalise(name)
        for country in self.countries:
            if _normalise(country) == key:
                return country
        try:
            canonical = resolve_country(name)
        except UnknownCountryError:
            canonical = None
        if canonical in self._index:
            return canonical
        known = f" (known as {canonical!r})" if canonical and canonical != name else ""
        raise UnknownCountryError(name, _close(name, self.countries), f"{known} in reference set {self.name!r}")

    def scores(self, country: str) -> dict[str, float]:
        """Six scores of one country (alias allowed) as ``{dim: value}``; NaN where unpublished."""
        row = self.values[self._index[self.resolve(country)]]
        return {dim: float(v) for dim, v in zip(DIMENSIONS, row, strict=True)}

    def matrix(self, countries: list[str] | tuple[str, ...]) -> np.ndarray:
        """Scores of several countries (aliases allowed), shape (len(countries), 6), NaN where unpublished."""
        rows = [self._index[self.resolve(c)] for c in countries]
        return self.values[rows] if rows else np.empty((0, len(DIMENSIONS)))

    def to_dict(self) -> dict[str, object]:
        """Name, description and sources, for the provenance block of every output."""
        return {"name": self.name, "description": self.description, "sources": list(self.sources)}

    def table(self) -> pl.DataFrame:
        """The scores as a table: ``country`` and one float column per dimension (null where unpublished)."""
        import polars as pl

        columns = {
            dim: pl.Series(dim, self.values[:, j], pl.Float64, nan_to_null=True) for j, dim in enumerate(DIMENSIONS)
        }
        return pl.DataFrame({"country": list(self.countries), **columns})

    @classmethod
    def from_table(cls, about: dict[str, Any], table: pl.DataFrame) -> ReferenceSet:
        """The set ``table`` (written by ``table``) holds, named and described by ``about`` (``to_dict``'s)."""
        import polars as pl

        values = (
            table.select(DIMENSIONS).cast(pl.Float64).fill_null(float("nan")).to_numpy().reshape(-1, len(DIMENSIONS))
        )
        return cls(
            name=str(about.get("name")),
            countries=tuple(table["country"].cast(pl.String).to_list()),
            values=values,
            description=str(about.get("description") or ""),
            sources=tuple(str(s) for s in about.get("sources") or ()),
        )


def load_reference(name_or_csv: str | Path) -> ReferenceSet:
    """A shipped set by name (see ``reference_names()``) or a user CSV ``country,pdi,idv,mas,uai,lto,ivr``."""
    sets = _manifest()
    key = str(name_or_csv)
    if key in sets:
        return _load_named(key)
    path = Path(name_or_csv)
    if path.is_file():
        countries, values = _read_plain(path, resolve=False)
        return ReferenceSet(
            name=str(path),
            countries=tuple(countries),
            values=values,
            description="user-supplied reference CSV",
            sources=(str(path),),
        )
    raise UnknownReferenceError(
        f"reference {key!r} is neither a shipped set ({', '.join(sorted(sets))}) nor an existing CSV file"
    )


def reference_names() -> tuple[str, ...]:
    """Names of the shipped reference sets, sorted."""
    return tuple(sorted(_manifest()))


def resolve_country(name: str) -> str:
    """Canonical country name (the 2015 matrix's spelling) for a name, alias or Hofstede code, any case."""
    table = _alias_table()
    found = table.get(_normalise(name))
    if found is None:
        raise UnknownCountryError(name, _close(name, list(canonical_countries()) + list(_alias_spellings())))
    return found


@cache
def canonical_countries() -> tuple[str, ...]:
    """Every canonical country name: the ``country`` column of Hofstede's 2015 matrix."""
    return tuple(row["country"] for row in _hofstede_rows(REFERENCE_DIR / "hofstede_6d_2015.csv"))


def _normalise(name: str) -> str:
    """Lower case without dots/apostrophes, '&' as 'and', '-'/'_' as spaces, single spaces."""
    text = name.casefold().replace("&", " and ")
    text = re.sub(r"[.'’]", "", text)
    text = re.sub(r"[-_,]", " ", text)
    return " ".join(text.split())


def _close(name: str, candidates: list[str] | tuple[str, ...]) -> list[str]:
    """Up to five candidates that look like ``name`` (difflib), case-insensitively."""
    lowered = {c.casefold(): c for c in candidates}
    matches = difflib.get_close_matches(name.casefold(), list(lowered), n=5, cutoff=0.6)
    return [lowered[m] for m in matches]


@cache
def _alias_table() -> dict[str, str]:
    """Normalised spelling → canonical name, from canonical names, Hofstede codes and the aliases file."""
    canon = set(canonical_countries())
    table: dict[str, str] = {}
    path = REFERENCE_DIR / "country_aliases.csv"

    def add(spelling: str, country: str, line: int | None) -> None:
        key = _normalise(spelling)
        if table.get(key, country) != country:
            raise InputFileError(path, line, "alias", f"{spelling!r} already means {table[key]!r}, not {country!r}")
        table[key] = country

    for row in _hofstede_rows(REFERENCE_DIR / "hofstede_6d_2015.csv"):
        add(row["country"], row["country"], None)
        add(row["ctr"], row["country"], None)
    with path.open(newline="", encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            if row["country"] not in canon:
                raise InputFileError(
                    path,
                    line,
                    "country",
                    f"{row['country']!r} is not a canonical name",
                    "a `country` of hofstede_6d_2015.csv",
                )
            add(row["alias"], row["country"], line)
    return table


@cache
def _alias_spellings() -> tuple[str, ...]:
    """The aliases as written in the aliases file, for close-match suggestions."""
    with (REFERENCE_DIR / "country_aliases.csv").open(newline="", encoding="utf-8") as fh:
        return tuple(row["alias"] for row in csv.DictReader(fh))


@cache
def _manifest() -> dict[str, dict]:
    """The ``[sets]`` table of ``sets.toml``."""
    with (REFERENCE_DIR / "sets.toml").open("rb") as fh:
        return tomllib.load(fh)["sets"]


@cache
def _load_named(name: str) -> ReferenceSet:
    """Read and overlay the files of one shipped set."""
    spec = _manifest()[name]
    merged: dict[str, np.ndarray] = {}
    for entry in spec["files"]:
        path = REFERENCE_DIR / entry["path"]
        if entry["format"] == "hofstede":
            rows = _hofstede_rows(path)
            pairs = [
                (
                    r["country"],
                    [_number(path, i + 2, _HOFSTEDE_COLUMNS[d], r[_HOFSTEDE_COLUMNS[d]]) for d in DIMENSIONS],
                )
                for i, r in enumerate(rows)
            ]
            countries, values = [p[0] for p in pairs], np.array([p[1] for p in pairs], dtype=np.float64)
        else:
            countries, values = _read_plain(path, resolve=True)
        for country, row in zip(countries, values, strict=True):
            merged[country] = row
    values = np.array(list(merged.values()), dtype=np.float64).reshape(-1, len(DIMENSIONS))
    values.setflags(write=False)
    return ReferenceSet(
        name=name,
        countries=tuple(merged),
        values=values,
        description=spec.get("description", ""),
        sources=tuple(str(REFERENCE_DIR / e["path"]) for e in spec["files"]),
    )


def _hofstede_rows(path: Path) -> list[dict[str, str]]:
    """Rows of Hofstede's ``;``-delimited matrix as dicts of strings."""
    with path.open(newline="", encoding="utf-8") as fh:
        return [{k.strip(): v.strip() for k, v in row.items()} for row in csv.DictReader(fh, delimiter=";")]


def _read_plain(path: Path, *, resolve: bool) -> tuple[list[str], np.ndarray]:
    """A ``country,pdi,…,ivr`` CSV; names resolved through aliases (shipped) or, if unknown, kept (user)."""
    text = read_csv_text(path, max_bytes=MAX_REFERENCE_BYTES, expected="a reference CSV")
    reader = csv.reader(io.StringIO(text, newline=""))
    countries: list[str] = []
    rows: list[list[float]] = []
    try:
        header = [h.strip().lower() for h in next(reader, [])]
        _check_reference_header(path, header)
        col = {name: header.index(name) for name in ("country", *DIMENSIONS)}
        seen: dict[str, int] = {}
        for line, raw in enumerate(reader, start=2):
            if not any(field.strip() for field in raw):
                continue
            if len(raw) != len(header):  # a short row would read as missing scores, a long one lose its tail
                raise InputFileError(path, line, None, f"{len(raw)} fields", f"{len(header)} fields as in the header")
            name = raw[col["country"]].strip()
            if not name:
                raise InputFileError(path, line, "country", "empty country name")
            try:
                name = resolve_country(name)
            except UnknownCountryError:
                if resolve:
                    raise
            if name in seen:
                raise InputFileError(path, line, "country", f"{name!r} already given on line {seen[name]}")
            seen[name] = line
            countries.append(name)
            rows.append([_number(path, line, d, raw[col[d]].strip()) for d in DIMENSIONS])
    except csv.Error as exc:  # a field over the csv module's limit: located, one line
        raise InputFileError(path, reader.line_num, None, f"not a readable CSV row ({exc})") from None
    return countries, np.array(rows, dtype=np.float64).reshape(-1, len(DIMENSIONS))


def _check_reference_header(path: Path, header: list[str]) -> None:
    """Every score column present, none twice (a second ``PDI`` would silently replace the first)."""
    for i, name in enumerate(header):
        if name and header.index(name) != i:
            raise InputFileError(path, 1, name, "column given twice")
    missing = [c for c in ("country", *DIMENSIONS) if c not in header]
    if missing:
        raise InputFileError(
            path, 1, missing[0], f"header {header} lacks {missing}", "columns country,pdi,idv,mas,uai,lto,ivr"
        )


def _number(path: Path, line: int, column: str, text: str) -> float:
    """A score cell as float; the missing markers (``#NULL!``, empty, NA) become NaN."""
    if text.strip().casefold() in _MISSING:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise InputFileError(
            path, line, column, f"{text!r} is not a number", "a number, or empty/#NULL!/NA for a missing score"
        ) from None
    if not math.isfinite(value):
        raise InputFileError(path, line, column, f"{text!r} is not finite", "a finite number")
    return value
