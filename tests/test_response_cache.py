"""The shared response cache ([run] cache / HOFCAT_CACHE) against the simulator on loopback."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import random
import threading
from pathlib import Path

import pytest

from _loopback_server import LoopbackServer, chat_ok
from _runner_support import check_run_dir, make_spec
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.rundir import read_dataset, read_manifest
from runner.sweep.cache import request_key
from runner.sweep.providers import HttpCall
from runner.sweep.session import run_sweep
from runner.sweep.spec import Spec

DESIGN = {"personas": ["United States", "China"], "questions": [1, 2, 3, 4, 5, 6], "seeds": [1, 2]}  # 24 per temp


def _spec(base_url: str, name: str, cache: Path | None, design: dict | None = None, **run: object) -> Spec:
    run_table = {"name": name, **run} | ({} if cache is None else {"cache": str(cache)})
    return make_spec(base_url, run=run_table, design={**DESIGN, "temperature": [0.0], **(design or {})})


def _run(spec: Spec, out: Path) -> dict:
    result = run_sweep(spec, out, stream=io.StringIO(), live=False)
    assert not result.interrupted and result.failed == 0
    check_run_dir(out, spec)
    return read_manifest(out)["sessions"][-1]


def _answers(out: Path) -> list[tuple]:
    rows = read_dataset(out, "answers", ["cell_key", "question", "option_id", "status"]).to_pylist()
    return sorted((r["cell_key"], r["question"], r["option_id"], r["status"]) for r in rows)


def _origins(out: Path) -> dict[str, str | None]:
    rows = read_dataset(out, "responses", ["cell_key", "cache_origin"]).to_pylist()
    return {r["cell_key"]: r["cache_origin"] for r in rows}


def test_rerun_under_another_name_sends_nothing_and_answers_match(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with SimServerThread(SimConfig(seed=3)) as sim:
        first = _run(_spec(sim.base_url, "first", cache), tmp_path / "a")
        sent = sim.stats()["total"]
        assert sent == 24 and first["cache"]["stored"] == 24 and first["cache"]["hits"] == 0
        second = _run(_spec(sim.base_url, "second", cache), tmp_path / "b")
        assert sim.stats()["total"] == sent  # not one request more
    assert second["cache"] == {**second["cache"], "hits": 24, "stored": 0, "ineligible": 0}
    assert _answers(tmp_path / "b") == _answers(tmp_path / "a") and len(_answers(tmp_path / "a")) == 24
    assert set(_origins(tmp_path / "a").values()) == {None}  # sent, not served
    manifest_a = read_manifest(tmp_path / "a")
    for origin in _origins(tmp_path / "b").values():
        got = json.loads(origin)
        assert (got["run_id"], got["run_name"]) == (manifest_a["run_id"], "first")
        assert got["session"] == manifest_a["sessions"][0]["token"] and got["time"].startswith("20")


@pytest.mark.slow
def test_a_malformed_reply_is_retried_not_cached(tmp_path: Path) -> None:
    """A 200 whose body is not a reply (truncated JSON, an HTML page) is never stored: the retry's reply is."""
    cache = tmp_path / "cache"
    with SimServerThread(SimConfig(seed=8, malformed_rate=0.3)) as sim:
        _run(_spec(sim.base_url, "first", cache), tmp_path / "a")
        malformed = sim.stats()["by_outcome"].get("malformed", 0)
        sent = sim.stats()["total"]
        assert malformed > 0 and sent == 24 + malformed
        second = _run(_spec(sim.base_url, "second", cache), tmp_path / "b")
        assert sim.stats()["total"] == sent and second["cache"]["hits"] == 24
    assert _answers(tmp_path / "b") == _answers(tmp_path / "a")


def test_env_var_names_the_cache_when_the_spec_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOFCAT_CACHE", str(tmp_path / "env-cache"))
    with SimServerThread(SimConfig(seed=3)) as sim:
        _run(_spec(sim.base_url, "first", None), tmp_path / "a")
        _run(_spec(sim.base_url, "second", None), tmp_path / "b")
        assert sim.stats()["total"] == 24
    assert len(list((tmp_path / "env-cache").rglob("*.json"))) == 24


