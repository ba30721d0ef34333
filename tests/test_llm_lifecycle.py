"""Starting and stopping the local llama.cpp server: clean shutdown, located errors, ``hofcat serve-llm``."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import psutil
import pytest

from runner.endpoints.llm import (
    LLMError,
    LocalLLM,
    ModelNotFoundError,
    PortInUseError,
    ServerConfig,
    ServerStartError,
    resolve_model,
)

pytestmark = [pytest.mark.llm, pytest.mark.slow]  # llm tests are slow: `-m "not slow"` skips them


def _port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers do not block a server
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _health(root_url: str) -> int:
    with urllib.request.urlopen(root_url + "/health", timeout=10) as response:
        return response.status


def test_stop_leaves_no_process_and_releases_the_port():
    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}
    threads_before = me.num_threads()
    with LocalLLM(slots=1, ctx_per_slot=512) as llm:
        child = psutil.Process(llm.pid)
        assert child.ppid() == me.pid
        port = _port_of(llm.root_url)
        assert _health(llm.root_url) == 200
        assert not _bindable(port)
        assert llm.startup_s is not None and llm.startup_s > 0
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert {c.pid for c in me.children(recursive=True)} == before
    assert _bindable(port)
    assert me.num_threads() <= threads_before  # the server's threads lived in the child only
    with pytest.raises(LLMError, match="not running"):
        llm.base_url


def test_context_manager_stops_the_server_when_the_body_raises():
    pids = []

    def serve_then_fail() -> None:
        with LocalLLM(slots=1, ctx_per_slot=512) as llm:
            pids.append(llm.pid)
            raise KeyError("boom")

    with pytest.raises(KeyError):
        serve_then_fail()
    (pid,) = pids
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_dead_child_is_reaped_by_stop():
    llm = LocalLLM(slots=1, ctx_per_slot=512).start()
    psutil.Process(llm.pid).kill()
    llm.stop()
    llm.stop()  # idempotent
    assert llm.pid is None


def test_missing_and_non_gguf_models_fail_before_any_process_starts(tmp_path):
    children = psutil.Process().children()
    with pytest.raises(ModelNotFoundError, match=r"does not exist"):
        LocalLLM(model=str(tmp_path / "absent.gguf"))
    text = tmp_path / "text.gguf"
    text.write_text("not a model")
    with pytest.raises(ModelNotFoundError, match=r"not a GGUF file"):
        LocalLLM(model=str(text))
    with pytest.raises(ModelNotFoundError, match=r"expected one of smollm2 or a path to a \.gguf file"):
        LocalLLM(model="gpt-9")
    with pytest.raises(LLMError, match=r"slots: 0 must be an integer >= 1"):
        LocalLLM(slots=0)
    assert psutil.Process().children() == children
    assert resolve_model("smollm2").name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_corrupt_gguf_reports_llama_cpp_log_tail(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x00" * 64)  # right magic, nonsense header
    with pytest.raises(ServerStartError, match=r"(?s)exited.*exit status 3.*broken\.gguf"):
        LocalLLM(model=str(broken), slots=1, start_timeout_s=60).start()
    assert psutil.Process().children() == []


def test_a_taken_port_is_named_in_the_error():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUseError, match=rf"--port {port}: 127\.0\.0\.1:{port} is already in use"):
            LocalLLM(port=port).start()
        result = subprocess.run(
            [sys.executable, "-m", "runner.cli", "serve-llm", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"--port {port}" in result.stderr and "already in use" in result.stderr


def test_config_validation_names_the_field():
    with pytest.raises(LLMError, match="ctx_per_slot: 10 must be an integer >= 64"):
        ServerConfig(ctx_per_slot=10).validated()
    with pytest.raises(LLMError, match="port: 70000 must be at most 65535"):
        ServerConfig(port=70000).validated()
    assert ServerConfig(threads=None).validated().threads >= 1


def test_serve_llm_prints_the_url_serves_and_stops_cleanly_on_sigterm():
    process = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "serve-llm", "--slots", "1", "--ctx-size", "512"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), url
        root = url.removesuffix("/v1")
        assert _health(root) == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0  # a hang is forever; the stop itself takes under a second
        assert "stopped" in process.stderr.read()
        assert _bindable(_port_of(root))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()


def test_serve_llm_stops_on_sigterm_while_a_request_is_decoding():
    """llama.cpp's own shutdown waits until a decoding request's client hangs up; Ctrl-C must not wait for it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", "serve-llm", "--slots", "1", "--ctx-size", "2048"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    outcome: dict[str, object] = {}

    def ask(url: str) -> None:
        body = {"model": "smollm2", "messages": [{"role": "user", "content": "Tell me a long story."}]}
        body |= {"max_tokens": 1500, "ignore_eos": True}  # minutes of decoding on a busy machine
        request = urllib.request.Request(
            url + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                outcome["reply"] = response.read()
        except OSError as exc:  # the connection closes under the request: what a client sees of a stop
            outcome["error"] = exc

    try:
        url = process.stdout.readline().strip()
        root = url.removesuffix("/v1")
        client = threading.Thread(target=ask, args=(url,))
        client.start()
        deadline = time.monotonic() + 120
        while not any(slot["is_processing"] for slot in json.load(urllib.request.urlopen(root + "/slots", timeout=30))):
            assert client.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0  # the old shutdown waited for the client's 600 s timeout
        assert "stopped" in process.stderr.read()
        client.join(timeout=60)
        assert not client.is_alive() and "error" in outcome and "reply" not in outcome
        assert _bindable(_port_of(root))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()
