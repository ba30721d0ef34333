"""Anthropic and Gemini shapes against real loopback servers that speak them; OpenAI mapping details."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from pathlib import Path

import pytest
from aiohttp import web

from _runner_support import check_run_dir, make_spec
from runner.errors import UnreadableBody
from runner.rundir import read_dataset
from runner.sweep.providers import ChatRequest, get_provider
from runner.sweep.session import run_sweep


class ShapeServer:
    """An aiohttp server in a thread answering in one provider's shape; records every request it got."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.requests: list[dict] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.base_url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(
            {"path": request.path, "query": request.query_string, "headers": dict(request.headers), "body": body}
        )
        n = len(self.requests)
        if n % 5 == 0:  # every fifth attempt is rate limited, in this provider's header dialect
            headers = {"retry-after": "0"} if self.provider == "anthropic" else {"Retry-After": "0"}
            return web.json_response({"error": {"type": "rate_limit_error"}}, status=429, headers=headers)
        text = f"{n % 5}"
        if self.provider == "openai":
            return web.json_response(
                {
                    "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 40 + n, "completion_tokens": 1},
                }
            )
        if self.provider == "anthropic":
            return web.json_response(
                {
                    "type": "message",
                    "role": "assistant",
                    "stop_reason": "end_turn",
                    "content": [{"type": "text", "text": text}],
                    "usage": {"input_tokens": 40 + n, "output_tokens": 1},
                }
            )
        return web.json_response(
            {
                "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 40 + n, "candidatesTokenCount": 1},
            }
        )

    def __enter__(self) -> ShapeServer:
        self._thread.start()

        async def start() -> int:
            app = web.Application()
            app.router.add_post("/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            return site._server.sockets[0].getsockname()[1]

        port = asyncio.run_coroutine_threadsafe(start(), self._loop).result(30)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_provider_round_trip_against_its_own_shape(provider: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOFCAT_TEST_KEY", "k-provider-test-123")
    stream = io.StringIO()
    with ShapeServer(provider) as server:
        spec = make_spec(
            server.base_url,
            endpoint={"provider": provider, "model": "m-1", "api_key_env": "HOFCAT_TEST_KEY", "max_concurrency": 2},
            design={
                "personas": ["China"],
                "questions": [1, 2, 3],
                "seeds": [1, 2],
                # Anthropic takes temperature or top_p: top_p alone goes out where temperature is its default 1
                "temperature": [1.0 if provider == "anthropic" else 0.3],
                "top_p": [0.9],
            },
        )
        result = run_sweep(spec, tmp_path / "run", live=False, stream=stream)
    rows = check_run_dir(tmp_path / "run", spec)
    assert result.stored == 6 and len(rows) == 6
    answered = server.requests
    ok = [r for i, r in enumerate(answered, 1) if i % 5]
    assert len(answered) == 7 and len(ok) == 6  # one 429 retried
    texts = sorted(int(r["response_text"]) for r in rows.values())
    assert texts == sorted(i % 5 for i in range(1, 8) if i % 5)
    assert {r["input_tokens"] for r in rows.values()} <= set(range(41, 48))
    system = "Reply with the number of your answer only, with no explanation."
    for r in answered:
        body, headers = r["body"], r["headers"]
        assert "k-provider-test-123" not in r["path"] + r["query"]  # the key travels in a header only
        if provider == "anthropic":
            assert r["path"] == "/v1/messages" and headers["x-api-key"] == "k-provider-test-123"
            assert headers["anthropic-version"] == "2023-06-01"
            assert body["system"] == system and [m["role"] for m in body["messages"]] == ["user"]
            assert (body["model"], body["top_p"], body["max_tokens"]) == ("m-1", 0.9, 64) and "temperature" not in body
            assert "seed" not in body
        else:
            assert r["path"] == "/v1/models/m-1:generateContent" and headers["x-goog-api-key"] == "k-provider-test-123"
            assert body["systemInstruction"] == {"parts": [{"text": system}]}
            assert [c["role"] for c in body["contents"]] == ["user"]
            assert body["generationConfig"]["temperature"] == 0.3 and body["generationConfig"]["topP"] == 0.9
            assert body["generationConfig"]["maxOutputTokens"] == 64 and body["generationConfig"]["seed"] in (1, 2)
    notes = [line for line in stream.getvalue().splitlines() if "takes no" in line]
    assert notes == (
        ["hofcat: endpoint 'sim': the anthropic API takes no seed; requests are sent without it"]
        if provider == "anthropic"
        else []
    )
    assert read_dataset(tmp_path / "run", "answers").num_rows == 6


def test_openai_mapping_passes_every_sampling_parameter_and_reads_refusals() -> None:
    provider = get_provider("openai")
    call = provider.call("http://h/v1", "sk-1", ChatRequest("gpt", [{"role": "user", "content": "q"}], 3, 0.5, 0.9, 8))
    assert call.url == "http://h/v1/chat/completions" and call.headers["Authorization"] == "Bearer sk-1"
    assert call.body == {
        "model": "gpt",
        "messages": [{"role": "user", "content": "q"}],
        "temperature": 0.5,
        "top_p": 0.9,
        "max_tokens": 8,
        "seed": 3,
    }
    messages = [{"role": "system", "content": "s \u00e9"}, {"role": "user", "content": 'q "1"'}]
    spliced = provider.call(
        "http://h/v1",
        None,
        ChatRequest("gpt", messages, None, 1.0, 0.5, 9, json.dumps(messages, separators=(",", ":"))),
    )
    assert json.loads(spliced.data) == spliced.body and "seed" not in spliced.body  # same request, pre-serialized
    reply = provider.reply(
        {
            "choices": [{"message": {"content": None, "refusal": "I can't"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2},
        }
    )
    assert (reply.text, reply.finish_reason, reply.input_tokens, reply.output_tokens) == ("I can't", "stop", 9, 2)


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("openai", {"choices": []}),
        ("openai", {"error": "x"}),
        ("openai", [1, 2]),
        ("anthropic", {"content": "text"}),
        ("anthropic", {"content": [{"type": "text", "text": 3}]}),
        ("gemini", {"candidates": []}),
        ("gemini", {"candidates": [{"content": {"parts": [{"text": 1}]}}]}),
    ],
)
def test_wrong_reply_shapes_are_unreadable_bodies(provider: str, body: object) -> None:
    with pytest.raises(UnreadableBody, match=provider):
        get_provider(provider).reply(body)


def test_anthropic_omits_top_p_at_its_default_and_gemini_maps_assistant_turns() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "u2"},
    ]
    anthropic = get_provider("anthropic").call("http://h", None, ChatRequest("c", messages, 1, 0.0, 1.0, 5))
    assert "top_p" not in anthropic.body and "x-api-key" not in anthropic.headers
    assert [m["role"] for m in anthropic.body["messages"]] == ["user", "assistant", "user"]
    gemini = get_provider("gemini").call("http://h", None, ChatRequest("g", messages, 1, 0.0, 1.0, 5))
    assert [c["role"] for c in gemini.body["contents"]] == ["user", "model", "user"]
    assert json.dumps(gemini.body).count('"s"') == 1  # the system text only in systemInstruction


