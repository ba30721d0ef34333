"""The simulated endpoint speaks OpenAI chat completions over real HTTP on 127.0.0.1, reproducibly."""

from __future__ import annotations

import json
from collections import Counter

import aiohttp
import pytest

from _sim_client import SCORES, chat_body, content, post, run
from runner.endpoints.sim import SimConfig, SimServer, request_key
from runner.survey.cell import Framing, PromptCell

ITEM = PromptCell("en", "item", (7,), Framing("persona", "China"))
SURVEY = PromptCell("en", "survey", tuple(range(1, 25)), Framing("persona", "Germany"))


def serve(config: SimConfig | None = None) -> SimServer:
    return SimServer(config or SimConfig(seed=3), scores=SCORES)


def test_models_health_and_completion_shape() -> None:
    async def go() -> None:
        async with serve() as sim, aiohttp.ClientSession() as session:
            async with session.get(f"{sim.base_url}/models") as r:
                assert r.status == 200
                assert [m["id"] for m in (await r.json())["data"]] == ["sim-1"]
            async with session.get(f"{sim.url}/health") as r:
                assert (await r.json()) == {"status": "ok"}
            status, headers, text = await post(session, sim.base_url, chat_body(ITEM, seed=1, model="gpt-x"))
            assert status == 200 and headers["Content-Type"].startswith("application/json")
            reply = json.loads(text)
            assert reply["object"] == "chat.completion" and reply["model"] == "gpt-x"
            choice = reply["choices"][0]
            assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "stop"
            assert choice["message"]["content"] in {"1", "2", "3", "4", "5"}
            usage = reply["usage"]
            assert usage["prompt_tokens"] > 20 and usage["completion_tokens"] == 1
            assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]

    run(go())


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        ({"model": "sim-1"}, "messages"),
        ({"model": "sim-1", "messages": [{"role": "user", "content": "hi"}], "temperature": 2.5}, "temperature"),
        ({"model": "sim-1", "messages": [{"role": "user", "content": "hi"}], "top_p": -0.1}, "top_p"),
        ({"model": "sim-1", "messages": [{"role": "user", "content": "hi"}], "seed": "7"}, "seed"),
        ({"model": "sim-1", "messages": [{"role": "user", "content": "hi"}], "stream": True}, "stream"),
        ({"model": "sim-1", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ],
)
def test_bad_requests_get_400_naming_the_parameter(body: object, param: str | None) -> None:
    async def go() -> None:
        async with serve() as sim, aiohttp.ClientSession() as session:
            status, _, text = await post(session, sim.base_url, body)
            assert status == 400
            error = json.loads(text)["error"]
            assert error["type"] == "invalid_request_error" and error["param"] == param
            assert sim.log.entries()[-1].outcome == "bad_request"

    run(go())


def test_same_request_and_seed_give_the_same_reply_across_servers() -> None:
    bodies = [chat_body(c, seed=s) for c in (ITEM, SURVEY) for s in range(20)]

    async def replies() -> list[str]:
        async with serve() as sim, aiohttp.ClientSession() as session:
            return [content((await post(session, sim.base_url, b))[2]) for b in bodies]

    first, second = run(replies()), run(replies())
    assert first == second
    assert len(set(first[:20])) > 1, "different seeds should give different item answers at temperature 1"
    other = run(_with_config(SimConfig(seed=4), bodies))
    assert other != first, "the server seed changes the draws"


async def _with_config(config: SimConfig, bodies: list[dict]) -> list[str]:
    async with SimServer(config, scores=SCORES) as sim, aiohttp.ClientSession() as session:
        return [content((await post(session, sim.base_url, b))[2]) for b in bodies]


@pytest.mark.slow
def test_temperature_zero_answers_the_mode_deterministically() -> None:
    cells = [
        PromptCell("en", "item", (q,), Framing("persona", c))
        for q in (2, 7, 13, 16)
        for c in ("China", "U.S.A.", "Slovak Rep")
    ]

    async def go() -> tuple[dict, dict, SimServer]:
        greedy: dict[PromptCell, set[str]] = {}
        sampled: dict[PromptCell, Counter[str]] = {}
        async with serve() as sim, aiohttp.ClientSession() as session:
            for cell in cells:
                greedy[cell] = {
                    content((await post(session, sim.base_url, chat_body(cell, seed=s, temperature=0)))[2])
                    for s in range(5)
                }
                sampled[cell] = Counter(
                    [
                        content((await post(session, sim.base_url, chat_body(cell, seed=s, temperature=1)))[2])
                        for s in range(400)
                    ]
                )
        return greedy, sampled, sim

    greedy, sampled, sim = run(go())
    checked = 0
    for cell in cells:
        assert len(greedy[cell]) == 1, f"temperature 0 must not vary with the seed: {greedy[cell]}"
        (answer,) = greedy[cell]
        probs = sim.sim.model.distribution(cell.framing.country, cell.questions[0], 1.0, 1.0)
        assert int(answer) == max(range(1, 6), key=lambda k: probs[k - 1]), "temperature 0 = most likely answer"
        # Where the mode is clear, 400 temperature-1 draws find it too (not only the model's own tables).
        ranked = sorted(probs, reverse=True)
        if ranked[0] - ranked[1] > 0.1:
            checked += 1
            assert sampled[cell].most_common(1)[0][0] == answer, (cell, sampled[cell], answer)
    assert checked >= 3


