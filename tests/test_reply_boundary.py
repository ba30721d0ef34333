"""The reply boundary against real loopback servers: odd but possible 200 replies are stored (with warnings)
or recorded as failures with a useful class, never a traceback; bodies are bounded; providers' wire details."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from _runner_support import check_run_dir, make_spec, spec_text
from runner.errors import SpecError
from runner.rundir import read_dataset
from runner.sweep.providers import ChatRequest, get_provider
from runner.sweep.session import run_sweep
from runner.sweep.spec import parse_spec
from test_runner_providers import ShapeServer

Respond = Callable[[int, dict[str, Any]], web.Response]


class ScriptedServer(ShapeServer):
    """A loopback server whose n-th request (1 first) is answered by ``respond(n, body)``; records requests."""

    def __init__(self, respond: Respond, provider: str = "openai") -> None:
        super().__init__(provider)
        self.respond = respond

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append({"path": request.path, "headers": dict(request.headers), "body": body})
        return self.respond(len(self.requests), body)


def _raw(text: str, status: int = 200, **headers: str) -> web.Response:
    return web.Response(status=status, body=text.encode(), headers={"Content-Type": "application/json", **headers})


def _completion(content: Any = "3", finish: Any = "stop", usage: Any = None) -> str:
    usage = {"prompt_tokens": 20, "completion_tokens": 1} if usage is None else usage
    choice = {"message": {"role": "assistant", "content": content}, "finish_reason": finish}
    return json.dumps({"choices": [choice], "usage": usage})


# Each odd reply, keyed by what the stored row must show: (body text, expected kind).
ODD_REPLIES: list[tuple[str, str]] = [
    (_completion(finish=3), "finish_int"),
    (_completion(finish={"reason": "stop"}), "finish_object"),
    (_completion(content="\\ud800 4"), "surrogate"),  # JSON text with a lone surrogate escape
    (_completion(finish="st\\ud800op"), "finish_surrogate"),
    (_completion(usage={"prompt_tokens": 10**30, "completion_tokens": 1}), "huge_usage"),
    (_completion(usage={"prompt_tokens": -5, "completion_tokens": 1}), "negative_usage"),
    (_completion(usage={"prompt_tokens": 12.5, "completion_tokens": 1}), "float_usage"),
    (_completion(usage={"prompt_tokens": "12", "completion_tokens": True}), "string_bool_usage"),
    (_completion(content=[{"type": "text", "text": "2"}, {"type": "image_url"}]), "parts"),
    (_completion(content=None), "null_content"),
    ("[1, 2]", "non_dict"),
    ('{"id": "x", "object": "chat.completion"}', "no_choices"),
    ("[" * 50_000 + "]" * 50_000, "deep"),
    ('{"choices": [{"message": {"content": "1"}, "finish_reason": "stop"}], "n": ' + "9" * 5000 + "}", "long_int"),
]
# The surrogate-escaped strings above are written as JSON text: json.dumps escapes the backslash, undo that.
ODD_REPLIES = [(body.replace("\\\\ud800", "\\ud800"), kind) for body, kind in ODD_REPLIES]


def _odd_server() -> ScriptedServer:
    return ScriptedServer(lambda n, body: _raw(ODD_REPLIES[(n - 1) % len(ODD_REPLIES)][0]))


def _odd_spec_text(base_url: str) -> str:
    return spec_text(
        base_url,
        endpoint={"max_concurrency": 1, "max_retries": 0},
        design={"personas": ["China"], "questions": list(range(1, 15)), "seeds": [1], "temperature": [0.0]},
    )


@pytest.mark.slow
def test_odd_replies_are_stored_with_warnings_or_failed_with_a_class(tmp_path: Path) -> None:
    assert len(ODD_REPLIES) == 14
    with _odd_server() as server:
        spec = parse_spec(_odd_spec_text(server.base_url), source="test-spec")
        result = run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
    assert len(server.requests) == 14  # one attempt per cell: every odd reply was seen once
    rows = check_run_dir(tmp_path / "run", spec)  # every cell stored once or failed
    failures = read_dataset(tmp_path / "run", "failures").to_pylist()
    assert (result.stored, result.failed, len(rows), len(failures)) == (10, 4, 10, 4)
    assert sorted(f["error_class"] for f in failures) == ["UnreadableBody"] * 4
    messages = sorted(f["error_message"].split(": ")[0] for f in failures)
    assert messages == ["HTTP 200 with a body that is not JSON"] * 2 + ["openai reply without choices[0].message"] * 2
    by_text: dict[str, list[dict]] = {}
    for r in rows.values():
        by_text.setdefault(r["response_text"], []).append(r)
    warned = {r["cell_key"]: r["reply_warnings"] for r in rows.values()}
    # a lone surrogate is replaced (U+FFFD) and said so; the rest of the text is as sent
    (surrogate,) = by_text["\ufffd 4"]
    assert "lone surrogate" in surrogate["reply_warnings"] and "response_text" in surrogate["reply_warnings"]
    # finish reasons of the wrong type are null, with the type named
    nulled_finish = [r for r in rows.values() if r["finish_reason"] is None]
    assert sorted(w for r in nulled_finish for w in [r["reply_warnings"]]) == [
        "finish_reason = <dict>: not a string, stored as null",
        "finish_reason = <int>: not a string, stored as null",
    ]
    assert sum(r["finish_reason"] == "st\ufffdop" for r in rows.values()) == 1
    # impossible token counts are unknown (null), never clipped or guessed
    bad_usage = [r for r in rows.values() if r["input_tokens"] is None]
    assert len(bad_usage) == 4 and all("not a token count" in r["reply_warnings"] for r in bad_usage)
    assert any("= 1000000000000000000000000000000" in r["reply_warnings"] for r in bad_usage)
    assert any("usage completion_tokens = True" in r["reply_warnings"] for r in bad_usage)
    assert sum(r["output_tokens"] is None for r in rows.values()) == 1  # only the bool completion count
    # content as a list of parts: its text parts joined; null content: empty text, and a warning
    assert len(by_text["2"]) == 1 and by_text["2"][0]["reply_warnings"] is None
    (empty,) = by_text[""]
    assert empty["reply_warnings"] == "message content is null; stored as empty text"
    assert sum(w is None for w in warned.values()) == 1  # only the list of parts needed no change
    answers = read_dataset(tmp_path / "run", "answers")
    assert answers.num_rows == 10  # every stored reply was parsed


@pytest.mark.slow
def test_a_run_mixing_odd_replies_exits_3_without_a_traceback(tmp_path: Path) -> None:
    with _odd_server() as server:
        spec = tmp_path / "spec.toml"
        spec.write_text(_odd_spec_text(server.base_url))
        done = subprocess.run(
            [sys.executable, "-m", "runner.cli", "run", str(spec), "--out", str(tmp_path / "run")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and "4 cells failed for good" in done.stderr, done.stderr
    assert read_dataset(tmp_path / "run", "responses").num_rows == 10


def _gzip_zeros(megabytes: int) -> bytes:
    """A gzip body of ``megabytes`` MiB of zeros (a bomb: about 1,000 times smaller than it expands to)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join([*(packer.compress(block) for _ in range(megabytes)), packer.flush()])


