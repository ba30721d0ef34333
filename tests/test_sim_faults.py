"""Faults happen at their configured rates, reproducibly, and look like what real endpoints send."""

from __future__ import annotations

import asyncio
import json
import math
import time

import aiohttp
import pytest

from _sim_client import SCORES, chat_body, content, post, run
from runner.endpoints.sim import Latency, SimConfig, SimConfigError, SimServer
from runner.survey.cell import Framing, PromptCell

CELLS = [PromptCell("en", "item", (q,), Framing("persona", c)) for q in range(1, 25) for c in ("China", "Japan")]
N = 960  # requests per rate check: 48 cells x 20 seeds


def bodies(n: int = N) -> list[dict]:
    return [chat_body(CELLS[i % len(CELLS)], seed=i // len(CELLS)) for i in range(n)]


async def send_all(config: SimConfig, requests: list[dict], concurrency: int = 16) -> tuple[list, SimServer]:
    """Post every body (bounded concurrency) → ([(status, headers, text)] in request order, server)."""
    async with SimServer(config, scores=SCORES) as sim, aiohttp.ClientSession() as session:
        gate = asyncio.Semaphore(concurrency)

        async def one(body: dict) -> tuple[int, dict, str]:
            async with gate:
                return await post(session, sim.base_url, body)

        return list(await asyncio.gather(*(one(b) for b in requests))), sim


def within_binomial(count: int, n: int, p: float, sigmas: float = 4.0) -> bool:
    """``count`` is within ``sigmas`` standard deviations of Binomial(n, p)'s mean."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("rate", [0.05, 0.3])
def test_server_errors_at_the_configured_rate_and_reproducibly(rate: float) -> None:
    config = SimConfig(seed=11, error_rate=rate)
    first, sim = run(send_all(config, bodies()))
    statuses = [s for s, _, _ in first]
    errors = [s for s in statuses if s >= 500]
    assert within_binomial(len(errors), N, rate)
    assert set(errors) <= {500, 502, 503} and len(set(errors)) == 3
    assert all(json.loads(t)["error"]["type"] == "server_error" for s, _, t in first if s >= 500)
    assert sim.log.by_outcome["server_error"] == len(errors)
    # Faults depend on (seed, request, attempt), not on arrival order: a second server agrees request by request.
    again, _ = run(send_all(config, bodies(), concurrency=3))
    assert [s for s, _, _ in again] == statuses


def test_a_retried_request_gets_a_fresh_fault_draw() -> None:
    body = chat_body(CELLS[0], seed=1)

    async def go() -> list[int]:
        async with (
            SimServer(SimConfig(seed=2, error_rate=0.5), scores=SCORES) as sim,
            aiohttp.ClientSession() as session,
        ):
            return [(await post(session, sim.base_url, body))[0] for _ in range(40)]

    statuses = run(go())
    assert 200 in statuses and any(s >= 500 for s in statuses)


def test_malformed_bodies_at_the_configured_rate() -> None:
    results, sim = run(send_all(SimConfig(seed=5, malformed_rate=0.2), bodies()))
    bad = [(h, t) for s, h, t in results if s == 200 and not is_json(t)]
    assert all(s == 200 for s, _, _ in results)
    assert within_binomial(len(bad), N, 0.2)
    html = [t for h, t in bad if h["Content-Type"].startswith("text/html")]
    truncated = [t for h, t in bad if h["Content-Type"].startswith("application/json")]
    assert html and truncated and len(html) + len(truncated) == len(bad)
    assert all("<html>" in t for t in html)
    assert all(t.startswith('{"id": "chatcmpl-sim-') for t in truncated)
    assert sim.log.by_outcome["malformed"] == len(bad)


def test_refusals_and_chatty_replies_at_their_rates() -> None:
    results, sim = run(send_all(SimConfig(seed=8, refusal_rate=0.1, chatty_rate=0.3), bodies()))
    texts = [content(t) for _, _, t in results]
    refusals = [t for t in texts if t.startswith("As an AI, I do not have personal preferences")]
    plain = [t for t in texts if t in {"1", "2", "3", "4", "5"}]
    chatty = len(texts) - len(refusals) - len(plain)
    assert within_binomial(len(refusals), N, 0.1)
    assert within_binomial(chatty, N, 0.9 * 0.3)  # chatty is drawn only for replies that do not refuse
    entries = sim.log.entries()
    assert sum(e.outcome == "refusal" for e in entries) == len(refusals)
    assert all(e.answers == (None,) for e in entries if e.outcome == "refusal")
    for entry in entries:
        if entry.outcome == "chatty":
            (answer,) = entry.answers
            assert str(answer) in entry.reply and entry.reply not in {"1", "2", "3", "4", "5"}


def test_hangs_make_clients_time_out_and_closing_ends_them() -> None:
    async def go() -> tuple[list[str], float, SimServer]:
        sim = SimServer(SimConfig(seed=1, hang_rate=1.0, hang_s=120.0), scores=SCORES)
        await sim.start()
        outcomes = []
        async with aiohttp.ClientSession() as session:
            for body in bodies(3):
                try:
                    await post(session, sim.base_url, body, timeout=aiohttp.ClientTimeout(total=0.3))
                    outcomes.append("answered")
                except TimeoutError:
                    outcomes.append("timeout")
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await sim.close()
        return outcomes, time.monotonic() - started, sim

    outcomes, close_s, sim = run(go())
    assert outcomes == ["timeout"] * 3
    assert close_s < 5.0, "closing the server must not wait out hang_s"
    assert [e.outcome for e in sim.log.entries()] == ["hang"] * 3


def test_latency_is_applied() -> None:
    async def go() -> list[float]:
        async with (
            SimServer(SimConfig(latency=Latency.parse("uniform:80:120")), scores=SCORES) as sim,
            aiohttp.ClientSession() as session,
        ):
            times = []
            for body in bodies(5):
                started = time.monotonic()
                await post(session, sim.base_url, body)
                times.append(time.monotonic() - started)
            return times

    assert min(run(go())) >= 0.08


@pytest.mark.slow
def test_rate_limit_answers_429_with_retry_after_headers_and_recovers() -> None:
    async def go() -> tuple[list[tuple[int, dict]], tuple[int, dict], SimServer]:
        config = SimConfig(requests_per_minute=600, burst=5)
        async with SimServer(config, scores=SCORES) as sim, aiohttp.ClientSession() as session:
            burst = [(s, h) for s, h, _ in [await post(session, sim.base_url, b) for b in bodies(8)]]
            wait_ms = int(burst[-1][1]["retry-after-ms"])
            await asyncio.sleep(wait_ms / 1000.0 + 0.01)
            status, headers, _ = await post(session, sim.base_url, bodies(9)[-1])
            return burst, (status, headers), sim

    burst, after, sim = run(go())
    assert [s for s, _ in burst] == [200] * 5 + [429] * 3
    headers = burst[-1][1]
    assert headers["Retry-After"] == "1" and 0 < int(headers["retry-after-ms"]) <= 1000
    assert headers["x-ratelimit-limit-requests"] == "600"
    assert headers["x-ratelimit-remaining-requests"] == "595"
    assert headers["x-ratelimit-reset-requests"].endswith("s")
    assert after[0] == 200, "after waiting retry-after-ms the request is accepted"
    assert sim.log.by_status[429] == 3


def test_per_minute_budget_counts_only_accepted_requests() -> None:
    async def go() -> list[tuple[int, dict]]:
        async with (
            SimServer(SimConfig(requests_per_minute=20), scores=SCORES) as sim,
            aiohttp.ClientSession() as session,
        ):
            return [(s, h) for s, h, _ in [await post(session, sim.base_url, b) for b in bodies(30)]]

    results = run(go())
    assert [s for s, _ in results] == [200] * 20 + [429] * 10
    retry = [int(h["Retry-After"]) for s, h in results if s == 429]
    assert all(59 <= r <= 60 for r in retry), retry
    assert all(int(h["x-ratelimit-remaining-requests"]) == 20 - i - 1 for i, (s, h) in enumerate(results[:20]))


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"error_rate": 1.5}, "error_rate"),
        ({"error_rate": 0.6, "malformed_rate": 0.6}, "error_rate + malformed_rate + hang_rate"),
        ({"requests_per_minute": 0}, "requests_per_minute"),
        ({"spread": 0.0}, "spread"),
        ({"signal": -1.0}, "signal"),
    ],
)
def test_bad_config_names_the_key(kwargs: dict, key: str) -> None:
    with pytest.raises(SimConfigError) as info:
        SimConfig(**kwargs)
    assert info.value.key == key and key in str(info.value)


@pytest.mark.parametrize("text", ["fast", "uniform:5", "uniform:9:3", "lognormal:-1:1", "exponential:x"])
def test_bad_latency_specs_name_the_option(text: str) -> None:
    with pytest.raises(SimConfigError, match="latency"):
        Latency.parse(text)


def test_tokens_per_minute_budget_counts_prompt_plus_max_tokens() -> None:
    body = chat_body(CELLS[0], seed=1, max_tokens=50)

    async def go() -> tuple[list[tuple[int, dict, str]], int]:
        async with (
            SimServer(SimConfig(tokens_per_minute=1000), scores=SCORES) as sim,
            aiohttp.ClientSession() as session,
        ):
            first = await post(session, sim.base_url, body)
            prompt_tokens = json.loads(first[2])["usage"]["prompt_tokens"]
            rest = [await post(session, sim.base_url, body) for _ in range(12)]
            huge = await post(session, sim.base_url, chat_body(CELLS[0], seed=1, max_tokens=5000))
            return [first, *rest, huge], prompt_tokens

    results, prompt_tokens = run(go())
    weight = prompt_tokens + 50
    fits = 1000 // weight
    assert [s for s, _, _ in results[:-1]] == [200] * fits + [429] * (13 - fits)
    status, headers, text = results[fits]
    assert json.loads(text)["error"]["type"] == "tokens" and 59 <= int(headers["Retry-After"]) <= 60
    assert headers["x-ratelimit-remaining-tokens"] == str(1000 - fits * weight)
    assert results[0][1]["x-ratelimit-limit-tokens"] == "1000"
    status, _, text = results[-1]
    assert status == 400 and json.loads(text)["error"]["code"] == "request_too_large"
