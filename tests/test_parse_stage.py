"""The parse stage on a real run directory: re-parse after a parser-version bump, idempotence, crash safety."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _runner_support import make_spec
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.parse import ParseResult, parse_reply
from runner.parse.answers import CURRENT, Parser, answers_table
from runner.parse.stage import reparse
from runner.rundir import RunDir, read_dataset, read_manifest
from runner.survey.cell import PromptCell
from runner.sweep.session import run_sweep


def _flipped(text: str, cell: PromptCell) -> ParseResult:
    """A 'fixed' parser: the current one with every hedge flag inverted, so its answers visibly differ."""
    return ParseResult(tuple(dataclasses.replace(a, hedged=not a.hedged) for a in parse_reply(text, cell).answers))


NEW = Parser("99.0.0-test", _flipped)


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.parquet"))}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, chatty_rate=0.3)) as sim:
        run_sweep(make_spec(sim.base_url, run={"batch_rows": 10}), out, live=False)
    assert len(RunDir(out).parts("answers")) >= 4
    return out


def _expected(out: Path, parser: Parser):
    return answers_table(read_dataset(out, "responses"), parser)


@pytest.mark.slow
def test_a_version_bump_rewrites_answers_and_leaves_responses_untouched(run_dir: Path) -> None:
    responses_before = _digests(run_dir / "responses")
    result = reparse(run_dir, NEW)
    assert (result.rewritten, result.current) == (len(responses_before), 0)
    assert result.previous_versions == (CURRENT.version,)
    assert _digests(run_dir / "responses") == responses_before
    answers = read_dataset(run_dir, "answers")
    assert set(answers.column("parser_version").to_pylist()) == {NEW.version}
    assert answers.select(["cell_key", "question", "hedged"]).equals(
        _expected(run_dir, NEW).select(["cell_key", "question", "hedged"])
    )
    old = _expected(run_dir, CURRENT)
    assert answers.column("hedged").to_pylist() == [not h for h in old.column("hedged").to_pylist()]
    manifest = read_manifest(run_dir)
    assert manifest["parser_version"] == NEW.version
    assert manifest["reparses"][-1]["parts"] == len(responses_before)
    assert manifest["reparses"][-1]["previous_versions"] == [CURRENT.version]


def test_reparse_is_idempotent(run_dir: Path) -> None:
    reparse(run_dir, NEW)
    answers, manifest = _digests(run_dir / "answers"), (run_dir / "manifest.json").read_bytes()
    again = reparse(run_dir, NEW)
    assert (again.rewritten, again.previous_versions) == (0, ())
    assert _digests(run_dir / "answers") == answers
    assert (run_dir / "manifest.json").read_bytes() == manifest


@pytest.mark.slow
def test_a_crash_mid_reparse_leaves_whole_parts_and_a_rerun_finishes(run_dir: Path) -> None:
    calls = {"n": 0}
    parts = len(RunDir(run_dir).parts("responses"))

    def dies_on_third_part(text: str, cell: PromptCell) -> ParseResult:
        calls["n"] += 1
        if calls["n"] > 2 * per_part:
            raise RuntimeError("killed mid-reparse")
        return _flipped(text, cell)

    per_part = pq.read_table(RunDir(run_dir).part("responses", RunDir(run_dir).parts("responses")[0])).num_rows
    with pytest.raises(RuntimeError, match="killed mid-reparse"):
        reparse(run_dir, Parser(NEW.version, dies_on_third_part))
    (run_dir / ".tmp" / "answers-part-000003.parquet").write_bytes(b"PAR1 half a part")  # as if killed mid-write
    versions = {
        pq.read_table(p, columns=["parser_version"]).column(0).to_pylist()[0]
        for p in (run_dir / "answers").glob("*.parquet")
    }
    assert versions == {CURRENT.version, NEW.version}  # some parts rewritten, the others untouched, all whole
    assert read_manifest(run_dir)["parser_version"] == CURRENT.version  # recorded only once all parts are done
    result = reparse(run_dir, NEW)
    assert 0 < result.rewritten < parts
    assert not list((run_dir / ".tmp").iterdir())
    assert (
        read_dataset(run_dir, "answers")
        .select(["cell_key", "question", "hedged", "parser_version"])
        .equals(_expected(run_dir, NEW).select(["cell_key", "question", "hedged", "parser_version"]))
    )


@pytest.mark.slow
def test_reparse_command_rebuilds_a_missing_part_and_says_so(run_dir: Path) -> None:
    part = RunDir(run_dir).part("answers", RunDir(run_dir).parts("answers")[1])
    before = part.read_bytes()
    part.unlink()
    hofcat = [sys.executable, "-m", "runner.cli", "reparse"]
    done = subprocess.run([*hofcat, str(run_dir)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 answers parts rewritten (were missing)" in done.stderr
    assert pq.read_table(part).equals(pq.read_table(pa.BufferReader(before)))  # the same answers, rebuilt
    again = subprocess.run([*hofcat, str(run_dir)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "0 answers parts rewritten" in again.stderr
    missing = subprocess.run([*hofcat, str(run_dir / "nope")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.count("\n") == 1 and "manifest.json" in missing.stderr
