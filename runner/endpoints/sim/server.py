"""Running the simulated endpoint: in the current event loop, in a background thread, or as a subprocess.

async with SimServer(SimConfig(seed=1)) as sim:      # a free 127.0.0.1 port
    ... sim.base_url ...                             # "http://127.0.0.1:PORT/v1"
with SimServerThread(config) as sim: ...             # same, serving from its own thread and loop
with SimProcess(["--rpm", "600"]) as sim: ...        # `hofcat serve-sim` in a child process
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from aiohttp import web

from runner.endpoints.sim.app import PromptReader, SimApp
from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.log import RequestLog
from runner.endpoints.sim.respondent import AnswerModel, Scores
from runner.process import child_env, python_command


def build_sim_app(config: SimConfig, scores: Scores | None = None, reader: PromptReader | None = None) -> SimApp:
    """A SimApp whose scores and prompt reader come from hofcat's data unless given."""
    from runner.endpoints.sim.data import load_reader, load_scores

    model = AnswerModel(
        load_scores(config.reference) if scores is None else scores, signal=config.signal, spread=config.spread
    )
    return SimApp(config, model, load_reader() if reader is None else reader)


class SimServer:
    """The simulated endpoint serving from the running event loop on ``host``:``port`` (0 = a free port)."""

    def __init__(
        self,
        config: SimConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        scores: Scores | None = None,
        reader: PromptReader | None = None,
    ) -> None:
        self.config = config or SimConfig()
        self.host = host
        self.port = port
        self.sim = build_sim_app(self.config, scores, reader)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """Root URL, e.g. ``http://127.0.0.1:8011`` (``/health``, ``/sim/log`` live here)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients use, e.g. ``http://127.0.0.1:8011/v1``."""
        return f"{self.url}/v1"

    @property
    def log(self) -> RequestLog:
        """The server-side request log."""
        return self.sim.log

    def stats(self) -> dict[str, Any]:
        """Same as GET /sim/stats."""
        return self.sim.stats()

    async def start(self) -> None:
        """Bind the socket and start serving."""
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self._runner = web.AppRunner(
            self.sim.application(),
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=1.0,
        )
        await self._runner.setup()
        await web.SockSite(self._runner, sock, backlog=1024).start()

    async def close(self) -> None:
        """Stop serving: hanging requests end at once, the log file is closed."""
        self.sim.closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.sim.log.close()

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SimServerThread:
    """A SimServer in a daemon thread with its own event loop, for synchronous tests and subprocess clients."""

    def __init__(self, config: SimConfig | None = None, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._server = SimServer(config, **kwargs)
        self._thread = threading.Thread(target=self._loop.run_forever, name="hofcat-sim", daemon=True)

    @property
    def server(self) -> SimServer:
        """The SimServer (read its log and stats from any thread)."""
        return self._server

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return self._server.base_url

    @property
    def url(self) -> str:
        """Root URL of the server."""
        return self._server.url

    @property
    def log(self) -> RequestLog:
        """The server-side request log."""
        return self._server.log

    def stats(self) -> dict[str, Any]:
        """Same as GET /sim/stats."""
        return self._server.stats()

    def start(self) -> None:
        """Start the thread and wait until the server listens."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._server.start(), self._loop).result(timeout=30)

    def close(self) -> None:
        """Stop the server and the thread."""
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._server.close(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()

    def __enter__(self) -> SimServerThread:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class SimProcess:
    """``hofcat serve-sim ARGS --port 0`` in a child process; ``base_url`` is read from its first output line."""

    def __init__(self, args: Sequence[str] = ()) -> None:
        self.args = list(args)
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self) -> None:
        """Start the child and wait for the line announcing its base URL."""
        command = python_command("-m", "runner.cli", "serve-sim", "--port", "0", *self.args)
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=child_env())
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait(timeout=30)
            raise RuntimeError(f"hofcat serve-sim exited with status {code} before announcing its URL")
        self.base_url = line.strip()

    @property
    def url(self) -> str:
        """Root URL of the server."""
        return self.base_url.removesuffix("/v1")

    def log_entries(self, since: int = 0) -> list[dict[str, Any]]:
        """The child's in-memory log entries with seq >= ``since`` (GET /sim/log), as JSON dicts."""
        return self._get(f"/sim/log?since={since}")["entries"]

    def stats(self) -> dict[str, Any]:
        """The child's GET /sim/stats."""
        return self._get("/sim/stats")

    def _get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + path, timeout=60) as response:
            return json.loads(response.read())

    def close(self) -> None:
        """SIGTERM the child and wait for it to exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> SimProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
