"""The real llama.cpp server (xllamacpp) with SmolLM2-135M: OpenAI chat, seeds, constrained decoding, parsing.

One server for the whole module (starting one costs seconds); replies are short and few. Reply texts differ
between llama.cpp builds, so the tests assert behaviour (shapes, equality under a seed, grammar validity,
status accounting), never exact text.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import aiohttp
import pytest

from runner.endpoints.llm import LocalLLM
from runner.parse import STATUSES, parse_reply
from runner.survey.cell import Framing, PromptCell
from runner.survey.constrained import constrained_request_fields
from runner.survey.prompts import build_messages
from runner.sweep.probe import probe_determinism

pytestmark = [pytest.mark.llm, pytest.mark.slow]  # llm tests are slow: `-m "not slow"` skips them

QUESTIONS = (1, 7, 13, 19)


@pytest.fixture(scope="module")
def llm():
    with LocalLLM(model="smollm2", slots=4, ctx_per_slot=1024) as server:
        yield server


async def _chat_many(llm: LocalLLM, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """POST every body to /chat/completions concurrently; return the decoded JSON responses in order."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:

        async def one(body: dict[str, Any]) -> dict[str, Any]:
            async with session.post(llm.base_url + "/chat/completions", json=body) as response:
                assert response.status == 200, await response.text()
                return await response.json()

        return list(await asyncio.gather(*(one(body) for body in bodies)))


def _body(llm: LocalLLM, messages: list[dict[str, str]], **fields: Any) -> dict[str, Any]:
    return {"model": llm.model_name, "messages": messages, **fields}


def _text(response: dict[str, Any]) -> str:
    return response["choices"][0]["message"]["content"]


def test_openai_chat_completion_shape_and_token_limit(llm):
    messages = [{"role": "user", "content": "Name a colour."}]
    [response] = asyncio.run(_chat_many(llm, [_body(llm, messages, max_tokens=6, temperature=0)]))
    assert response["object"] == "chat.completion"
    assert response["model"] == "smollm2"
    choice = response["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"]
    assert choice["finish_reason"] in ("stop", "length")
    usage = response["usage"]
    assert 1 <= usage["completion_tokens"] <= 6
    assert usage["prompt_tokens"] > 3
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_models_endpoint_lists_the_alias(llm):
    async def models() -> dict[str, Any]:
        async with aiohttp.ClientSession() as session, session.get(llm.base_url + "/models") as response:
            assert response.status == 200
            return await response.json()

    ids = [entry["id"] for entry in asyncio.run(models())["data"]]
    assert ids == ["smollm2"]


def test_same_seed_same_text_across_parallel_slots_and_different_seeds_differ(llm):
    messages = [{"role": "user", "content": "Tell me about your favourite city."}]
    same = [_body(llm, messages, max_tokens=8, temperature=1.0, seed=77) for _ in range(2)]
    varied = [_body(llm, messages, max_tokens=8, temperature=1.0, seed=100 + i) for i in range(2)]
    # All four at once on four slots: equal seeds are decoded in different slots, batched with other requests.
    replies = [_text(r) for r in asyncio.run(_chat_many(llm, same + varied))]
    assert replies[0] == replies[1], replies
    assert len(set(replies)) > 1, replies


def test_determinism_probe_finds_the_seed_honoured(llm):
    probe = asyncio.run(probe_determinism(llm.base_url, llm.model_name, repeats=3, max_tokens=6))
    assert probe.seed == "honoured" and probe.seed_honoured
    assert probe.greedy_identical_share == 1.0
    assert probe.condition("hot_seed").identical_share == 1.0
    assert probe.condition("hot_seeds").distinct_texts > 1
    assert all(c.errors == 0 and c.requests == 3 for c in probe.conditions)
    data = probe.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["seed"] == "honoured" and [c["name"] for c in data["conditions"]] == [
        "t0",
        "t0_seed",
        "hot_seed",
        "hot_seeds",
    ]


def _cells(reply_format: str) -> list[PromptCell]:
    return [
        PromptCell(
            language="en",
            mode="item",
            questions=(q,),
            reply_format=reply_format,
            framing=Framing(kind="persona", country="Japan"),
        )
        for q in QUESTIONS
    ]


def test_grammar_constrains_the_reply_to_one_digit_and_every_reply_parses(llm):
    cells = _cells("fewshot")
    bodies = [
        _body(llm, build_messages(c), max_tokens=4, temperature=1.0, seed=5, **constrained_request_fields("grammar"))
        for c in cells
    ]
    replies = [_text(r) for r in asyncio.run(_chat_many(llm, bodies))]
    assert all(len(t) == 1 and t in "12345" for t in replies), replies
    answers = [parse_reply(t, c).answers[0] for t, c in zip(replies, cells)]
    assert [a.status for a in answers] == ["ok"] * len(cells)
    # Canonical option order: the displayed number is the option ID.
    assert [a.option_id for a in answers] == [int(t) for t in replies]


def test_json_schema_response_format_gives_valid_objects_that_parse(llm):
    cells = _cells("json")
    bodies = [
        _body(
            llm, build_messages(c), max_tokens=48, temperature=1.0, seed=5, **constrained_request_fields("json_schema")
        )
        for c in cells
    ]
    replies = [_text(r) for r in asyncio.run(_chat_many(llm, bodies))]
    for text, cell in zip(replies, cells):
        obj = json.loads(text)
        assert set(obj) == {"option_id", "reason"}, obj
        assert obj["option_id"] in (1, 2, 3, 4, 5) and isinstance(obj["reason"], str)
        assert len(obj["reason"]) <= 40
        answer = parse_reply(text, cell).answers[0]
        assert answer.status == "ok" and answer.option_id == obj["option_id"]


def test_parse_status_accounting_on_unconstrained_replies(llm):
    cells = _cells("number")
    bodies = [_body(llm, build_messages(c), max_tokens=8, temperature=1.0, seed=9) for c in cells]
    replies = [_text(r) for r in asyncio.run(_chat_many(llm, bodies))]
    answers = [parse_reply(t, c).answers[0] for t, c in zip(replies, cells)]
    counts = Counter(a.status for a in answers)
    assert sum(counts.values()) == len(cells) and set(counts) <= set(STATUSES)
    for answer, cell in zip(answers, cells):
        assert answer.question == cell.questions[0]
        # An option ID exactly when the status is ok: the accounting the parse rate is computed from.
        assert (answer.option_id is not None) == (answer.status == "ok")
        assert answer.option_id is None or 1 <= answer.option_id <= 5