def _bomb(n: int, body: dict) -> web.Response:
    return web.Response(body=_BOMB, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})


_BOMB = _gzip_zeros(64)


def test_an_oversize_reply_is_a_failure_and_other_cells_still_run(tmp_path: Path) -> None:
    plain = _completion()

    def respond(n: int, body: dict) -> web.Response:
        return _bomb(n, body) if n % 3 == 0 else _raw(plain)

    with ScriptedServer(respond) as server:
        spec = make_spec(
            server.base_url,
            endpoint={"max_concurrency": 1, "max_retries": 2, "max_reply_bytes": 1 << 20},
            design={"personas": ["China"], "questions": list(range(1, 7)), "seeds": [1], "temperature": [0.0]},
        )
        result = run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
    assert len(server.requests) == 6  # an oversize reply is not retried (another attempt pays for another bomb)
    assert (result.stored, result.failed) == (4, 2)
    failures = read_dataset(tmp_path / "run", "failures").to_pylist()
    assert [f["error_class"] for f in failures] == ["OversizeReply"] * 2
    assert all("max_reply_bytes = 1048576" in f["error_message"] and f["http_status"] == 200 for f in failures)


_RSS_SCRIPT = textwrap.dedent(
    """
    import asyncio, resource, sys
    sys.path.insert(0, sys.argv[1])
    from test_reply_boundary import ScriptedServer, _bomb
    from runner.errors import OversizeReply
    from runner.sweep.providers import HttpCall
    from runner.sweep.transport import AiohttpTransport

    async def main(url):
        transport = AiohttpTransport(2, 60.0, max_reply_bytes=int(sys.argv[2]))
        call = HttpCall(url + "/chat/completions", {"Content-Type": "application/json"}, {"m": 1})
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for _ in range(2):
            try:
                await transport.send(call)
            except OversizeReply:
                pass
        await transport.close()
        return before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    with ScriptedServer(_bomb) as server:
        before, after = asyncio.run(main(server.base_url))
    print((after - before) // 1024)  # MiB of peak RSS the two bombs added
    """
)


