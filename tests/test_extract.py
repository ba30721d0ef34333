"""The extractor fallback (runner/extract, ``hofcat extract``): ambiguous answers restated by an extractor model.

Against the simulator (its ``ambiguous_rate`` writes "2 or 3" replies; it reads an extractor request as the item it
quotes and answers it), small aiohttp servers in the test (a provider's shape, a failing server echoing the key),
and the real SmolLM2 model behind llama.cpp's server (a handful of requests).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _loopback_server import LoopbackServer
from _runner_support import make_spec, spec_text
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.cli import main as cli
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.errors import RunDirError, UsageError
from runner.extract.overlay import with_extractions
from runner.extract.request import MAX_REPLY_CHARS, constraint_fields, extractor_messages, read_extraction
from runner.extract.stage import extract_answers, stored_extractions
from runner.rundir import read_dataset, read_manifest
from runner.survey.cell import Framing, PromptCell
from runner.sweep.session import run_sweep
from runner.sweep.spec import EndpointConfig
from test_runner_providers import ShapeServer

ROOT = Path(__file__).resolve().parent.parent
DESIGN = {"shuffle_options": True, "questions": [1, 2, 3, 4, 5, 6], "seeds": [1, 2]}


def _swept(sim: SimServerThread, out: Path, **design: object) -> EndpointConfig:
    """Sweep a small item design against ``sim`` into ``out``; the spec's endpoint."""
    spec = make_spec(sim.base_url, design={**DESIGN, **design})
    result = run_sweep(spec, out, stream=io.StringIO())
    assert result.failed == 0
    return spec.endpoints[0]


def _statuses(run: Path) -> Counter:
    return Counter(read_dataset(run, "answers", ["status"]).column(0).to_pylist())


def _digests(run: Path) -> dict[str, str]:
    """SHA-256 of every responses and answers part: the extractor must never change them."""
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for d in ("responses", "answers")
        for p in sorted((run / d).glob("*.parquet"))
    }


# ---- the request and the reading of its reply (pure) ------------------------------------------------------


def test_the_extractor_sees_the_question_as_displayed_and_the_raw_reply() -> None:
    cell = PromptCell("zh", "item", (3,), Framing("persona", "China"), (3, 1, 5, 2, 4), "json")
    system, user = extractor_messages(cell, 3, "我选2或者4")
    assert system["role"] == "system" and "NONE" in system["content"] and user["role"] == "user"
    plain = PromptCell("zh", "item", (3,), Framing(), (3, 1, 5, 2, 4), "number")
    from runner.survey.prompts import build_messages

    assert build_messages(plain)[-1]["content"] in user["content"]  # the options in the order the reply saw
    assert "China" not in user["content"] and "<<<\n我选2或者4\n>>>" in user["content"]
    survey = PromptCell("en", "survey", tuple(range(1, 25)))
    long = "x" * (MAX_REPLY_CHARS + 500)
    text = extractor_messages(survey, 15, long)[1]["content"]
    assert "question 15" in text and "[… reply cut here]" in text and "x" * (MAX_REPLY_CHARS + 1) not in text


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("2", ("extracted", 1, 2)),  # position 2 of (3, 1, 5, 2, 4) is option 1
        (" Answer: 5\n", ("extracted", 4, 5)),
        ('{"answer": "4"}', ("extracted", 2, 4)),
        ("NONE", ("none", None, None)),
        ('{"answer": "NONE"}', ("none", None, None)),
        ("None of them.", ("none", None, None)),
        ("2 / 3", ("unreadable", None, None)),
        ("I cannot tell.", ("unreadable", None, None)),
        ("7", ("unreadable", None, None)),
    ],
)
def test_an_extractor_reply_is_read_as_a_position_of_the_displayed_order(reply: str, expected: tuple) -> None:
    cell = PromptCell("en", "item", (3,), option_order=(3, 1, 5, 2, 4))
    assert read_extraction(reply, cell, 3) == expected


