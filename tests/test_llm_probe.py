"""The determinism probe's verdicts against small real HTTP endpoints on 127.0.0.1 with known seed behaviour."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from runner.sweep.probe import ProbeError, _condition, _verdict, probe_determinism


def _serve_and_probe(reply: Callable[[dict[str, Any]], str | None], **probe_args: Any):
    """Serve /v1/chat/completions answering with ``reply(body)`` (None: HTTP 500), run the probe against it.

    ``body["_crowded"]`` tells ``reply`` whether another request was in flight at the same time (a batch).
    """
    seen: list[dict[str, Any]] = []
    active: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        body["_auth"] = request.headers.get("Authorization")
        body["_crowded"] = bool(active)
        for other in active:
            other["_crowded"] = True
        active.append(body)
        await asyncio.sleep(0.05)  # long enough for a concurrent batch to overlap
        active.remove(body)
        seen.append(body)
        text = reply(body)
        if text is None:
            return web.json_response({"error": "down"}, status=500)
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": text}}]})

    async def main():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            return await probe_determinism(f"http://127.0.0.1:{port}/v1", "fake", **probe_args)
        finally:
            await runner.cleanup()

    return asyncio.run(main()), seen


def _seeded(body: dict[str, Any]) -> str:
    if body["temperature"] == 0:
        return "greedy"
    rng = random.Random(body["seed"]) if "seed" in body else random.Random()
    return f"sample {rng.random()}"


def test_an_endpoint_that_honours_seeds_is_found_honoured():
    probe, seen = _serve_and_probe(_seeded, repeats=4, seed=11, max_tokens=5)
    assert probe.seed == "honoured" and probe.seed_honoured
    assert probe.greedy_identical_share == 1.0
    assert [(c.name, c.requests, c.errors) for c in probe.conditions] == [
        ("t0", 4, 0),
        ("t0_seed", 4, 0),
        ("hot_seed", 4, 0),
        ("hot_seeds", 4, 0),
    ]
    assert probe.condition("hot_seeds").distinct_texts == 4
    assert probe.condition("hot_seeds").identical_share == 0.25
    assert probe.condition("hot_seed").seed == 11 and probe.condition("hot_seeds").seed is None
    # Three solo requests one at a time (t0, t0_seed, hot_seed), then the other 13 together with 4 distractors:
    # the same question lengthened (other prompts in the batch), hot, with the fixed seed.
    assert [b["_crowded"] for b in seen[:3]] == [False] * 3
    assert [(b["temperature"], b.get("seed")) for b in seen[:3]] == [(0.0, None), (0.0, 11), (1.0, 11)]
    assert all(b["_crowded"] for b in seen[3:]) and len(seen) == 20
    assert Counter(b.get("seed") for b in seen) == {None: 4, 11: 12, 12: 1, 13: 1, 14: 1, 15: 1}
    prompts = Counter(b["messages"][-1]["content"] for b in seen)
    assert len(prompts) == 5 and prompts.most_common(1)[0][1] == 16
    assert {body["max_tokens"] for body in seen} == {5} and {body["model"] for body in seen} == {"fake"}
    assert all(body["_auth"] is None for body in seen)


def test_an_endpoint_that_ignores_seeds_is_found_ignoring_them():
    probe, _ = _serve_and_probe(lambda b: "greedy" if b["temperature"] == 0 else f"x {random.random()}")
    assert probe.seed == "ignored" and not probe.seed_honoured
    assert probe.condition("hot_seed").identical_share == pytest.approx(1 / 6)


def test_an_endpoint_whose_samples_depend_on_the_batch_is_found_batch_dependent():
    def reply(body: dict[str, Any]) -> str:
        if body["temperature"] == 0:
            return "greedy in a batch" if body["_crowded"] else "greedy alone"
        return f"seed {body['seed']} {'batched' if body['_crowded'] else 'alone'}"

    probe, _ = _serve_and_probe(reply, repeats=4)
    assert probe.seed == "batch_dependent" and not probe.seed_honoured
    assert probe.condition("hot_seed").identical_share == 0.75
    assert probe.greedy_identical_share == 0.75 and probe.condition("t0").distinct_texts == 2


def test_a_constant_endpoint_is_inconclusive():
    probe, _ = _serve_and_probe(lambda b: "same", repeats=3)
    assert probe.seed == "inconclusive"
    assert all(c.distinct_texts == 1 and c.identical_share == 1.0 for c in probe.conditions)


def test_failures_are_counted_and_all_failing_raises():
    flaky = iter(range(1000))
    probe, _ = _serve_and_probe(lambda b: None if next(flaky) % 4 == 0 else _seeded(b), repeats=4)
    assert sum(c.errors for c in probe.conditions) == 4
    with pytest.raises(ProbeError, match=r"all 8 requests .*failed"):
        _serve_and_probe(lambda b: None, repeats=2)


def test_the_api_key_comes_from_the_named_environment_variable(monkeypatch):
    monkeypatch.setenv("HOFCAT_TEST_KEY", "sk-test-123")
    _, seen = _serve_and_probe(_seeded, repeats=2, api_key_env="HOFCAT_TEST_KEY")
    assert {body["_auth"] for body in seen} == {"Bearer sk-test-123"}
    monkeypatch.delenv("HOFCAT_TEST_KEY")
    with pytest.raises(ValueError, match="api_key_env: environment variable HOFCAT_TEST_KEY is not set"):
        asyncio.run(probe_determinism("http://127.0.0.1:9/v1", "m", api_key_env="HOFCAT_TEST_KEY"))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="repeats: 1 must be at least 2"):
        asyncio.run(probe_determinism("http://127.0.0.1:9/v1", "m", repeats=1))
    with pytest.raises(ValueError, match="provider_name: 'opnai' is not one of anthropic, gemini, openai"):
        asyncio.run(probe_determinism("http://127.0.0.1:9/v1", "m", provider_name="opnai"))
    with pytest.raises(ValueError, match="hot_temperature: 0 must be > 0"):
        asyncio.run(probe_determinism("http://127.0.0.1:9/v1", "m", hot_temperature=0))


def test_verdict_rules_by_hand():
    varied = _condition("hot_seeds", 1.0, [2, 3, 4], ["a", "b", "a"])
    flat = _condition("hot_seeds", 1.0, [2, 3, 4], ["a", "a", "a"])
    assert (varied.distinct_texts, flat.distinct_texts) == (2, 1)
    assert varied.identical_share == pytest.approx(2 / 3)
    assert _verdict(["a", "a", "a"], varied) == "honoured"
    assert _verdict(["a", "a", "a"], flat) == "inconclusive"
    assert _verdict(["b", "a", "a"], varied) == "batch_dependent"
    assert _verdict(["a", "a", "b"], varied) == "ignored"
    assert _verdict([None, "a", "a"], varied) == "honoured"  # a failed solo request: judged on the batch
    assert _verdict([None, "a", None], varied) == "inconclusive"
    assert _verdict(["a", None, None], varied) == "inconclusive"
    one_ok = _condition("hot_seed", 1.0, [1, 1, 1], ["a", None, None])
    assert (one_ok.errors, one_ok.identical_share, one_ok.distinct_texts) == (2, 1.0, 1)


@pytest.mark.slow
def test_hofcat_probe_cli_prints_the_result_as_json():
    import json
    import subprocess
    import sys

    from runner.endpoints.sim import SimProcess

    command = [sys.executable, "-m", "runner.cli", "probe"]
    with SimProcess(["--seed", "1"]) as sim:
        done = subprocess.run(
            [*command, "--base-url", sim.base_url, "--model", "sim-1", "--repeats", "2"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["endpoint"] == sim.base_url and data["model"] == "sim-1" and data["repeats"] == 2
    assert [c["name"] for c in data["conditions"]] == ["t0", "t0_seed", "hot_seed", "hot_seeds"]
    assert all(c["requests"] == 2 and c["errors"] == 0 for c in data["conditions"])
    assert data["seed"] in ("honoured", "batch_dependent", "ignored", "inconclusive")
    missing = subprocess.run([*command, "--base-url", sim.base_url], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "--model is required with --base-url" in missing.stderr