def test_unseeded_requests_still_answer_and_vary() -> None:
    async def go() -> list[str]:
        async with serve() as sim, aiohttp.ClientSession() as session:
            return [content((await post(session, sim.base_url, chat_body(ITEM)))[2]) for _ in range(40)]

    answers = run(go())
    assert set(answers) <= {"1", "2", "3", "4", "5"} and len(set(answers)) > 1


def test_survey_reply_is_a_numbered_list_and_max_tokens_truncates() -> None:
    async def go() -> tuple[str, dict, SimServer]:
        async with serve() as sim, aiohttp.ClientSession() as session:
            full = content((await post(session, sim.base_url, chat_body(SURVEY, seed=1)))[2])
            _, _, text = await post(session, sim.base_url, chat_body(SURVEY, seed=1, max_tokens=10))
            return full, json.loads(text), sim

    full, cut, sim = run(go())
    lines = full.splitlines()
    assert [line.split(". ")[0] for line in lines] == [str(q) for q in range(1, 25)]
    assert all(line.split(". ")[1] in {"1", "2", "3", "4", "5"} for line in lines)
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["usage"]["completion_tokens"] <= 10
    assert full.startswith(cut["choices"][0]["message"]["content"])
    assert [e.finish_reason for e in sim.log.entries()] == ["stop", "length"]


def test_replies_use_displayed_positions_and_the_requested_format() -> None:
    order = (4, 2, 5, 1, 3)
    number = PromptCell("en", "item", (7,), Framing("persona", "China"), option_order=order)
    as_json = PromptCell("en", "item", (7,), Framing("persona", "China"), option_order=order, reply_format="json")

    async def go() -> tuple[list[str], list[str], SimServer]:
        async with serve() as sim, aiohttp.ClientSession() as session:
            plain = [content((await post(session, sim.base_url, chat_body(number, seed=s)))[2]) for s in range(30)]
            js = [content((await post(session, sim.base_url, chat_body(as_json, seed=s)))[2]) for s in range(30)]
            return plain, js, sim

    plain, js, sim = run(go())
    entries = sim.log.entries()
    for text, entry in zip(plain, entries[:30], strict=True):
        assert entry.option_order == order and entry.reply == text
        (chosen,) = entry.answers
        assert int(text) == order.index(chosen) + 1, "the reply is the position at which the chosen ID is shown"
    for text, entry in zip(js, entries[30:], strict=True):
        reply = json.loads(text)
        assert set(reply) == {"option_id", "reason"} and reply["option_id"] == order.index(entry.answers[0]) + 1


def test_content_parts_are_read_like_strings_and_keyed_like_the_log() -> None:
    plain = chat_body(ITEM, seed=4)
    parts = dict(
        plain,
        messages=[{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in plain["messages"]],
    )

    async def go() -> tuple[str, str, SimServer]:
        async with serve() as sim, aiohttp.ClientSession() as session:
            a = content((await post(session, sim.base_url, plain))[2])
            b = content((await post(session, sim.base_url, parts))[2])
            return a, b, sim

    a, b, sim = run(go())
    first, second = sim.log.entries()
    assert first.questions == second.questions == (7,) and first.country == second.country == "China"
    assert [first.request_key, second.request_key] == [request_key(plain), request_key(parts)]
    assert first.request_key != second.request_key and a in "12345" and b in "12345"


def test_json_mode_requests_get_json_replies() -> None:
    async def go() -> str:
        async with serve() as sim, aiohttp.ClientSession() as session:
            body = chat_body(ITEM, seed=2) | {"response_format": {"type": "json_object"}}
            return content((await post(session, sim.base_url, body))[2])

    reply = json.loads(run(go()))
    assert reply["option_id"] in range(1, 6) and isinstance(reply["reason"], str)


def test_a_prompt_without_a_survey_question_gets_a_polite_non_answer() -> None:
    async def go() -> tuple[int, str, SimServer]:
        async with serve() as sim, aiohttp.ClientSession() as session:
            body = {"model": "sim-1", "messages": [{"role": "user", "content": "What is the capital of France?"}]}
            status, _, text = await post(session, sim.base_url, body)
            return status, content(text), sim

    status, text, sim = run(go())
    assert status == 200 and "could not find a survey question" in text
    assert sim.log.entries()[-1].outcome == "unknown_prompt"
