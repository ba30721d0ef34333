"""The model you asked for is the model you measured (issue 26, item 3): the alias rule for providers' dated
snapshots, and what the analysis and the report say about the models that answered."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from _runner_support import make_spec
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.report.html import render_report
from runner.rundir import read_dataset, read_manifest
from runner.survey.models import is_requested_model
from runner.sweep.mock import MockTransport
from runner.sweep.session import run_sweep
from runner.sweep.transport import RawReply


@pytest.mark.parametrize(
    ("requested", "served"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o", "gpt-4o-2024-08-06"),
        ("gpt-4", "gpt-4-0613"),
        ("gpt-4o-mini", "gpt-4o-mini-2024-07-18"),
        ("claude-3-5-sonnet", "claude-3-5-sonnet-20240620"),
        ("claude-3-5-sonnet", "claude-3-5-sonnet@20240620"),
        ("gemini-1.5-flash", "gemini-1.5-flash-002"),
        ("gemini-1.5-flash", "models/gemini-1.5-flash-002"),
        ("models/gemini-1.5-flash", "gemini-1.5-flash"),
        ("claude-3-5-sonnet", "claude-3-5-sonnet-latest"),
    ],
)
def test_a_snapshot_of_the_requested_model_is_the_requested_model(requested: str, served: str) -> None:
    assert is_requested_model(requested, served)


@pytest.mark.parametrize(
    ("requested", "served"),
    [
        ("gpt-4o-mini", "SmolLM2-135M-Instruct"),
        ("gpt-4o", "gpt-4o-mini"),  # another model of the family, not a snapshot
        ("gpt-4o", "gpt-4o-mini-2024-07-18"),
        ("gpt-4", "gpt-4o"),
        ("gpt-4o", "gpt-4o-2024-08"),  # not a whole date
        ("gpt-4o", "xgpt-4o"),
        ("llama-3", "llama-3-70b"),
        ("gpt-4o", ""),
    ],
)
def test_another_model_is_not_the_requested_model_unless_accepted(requested: str, served: str) -> None:
    assert not is_requested_model(requested, served)
    assert is_requested_model(requested, served, [served]) and is_requested_model(requested, served, ["*"])
    assert not is_requested_model(requested, served, ["other"])


def chat_reply(text: str, model: str | None) -> RawReply:
    body = {
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 1},
        **({"model": model} if model is not None else {}),
    }
    return RawReply(200, json.dumps(body).encode(), {})


def stored_run(out: Path, served: str | None, endpoint: dict | None = None) -> Path:
    """A small run whose replies say ``served`` answered (None: they name no model)."""
    design = {"personas": ["United States", "China", "Germany"], "questions": [1, 2], "seeds": [1, 2]}
    spec = make_spec("http://127.0.0.1:9/v1", design=design, endpoint={"model": "gpt-4o", **(endpoint or {})})
    transport = MockTransport(lambda body, attempt: chat_reply("3", served))
    run_sweep(spec, out, stream=io.StringIO(), transport_factory=lambda e: transport)
    return out


@pytest.mark.parametrize(
    ("served", "fact", "caveat"),
    [
        ("gpt-4o-2024-08-06", "served by sim: gpt-4o-2024-08-06 (24 replies)", None),
        (None, "served by sim: 24 replies named no model", None),
    ],
)
@pytest.mark.slow
def test_the_analysis_and_report_name_the_served_models(tmp_path: Path, served, fact, caveat) -> None:
    run = stored_run(tmp_path / "r", served)
    analyze_run(run, AnalysisOptions(n_resamples=10, permutations=9))
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    entry = summary["served_models"]["sim"]
    assert entry["requested"] == "gpt-4o"
    assert entry["served"] == ({} if served is None else {served: 24}) and entry["unreported"] == (24 * (not served))
    assert not any("asked for model" in c for c in summary["caveats"])
    page = render_report(run).read_text()
    assert fact in page


@pytest.mark.slow
def test_an_accepted_other_model_is_named_in_a_caveat(tmp_path: Path) -> None:
    run = stored_run(tmp_path / "r", "SmolLM2-135M-Instruct", endpoint={"served_models": ["*"]})
    analyze_run(run, AnalysisOptions(n_resamples=10, permutations=9))
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    assert summary["served_models"]["sim"]["served"] == {"SmolLM2-135M-Instruct": 24}
    caveat = "endpoint sim: asked for model gpt-4o, replies name SmolLM2-135M-Instruct (24 replies)"
    assert caveat in summary["caveats"]
    assert caveat in render_report(run).read_text()
    assert read_manifest(run)["sessions"][-1]["served_models"] == {"sim": {"SmolLM2-135M-Instruct": 24}}


def test_a_reply_from_another_model_is_not_stored_and_stops_the_endpoint(tmp_path: Path) -> None:
    run = stored_run(tmp_path / "r", "SmolLM2-135M-Instruct")
    session = read_manifest(run)["sessions"][-1]
    assert (
        "asked for model 'gpt-4o', the server answered as 'SmolLM2-135M-Instruct'"
        in session["stopped_endpoints"]["sim"]
    )
    assert len(read_dataset(run, "responses")) == 0 and len(read_dataset(run, "failures")) == 0
