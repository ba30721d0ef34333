"""Errors raised by the simulated endpoint (errors inside a request become HTTP responses, not exceptions).

    SimError
    ├── SimConfigError        a knob has a value outside what is allowed (names the knob and the range)
    └── SimDataError          the instrument or reference data the simulator needs is missing or unusable
"""

from __future__ import annotations


class SimError(Exception):
    """Base class of every error the simulator raises."""


class SimConfigError(SimError, ValueError):
    """A configuration value is not allowed."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        super().__init__(f"sim config {key}={value!r}: expected {allowed}")
        self.key = key
        self.value = value
        self.allowed = allowed


class SimDataError(SimError):
    """The data the simulator reads (instrument, templates, reference) is missing or malformed."""
