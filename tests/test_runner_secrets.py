"""API keys never reach the run directory or the logs, even when a server echoes them back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from _runner_support import spec_text
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset
from test_runner_providers import ShapeServer

KEY = "sk-planted-4f2b9c1e7d3a"


class EchoingServer(ShapeServer):
    """Rejects every request with a 401 whose body quotes the Authorization header it received."""

    async def _handle(self, request: web.Request) -> web.Response:
        return web.json_response({"error": f"invalid key: {request.headers.get('Authorization')}"}, status=401)


def _run(spec: Path, out: Path, key: str = KEY) -> subprocess.CompletedProcess:
    """``hofcat run SPEC --out OUT`` in a child process, with ``key`` in the spec's key variable."""
    env = {**os.environ, "HOFCAT_PLANTED_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(spec), "--out", str(out), "--log-every", "0.2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _assert_no_key(out: Path, *logs: str) -> None:
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert KEY.encode() not in path.read_bytes(), path
    for log in logs:
        assert KEY not in log


@pytest.mark.slow
def test_planted_key_is_in_no_file_and_no_log(tmp_path: Path) -> None:
    with SimServerThread(SimConfig(seed=9, error_rate=0.08, malformed_rate=0.04, refusal_rate=0.1)) as sim:
        spec = tmp_path / "spec.toml"
        spec.write_text(spec_text(sim.base_url, endpoint={"api_key_env": "HOFCAT_PLANTED_KEY"}))
        done = _run(spec, tmp_path / "run")
    # 0, or 3 when some cell exhausted its retries against the faulty simulator
    failed = read_dataset(tmp_path / "run", "failures").num_rows
    assert done.returncode == (3 if failed else 0), done.stderr
    assert "hofcat:" in done.stderr  # progress lines were logged (and checked below)
    _assert_no_key(tmp_path / "run", done.stdout, done.stderr)
    assert "HOFCAT_PLANTED_KEY" in (tmp_path / "run" / "manifest.json").read_text()  # the name, not the key


@pytest.mark.slow
def test_a_key_echoed_in_an_error_body_is_redacted(tmp_path: Path) -> None:
    with EchoingServer("openai") as server:
        spec = tmp_path / "spec.toml"
        spec.write_text(
            spec_text(
                server.base_url,
                endpoint={"api_key_env": "HOFCAT_PLANTED_KEY"},
                design={"personas": ["China"], "questions": [1, 2], "seeds": [1], "temperature": [0.0]},
            )
        )
        done = _run(spec, tmp_path / "run")
    assert done.returncode == 3 and "2 cells failed for good" in done.stderr, done.stderr
    failures = read_dataset(tmp_path / "run", "failures").to_pylist()
    assert len(failures) == 2
    # resuming without --retry-failed leaves them failed: still not a clean exit
    again = _run(spec, tmp_path / "run")
    assert again.returncode == 3 and "2 cells failed for good" in again.stderr, again.stderr and all(
        f["error_class"] == "FatalRequestError" for f in failures
    )
    assert all(f["attempts"] == 1 and f["http_status"] == 401 for f in failures)  # a 401 is not retried
    assert all("Bearer <redacted>" in f["error_message"] for f in failures)
    _assert_no_key(tmp_path / "run", done.stdout, done.stderr)


@pytest.mark.slow
def test_missing_key_variable_is_a_spec_error_naming_the_variable(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text("http://127.0.0.1:9/v1", endpoint={"api_key_env": "HOFCAT_UNSET_VARIABLE_X"}))
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "run", str(spec), "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "api_key_env = 'HOFCAT_UNSET_VARIABLE_X'" in done.stderr and not (tmp_path / "run").exists()


@pytest.mark.parametrize("key", ["sk-abc123\n", "sk-abc\r\n123", " sk-abc123", "sk-abc\t123", "sk-abc\x7f123"])
def test_a_key_that_cannot_go_in_a_header_is_a_spec_error_that_never_shows_it(key: str, monkeypatch) -> None:
    from runner.errors import SpecError
    from runner.sweep.request import api_key_for
    from runner.sweep.spec import parse_spec

    monkeypatch.setenv("HOFCAT_TEST_PASTED_KEY", key)
    spec = parse_spec(spec_text("http://127.0.0.1:9/v1", endpoint={"api_key_env": "HOFCAT_TEST_PASTED_KEY"}))
    with pytest.raises(SpecError, match=r"HOFCAT_TEST_PASTED_KEY.*control character") as raised:
        api_key_for(spec.endpoints[0])
    assert "abc" not in str(raised.value)  # no piece of the key in the message
    monkeypatch.setenv("HOFCAT_TEST_PASTED_KEY", key.strip().replace("\r\n", "").replace("\t", "").replace("\x7f", ""))
    assert api_key_for(spec.endpoints[0]) == "sk-abc123"  # the same key pasted cleanly is taken as it is


# A 36-character key, as OpenAI's project keys look: long enough that a 300-character cut used to keep 21-30
# of its characters, and a server may echo any piece of it.
LONG_KEY = "sk-proj-7Hq2Lw9Zt4Xb8Nc3Vm6Rk1Jp5Yd0Ue"


def _assert_no_piece_of(key: str, out: Path, *logs: str) -> None:
    """Neither ``key`` nor any 8-character run of it in any file under ``out`` nor in ``logs``."""
    pieces = {key[i : i + 8] for i in range(len(key) - 7)}
    texts = [p.read_bytes().decode("utf-8", "replace") for p in out.rglob("*") if p.is_file()] + list(logs)
    assert texts
    for text in texts:
        found = [piece for piece in pieces if piece in text]
        assert not found, found


class PieceEchoingServer(ShapeServer):
    """Fails each request (400, or 500 then 400) with a body that quotes pieces of the key it got."""

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append({"path": request.path})
        key = request.headers.get("x-api-key", "")
        n = len(self.requests)
        bodies = [
            "x" * 280 + f" your key {key} is invalid",  # the key straddles the 300-character cut
            f"key ending ...{key[-16:]} rejected; prefix {key[:12]} unknown",  # a split, truncated echo
            json.dumps({"error": {"message": f"bad key {key[3:30]}", "type": "authentication_error"}}),
        ]
        return web.Response(status=500 if n % 4 == 0 else 400, text=bodies[n % 3], content_type="application/json")


@pytest.mark.slow
def test_no_8_character_piece_of_a_key_survives_an_echo(tmp_path: Path) -> None:
    with PieceEchoingServer("anthropic") as server:
        spec = tmp_path / "spec.toml"
        spec.write_text(
            spec_text(
                server.base_url,
                endpoint={"provider": "anthropic", "api_key_env": "HOFCAT_PLANTED_KEY", "max_retries": 1},
                design={"personas": ["China"], "questions": [1, 2, 3, 4, 5, 6], "temperature": [0.0]},
            )
        )
        done = _run(spec, tmp_path / "run", LONG_KEY)
    assert done.returncode in (3, 4) and "Traceback" not in done.stderr, done.stderr
    failures = read_dataset(tmp_path / "run", "failures").to_pylist()
    assert failures and all("<redacted>" in f["error_message"] for f in failures)
    _assert_no_piece_of(LONG_KEY, tmp_path / "run", done.stdout, done.stderr)


class RedirectingServer(ShapeServer):
    """Answers requests under /v1 with a 307 to ``target`` + the same path under /v2; others in its shape."""

    target = ""

    async def _handle(self, request: web.Request) -> web.Response:
        if request.path.startswith("/v1/"):
            self.requests.append({"path": request.path, "headers": dict(request.headers), "body": None})
            location = self.target + "/v2/" + request.path[len("/v1/") :]
            return web.Response(status=307, headers={"Location": location})
        return await super()._handle(request)


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai"])
def test_a_redirect_to_another_origin_never_carries_the_key(provider: str, tmp_path: Path) -> None:
    design = {"personas": ["China"], "questions": [1, 2], "seeds": [1], "temperature": [0.0]}
    endpoint = {"provider": provider, "api_key_env": "HOFCAT_PLANTED_KEY", "max_concurrency": 1}
    with ShapeServer(provider) as elsewhere, RedirectingServer(provider) as server:
        server.target = elsewhere.base_url.removesuffix("/v1")  # same host, another port: another origin
        spec = tmp_path / "spec.toml"
        spec.write_text(spec_text(server.base_url, endpoint=endpoint, design=design))
        done = _run(spec, tmp_path / "run", LONG_KEY)
        server.target = ""  # a relative Location: the same origin, followed with the same POST
        same = tmp_path / "same.toml"
        same.write_text(spec_text(server.base_url, endpoint=endpoint, design=design))
        again = _run(same, tmp_path / "same", LONG_KEY)
    assert elsewhere.requests == []  # nothing, let alone the key, reached the other origin
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    failures = read_dataset(tmp_path / "run", "failures").to_pylist()
    assert [f["error_class"] for f in failures] == ["FatalRequestError"] * 2
    assert all("redirect to another origin" in f["error_message"] and f["attempts"] == 1 for f in failures)
    assert again.returncode == 0, again.stderr
    followed = [r for r in server.requests if r["path"].startswith("/v2/")]
    assert len(followed) >= 2 and all(r["body"]["messages" if provider != "gemini" else "contents"] for r in followed)
    _assert_no_piece_of(LONG_KEY, tmp_path / "run", done.stdout, done.stderr)


@pytest.mark.slow
@pytest.mark.parametrize(
    "base_url",
    [
        f"http://127.0.0.1:9/v1?key={LONG_KEY}",
        f"http://me:{LONG_KEY}@127.0.0.1:9/v1",
        f"http://127.0.0.1:9/v1#{LONG_KEY}",
    ],
)
def test_a_key_written_into_base_url_is_refused_without_echoing_it(base_url: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(base_url))
    done = _run(spec, tmp_path / "run", LONG_KEY)
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    (line,) = done.stderr.strip().splitlines()
    assert "base_url = 'http://127.0.0.1:9/v1<hidden>': must be a URL without user:password@" in line, line
    pieces = {LONG_KEY[i : i + 8] for i in range(len(LONG_KEY) - 7)}
    assert not [p for p in pieces if p in done.stderr + done.stdout]
