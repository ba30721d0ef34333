"""Errors of the sweep runner (spec, plan, run directory, requests).

    RunnerError
    ├── SpecError              a spec key has a bad value (names file, key, value and what is allowed)
    ├── RunDirError            a run directory is missing, locked, or was made by another spec
    ├── Interrupted            the run is stopping (Ctrl-C); the cell is left for the next run
    └── RequestError           one request attempt failed (status, retry_after_s, redacted message)
        ├── RetryableError     worth another attempt under the retry policy
        │   ├── RateLimited    HTTP 429
        │   ├── ServerError    HTTP 408 or 5xx
        │   ├── TransportError connection refused/reset, timeout
        │   └── UnreadableBody a 2xx reply that is not the provider's JSON shape
        └── FatalRequestError  any other 4xx: retrying cannot help (bad model name, bad key, ...)
"""

from __future__ import annotations


class RunnerError(Exception):
    """Base of every error the runner raises on purpose."""


class SpecError(RunnerError, ValueError):
    """A spec key has a bad value; the message names the file, the key, the value and what is allowed."""


class RunDirError(RunnerError):
    """A run directory cannot be used (locked by another run, made by a different spec, unreadable)."""


class Interrupted(RunnerError):
    """The run is stopping: the cell in hand is dropped unstored so that the next run does it."""


class RequestError(RunnerError):
    """One request attempt failed; ``status`` is the HTTP status (None without a response)."""

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s  # seconds the server asked us to wait, when it said so


class RetryableError(RequestError):
    """An attempt failure that another attempt may cure."""


class RateLimited(RetryableError):
    """HTTP 429: the endpoint's rate limit was hit."""


class ServerError(RetryableError):
    """HTTP 408 or 5xx."""


class TransportError(RetryableError):
    """No usable response: connection refused or reset, or the attempt timed out."""


class UnreadableBody(RetryableError):
    """A successful status with a body that is not the provider's JSON reply shape."""


class FatalRequestError(RequestError):
    """A 4xx other than 408 and 429: the request itself is wrong and retrying cannot help."""
