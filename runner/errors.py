"""Every error hofcat raises on purpose, under one root, each naming where the problem is.

CLI commands catch ``HofcatError`` and exit with status 2 and its one-line message. The tree (stdlib bases
in parentheses)::

    HofcatError
    ├── InputError (ValueError)          a user-supplied value is invalid; the message says what was allowed
    │   ├── UnknownCountryError          a country name no alias resolves; lists close matches
    │   ├── UnknownReferenceError        a reference set name that is neither shipped nor a readable CSV
    │   ├── InputFileError               a bad row/field in an input file: file, line, column, expected
    │   ├── InstrumentError              an instrument file is missing or malformed (names file and key)
    │   ├── PromptError                  a cell cannot be rendered, or a prompt template is bad
    │   └── PolicyError                  a scoring policy field has a value outside its allowed set
    ├── RunnerError                      the sweep runner (spec, plan, run directory, requests)
    │   ├── SpecError (ValueError)       a spec key has a bad value (names file, key, value and what is allowed)
    │   ├── RunDirError                  a run directory is missing, locked, or was made by another spec
    │   ├── Interrupted                  the run is stopping (Ctrl-C); the cell is left for the next run
    │   └── RequestError                 one request attempt failed (status, retry_after_s, redacted message)
    │       ├── RetryableError           worth another attempt under the retry policy
    │       │   ├── RateLimited          HTTP 429
    │       │   ├── ServerError          HTTP 408 or 5xx
    │       │   ├── TransportError       no usable HTTP reply: refused, reset, closed early, malformed, timeout
    │       │   │   └── ConnectionFailed no server reached: refused, DNS, TLS, reset before any reply (the
    │       │   │                        endpoint, not the cell: a streak stops the endpoint, as 401/403/404)
    │       │   ├── UnreadableBody       a 2xx reply that is not the provider's JSON shape
    │       │   └── BatchRequestFailed   a request inside a provider batch got no reply (failed, expired, …)
    │       └── FatalRequestError        any other 4xx: retrying cannot help (bad model name, bad key, ...)
    │           └── OversizeReply        a reply body past the endpoint's max_reply_bytes (not read further)
    ├── SimError                         the simulated endpoint (faults inside a request become HTTP replies)
    │   ├── SimConfigError (ValueError)  a knob has a value outside what is allowed (names the knob and range)
    │   ├── SimDataError                 the instrument or reference data the simulator needs is unusable
    │   └── BadRequest                   a request body the simulator rejects; answered with HTTP 400
    ├── LLMError (RuntimeError)          the local llama.cpp server
    │   ├── ModelNotFoundError           --model is neither a known model name nor an existing .gguf file
    │   ├── PortInUseError               --port is already bound on the host
    │   ├── ServerStartError             the server exited or did not answer /health in time (log tail)
    │   └── NotInstalledError            llama.cpp's server or a model is not installed (names the pip command)
    ├── ProbeError (RuntimeError)        every request of a determinism probe failed
    └── UsageError (RuntimeError)        a Python API call made where it cannot work (e.g. inside a running loop)
"""

from __future__ import annotations

from pathlib import Path


class HofcatError(Exception):
    """Base class of every error hofcat raises on purpose."""


# --- bad input -------------------------------------------------------------------------------------------


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


class InstrumentError(InputError):
    """An instrument file is missing or malformed; the message names the file and the key."""


class PromptError(InputError):
    """A cell cannot be rendered (unknown language, country, reply format, bad order) or a template is bad."""


class PolicyError(InputError):
    """A policy field has a value outside its allowed set."""


# --- sweep runner ----------------------------------------------------------------------------------------


class RunnerError(HofcatError):
    """Base of every error the sweep runner raises on purpose."""


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
    """No usable response: connection refused, reset or closed early, a reply that is not valid HTTP (framing,
    lengths, chunks, encoding), or the attempt timed out."""


class ConnectionFailed(TransportError):
    """No server was reached, or it dropped the connection before replying: refused, DNS failure, TLS failure,
    reset before any byte of a reply. Says the endpoint is wrong or down, not the request."""


class UnreadableBody(RetryableError):
    """A successful status with a body that is not the provider's JSON reply shape."""


class BatchRequestFailed(RetryableError):
    """A request inside a provider batch that got no reply (failed, expired or cancelled in the batch)."""


class FatalRequestError(RequestError):
    """A 4xx other than 408 and 429: the request itself is wrong and retrying cannot help."""


class OversizeReply(FatalRequestError):
    """A reply whose decoded body exceeds the endpoint's ``max_reply_bytes``: reading stopped at the cap."""


# --- simulated endpoint ----------------------------------------------------------------------------------


class SimError(HofcatError):
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


class BadRequest(SimError):
    """The body is not a chat-completions request the simulator accepts (answered with HTTP 400)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


# --- local LLM server and probe --------------------------------------------------------------------------


class LLMError(HofcatError, RuntimeError):
    """Base of the local LLM server's errors."""


class ModelNotFoundError(LLMError):
    """The model name or path does not lead to a GGUF file."""


class PortInUseError(LLMError):
    """The requested port is already bound."""


class ServerStartError(LLMError):
    """The server process exited or did not become healthy."""


class NotInstalledError(LLMError):
    """An optional part hofcat does not install by default is missing; the message names the install command."""


class ProbeError(HofcatError, RuntimeError):
    """Every request of the probe failed (the endpoint is unreachable or rejects the request)."""


class UsageError(HofcatError, RuntimeError):
    """A Python API function called where it cannot work; the message names the call to use instead."""