def test_constraint_fields_hold_the_reply_to_a_position_or_none() -> None:
    assert constraint_fields("none") == {}
    assert constraint_fields("grammar") == {"grammar": 'root ::= [1-5] | "NONE"\n'}
    assert constraint_fields("choice") == {"guided_choice": ["1", "2", "3", "4", "5", "NONE"]}
    schema = constraint_fields("json_schema")["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["enum"] == ["1", "2", "3", "4", "5", "NONE"]
    with pytest.raises(ValueError, match="regex"):
        constraint_fields("regex")


# ---- the simulator's ambiguous replies ----------------------------------------------------------------------


@pytest.mark.slow
def test_the_simulator_writes_ambiguous_replies_without_changing_any_other_reply(tmp_path: Path) -> None:
    texts = {}
    for rate in (0.0, 0.5):
        with SimServerThread(SimConfig(seed=4, chatty_rate=0.3, refusal_rate=0.1, ambiguous_rate=rate)) as sim:
            _swept(sim, tmp_path / str(rate), mode=["item", "survey"])
            texts[rate] = {e.request_key: (e.outcome, e.reply) for e in sim.log}
    assert texts[0.0].keys() == texts[0.5].keys()
    changed = {k for k in texts[0.0] if texts[0.0][k] != texts[0.5][k]}
    assert changed and all(texts[0.5][k][0] == "ambiguous" and texts[0.0][k][0] == "ok" for k in changed)
    assert 0.3 < len(changed) / sum(o == "ok" for o, _ in texts[0.0].values()) < 0.7
    statuses = _statuses(tmp_path / "0.5")
    assert statuses["ambiguous"] == len(changed) and _statuses(tmp_path / "0.0")["ambiguous"] == 0


# ---- end to end against the simulator ----------------------------------------------------------------------


@pytest.mark.slow
def test_ambiguous_answers_are_extracted_stored_apart_and_never_sent_twice(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as sim:
        endpoint = _swept(sim, run)
        ambiguous = _statuses(run)["ambiguous"]
        assert ambiguous >= 10
        before, sent_before = _digests(run), sim.log.total
        result = extract_answers(run, endpoint, constraint="grammar", batch_rows=4)
        requests = list(sim.log)[sent_before:]
        assert result.sent == result.eligible == ambiguous == len(requests) and result.already == 0
        assert result.counts == {"extracted": ambiguous}  # the grammar holds the sim to a bare position
        # a second call sends nothing and changes nothing
        manifest = read_manifest(run)
        again = extract_answers(run, endpoint, constraint="grammar")
        assert (again.sent, again.already, sim.log.total) == (0, ambiguous, sent_before + ambiguous)
        assert read_manifest(run) == manifest
    assert _digests(run) == before  # raw replies and the parser's answers untouched
    assert len(list((run / "extractions").glob("part-*.parquet"))) == -(-ambiguous // 4)
    rows = stored_extractions(run).to_pylist()
    answers = read_dataset(run, "answers", ["cell_key", "question", "status"]).to_pylist()
    asked = {(a["cell_key"], a["question"]) for a in answers if a["status"] == "ambiguous"}
    assert {(r["cell_key"], r["question"]) for r in rows} == asked and len(rows) == len(asked)
    orders = {r["cell_key"]: r["option_order"] for r in read_dataset(run, "responses").to_pylist()}
    sim_replies = {e.reply for e in requests}
    for row in rows:
        assert row["status"] == "extracted" and row["parse_status"] == "ambiguous" and row["constraint"] == "grammar"
        assert row["extractor_text"] in sim_replies and row["displayed"] == int(row["extractor_text"])
        assert row["option_id"] == orders[row["cell_key"]][row["displayed"] - 1]
        assert (row["extractor_endpoint"], row["extractor_model"], row["served_model"]) == ("sim", "sim-1", "sim-1")
        assert row["attempts"] == 1 and row["error_class"] is None
    (entry,) = manifest["extractions"]
    assert entry["endpoint"] == "sim" and entry["model"] == "sim-1" and entry["sent"] == ambiguous
    assert entry["stored"] == {"extracted": ambiguous} and entry["statuses"] == ["ambiguous"]


@pytest.mark.slow
def test_an_extractions_part_whose_keys_changed_is_refused_with_its_name(tmp_path: Path) -> None:
    """Extraction parts carry the key digest every other part has: a rewritten cell key is caught on read."""
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as sim:
        extract_answers(run, _swept(sim, run), constraint="grammar", batch_rows=4)
    part = min((run / "extractions").glob("part-*.parquet"))
    data = pq.read_table(part)
    keys = data.column("cell_key").to_pylist()
    keys[0] = keys[0][::-1]  # same schema and metadata (the digest of the old keys), another key
    pq.write_table(data.set_column(0, "cell_key", pa.array(keys, pa.string())), part)
    with pytest.raises(RunDirError, match=rf"{part.name} is corrupt \(checksum mismatch\): cell_key digest"):
        stored_extractions(run)


@pytest.mark.slow
def test_the_analysis_scores_extracted_answers_only_when_asked(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as sim:
        endpoint = _swept(sim, run)
        extract_answers(run, endpoint, constraint="grammar")
    extracted = stored_extractions(run).num_rows
    quick = {"n_resamples": 20, "permutations": 9, "baseline_replicates": 5}

    def analysed(**choices: object) -> tuple[dict, pl.DataFrame, pl.DataFrame]:
        folder = analyze_run(run, AnalysisOptions(**quick, **choices))  # type: ignore[arg-type]
        summary = json.loads((folder / "summary.json").read_text())
        return summary, pl.read_parquet(folder / "status_rates.parquet"), pl.read_parquet(folder / "questions.parquet")

    summary, rates, questions = analysed()
    assert summary["extractions"] == {"used": False, "stored": extracted}
    assert "extracted" not in rates["status"].to_list()
    summary_x, rates_x, questions_x = analysed(extracted=True)
    info = summary_x["extractions"]
    assert info["used"] and info["replaced"] == extracted == info["stored"]
    assert info["by_extractor"] == [
        {"endpoint": "sim", "model": "sim-1", "parse_status": "ambiguous", "answers": extracted}
    ]
    by_status = dict(zip(*rates_x.group_by("status").agg(pl.col("count").sum()).to_dict().values(), strict=True))
    assert by_status["extracted"] == extracted and "ambiguous" not in by_status
    assert int(questions_x["n"].sum()) == int(questions["n"].sum()) + extracted  # scored like ok answers
    # the report says so
    from runner.report.html import render_report

    page = render_report(run).read_text(encoding="utf-8")
    assert f"{extracted} answers the parser could not read are scored from an extractor model" in page


@pytest.mark.slow
def test_an_answer_a_newer_parse_reads_keeps_its_own_reading(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as sim:
        endpoint = _swept(sim, run)
        extract_answers(run, endpoint, constraint="grammar")
    answers = pl.from_arrow(read_dataset(run, "answers", ["cell_key", "question", "status", "option_id"]))
    first = stored_extractions(run).to_pylist()[0]
    # as if a newer parser now read that reply as option 5: the extraction no longer applies to it
    reread = answers.with_columns(
        status=pl.when(pl.col("cell_key") == first["cell_key"]).then(pl.lit("ok")).otherwise(pl.col("status")),
        option_id=pl.when(pl.col("cell_key") == first["cell_key"]).then(5).otherwise(pl.col("option_id")),
    )
    laid, info = with_extractions(reread.lazy(), run)
    out = laid.collect()
    mine = out.filter(pl.col("cell_key") == first["cell_key"]).row(0, named=True)
    assert (mine["status"], mine["option_id"]) == ("ok", 5)
    assert info["replaced"] == stored_extractions(run).num_rows - 1
    assert out.height == answers.height and (out["status"] == "extracted").sum() == info["replaced"]


@pytest.mark.slow
def test_failed_requests_are_recorded_redacted_and_retried_only_when_asked(tmp_path: Path, monkeypatch) -> None:
    run = tmp_path / "run"
    key = "sk-extract-secret-0123456789"
    monkeypatch.setenv("HOFCAT_EXTRACT_KEY", key)
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as sim:
        endpoint = _swept(sim, run)
        ambiguous = _statuses(run)["ambiguous"]
        echo = {"error": {"message": f"overloaded; you sent Bearer {key}"}}  # a server that echoes the key
        with LoopbackServer(lambda body, seq: (503, echo, {})) as broken:
            bad = dataclasses.replace(
                endpoint, base_url=broken.base_url, api_key_env="HOFCAT_EXTRACT_KEY", max_retries=1
            )
            failed = extract_answers(run, bad)
            assert failed.counts == {"failed": ambiguous} and len(broken.requests) == 2 * ambiguous  # one retry each
            assert all(headers["Authorization"] == f"Bearer {key}" for _, headers in broken.requests)
            assert extract_answers(run, bad).sent == 0  # recorded failures are not sent again by default
        rows = stored_extractions(run).to_pylist()
        assert {(r["status"], r["error_class"], r["http_status"], r["attempts"]) for r in rows} == {
            ("failed", "ServerError", 503, 2)
        }
        assert all("<redacted>" in r["error_message"] and r["extractor_text"] is None for r in rows)
        for path in run.rglob("*"):
            if path.is_file():
                assert key.encode() not in path.read_bytes() and key[:12].encode() not in path.read_bytes()
        retried = extract_answers(run, dataclasses.replace(endpoint, api_key_env=None), retry_failed=True)
        assert retried.sent == ambiguous and retried.counts.get("failed", 0) == 0
    info = with_extractions(
        pl.from_arrow(read_dataset(run, "answers", ["cell_key", "question", "status", "option_id"])).lazy(), run
    )[1]
    assert info["replaced"] == retried.counts["extracted"]  # the later extracted rows win over the failures


@pytest.mark.slow
def test_another_provider_rate_limits_and_limit_leave_the_rest_for_later(tmp_path: Path, monkeypatch) -> None:
    run = tmp_path / "run"
    monkeypatch.setenv("HOFCAT_TEST_KEY", "k-anthropic-extract-42")
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as sim:
        _swept(sim, run)
    ambiguous = _statuses(run)["ambiguous"]
    with ShapeServer("anthropic") as server:  # every fifth attempt is a 429 with retry-after 0
        endpoint = EndpointConfig(
            name="claude", provider="anthropic", base_url=server.base_url, model="m-1", api_key_env="HOFCAT_TEST_KEY"
        )
        with pytest.raises(UsageError, match="only OpenAI-compatible endpoints"):
            extract_answers(run, endpoint, constraint="grammar")
        first = extract_answers(run, endpoint, limit=3)
        assert (first.sent, first.left) == (3, ambiguous - 3)
        rest = extract_answers(run, endpoint)
        assert (rest.sent, rest.already, rest.left) == (ambiguous - 3, 3, 0)
        assert all(r["headers"].get("x-api-key") == "k-anthropic-extract-42" for r in server.requests)
        assert len(server.requests) == ambiguous + ambiguous // 4  # each 429 retried once
    rows = stored_extractions(run).to_pylist()
    assert len(rows) == ambiguous and {r["status"] for r in rows} == {"extracted"}
    assert {r["extractor_provider"] for r in rows} == {"anthropic"}


@pytest.mark.slow
def test_a_killed_extraction_resumes_and_stores_every_answer_once(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as fast:
        _swept(fast, run, personas=["United States", "China", "Japan", "Germany"])
    ambiguous = _statuses(run)["ambiguous"]
    with SimServerThread(SimConfig(seed=3, latency=SimConfig().latency.parse("60"))) as slow:
        endpoint = {
            "name": "sim",
            "provider": "openai",
            "base_url": slow.base_url,
            "model": "sim-1",
            "max_concurrency": 2,
        }
        code = (
            "import sys; from runner.extract.stage import extract_answers; "
            "from runner.sweep.spec import EndpointConfig; "
            f"extract_answers(sys.argv[1], EndpointConfig(**{endpoint!r}), batch_rows=3)"
        )
        child = subprocess.Popen([sys.executable, "-c", code, str(run)], cwd=ROOT)
        deadline = time.monotonic() + 60
        while len(list((run / "extractions").glob("part-*.parquet"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        killed = stored_extractions(run).num_rows
        assert 6 <= killed < ambiguous  # killed mid-way, after two parts
        result = extract_answers(run, EndpointConfig(**endpoint))
    assert result.already == killed and result.sent == ambiguous - killed
    keys = [(r["cell_key"], r["question"]) for r in stored_extractions(run).to_pylist()]
    assert len(keys) == len(set(keys)) == ambiguous
    assert not list((run / ".tmp").glob("*.parquet"))


@pytest.mark.slow
def test_ctrl_c_commits_the_replies_that_came_back_and_exits_130(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as fast:
        _swept(fast, run, personas=["United States", "China", "Japan", "Germany"])
    ambiguous = _statuses(run)["ambiguous"]
    with SimServerThread(SimConfig(seed=3, latency=SimConfig().latency.parse("300"))) as slow:
        spec = tmp_path / "slow.toml"
        spec.write_text(spec_text(slow.base_url, endpoint={"max_concurrency": 4}))
        argv = [sys.executable, "-m", "runner.cli", "extract", str(run), "--endpoint", "sim", "--spec", str(spec)]
        child = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while sum(e.outcome == "ok" for e in slow.log) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
        assert child.returncode == 130 and "Traceback" not in err
        stored = stored_extractions(run).num_rows
        # 5 served with 4 workers: some worker's second request was served, so its first reply had come back.
        # Fewer than one batch of 50: committed by the interrupt, not by a full batch.
        assert 1 <= stored < ambiguous
        (entry,) = read_manifest(run)["extractions"]
        assert entry["sent"] >= stored and entry["left"] == ambiguous - entry["sent"]
        assert cli(["extract", str(run), "--endpoint", "sim", "--spec", str(spec)]) == 0
    keys = [(r["cell_key"], r["question"]) for r in stored_extractions(run).to_pylist()]
    assert len(keys) == len(set(keys)) == ambiguous


# ---- the command --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_command_extracts_and_refuses_bad_options_with_one_line(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=0.5)) as sim:
        _swept(sim, run)
        ambiguous = _statuses(run)["ambiguous"]
        other = tmp_path / "other.toml"
        other.write_text(spec_text(sim.base_url, endpoint={"name": "claude", "provider": "anthropic"}))
        for argv, needle in (
            (["--endpoint", "nope"], "endpoint 'nope': "),
            (["--endpoint", "sim", "--statuses", "refusal"], "statuses: refusal: must be among ambiguous"),
            (["--endpoint", "sim", "--limit", "0"], "limit: 0 must be a positive integer"),
            (["--endpoint", "claude", "--spec", str(other), "--constraint", "grammar"], "only OpenAI-compatible"),
        ):
            assert cli(["extract", str(run), *argv]) == 2
            err = capsys.readouterr().err
            assert err.startswith("hofcat extract: error: ") and needle in err and err.count("\n") == 1
            assert "Traceback" not in err
        assert cli(["extract", str(tmp_path / "missing"), "--endpoint", "sim"]) == 2
        assert "not a readable hofcat run manifest" in capsys.readouterr().err
        assert cli(["extract", str(run), "--endpoint", "sim", "--statuses", "ambiguous,no_answer"]) == 0
        err = capsys.readouterr().err
        assert f"{ambiguous} sent to sim (sim-1)" in err and "0 already extracted" in err
    assert cli(["analyze", str(run), "--use-extracted", "--resamples", "10", "--permutations", "9"]) == 0
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert summary["extractions"]["used"] is True


# ---- the real local model -----------------------------------------------------------------------------------


@pytest.mark.llm
@pytest.mark.slow
def test_smollm2_restates_ambiguous_answers_in_the_constrained_format(tmp_path: Path) -> None:
    from runner.endpoints.llm import LocalLLM

    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, ambiguous_rate=1.0)) as sim:
        _swept(sim, run, personas=["China"], questions=[1, 2, 3, 4], seeds=[1], temperature=[0.0])
    assert _statuses(run) == {"ambiguous": 4}
    with LocalLLM(model="smollm2", slots=2, ctx_per_slot=1024) as llm:
        endpoint = EndpointConfig(
            name="local", provider="openai", base_url=llm.base_url, model=llm.model_name, timeout_s=120.0
        )
        result = extract_answers(run, endpoint, constraint="grammar", max_tokens=4)
    assert result.sent == 4 and result.counts.get("failed", 0) == 0
    orders = {r["cell_key"]: r["option_order"] for r in read_dataset(run, "responses").to_pylist()}
    for row in stored_extractions(run).to_pylist():
        assert row["extractor_text"] in {"1", "2", "3", "4", "5", "NONE"}  # the grammar held
        assert row["status"] == ("none" if row["extractor_text"] == "NONE" else "extracted")
        if row["status"] == "extracted":
            assert row["option_id"] == orders[row["cell_key"]][int(row["extractor_text"]) - 1]
        assert row["extractor_model"] == "smollm2" and row["output_tokens"] >= 1
