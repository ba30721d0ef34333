"""Errors raised by stats_core.

StatsCoreError
├── InvalidInputError (ValueError)      an argument has the wrong shape, dtype or values
└── BackendUnavailableError (ImportError)  a requested backend cannot be loaded
"""

from __future__ import annotations


class StatsCoreError(Exception):
    """Base class of every stats_core error."""


class InvalidInputError(StatsCoreError, ValueError):
    """An argument is invalid; the message names the argument and the offending value."""

    def __init__(self, argument: str, problem: str) -> None:
        self.argument = argument
        super().__init__(f"{argument}: {problem}")


class BackendUnavailableError(StatsCoreError, ImportError):
    """A backend was requested (or preferred) but cannot be imported."""