def _seeded_answer(sent: list[tuple[float, int | None]]):
    """A server that honours its seed: the reply is a digit fixed by the messages and the seed (none: random)."""
    rng = random.Random(0)

    def answer(body: dict, seq: int) -> tuple[int, dict, dict[str, str]]:
        sent.append((body["temperature"], body.get("seed")))
        seed = body.get("seed")
        salt = rng.random() if seed is None and body["temperature"] > 0 else seed
        digest = hashlib.sha256(json.dumps([body["messages"], salt]).encode()).digest()
        return chat_ok(str(1 + digest[0] % 5))

    return answer


def test_run_extended_by_more_seeds_sends_only_the_new_cells(tmp_path: Path) -> None:
    """Seeded sampling at temperature 0.7: served only because the determinism probe finds the seed honoured."""
    cache, hot, sent = tmp_path / "cache", {"temperature": [0.7]}, []
    with LoopbackServer(_seeded_answer(sent)) as server:
        first = _run(_spec(server.base_url, "first", cache, hot, determinism_probe=True), tmp_path / "a")
        assert read_manifest(tmp_path / "a")["determinism_probe"]["sim"]["seed_honoured"] is True
        assert first["cache"]["stored"] == 24
        before = len(sent)
        wider = {**hot, "seeds": [1, 2, 3]}
        second = _run(_spec(server.base_url, "wider", cache, wider, determinism_probe=True), tmp_path / "b")
    cells = [seed for temperature, seed in sent[before:] if temperature == 0.7]  # the probe uses 0 and 1.0
    assert len(cells) == 12 and set(cells) == {3}  # only the new seed's cells went out
    assert (second["cache"]["hits"], second["cache"]["stored"]) == (24, 12)
    origins = _origins(tmp_path / "b")
    assert sum(o is not None for o in origins.values()) == 24 and len(origins) == 36
    old = {k: a for k, *a in _answers(tmp_path / "a")}
    assert all(old[k] == a for k, *a in _answers(tmp_path / "b") if k in old)


def test_a_request_not_determined_is_sent_not_served(tmp_path: Path) -> None:
    """Temperature 0.7 without a probe (the seed is not known to be honoured): sent every time, unless forced."""
    cache, hot = tmp_path / "cache", {"temperature": [0.7]}
    with SimServerThread(SimConfig(seed=5)) as sim:
        first = _run(_spec(sim.base_url, "first", cache, hot), tmp_path / "a")
        second = _run(_spec(sim.base_url, "second", cache, hot), tmp_path / "b")
        assert sim.stats()["total"] == 48
        assert first["cache"]["ineligible"] == second["cache"]["ineligible"] == 24
        assert first["cache"]["stored"] == second["cache"]["hits"] == 0
        assert set(_origins(tmp_path / "b").values()) == {None}
        assert not list(cache.rglob("*.json"))
        _run(_spec(sim.base_url, "forced", cache, hot, cache_force=True), tmp_path / "c")
        forced = _run(_spec(sim.base_url, "forced-again", cache, hot, cache_force=True), tmp_path / "d")
        assert sim.stats()["total"] == 72 and forced["cache"]["hits"] == 24


