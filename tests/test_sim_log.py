"""The server-side request log: exact replies, statuses, arrival times; over HTTP, in process and as JSONL."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from _sim_client import SCORES, chat_body, content, post, run
from runner.endpoints.sim import SimConfig, SimProcess, SimServer, SimServerThread, max_in_window, request_key
from runner.survey.cell import Framing, PromptCell

CELL = PromptCell("en", "item", (9,), Framing("persona", "Mexico"))


def test_log_records_exactly_what_was_sent(tmp_path: Path) -> None:
    log_path = tmp_path / "sim.jsonl"
    config = SimConfig(seed=4, error_rate=0.2, chatty_rate=0.3, requests_per_minute=25, log_path=log_path)

    async def go() -> tuple[list, dict, dict]:
        async with SimServer(config, scores=SCORES) as sim, aiohttp.ClientSession() as session:
            sent = []
            for seed in range(30):
                body = chat_body(CELL, seed=seed)
                sent.append((request_key(body), *(await post(session, sim.base_url, body))))
            async with session.get(f"{sim.url}/sim/log", params={"since": "10"}) as r:
                over_http = await r.json()
            async with session.get(f"{sim.url}/sim/stats") as r:
                stats = await r.json()
            return sent, over_http, stats | {"entries": json.loads(json.dumps([e.as_json() for e in sim.log]))}

    sent, over_http, stats = run(go())
    entries = stats["entries"]
    assert [e["seq"] for e in entries] == list(range(30))
    for (key, status, _, text), entry in zip(sent, entries, strict=True):
        assert entry["request_key"] == key and entry["status"] == status
        assert entry["reply"] == (content(text) if status == 200 else json.loads(text)["error"]["message"])
        assert entry["finish_reason"] == ("stop" if status == 200 else None)
    assert [e["arrival_s"] for e in entries] == sorted(e["arrival_s"] for e in entries)
    assert over_http["total"] == 30 and over_http["entries"] == entries[10:]
    assert [json.loads(line) for line in log_path.read_text().splitlines()] == entries
    assert stats["by_status"] == {
        str(k): sum(e["status"] == k for e in entries)
        for k in (200, 429, 500, 502, 503)
        if any(e["status"] == k for e in entries)
    }
    assert stats["by_status"]["429"] == 5 and stats["max_requests_in_60s"] == 30


def test_bad_query_numbers_are_refused_naming_the_parameters() -> None:
    async def go() -> list[tuple[int, str]]:
        async with SimServer(SimConfig(seed=1), scores=SCORES) as sim, aiohttp.ClientSession() as session:
            got = []
            for path, params in (
                ("/sim/log", {"limit": "ten"}),
                ("/sim/truth", {"top_p": "high"}),
                ("/sim/truth", {"temperature": "0.5", "country": "Japan"}),
            ):
                async with session.get(f"{sim.url}{path}", params=params) as r:
                    got.append((r.status, await r.text()))
            return got

    log, truth, good = run(go())
    assert log == (400, "since and limit must be integers")
    assert truth == (400, "temperature and top_p must be numbers")
    assert good[0] == 200 and json.loads(good[1])["temperature"] == 0.5 and json.loads(good[1])["top_p"] == 1.0


def test_the_in_memory_log_is_bounded() -> None:
    async def go() -> SimServer:
        async with SimServer(SimConfig(log_limit=5), scores=SCORES) as sim, aiohttp.ClientSession() as session:
            for seed in range(12):
                await post(session, sim.base_url, chat_body(CELL, seed=seed))
            return sim

    sim = run(go())
    assert [e.seq for e in sim.log.entries()] == list(range(7, 12)) and sim.log.total == 12


def brute_force_max(times: list[float], window: float) -> int:
    return max((sum(start <= t < start + window for t in times) for start in times), default=0)


@pytest.mark.parametrize("seed", range(5))
def test_max_in_window_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    times = [rng.uniform(0, 10) for _ in range(rng.randint(0, 60))] + [3.0, 3.0, 4.0]
    for window in (0.5, 1.0, 2.5):
        assert max_in_window(times, window) == brute_force_max(times, window)
    assert max_in_window([0.0, 1.0, 2.0], 1.0) == 1, "windows are half-open: [t, t + window)"


def test_thread_server_serves_a_subprocess_client() -> None:
    script = (
        "import json, sys, urllib.request\n"
        "req = urllib.request.Request(sys.argv[1] + '/chat/completions', data=sys.argv[2].encode(),"
        " headers={'Content-Type': 'application/json'})\n"
        "print(json.load(urllib.request.urlopen(req))['choices'][0]['message']['content'])\n"
    )
    with SimServerThread(SimConfig(seed=1), scores=SCORES) as sim:
        body = json.dumps(chat_body(CELL, seed=3))
        out = subprocess.run(
            [sys.executable, "-c", script, sim.base_url, body], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
        assert [e.reply for e in sim.log.entries()] == [out]
        assert sim.stats()["by_outcome"] == {"ok": 1}


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serve_sim_command_announces_its_url_and_stops_on_a_signal(stop: signal.Signals) -> None:
    with SimProcess(["--seed", "3", "--rpm", "100", "--chatty-rate", "0.5"]) as sim:
        assert sim.base_url.startswith("http://127.0.0.1:") and sim.base_url.endswith("/v1")

        async def go() -> tuple[int, dict]:
            async with aiohttp.ClientSession() as session:
                status, _, _ = await post(session, sim.base_url, chat_body(CELL, seed=1))
                async with session.get(f"{sim.url}/sim/stats") as r:
                    return status, await r.json()

        status, stats = run(go())
        assert status == 200 and stats["total"] == 1
        assert sim.stats()["total"] == 1 and [e["seq"] for e in sim.log_entries()] == [0]
        assert stats["config"]["requests_per_minute"] == 100 and stats["config"]["chatty_rate"] == 0.5
        assert sim.process is not None
        sim.process.send_signal(stop)
        assert sim.process.wait(timeout=30) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--error-rate", "2"], "error_rate"),
        (["--latency-ms", "soon"], "latency"),
        (["--reference", "nowhere"], "reference"),
    ],
)
def test_serve_sim_rejects_bad_options_by_name(args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "runner.cli", "serve-sim", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and message in result.stderr and result.stdout == ""


def test_serve_sim_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "runner.cli", "serve-sim", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--rpm" in result.stdout and "--refusal-rate" in result.stdout


@pytest.mark.slow
def test_serve_sim_reports_a_busy_port_in_one_line_with_exit_2_like_serve_llm() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "runner.cli", "serve-sim", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"hofcat serve-sim: error: --port {port}: 127.0.0.1:{port} is already in use (")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
