"""Errors raised by hofcat's runner for bad input, each naming where the problem is.

    HofcatError
    └── InputError (ValueError)          a user-supplied value is invalid; the message says what was allowed
        ├── UnknownCountryError          a country name no alias resolves; lists close matches
        ├── UnknownReferenceError        a reference set name that is neither shipped nor a readable CSV
        └── InputFileError               a bad row/field in an input file: file, line, column, expected
"""

from __future__ import annotations

from pathlib import Path


class HofcatError(Exception):
    """Base class of every error hofcat raises on purpose."""


class InputError(HofcatError, ValueError):
    """A value given by the user is invalid; the message names it and what was allowed."""


class UnknownCountryError(InputError):
    """A country name that neither a canonical name nor an alias matches."""

    def __init__(self, name: str, close: list[str], where: str = "") -> None:
        self.name = name
        self.close = close
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        super().__init__(f"unknown country {name!r}{where}{hint}")


class UnknownReferenceError(InputError):
    """A reference name that is neither a shipped set nor an existing CSV file."""


class InputFileError(InputError):
    """A problem at one place in an input file: ``path:line: column 'col': problem (expected …)``."""

    def __init__(
        self, path: str | Path, line: int | None, column: str | None, problem: str, expected: str = ""
    ) -> None:
        self.path = str(path)
        self.line = line
        self.column = column
        where = self.path + (f":{line}" if line is not None else "")
        col = f" column {column!r}:" if column else ""
        exp = f" (expected {expected})" if expected else ""
        super().__init__(f"{where}:{col} {problem}{exp}")