_ABSENT = object()  # a field left out of the body
_ODD = [None, -1, 2**63, 2**63 - 1, 0, True, 1.0, "7", 10**40]
_LABELS = [None, "gpt-4o", "", "é-model", "x" * 256, "x" * 257, 7, "\ud800"]


def _bodies() -> list[dict[str, object]]:
    """OpenAI chat completions whose fields vary one at a time over what servers send and what they should not."""
    base = {
        "model": "sim-1",
        "choices": [{"message": {"content": "3"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 1},
    }
    bodies: list[dict[str, object]] = [base]

    def varied(**change: object) -> dict[str, object]:
        body = json.loads(json.dumps(base))
        for path, value in change.items():
            where = body
            *parents, leaf = path.split("__")
            for key in parents:
                where = where[int(key)] if isinstance(where, list) else where[key]
            if value is _ABSENT:
                where.pop(leaf, None)
            else:
                where[leaf] = value
        return body

    bodies += [varied(choices__0__message__content=text) for text in ["", "Antwort: 3 ✓", "\ud800 lone", "x" * 5000]]
    bodies += [varied(choices__0__finish_reason=finish) for finish in [None, "length", "stöp", 5, _ABSENT]]
    for count in _ODD:
        bodies.append(varied(usage__prompt_tokens=count))
        bodies.append(varied(usage__completion_tokens=count))
    for label in _LABELS:
        bodies.append(varied(model=label))
        bodies.append(varied(system_fingerprint=label))
    bodies += [varied(usage=_ABSENT), varied(usage=[1]), varied(model=_ABSENT), varied(modelVersion="gemini-x")]
    return bodies


@pytest.mark.parametrize("body", _bodies(), ids=lambda b: json.dumps(b, default=str)[-60:])
def test_the_common_reply_read_at_once_equals_every_field_checked(body: dict[str, object]) -> None:
    """OpenAI's ``reply`` reads the common reply in one pass of checks (``plain_reply``); whatever it returns
    equals what the field-by-field checks make of the same body (reached here by splitting the text in two)."""
    from runner.sweep.providers import text_reply

    choice = body["choices"][0]  # type: ignore[index]
    text = choice["message"]["content"]
    checked = text_reply(
        "openai",
        body,
        [text[:1], text[1:]],  # two pieces: the path that checks each field and joins the texts
        "a string choices[0].message.content",
        choice.get("finish_reason"),
        "usage",
        "prompt_tokens",
        ("completion_tokens",),
        [],
    )
    assert get_provider("openai").reply(body) == checked


_COMMON = (
    b'{"model":"sim-1","choices":[{"message":{"content":"3"},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":20,"completion_tokens":1}}'
)
_HEAD, _TAIL = _COMMON[:-1], b"}"  # a field added after the common reply's own


def _raw_bodies() -> list[bytes]:
    """Chat completions as a server's bytes: ``_bodies()`` written three ways (ASCII with escapes, raw UTF-8,
    indented), and the common reply with what a JSON decode refuses or reads its own way put beside or into it."""
    out = []
    for body in _bodies():
        out.append(json.dumps(body).encode())
        out.append(json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        out.append(json.dumps(body, indent=2).encode())
    beside = [
        b'"x":"\xff"',  # invalid UTF-8 in a field nobody reads
        b'"\xff":1',
        b'"x":"\xed\xa0\x80"',  # a surrogate written as UTF-8 bytes
        b'"x":"\\ud800"',  # a lone surrogate escape
        b'"x":NaN',
        b'"x":1e400',
        b'"x":123456789012345678901234567890',
        b'"x":' + b"[" * 3000 + b"]" * 3000,
        b'"x":01',
        b'"x":[1,]',
        b'"usage":{"prompt_tokens":7,"completion_tokens":2}',  # a duplicated key: the last one counts
        b'"choices":[{"message":{"content":"4"},"finish_reason":"length"}]',
        b'"model":null',
        b'"model":"other"',
        b'"system_fingerprint":"fp_1"',
        b'"usage":null',
        b'"usage":[1]',
        b'"choices":[]',
        b'"choices":[1]',
        b'"choices":[{"message":null}]',
        b'"choices":[{"message":{"content":[{"type":"text","text":"3"}]}}]',
        b'"choices":[{"message":{"content":null,"refusal":"no"}}]',
        b'"choices":[{"message":{"content":"3"},"logprobs":{}}]',
        b'"choices":[{"message":{"content":"3"},"logprobs":{"content":[]}}]',
        (
            b'"choices":[{"message":{"content":"3"},"logprobs":{"content":[{"token":"3","logprob":-0.1,'
            b'"top_logprobs":[{"token":"3","logprob":-0.1}]}]}}]'
        ),
        b'"usage":{"prompt_tokens":18446744073709551616,"completion_tokens":1}',
        b'"usage":{"prompt_tokens":20.0,"completion_tokens":1}',
        b'"choices":[{"message":{"content":"key sk-test-0123456789abcdef"}}]',
    ]
    out += [_HEAD + b"," + field + _TAIL for field in beside]
    out += [b"\xef\xbb\xbf" + _COMMON, _COMMON + b" trailing", _COMMON + b"\n", b"", b"[]", b"null", b"{}"]
    return out


def _read(body: bytes, secret: str | None) -> object:
    """What ``decode`` makes of a 200 with ``body``: the reply, or the error's class and message."""
    from runner.sweep.transport import RawReply, decode

    try:
        return decode(get_provider("openai"), RawReply(200, body, {}), secret)
    except UnreadableBody as exc:
        return type(exc).__name__, str(exc), exc.status


@pytest.mark.parametrize("body", _raw_bodies(), ids=lambda b: repr(b[-50:]))
def test_the_common_reply_read_from_its_bytes_equals_the_decoded_one(body: bytes, monkeypatch) -> None:
    """``decode`` reads the common reply from its bytes (``OpenAIProvider.plain``, msgspec) before any JSON decode:
    whatever body a server sends, the reply or error is the one the JSON decode and ``reply`` make of it."""
    from runner.sweep.providers.openai import OpenAIProvider

    secret = "sk-test-0123456789abcdef"
    read = [_read(body, None), _read(body, secret)]
    monkeypatch.setattr(OpenAIProvider, "plain", lambda self, body: None)  # every body through the JSON decode
    assert read == [_read(body, None), _read(body, secret)]


def test_the_common_reply_takes_the_shortcut() -> None:
    """The reply nearly every server sends is read from its bytes, not decoded as JSON, and is what ``reply`` reads."""
    from benches.runner_peer import REPLY

    provider = get_provider("openai")
    for body in (_COMMON, REPLY, json.dumps(json.loads(_COMMON), indent=2).encode()):
        assert provider.plain(body) is not None
        assert provider.plain(body) == provider.reply(json.loads(body))
