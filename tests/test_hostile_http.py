"""hofcat against hostile HTTP servers (tests/_hostile_server.py: raw asyncio TCP, broken bytes on purpose).

Whatever the server does at the HTTP layer, a run never exits through a traceback, never waits past its
timeouts, stores each cell once or records it as a failure with a class, never stores a reply as something it
is not (a reply nobody asked for, a body in an encoding nobody decoded), keeps bodies within the cap, and
never writes or prints the API key or any 8-character run of it.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _hostile_server import BEHAVIOURS, KEY, KEY_ENV, MIX_LEFT_OUT, RETRY_AFTERS, HostileServer
from _runner_support import check_run_dir, make_spec, spec_text
from runner.errors import RateLimited, RequestError
from runner.rundir import read_dataset
from runner.sweep.providers import ChatRequest, get_provider
from runner.sweep.retry import RetryPolicy
from runner.sweep.session import run_sweep
from runner.sweep.spec import load_spec
from runner.sweep.transport import AiohttpTransport, RawReply, decode

GRAMS = {KEY[i : i + 8] for i in range(len(KEY) - 7)}
TIMEOUT_S = 1.0

# What one request against each behaviour becomes: the reply's text, or the RequestError class raised.
EXPECTED: dict[str, str] = {
    **dict.fromkeys(
        [
            "ok",
            "length_short_smuggle",
            "close_delimited",
            "http10",
            "continue_first",
            "early_hints",
            "duplicate_content_type",
            "gzip_ok",
            "header_bytes",
            "cookie_flood",
        ],
        "reply:3",
    ),
    # closed before any byte of a reply: no server answered (counts toward the endpoint's stop; still retried)
    "close_at_once": "ConnectionFailed",
    **dict.fromkeys(
        [
            "close_mid_status",
            "close_mid_headers",
            "close_mid_body",
            "length_and_chunked",
            "two_lengths",
            "length_plus",
            "chunk_bad_hex",
            "chunk_no_crlf",
            "chunk_no_end",
            "tls_bytes",
            "ssh_banner",
            "binary",
            "status_0",
            "huge_header",
            "many_headers",
            "gzip_corrupt",
            "encoding_zstd",  # aiohttp without backports.zstd refuses it; with it, the bytes do not decompress
            "encoding_br",
            "slowloris",
            "slow_headers",
            "silent",
            "continue_forever",
            "reset_mid_reply",
            "echo_then_close",
            "redirect_slow",
        ],
        "TransportError",
    ),
    **dict.fromkeys(["chunk_past_cap", "infinite", "infinite_no_length", "length_huge"], "OversizeReply"),
    **dict.fromkeys(["encoding_unknown", "encoding_stacked", "html_200", "no_content_204"], "UnreadableBody"),
    **dict.fromkeys(["status_999", "echo_500", "echo_reason"], "ServerError"),
    **dict.fromkeys(
        [
            "status_099",
            "status_101",
            "echo_401",
            "redirect_other_port",
            "redirect_key_host",
            "redirect_self_loop",
            "redirect_garbage",
        ],
        "FatalRequestError",
    ),
    **dict.fromkeys(["echo_split", "retry_after_odd"], "RateLimited"),
    "echo_escaped": "reply:3 <redacted>",
    "echo_200": "reply:redacted",
    "length_short_late_smuggle": "reply:3",
}


def _leaks(text: str) -> list[str]:
    """The key's 8-character runs in ``text``, case-insensitively (a host name holding the key is lowercased)."""
    lower = text.lower()
    return sorted(g for g in GRAMS if g.lower() in lower)


PROVIDERS = ["openai", "anthropic", "gemini"]


def _call(base_url: str, content: str = "q", provider: str = "openai"):
    request = ChatRequest("m", [{"role": "user", "content": content}], 1, 0.0, 1.0, 8)
    return get_provider(provider).call(base_url, KEY, request)


async def _attempt(transport: AiohttpTransport, base_url: str, content: str = "q", provider: str = "openai") -> str:
    """One request: ``reply:TEXT`` or the RequestError's class name (and its message, for the leak check)."""
    call = _call(base_url, content, provider)
    try:
        reply = decode(get_provider(provider), await transport.send(call), call.secret)
    except RequestError as exc:
        return f"{type(exc).__name__}\x00{exc}"
    return f"reply:{reply.text}\x00{reply.warnings}"