@pytest.mark.slow
def test_a_gzip_bomb_does_not_raise_memory_past_the_cap(tmp_path: Path) -> None:
    tests = str(Path(__file__).parent)
    rss = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, tests, str(4 << 20)], capture_output=True, text=True, timeout=120
    )
    assert rss.returncode == 0, rss.stderr
    grown_mib = int(rss.stdout.split()[-1])
    assert grown_mib < 32, grown_mib  # 64 MiB decoded were sent, twice; reading stopped at 4 MiB


def test_gemini_blocked_prompts_are_stored_refusals_and_thinking_tokens_count(tmp_path: Path) -> None:
    def respond(n: int, body: dict) -> web.Response:
        usage = {"promptTokenCount": 30, "candidatesTokenCount": 1, "thoughtsTokenCount": 40}
        if n % 2:
            return web.json_response({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage})
        parts = [{"text": "thinking about it", "thought": True}, {"text": "2"}]
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
        return web.json_response({"candidates": [candidate], "usageMetadata": usage})

    with ScriptedServer(respond, "gemini") as server:
        spec = make_spec(
            server.base_url,
            endpoint={"provider": "gemini", "model": "g-1", "max_concurrency": 1, "price_output_per_1k": 1.0},
            design={"personas": ["China"], "questions": [1, 2, 3, 4], "seeds": [1], "temperature": [0.0]},
        )
        result = run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
    assert len(server.requests) == 4 and (result.stored, result.failed) == (4, 0)  # no retries, no failures
    rows = check_run_dir(tmp_path / "run", spec).values()
    blocked = [r for r in rows if r["finish_reason"] == "blocked:SAFETY"]
    assert len(blocked) == 2 and all(r["response_text"] == "" and r["attempts"] == 1 for r in blocked)
    answered = [r for r in rows if r["finish_reason"] == "STOP"]
    assert [r["response_text"] for r in answered] == ["2", "2"]  # the thought summary is not the answer
    assert {r["output_tokens"] for r in rows} == {41}  # candidates + thoughts (both billed as output)


