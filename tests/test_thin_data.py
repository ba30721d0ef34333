"""Thin data never crashes a stage (issue 26, item 1): ``hofcat analyze`` and ``hofcat report`` finish on any run
that has rows — no ok answers, one seed, one country, one question, only refusals, only failures, a ``--limit``
pilot — with what can be computed and a caveat for what cannot.

The runs are real run directories written by the sweep (an in-memory transport scripts each reply's outcome);
``analyze`` and ``report`` are the ``hofcat`` command's own entry point, called in-process so that many random
designs stay fast. A refused command must be one located line and exit 2.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markupsafe import escape

from _runner_support import make_spec
from runner.cli import main
from runner.rundir import read_dataset
from runner.sweep.mock import MockTransport, error_reply, openai_reply
from runner.sweep.plan import select
from runner.sweep.session import run_sweep

FAST = ["--resamples", "40", "--permutations", "19"]
PERSONAS = ["United States", "China", "Germany", "Japan", "Brazil"]
KINDS = ("ok", "refusal", "junk", "empty", "fail")


def hofcat(*argv: str) -> tuple[int, str, str]:
    """``hofcat ARGV`` in this process: exit status, stdout, stderr (a traceback would escape as an exception)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def reply(kind: str, body: dict, rng: random.Random):
    """The scripted reply of one request: an answer, a refusal, junk, nothing, or a server error."""
    if kind == "fail":
        return error_reply(500)
    if kind == "refusal":
        return openai_reply("I am an AI and cannot share personal opinions on that.")
    if kind == "junk":
        return openai_reply("banana " * rng.randint(1, 3))
    if kind == "empty":
        return openai_reply("")
    prompt = json.dumps(body["messages"])
    asked = len(set(re.findall(r"\\n(\d{1,2})\.", prompt))) or 1  # survey prompts number their questions
    if asked > 1:
        return openai_reply("\n".join(f"{i}. {rng.randint(1, 5)}" for i in range(1, asked + 1)))
    return openai_reply(str(rng.randint(1, 5)))


def sweep(out: Path, design: dict, weights: dict[str, int], *, seed: int = 0, limit: int | None = None) -> None:
    """Run ``design`` into ``out``, each request's outcome drawn with ``weights`` (failures are not retried)."""
    spec = make_spec("http://127.0.0.1:9/v1", design=design, endpoint={"max_retries": 0})
    rng = random.Random(seed)
    kinds, w = zip(*((k, n) for k, n in weights.items() if n), strict=True)

    def script(body: dict, attempt: int):
        return reply(rng.choices(kinds, w)[0], body, rng)

    run_sweep(
        spec,
        out,
        stream=io.StringIO(),
        transport_factory=lambda endpoint: MockTransport(script),
        selection=select(spec, limit=limit),
    )


def analyze_and_report(run: Path) -> tuple[dict, str, str]:
    """``hofcat analyze`` then ``hofcat report`` on ``run``, both exit 0: the summary, analyze's stdout, the page."""
    status, out, err = hofcat("analyze", str(run), *FAST)
    assert status == 0, err
    assert out.startswith(f"analysis written to {run / 'analysis'}\nanswers: "), out
    status, _page, err = hofcat("report", str(run))
    assert status == 0, err
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    return summary, out, (run / "report" / "index.html").read_text()


def assert_caveat(summary: dict, out: str, page: str, text: str) -> str:
    """The caveat containing ``text``: in the summary, printed by analyze and listed in the report."""
    found = [c for c in summary["caveats"] if text in c]
    assert found, summary["caveats"]
    assert f"caveat: {found[0]}" in out
    assert str(escape(found[0])) in page
    return found[0]


ONE = {"seeds": [1], "temperature": [0.0]}


def test_a_run_of_only_refusals_is_analysed_and_says_nothing_was_scored(tmp_path: Path) -> None:
    sweep(tmp_path / "r", {**ONE, "personas": PERSONAS[:3], "questions": [1, 2, 3]}, {"refusal": 1})
    summary, out, page = analyze_and_report(tmp_path / "r")
    assert summary["answers"] == 9 and summary["completeness"] == {
        "planned": 9,
        "replied": 9,
        "failed": 0,
        "missing": 0,
    }
    assert "0.0% parsed ok" in out
    assert "refusal 9" in assert_caveat(summary, out, page, "none of the 9 answers is scored")


def test_a_run_of_only_failures_is_analysed_without_answers(tmp_path: Path) -> None:
    sweep(tmp_path / "f", {**ONE, "personas": PERSONAS[:2], "questions": [1, 2]}, {"fail": 1})
    summary, out, page = analyze_and_report(tmp_path / "f")
    assert summary["answers"] == 0 and summary["completeness"]["failed"] == 4
    assert_caveat(summary, out, page, "no replies stored")
    assert "requests failed for good: 4" in page