def test_the_catalogue_covers_every_behaviour() -> None:
    assert sorted(EXPECTED) == sorted(BEHAVIOURS)


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_behaviour_becomes_a_reply_or_a_classified_error_within_the_timeout(provider: str) -> None:
    async def one(server: HostileServer, name: str) -> tuple[str, str, float]:
        transport = AiohttpTransport(2, TIMEOUT_S, max_reply_bytes=64 * 1024)
        t0 = time.monotonic()
        try:
            # the cap only a hang reaches (then the outcome is wait_for's TimeoutError, not the transport's)
            got = await asyncio.wait_for(_attempt(transport, server.base_url(name), provider=provider), 30 * TIMEOUT_S)
        finally:
            await asyncio.wait_for(transport.close(), 5)
        return name, got, time.monotonic() - t0

    async def main(server: HostileServer) -> list[tuple[str, str, float]]:
        return await asyncio.gather(*(one(server, name) for name in EXPECTED))

    with HostileServer() as server:
        results = asyncio.run(main(server))
    wrong = {}
    for name, got, elapsed in results:
        kind, _, detail = got.partition("\x00")
        want = EXPECTED[name]
        if want == "reply:redacted":  # the request echoed in the answer: kept, the key cut out, and said so
            ok = kind.startswith("reply:3 POST") and "<redacted>" in kind and "replaced by <redacted>" in detail
        else:
            ok = kind == want
        # the slow behaviours last minutes: a tenth of that is the timeout's doing, however busy the machine
        if not ok or _leaks(got) or elapsed > 10 * TIMEOUT_S or len(detail) > 400:
            wrong[name] = (got[:200], round(elapsed, 2), _leaks(got))
    assert not wrong, wrong
    assert server.other_received == b""  # the cross-origin redirect's target never heard from us


def test_a_stray_reply_on_an_idle_connection_is_never_taken_for_the_next_one() -> None:
    """A server that answers twice (the second reply after a pause): aiohttp parsed the stray reply on the
    pooled connection and handed it to the next request, whose cell stored another cell's answer."""

    async def main(server: HostileServer) -> list[str]:
        transport = AiohttpTransport(1, TIMEOUT_S)
        got = []
        for i in range(4):
            got.append(await _attempt(transport, server.base_url("length_short_late_smuggle"), f"q{i}"))
            await asyncio.sleep(0.2)  # the stray reply arrives while the connection waits in the pool
        await transport.close()
        return got

    with HostileServer() as server:
        got = asyncio.run(main(server))
    assert [g.partition("\x00")[0] for g in got] == ["reply:3"] * 4, got
    assert server.seen["length_short_late_smuggle"] == 4  # each request reached the server: none was pre-answered


def test_a_body_in_an_encoding_nobody_decoded_is_not_stored_as_plain(tmp_path: Path) -> None:
    """``Content-Encoding: x-foo`` (or ``gzip, gzip``) over bytes that happen to be JSON: aiohttp passes such
    bodies through undecoded, and the run stored them as if they were the plain reply."""
    design = {"personas": ["China"], "questions": [1, 2, 3], "seeds": [1], "temperature": [0.0]}
    with HostileServer() as server:
        for name in ("encoding_unknown", "encoding_stacked"):
            spec = make_spec(server.base_url(name), endpoint={"max_retries": 1, "max_concurrency": 2}, design=design)
            result = run_sweep(spec, tmp_path / name, live=False, stream=io.StringIO())
            assert (result.stored, result.failed) == (0, 3), name
            check_run_dir(tmp_path / name, spec)
            failures = read_dataset(tmp_path / name, "failures").to_pylist()
            assert {f["error_class"] for f in failures} == {"UnreadableBody"}
            assert all("which hofcat cannot decode" in f["error_message"] for f in failures)
    # each cell was tried (a retry may have met a connection the server had closed without saying so)
    assert server.seen["encoding_unknown"] >= 3 and server.seen["encoding_stacked"] >= 3


