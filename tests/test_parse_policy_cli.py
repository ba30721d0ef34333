"""Policies over parsed answers, and the ``hofcat parse-text`` command (in process and as the real script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner import cli
from runner.parse import PARSER_VERSION, STATUSES, Answer, ParseResult, Policy, PolicyError, apply_policies, parse_reply
from runner.parse.policy import scored_option
from runner.survey.cell import PromptCell

GPT4 = """Alright, here are my answers:

For the ideal job:

1. 1

2. 2

3. 3

4. 2

5. 2

6. 1

7. 3

8. 4

9. 4

10. 4

For the private life:

1. 2

2. 3

3. 2

4. 3

1. 3

2. 3

3. 3

4. 2

5. 3

6. 3

For the statements:

1. 2

2. 1

3. 2

4. 2
"""

RESULT = ParseResult(
    (
        Answer(14, 2, "ok", displayed=2),
        Answer(15, 1, "ok", displayed=1),
        Answer(16, None, "refusal"),
        Answer(17, None, "ambiguous"),
        Answer(18, None, "no_answer"),
        Answer(19, 5, "ok", hedged=True, displayed=5),
    )
)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (Policy(), {14: 2, 15: 1, 19: 5}),
        (Policy(unparseable="neutral"), {14: 2, 15: 1, 16: 3, 17: 3, 18: 3, 19: 5}),
        (Policy(health_items="neutral"), {14: 2, 15: 3, 18: 3, 19: 5}),
        (Policy("neutral", "neutral"), {14: 2, 15: 3, 16: 3, 17: 3, 18: 3, 19: 5}),
    ],
)
def test_policies(policy, expected):
    assert apply_policies(RESULT, policy) == expected
    assert apply_policies(list(RESULT.answers), policy) == expected  # plain answers too (re-policying)


def test_policy_values_are_checked_and_recordable():
    with pytest.raises(PolicyError, match="unparseable: 'zero' is not 'drop' or 'neutral'"):
        Policy(unparseable="zero")
    with pytest.raises(PolicyError, match="health_items"):
        Policy(health_items="skip")
    with pytest.raises(PolicyError, match="partial: 'listed' is not 'sample' or 'drop'"):
        Policy(partial="listed")  # renormalising over the listed options is the silent zero-fill: not offered
    assert Policy("neutral", "answered").to_dict() == {
        "unparseable": "neutral",
        "health_items": "answered",
        "partial": "sample",
    }


def test_result_carries_the_parser_version():
    result = parse_reply("3", PromptCell("en", "item", (4,)))
    assert result.parser_version == PARSER_VERSION and PARSER_VERSION.count(".") == 2


def run_cli(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_parse_text_survey_from_a_file(tmp_path, capsys):
    path = tmp_path / "reply.txt"
    path.write_text(GPT4, encoding="utf-8")
    code, out, _ = run_cli(capsys, "parse-text", "--mode", "survey", str(path))
    assert code == 0
    assert out["parser_version"] == PARSER_VERSION
    assert [a["option_id"] for a in out["answers"]] == [
        1,
        2,
        3,
        2,
        2,
        1,
        3,
        4,
        4,
        4,
        2,
        3,
        2,
        3,
        3,
        3,
        3,
        2,
        3,
        3,
        2,
        1,
        2,
        2,
    ]
    assert {a["status"] for a in out["answers"]} == {"ok"}


def test_parse_text_item_with_shuffled_options(tmp_path, capsys):
    path = tmp_path / "reply.txt"
    path.write_text("非常重要", encoding="utf-8")
    code, out, _ = run_cli(
        capsys,
        "parse-text",
        "--mode",
        "item",
        "--question",
        "2",
        "--language",
        "zh",
        "--options-order",
        "5,2,4,1,3",
        str(path),
    )
    assert code == 0
    assert out["answers"] == [{"question": 2, "option_id": 2, "status": "ok", "hedged": False, "displayed": 2}]
    path.write_text("1", encoding="utf-8")
    _, out, _ = run_cli(
        capsys, "parse-text", "--mode", "item", "--question", "2", "--options-order", "5,2,4,1,3", str(path)
    )
    assert out["answers"][0]["option_id"] == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mode", "item"], "item mode needs --question N"),
        (["--mode", "item", "--question", "25"], "item mode needs --question N with N in 1-24"),
        (["--mode", "survey", "--question", "3"], "--question is for item mode"),
        (["--mode", "survey", "--language", "de"], "--language 'de' is not an instrument language (ar, en, sk, zh)"),
        (["--mode", "survey", "--options-order", "1,2,3"], "not a permutation of 1,2,3,4,5"),
        (["--mode", "survey", "--options-order", "a,b"], "expected comma-separated option IDs"),
    ],
)
def test_parse_text_rejects_bad_arguments(tmp_path, capsys, argv, message):
    path = tmp_path / "reply.txt"
    path.write_text("3", encoding="utf-8")
    code, out, err = run_cli(capsys, "parse-text", *argv, str(path))
    assert code == 2 and out is None
    assert message in err


def test_parse_text_missing_file(tmp_path, capsys):
    code, _, err = run_cli(capsys, "parse-text", "--mode", "survey", str(tmp_path / "nope.txt"))
    assert code == 2 and "cannot read" in err and "nope.txt" in err


@pytest.mark.slow
def test_parse_text_console_script_reads_stdin():
    script = Path(sys.executable).with_name("hofcat")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "runner.cli"]
    done = subprocess.run(
        [*command, "parse-text", "--mode", "item", "--question", "21", "--language", "ar", "-"],
        input="الإجابة: ٤",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(done.stdout)["answers"][0] == {
        "question": 21,
        "option_id": 4,
        "status": "ok",
        "hedged": False,
        "displayed": 4,
    }
    help_text = subprocess.run(
        [*command, "parse-text", "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "--options-order" in help_text


def _rule(policy: Policy, answer: Answer) -> int | None:
    """The policy rule as docs/parsing.md states it, written out independently of the code under test."""
    if policy.health_items == "neutral" and answer.question in (15, 18):
        return 3
    if answer.status == "ok":
        return answer.option_id
    return 3 if policy.unparseable == "neutral" else None


_answers = st.lists(
    st.one_of(
        st.builds(
            lambda q, o, h: Answer(q, o, "ok", hedged=h, displayed=o),
            st.integers(1, 30),
            st.integers(1, 5),
            st.booleans(),
        ),
        st.builds(lambda q, s: Answer(q, None, s), st.integers(1, 30), st.sampled_from(STATUSES[1:])),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(
    cells=st.lists(_answers, min_size=1, max_size=6),
    unparseable=st.sampled_from(["drop", "neutral"]),
    health=st.sampled_from(["answered", "neutral"]),
)
def test_apply_policies_and_the_table_expression_agree(cells, unparseable, health):
    """apply_policies per parse == scored_option over one answers table (as the analysis applies it) == the rule."""
    policy = Policy(unparseable, health)
    table = pl.DataFrame(
        [
            {"cell": c, "row": i, "question": a.question, "status": a.status, "option_id": a.option_id}
            for c, answers in enumerate(cells)
            for i, a in enumerate(answers)
        ],
        schema={"cell": pl.Int64, "row": pl.Int64, "question": pl.Int64, "status": pl.String, "option_id": pl.Int16},
    )
    scored = table.lazy().with_columns(scored_option(policy)).collect()
    for c, answers in enumerate(cells):
        rows = scored.filter(pl.col("cell") == c).sort("row")["scored"].to_list()
        assert rows == [_rule(policy, a) for a in answers]
        expected = {}
        for a in answers:  # a question answered twice keeps its last scored answer
            if _rule(policy, a) is not None:
                expected[a.question] = _rule(policy, a)
        assert apply_policies(answers, policy) == expected
        assert apply_policies(ParseResult(tuple(answers)), policy) == expected