def test_two_runs_sharing_the_cache_at_once_both_complete(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    design = {"questions": list(range(1, 25))}  # 96 cells each
    with SimServerThread(SimConfig(seed=6)) as sim:
        specs = [_spec(sim.base_url, f"run{i}", cache, design) for i in range(2)]
        errors: list[BaseException] = []

        def go(i: int) -> None:
            try:
                _run(specs[i], tmp_path / f"r{i}")
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors and not any(t.is_alive() for t in threads)
        assert 96 <= sim.stats()["total"] <= 192
    assert _answers(tmp_path / "r0") == _answers(tmp_path / "r1") and len(_answers(tmp_path / "r0")) == 96
    assert len(list(cache.rglob("*.json"))) == 96  # one entry per request, whoever wrote it
    assert not list(cache.rglob(".tmp-*"))  # no temporary file left behind


def test_the_key_holds_no_header_and_no_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-test-0123456789abcdefSECRET"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0, "seed": 1}
    one = HttpCall("http://a:1/v1/chat/completions", {"Authorization": f"Bearer {secret}"}, body, secret=secret)
    other = HttpCall("http://b:2/v1/chat/completions", {"Authorization": "Bearer other"}, dict(body), secret="other")
    assert request_key("openai", one) == request_key("openai", other)  # neither host nor key in it
    assert request_key("openai", one) != request_key("openai", HttpCall(one.url, {}, {**body, "seed": 2}))
    assert request_key("openai", one) != request_key("anthropic", one)
    monkeypatch.setenv("HOFCAT_TEST_KEY", secret)
    cache = tmp_path / "cache"
    with SimServerThread(SimConfig(seed=7)) as sim:
        spec = make_spec(
            sim.base_url,
            run={"name": "keyed", "cache": str(cache)},
            endpoint={"api_key_env": "HOFCAT_TEST_KEY"},
            design={**DESIGN, "temperature": [0.0]},
        )
        _run(spec, tmp_path / "a")
    files = list(cache.rglob("*"))
    assert sum(f.is_file() for f in files) == 24
    for f in files:
        assert secret[:8] not in f.name
        if f.is_file():
            text = f.read_text(encoding="utf-8")
            assert secret[:8] not in text and "Authorization" not in text


def test_a_miss_is_decoded_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache's readability check decodes a missed reply; the executor takes that decode, not a second one."""
    from runner.sweep.providers.openai import OpenAIProvider

    calls = []
    real_reply, real_plain = OpenAIProvider.reply, OpenAIProvider.plain

    def counted_reply(self, body):
        calls.append(1)
        return real_reply(self, body)

    def counted_plain(self, body):  # read from the bytes: counted when it read the reply (None: ``reply`` will)
        reply = real_plain(self, body)
        calls.extend([1] if reply is not None else [])
        return reply

    monkeypatch.setattr(OpenAIProvider, "reply", counted_reply)
    monkeypatch.setattr(OpenAIProvider, "plain", counted_plain)
    with SimServerThread(SimConfig(seed=3)) as sim:
        session = _run(_spec(sim.base_url, "first", tmp_path / "cache"), tmp_path / "a")
    assert session["cache"]["stored"] == 24 and len(calls) == 24
    calls.clear()
    _run(_spec(sim.base_url, "second", tmp_path / "cache"), tmp_path / "b")  # hits: decoded by the executor only
    assert len(calls) == 24


def test_a_reply_echoing_the_key_reaches_its_cell_redacted_and_never_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-echo-0123456789abcdefghijKLMNOPQR"
    monkeypatch.setenv("HOFCAT_TEST_KEY", secret)
    echoed = iter(range(10**6))

    def answer(body, seq):  # a third of the replies echo the key in a header, a third in the text
        kind = next(echoed) % 3
        if kind == 0:
            return chat_ok("3", {"x-request-id": f"req {secret[3:20]}"})
        return chat_ok(f"3 (you sent {secret})" if kind == 1 else "3")

    with LoopbackServer(answer) as server:
        spec = make_spec(
            server.base_url,
            run={"name": "echo", "cache": str(tmp_path / "cache")},
            endpoint={"api_key_env": "HOFCAT_TEST_KEY"},
            design={**DESIGN, "temperature": [0.0]},
        )
        session = _run(spec, tmp_path / "a")
    assert session["cache"]["stored"] == 8  # the 8 replies without the key in body or headers
    for f in (tmp_path / "cache").rglob("*.json"):
        entry = json.loads(f.read_text(encoding="utf-8"))
        assert secret[:8] not in base64.b64decode(entry["body"]).decode() + json.dumps(entry["headers"])
    texts = read_dataset(tmp_path / "a", "responses", ["response_text"]).column(0).to_pylist()
    assert len(texts) == 24 and not any(secret[8:16] in t for t in texts)