def test_a_key_echoed_in_a_2xx_answer_is_redacted_before_it_is_stored(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    design = {"personas": ["China"], "questions": [1, 2], "seeds": [1], "temperature": [0.0]}
    log = io.StringIO()
    with HostileServer() as server:
        for name in ("echo_200", "echo_escaped"):
            spec = make_spec(server.base_url(name), endpoint={"api_key_env": KEY_ENV}, design=design)
            result = run_sweep(spec, tmp_path / name, live=False, stream=log)
            assert (result.stored, result.failed) == (2, 0)
            rows = check_run_dir(tmp_path / name, spec).values()
            assert all(r["response_text"].startswith("3 ") and "<redacted>" in r["response_text"] for r in rows)
            assert all("the API key (or a run of 8+ of its characters)" in r["reply_warnings"] for r in rows)
    _assert_no_key_under(tmp_path, log.getvalue())


def test_every_odd_retry_after_is_a_wait_the_policy_can_take() -> None:
    """Each odd ``Retry-After`` / ``retry-after-ms`` on a 429: no exception, a wait of None (the policy's
    backoff), a finite non-negative number, or inf (capped by ``max_retry_wait_s``)."""

    async def main(server: HostileServer) -> list[tuple[str, object]]:
        transport = AiohttpTransport(4, TIMEOUT_S)
        out = []
        for i, header in enumerate(RETRY_AFTERS):
            call = _call(server.base_url("retry_after_odd").replace("/v1", f"/{i}/v1"))
            try:
                decode(get_provider("openai"), await transport.send(call), call.secret)
            except RateLimited as exc:
                out.append((header, exc.retry_after_s))
        await transport.close()
        return out

    with HostileServer() as server:
        waits = asyncio.run(main(server))
    assert len(waits) == len(RETRY_AFTERS)
    odd = [(h, w) for h, w in waits if not (w is None or (isinstance(w, float) and w >= 0))]
    assert not odd, odd
    assert RetryPolicy(max_retry_wait_s=0.5).server_wait_s(max(w or 0.0 for _, w in waits)) == 0.5


@pytest.mark.slow
def test_a_long_2xx_reply_made_of_key_pieces_is_redacted_in_linear_time() -> None:
    """4 MB of 20-character pieces of the key in a 200's text: none of its 8-runs is left, in well under a
    second (the scan was one Python step per character, and rebuilt the text once per run it masked)."""
    text = " ".join(KEY[i % 16 : i % 16 + 20] for i in range(200_000))
    body = json.dumps({"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}).encode()
    t0 = time.process_time()  # CPU seconds: other work on a busy machine does not count
    reply = decode(get_provider("openai"), RawReply(200, body), KEY)
    elapsed = time.process_time() - t0
    assert not _leaks(reply.text) and reply.text.startswith("<redacted>")
    assert elapsed < 2.0, elapsed  # ~0.2 s here, minutes when quadratic; a generous bound, not a timing claim


_RSS_SCRIPT = """
import asyncio, resource, sys
sys.path.insert(0, sys.argv[1])
from _hostile_server import HostileServer, KEY
from runner.errors import RequestError
from runner.sweep.providers import ChatRequest, get_provider
from runner.sweep.transport import AiohttpTransport

NAMES = ["infinite", "infinite_no_length", "chunk_past_cap", "length_huge", "huge_header", "many_headers"]

async def main(server):
    transport = AiohttpTransport(4, 5.0, max_reply_bytes=1 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for round_ in range(5):
        calls = [
            get_provider("openai").call(
                server.base_url(name), KEY, ChatRequest("m", [{"role": "user", "content": str(round_)}], 1, 0.0, 1.0, 8)
            )
            for name in NAMES
        ]
        for call in calls:
            try:
                await transport.send(call)
            except RequestError:
                pass
    await transport.close()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024

with HostileServer() as server:
    print(asyncio.run(main(server)))
"""


@pytest.mark.slow
def test_endless_bodies_and_huge_headers_do_not_grow_memory_past_the_cap() -> None:
    """30 replies that never end or carry megabytes of headers, read with a 1 MiB cap: peak RSS grows by a few
    MiB (the server, in the same process, streams as fast as the client reads)."""
    done = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, str(Path(__file__).parent)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) < 48, done.stdout


def test_redirects_share_the_attempt_timeout() -> None:
    """Five same-origin redirects of 0.6 s each took 3.6 s with a 1 s timeout: each hop had its own."""

    async def main(server: HostileServer) -> tuple[str, float]:
        transport = AiohttpTransport(1, TIMEOUT_S)
        t0 = time.monotonic()
        got = await _attempt(transport, server.base_url("redirect_slow"))
        elapsed = time.monotonic() - t0
        await transport.close()
        return got, elapsed

    with HostileServer() as server:
        got, elapsed = asyncio.run(main(server))
    # per-hop timeouts let the chain run on, 0.6 s a hop; the shared timeout ends it after about one second
    assert got.startswith("TransportError\x00timed out") and elapsed < 5 * 0.6, (got, elapsed)


def test_cookies_are_neither_kept_nor_sent_back() -> None:
    """A server setting 100 new 4 KB cookies per reply: aiohttp kept them all and sent them back each call."""

    async def main(server: HostileServer) -> list[str]:
        transport = AiohttpTransport(1, 5.0)
        url = server.base_url("cookie_flood").replace("127.0.0.1", "localhost")  # IP hosts get no cookies at all
        got = [await _attempt(transport, url, f"q{i}") for i in range(4)]
        await transport.close()
        return got

    with HostileServer() as server:
        got = asyncio.run(main(server))
    assert [g.partition("\x00")[0] for g in got] == ["reply:3"] * 4
    assert server.cookies_received == 0


def test_a_transport_failure_message_is_short_and_redacted() -> None:
    """A reply cut off mid headers: aiohttp's message is the repr of every header received (the key echoed
    among them, 3 KB here); the stored message is one short, redacted line."""

    async def main(server: HostileServer) -> str:
        transport = AiohttpTransport(1, TIMEOUT_S)
        got = await _attempt(transport, server.base_url("echo_then_close"))
        await transport.close()
        return got

    with HostileServer() as server:
        got = asyncio.run(main(server))
    kind, _, message = got.partition("\x00")
    assert kind == "TransportError" and message == "the server closed the connection before a complete reply"


def _assert_no_key_under(root: Path, *texts: str) -> None:
    """No 8-character run of the key in any file under ``root`` (bytes) nor in ``texts``."""
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes().lower()
            found = [g for g in GRAMS if g.lower().encode() in data]
            assert not found, (path, found)
    for text in texts:
        assert not _leaks(text), _leaks(text)


def _hofcat(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, KEY_ENV: KEY},
        timeout=240,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("provider", "model", "personas", "seed"),
    [
        ("openai", "sim-1", ["United States", "China"], 11),
        ("anthropic", "c-1", ["China"], 12),
        ("gemini", "g-1", ["China"], 13),
    ],
)
def test_a_seeded_mix_of_every_behaviour_through_hofcat_run(
    tmp_path: Path, provider: str, model: str, personas: list[str], seed: int
) -> None:
    """24 questions x personas x 2 seeds at concurrency 4 against a server mixing every behaviour (about one
    attempt in two misbehaves), for each provider's API and credential header."""
    planned = 48 * len(personas)
    with HostileServer(seed=seed) as server:
        spec = tmp_path / "spec.toml"
        spec.write_text(
            spec_text(
                server.base_url("mix"),
                run={"batch_rows": 20, "determinism_probe": True},  # the probe meets the mix too
                endpoint={
                    "provider": provider,
                    "model": model,
                    "api_key_env": KEY_ENV,
                    "max_concurrency": 4,
                    "timeout_s": TIMEOUT_S,
                    "max_retries": 2,
                    "max_reply_bytes": 64 * 1024,
                    "max_retry_wait_s": 0.5,
                    "stop_after_fatal": 1000,  # echoed 401s in the mix are failures, not an endpoint stop
                },
                design={
                    "personas": personas,
                    "questions": list(range(1, 25)),
                    "seeds": [1, 2],
                    "temperature": [0.0],
                },
            )
        )
        out = tmp_path / "run"
        t0 = time.monotonic()
        done = _hofcat("run", str(spec), "--out", str(out), "--log-every", "0.5")
        elapsed = time.monotonic() - t0
        again = _hofcat("run", str(spec), "--out", str(out))  # a resume: nothing new is sent or stored
    status = _hofcat("status", str(out), "--json")
    outputs = (done.stdout, done.stderr, again.stdout, again.stderr, status.stdout, status.stderr)
    assert done.returncode in (0, 3) and again.returncode == done.returncode, done.stderr[-2000:]
    assert not any("Traceback" in text for text in outputs), done.stderr[-2000:]
    # 96 cells x 3 attempts x 1 s is the worst a timeout-bound run could take at concurrency 4 (72 s), and
    # waits are capped at 0.5 s: anything near that bound means a timeout was not honoured
    assert elapsed < 60, elapsed
    used = {name for name, n in server.seen.items() if n}
    assert len(used) >= 25 and not used & set(MIX_LEFT_OUT), sorted(used)  # the mix did mix
    report = json.loads(status.stdout)
    assert (report["planned"], report["remaining"]) == (planned, 0)
    assert report["done"] + report["failed"] == planned and report["done"] >= planned // 2, report
    rows = check_run_dir(out, load_spec(spec))  # each planned cell stored once or failed
    assert len(rows) == report["done"]
    for row in rows.values():  # every stored answer is what a healthy reply said, or it with the key cut out
        text = row["response_text"]
        assert text == "3" or (text.startswith("3 ") and "<redacted>" in text), text[:200]
    failures = read_dataset(out, "failures").to_pylist()
    assert failures and all(f["error_class"] and f["error_message"] for f in failures)
    assert {f["cell_key"] for f in failures}.isdisjoint(rows)
    assert server.other_received == b""
    _assert_no_key_under(out, *outputs)
