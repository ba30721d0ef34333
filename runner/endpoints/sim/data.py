"""The simulator's inputs from hofcat's data: a reference set's country scores and the prompt reader."""

from __future__ import annotations

import math
from functools import lru_cache

from runner.endpoints.sim.reader import TemplateReader
from runner.endpoints.sim.respondent import CountryScores
from runner.errors import SimDataError


def load_scores(reference: str) -> CountryScores:
    """Country scores of the named reference set (or CSV path), with the set's alias resolution."""
    from runner.errors import UnknownCountryError, UnknownReferenceError
    from runner.survey.reference import DIMENSIONS, load_reference

    try:
        ref = load_reference(reference)
    except UnknownReferenceError as exc:
        raise SimDataError(f"sim --reference: {exc}") from None
    table = {
        country: {dim: (None if math.isnan(v) else float(v)) for dim, v in zip(DIMENSIONS, row, strict=True)}
        for country, row in zip(ref.countries, ref.values, strict=True)
    }

    def resolve(name: str) -> str | None:
        try:
            return ref.resolve(name)
        except UnknownCountryError:
            return None

    return CountryScores(ref.name, table, resolve)


@lru_cache(maxsize=1)
def load_reader() -> TemplateReader:
    """The prompt reader for every instrument language (built once per process)."""
    return TemplateReader()
