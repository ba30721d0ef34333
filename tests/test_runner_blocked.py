"""Provider-side blocks (Gemini blockReason / SAFETY, OpenAI content_filter, Anthropic refusal) parse as refusals.

End to end: a real loopback server answers in the provider's own shape, ``run_sweep`` stores the replies and
the parse stage reads their finish reasons; the raw reply stays stored as it came.
"""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pytest
from aiohttp import web

from _runner_support import check_run_dir, make_spec
from runner.parse import PARSER_VERSION, parse_reply
from runner.parse.answers import CELL_COLUMNS, Parser, answers_table
from runner.parse.stage import reparse
from runner.rundir import RunWriter, read_dataset
from runner.rundir.reader import part_pairs, read_part
from runner.survey.cell import PromptCell
from runner.sweep.session import run_sweep
from test_reply_boundary import ScriptedServer

GEMINI_USAGE = {"promptTokenCount": 30, "candidatesTokenCount": 1}


def _gemini(n: int, body: dict) -> web.Response:
    """1st, 4th, ...: the prompt blocked; 2nd, 5th: a candidate stopped for SAFETY with partial text; else "2"."""
    if n % 3 == 1:
        return web.json_response(
            {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": GEMINI_USAGE}
        )
    text, finish = ("2", "SAFETY") if n % 3 == 2 else ("2", "STOP")
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish}
    return web.json_response({"candidates": [candidate], "usageMetadata": GEMINI_USAGE})


def _openai(n: int, body: dict) -> web.Response:
    """Odd requests: cut by the content filter after "3"; even: a plain "3"."""
    finish = "content_filter" if n % 2 else "stop"
    choice = {"message": {"role": "assistant", "content": "3"}, "finish_reason": finish}
    return web.json_response({"choices": [choice], "usage": {"prompt_tokens": 20, "completion_tokens": 1}})


def _anthropic(n: int, body: dict) -> web.Response:
    """Odd requests: Anthropic's ``refusal`` stop reason (with the text it sent); even: a plain "4"."""
    stop, text = ("refusal", "4") if n % 2 else ("end_turn", "4")
    return web.json_response(
        {
            "type": "message",
            "role": "assistant",
            "stop_reason": stop,
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 20, "output_tokens": 1},
        }
    )


CASES = {
    "gemini": (_gemini, {"blocked:PROHIBITED_CONTENT", "SAFETY"}, "STOP", "2"),
    "openai": (_openai, {"content_filter"}, "stop", "3"),
    "anthropic": (_anthropic, {"refusal"}, "end_turn", "4"),
}


@pytest.mark.parametrize("provider", sorted(CASES))
def test_provider_blocks_are_recorded_refusals_and_the_raw_reply_is_kept(
    provider: str, tmp_path: Path, monkeypatch
) -> None:
    respond, blocks, normal, text = CASES[provider]
    monkeypatch.setenv("HOFCAT_TEST_KEY", "k-blocked-test-123456")
    with ScriptedServer(respond, provider) as server:
        spec = make_spec(
            server.base_url,
            endpoint={"provider": provider, "model": "m-1", "api_key_env": "HOFCAT_TEST_KEY", "max_concurrency": 1},
            design={"personas": ["China"], "questions": [1, 2, 3, 4, 5, 6], "seeds": [1], "temperature": [0.0]},
        )
        result = run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
    assert len(server.requests) == 6 and (result.stored, result.failed) == (6, 0)  # no retries, no failures
    responses = check_run_dir(tmp_path / "run", spec)
    answers = {r["cell_key"]: r for r in read_dataset(tmp_path / "run", "answers").to_pylist()}
    assert len(answers) == 6
    blocked = [k for k, r in responses.items() if r["finish_reason"] in blocks]
    assert len(blocked) == (4 if provider == "gemini" else 3)
    for key, row in responses.items():
        answer = answers[key]
        assert answer["parser_version"] == PARSER_VERSION
        if key in blocked:
            assert (answer["status"], answer["option_id"]) == ("refusal", None), (row, answer)
        else:
            assert row["finish_reason"] == normal and answer["status"] == "ok"
        # the raw reply is stored as it came: the prompt-blocked Gemini reply had no text, the others theirs
        expected = "" if row["finish_reason"] == "blocked:PROHIBITED_CONTENT" else text
        assert row["response_text"] == expected
    # a reparse by the same parser finds every part current and changes nothing
    again = reparse(tmp_path / "run")
    assert (again.rewritten, again.parser_version) == (0, PARSER_VERSION)


def test_parse_without_a_finish_reason_column_reads_the_text_and_the_api_takes_one() -> None:
    cell = PromptCell("en", "survey", (1, 2))
    row = dict.fromkeys(CELL_COLUMNS) | {
        "cell_key": "k",
        "response_text": "1. 3\n2. 4",
        "language": "en",
        "mode": "survey",
        "questions": [1, 2],
        "framing": "none",
        "option_order": [1, 2, 3, 4, 5],
        "reply_format": "number",
    }
    plain = answers_table(pa.Table.from_pylist([row]))  # an older part: no finish_reason column
    assert plain.column("status").to_pylist() == ["ok", "ok"]
    blocked = answers_table(pa.Table.from_pylist([row | {"finish_reason": "blocked:SAFETY"}]))
    assert blocked.column("status").to_pylist() == ["refusal", "refusal"]
    assert [a.status for a in parse_reply("1. 3\n2. 4", cell, "content_filter").answers] == ["refusal", "refusal"]
    assert [a.status for a in parse_reply("1. 3\n2. 4", cell, "RECITATION").answers] == ["ok", "ok"]
    assert [a.status for a in parse_reply("1. 3\n2. 4", cell, "stop").answers] == ["ok", "ok"]


def test_reparse_turns_an_older_parsers_no_answer_for_a_blocked_prompt_into_a_refusal(tmp_path: Path) -> None:
    with ScriptedServer(_gemini, "gemini") as server:
        spec = make_spec(
            server.base_url,
            endpoint={"provider": "gemini", "model": "g-1", "max_concurrency": 1},
            design={"personas": ["China"], "questions": [1, 2, 3], "seeds": [1], "temperature": [0.0]},
        )
        run_sweep(spec, tmp_path / "run", live=False, stream=io.StringIO())
    # what the 1.3.0 parse stage stored for these replies: it read the text alone (no finish_reason column)
    with RunWriter.attach(tmp_path / "run") as writer:
        for pair in part_pairs(writer.layout):
            text_only = read_part(pair.responses, CELL_COLUMNS, "cell_key")
            writer.commit("answers", pair.n, answers_table(text_only, Parser("1.3.0", parse_reply)))
    before = read_dataset(tmp_path / "run", "answers").column("status").to_pylist()
    assert sorted(before) == ["no_answer", "ok", "ok"]  # the SAFETY-stopped "2" read as an answer, too
    result = reparse(tmp_path / "run")
    assert result.rewritten >= 1 and result.previous_versions == ("1.3.0",)
    after = {r["cell_key"]: r["status"] for r in read_dataset(tmp_path / "run", "answers").to_pylist()}
    finish = {r["cell_key"]: r["finish_reason"] for r in read_dataset(tmp_path / "run", "responses").to_pylist()}
    assert {k: (finish[k], s) for k, s in after.items()} == {
        k: (f, "refusal" if f in ("blocked:PROHIBITED_CONTENT", "SAFETY") else "ok") for k, f in finish.items()
    }
    assert sorted(after.values()) == ["ok", "refusal", "refusal"]