def test_openai_wire_options_max_completion_tokens_and_extras(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOFCAT_TEST_KEY", "k-wire-options-123456")
    plain = _completion()
    with ScriptedServer(lambda n, body: _raw(plain)) as server:
        spec = make_spec(
            server.base_url,
            endpoint={"model": "o3-mini", "api_key_env": "HOFCAT_TEST_KEY", "max_concurrency": 1},
            design={"personas": ["China"], "questions": [1], "seeds": [1], "temperature": [0.0]},
        )
        text = spec_text(
            server.base_url,
            endpoint={"model": "router/gpt-4o", "max_concurrency": 1},
            design={"personas": ["China"], "questions": [1], "seeds": [1], "temperature": [0.5]},
        )
        tables = (
            '[endpoints.extra_headers]\nX-Title = "hofcat"\n[endpoints.extra_body]\ntemperature = 9\n'
            'transforms = ["middle-out"]\n[endpoints.extra_body.provider]\norder = ["a"]\n'
        )
        extras = parse_spec(text.replace("[design]", tables + "[design]"), source="extras")
        run_sweep(spec, tmp_path / "a", live=False, stream=io.StringIO())
        run_sweep(extras, tmp_path / "b", live=False, stream=io.StringIO())
    (reasoning, routed) = server.requests
    assert reasoning["body"]["max_completion_tokens"] == 64 and "max_tokens" not in reasoning["body"]
    assert reasoning["headers"]["Authorization"] == "Bearer k-wire-options-123456"
    body = routed["body"]
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body  # not a reasoning model name
    assert body["temperature"] == 0.5  # hofcat's own field wins over extra_body's
    assert body["transforms"] == ["middle-out"] and body["provider"] == {"order": ["a"]}
    assert routed["headers"]["X-Title"] == "hofcat" and "Authorization" not in routed["headers"]


def test_anthropic_sends_temperature_or_top_p_never_both(tmp_path: Path) -> None:
    reply = {"content": [{"type": "text", "text": "3"}], "stop_reason": "end_turn", "usage": {"input_tokens": 5}}
    with ScriptedServer(lambda n, body: web.json_response(reply), "anthropic") as server:
        for name, top_p, temperature in (("t", [1.0], [0.0, 0.7]), ("p", [0.9], [1.0])):
            spec = make_spec(
                server.base_url,
                endpoint={"provider": "anthropic", "model": "c-1", "max_concurrency": 1},
                design={
                    "personas": ["China"],
                    "questions": [1],
                    "seeds": [1],
                    "temperature": temperature,
                    "top_p": top_p,
                },
            )
            run_sweep(spec, tmp_path / name, live=False, stream=io.StringIO())
    sampling = sorted(
        tuple(sorted((k, v) for k, v in r["body"].items() if k in ("temperature", "top_p"))) for r in server.requests
    )
    assert sampling == [(("temperature", 0.0),), (("temperature", 0.7),), (("top_p", 0.9),)]


@pytest.mark.parametrize(
    ("design", "message"),
    [
        ({"temperature": [0.5, 1.5]}, "design.temperature = 1.5: must be at most 1 for anthropic endpoints[0]"),
        ({"temperature": [0.0], "top_p": [0.9]}, "design.top_p = 0.9: must be 1.0 for anthropic endpoints[0]"),
    ],
)
def test_anthropic_sampling_the_api_refuses_is_a_spec_error(design: dict, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        make_spec("http://127.0.0.1:9/v1", endpoint={"provider": "anthropic"}, design=design)


def test_credentials_default_only_for_the_providers_own_host(tmp_path: Path, monkeypatch) -> None:
    from runner.sweep.providers import conventional_key_env, no_credentials_note

    monkeypatch.setenv("OPENAI_API_KEY", "sk-conventional-0123456789")
    monkeypatch.setenv("GEMINI_API_KEY", "g-conventional-0123456789")
    own = parse_spec(spec_text("https://api.openai.com/v1"), source="s").endpoints[0]
    gemini = spec_text("https://generativelanguage.googleapis.com/v1beta", endpoint={"provider": "gemini"})
    assert conventional_key_env(own) == "OPENAI_API_KEY"
    assert conventional_key_env(parse_spec(gemini, source="s").endpoints[0]) == "GEMINI_API_KEY"
    router = parse_spec(spec_text("https://openrouter.ai/api/v1"), source="s").endpoints[0]
    assert conventional_key_env(router) is None  # a key is never sent to a host it is not for
    assert no_credentials_note(router) == (
        "endpoint 'sim': api_key_env is not set: requests to openrouter.ai are sent without credentials"
    )
    assert no_credentials_note(own).endswith(
        "and neither is OPENAI_API_KEY: requests to api.openai.com are sent without credentials"
    )
    # a loopback server gets no key (OPENAI_API_KEY is set, but not for it) and no warning
    stream = tmp_path / "log"
    with ScriptedServer(lambda n, body: _raw(_completion())) as server:
        spec = make_spec(
            server.base_url, design={"personas": ["China"], "questions": [1], "seeds": [1], "temperature": [0.0]}
        )
        with stream.open("w") as log:
            run_sweep(spec, tmp_path / "run", live=False, stream=log)
    assert "Authorization" not in server.requests[0]["headers"]
    assert "without credentials" not in stream.read_text()


def test_provider_mapping_units() -> None:
    """Pure mapping details the loopback tests above rely on."""
    gemini = get_provider("gemini")
    assert gemini.reply({"candidates": [{"finishReason": "SAFETY"}]}).finish_reason == "SAFETY"  # no content
    reply = get_provider("openai").reply(
        json.loads(_completion(usage={"prompt_tokens": 2**63, "completion_tokens": 0}))
    )
    assert (reply.input_tokens, reply.output_tokens) == (None, 0)
    call = get_provider("openai").call(
        "http://h/v1", "sk-x", ChatRequest("m", [{"role": "user", "content": "q"}], 1, 0, 1, 8)
    )
    assert call.secret == "sk-x"


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ('[endpoints.extra_headers]\napi-key = "sk-in-the-spec-0123456789"\n', "extra_headers.api-key = '<hidden>'"),
        ('[endpoints.extra_headers]\nAuthorization = "Bearer sk-0123456789"\n', "must be a header without credentials"),
        ('[endpoints.extra_headers]\ncontent-type = "text/plain"\n', "a header name hofcat does not set itself"),
        ('[endpoints.extra_headers]\nX-Note = "two\\nlines"\n', "a printable ASCII string"),
        ("[endpoints.extra_body]\nwhen = 2026-01-01\n", "extra_body = '<hidden>': must be a table of JSON values"),
    ],
)
def test_extra_headers_and_body_that_cannot_be_sent_safely_are_spec_errors(tables: str, message: str) -> None:
    text = spec_text("http://127.0.0.1:9/v1").replace("[design]", tables + "[design]")
    with pytest.raises(SpecError, match=re.escape(message)) as error:
        parse_spec(text, source="s")
    assert "0123456789" not in str(error.value)  # a refused value is never echoed