def test_one_country_has_indices_but_no_ranking(tmp_path: Path) -> None:
    sweep(tmp_path / "c", {"personas": ["Germany"], "questions": list(range(1, 25)), "seeds": [1, 2, 3]}, {"ok": 1})
    summary, out, page = analyze_and_report(tmp_path / "c")
    assert summary["countries"] == ["Germany"] and summary["caveats"] == []
    assert any(w["kind"] == "few_countries" for w in summary["warnings"])
    assert "CAT" not in out.split("\n", 2)[2]  # no condition could be ranked: no CAT line
    assert "fewer than 3 countries" in page


def test_a_run_that_ranks_nothing_still_names_the_levels_it_varied(tmp_path: Path) -> None:
    design = {"personas": ["Germany"], "questions": [1, 2], "seeds": [1, 2], "temperature": [0.0, 1.0]}
    sweep(tmp_path / "t", design, {"ok": 1})
    summary, _, page = analyze_and_report(tmp_path / "t")
    assert summary["conditions"] == 2
    assert "varied: temperature (2 levels)" in page  # read from the answered conditions, not the empty CAT table


@pytest.mark.slow
def test_one_seed_gets_no_interval_and_says_why(tmp_path: Path) -> None:
    sweep(tmp_path / "s", {**ONE, "personas": PERSONAS[:4], "questions": list(range(1, 25))}, {"ok": 1})
    summary, out, page = analyze_and_report(tmp_path / "s")
    assert_caveat(summary, out, page, "one unit per country (one seed")
    assert re.search(r"CAT \d+\.\d \[n/a, n/a\]", out), out


@pytest.mark.slow
def test_one_question_names_the_dimensions_it_cannot_score(tmp_path: Path) -> None:
    sweep(tmp_path / "q", {"personas": PERSONAS[:3], "questions": [7], "seeds": [1, 2]}, {"ok": 1})
    summary, out, page = analyze_and_report(tmp_path / "q")
    caveat = assert_caveat(summary, out, page, "no index")
    assert caveat.startswith("PDI, IDV, MAS, UAI, LTO, IVR: no index") and "Q7," not in caveat


def test_a_limit_pilot_is_named_incomplete_with_the_cells_left(tmp_path: Path) -> None:
    design = {"personas": PERSONAS[:3], "questions": list(range(1, 25)), "seeds": [1, 2], "temperature": [0.0]}
    sweep(tmp_path / "p", design, {"ok": 1}, limit=5)
    summary, out, page = analyze_and_report(tmp_path / "p")
    assert summary["completeness"] == {"planned": 144, "replied": 5, "failed": 0, "missing": 139}
    caveat = assert_caveat(summary, out, page, "incomplete run: 5 of the plan's 144 cells")
    assert "a --limit pilot" in caveat and "sends the other 139" in caveat


@st.composite
def designs(draw: st.DrawFn) -> dict:
    """A small random design: 1–4 personas, 1–24 questions, 1–3 seeds, one or two temperatures, item or survey."""
    questions = draw(st.sets(st.integers(1, 24), min_size=1, max_size=24))
    return {
        "mode": draw(st.sampled_from(["item", "item", "survey"])),
        "personas": draw(st.lists(st.sampled_from(PERSONAS), min_size=1, max_size=4, unique=True)),
        "questions": sorted(questions),
        "seeds": list(range(1, draw(st.integers(1, 3)) + 1)),
        "temperature": draw(st.sampled_from([[0.0], [0.0, 1.0]])),
    }


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,  # the same designs on every run: a failure reproduces
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    design=designs(),
    weights=st.fixed_dictionaries({k: st.integers(0, 3) for k in KINDS}).filter(lambda w: sum(w.values()) > 0),
    limit=st.one_of(st.none(), st.integers(1, 30)),
    seed=st.integers(0, 2**16),
    extra=st.sampled_from([[], ["--units", "seed"], ["--points", "seed"], ["--unparseable", "neutral"]]),
)
@pytest.mark.slow
def test_any_small_run_is_analysed_and_reported_or_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, design: dict, weights: dict, limit: int | None, seed: int, extra: list
) -> None:
    run = tmp_path_factory.mktemp("run")
    sweep(run, design, weights, seed=seed, limit=limit)
    status, out, err = hofcat("analyze", str(run), *FAST, *extra)
    assert status == 0, err
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    replied = len(read_dataset(run, "responses", ["cell_key"]))
    done = summary["completeness"]
    assert done["replied"] == replied and done["planned"] == summary["run_manifest"]["plan"]["cells"]
    assert bool(done["missing"]) == any(c.startswith("incomplete run") for c in summary["caveats"])
    if not replied:
        assert any(c.startswith("no replies stored") for c in summary["caveats"])
    for caveat in summary["caveats"]:
        assert f"caveat: {caveat}" in out
    status, _, err = hofcat("report", str(run))
    assert status == 0, err
    page = (run / "report" / "index.html").read_text()
    assert all(str(escape(c)) in page for c in summary["caveats"])
    # a factor the run does not have is refused with one line naming it, exit 2
    status, out, err = hofcat("analyze", str(run), *FAST, "--factors", "no_such_factor")
    assert status == 2 and err.startswith("hofcat analyze: error: factors: column(s) ['no_such_factor']")
    assert err.count("\n") == 1 and "Traceback" not in err