def test_max_tokens_field_is_one_of_three() -> None:
    with pytest.raises(SpecError, match="max_tokens_field = 'n_predict': must be one of auto, max_tokens"):
        make_spec("http://127.0.0.1:9/v1", endpoint={"max_tokens_field": "n_predict"})
    explicit = make_spec("http://127.0.0.1:9/v1", endpoint={"model": "o3", "max_tokens_field": "max_tokens"})
    from runner.sweep.providers import provider_for

    call = provider_for(explicit.endpoints[0]).call("http://h", None, ChatRequest("o3", [], None, 1.0, 1.0, 5))
    assert call.body["max_tokens"] == 5 and "max_completion_tokens" not in call.body


def test_served_model_and_fingerprint_are_kept_or_nulled_with_a_warning():
    from runner.sweep.providers import get_provider

    openai = get_provider("openai")
    body = {
        "choices": [{"message": {"content": "3"}, "finish_reason": "stop"}],
        "model": "gpt-x-2026-01-01",
        "system_fingerprint": "fp_abc",
    }
    reply = openai.reply(body)
    assert (reply.served_model, reply.system_fingerprint, reply.warnings) == ("gpt-x-2026-01-01", "fp_abc", ())
    odd = openai.reply({**body, "model": {"id": 1}, "system_fingerprint": "x" * 10_000})
    assert odd.served_model is None and odd.system_fingerprint is None and len(odd.warnings) == 2
    gemini = get_provider("gemini").reply(
        {"candidates": [{"content": {"parts": [{"text": "2"}]}, "finishReason": "STOP"}], "modelVersion": "g-001"}
    )
    assert gemini.served_model == "g-001" and gemini.system_fingerprint is None
