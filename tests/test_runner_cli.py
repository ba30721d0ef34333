"""The run/plan/status commands as a user meets them: help, numbers, exit codes, progress lines."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from _runner_support import spec_text
from runner.cli import main
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.sweep.progress import EndpointStats, Progress, Reading, RunStats


@pytest.mark.parametrize("command", ["run", "plan", "status"])
def test_help(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0 and "usage: hofcat " + command in capsys.readouterr().out


def test_plan_counts_tokens_and_cost(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        spec_text(
            "http://127.0.0.1:9/v1",
            endpoint={"price_input_per_1k": 2.0, "price_output_per_1k": 10.0},
            design={"max_tokens": 5},
        )
    )
    assert main(["plan", str(spec), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    e = plan["endpoints"]["sim"]
    assert plan["cells"] == e["cells"] == 2 * 6 * 2 * 2 and e["output_tokens_max"] == 48 * 5
    # the cost is a bound: the input-token bound (UTF-8 bytes + template tokens) at the input price
    assert plan["cost_max"] == pytest.approx((e["input_tokens_max"] * 2.0 + 240 * 10.0) / 1000)
    assert 48 * 20 < e["input_tokens_estimate"] < 48 * 400  # a VSM item prompt is tens to hundreds of tokens
    assert e["input_tokens_estimate"] < e["input_tokens_max"] < 6 * e["input_tokens_estimate"]
    assert e["cost_max_batch"] == pytest.approx(e["cost_max_online"] / 2)
    assert e["price_per_million"]["batch"] == {"input": 1000.0, "output": 5000.0}
    assert main(["plan", str(spec)]) == 0
    text = capsys.readouterr().out
    assert "48 cells" in text and "1 endpoints × 1 languages × 2 framings × 6 questions" in text


def test_bad_spec_exits_2_naming_the_key(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(spec_text("http://127.0.0.1:9/v1", design={"mode": "batch"}))
    assert main(["plan", str(spec)]) == 2
    assert "design.mode = 'batch'" in capsys.readouterr().err
    assert main(["status", str(tmp_path)]) == 2


@pytest.mark.slow
def test_run_then_status_reports_tokens_and_cost(tmp_path: Path, capsys) -> None:
    with SimServerThread(SimConfig(seed=1)) as sim:
        spec = tmp_path / "s.toml"
        spec.write_text(spec_text(sim.base_url, endpoint={"price_input_per_1k": 1.0, "price_output_per_1k": 4.0}))
        assert main(["run", str(spec), "--out", str(tmp_path / "run")]) == 0
    assert "48 stored, 0 failed" in capsys.readouterr().err
    assert main(["status", str(tmp_path / "run"), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["done"], status["failed"], status["remaining"], status["planned"]) == (48, 0, 0, 48)
    import pyarrow.compute as pc

    from runner.rundir import read_dataset

    responses = read_dataset(tmp_path / "run", "responses")
    tokens_in = pc.sum(responses.column("input_tokens")).as_py()
    tokens_out = pc.sum(responses.column("output_tokens")).as_py()
    assert (status["input_tokens"], status["output_tokens"]) == (tokens_in, tokens_out) and tokens_in > 0
    assert status["cost"] == pytest.approx((tokens_in * 1.0 + tokens_out * 4.0) / 1000)
    assert main(["status", str(tmp_path / "run")]) == 0
    assert "48 done, 0 failed, 0 remaining of 48" in capsys.readouterr().out


def test_progress_logs_a_plain_line_per_interval_off_a_terminal() -> None:
    stats = RunStats(total=100, already_stored=10, done=30, failed=2, retries=5, input_tokens=900, output_tokens=40)
    stats.endpoints["sim"] = EndpointStats("sim", 600, 32, gauge=Reading(in_flight=7, limit=16))
    stream = io.StringIO()

    async def go() -> None:
        progress = Progress(stats, stream=stream, log_every_s=0.05)
        assert not progress.live  # a StringIO is not a terminal
        progress.start()
        await asyncio.sleep(0.18)
        await progress.stop()

    asyncio.run(go())
    lines = stream.getvalue().splitlines()
    assert 3 <= len(lines) <= 5  # about one per interval, plus the final line
    assert lines[-1].startswith("hofcat: 42/100 cells | 2 failed | 5 retries |")
    assert "tokens 900 in / 40 out" in lines[-1] and "sim: 7/16 in flight (max 32), 600 rpm" in lines[-1]


def test_live_display_renders_on_a_terminal() -> None:
    stats = RunStats(total=10, done=4)
    stats.endpoints["sim"] = EndpointStats("sim", None, 8, gauge=Reading(in_flight=2, limit=4))
    from rich.console import Console

    console = Console(file=io.StringIO(), width=160)
    console.print(Progress(stats, stream=io.StringIO(), live=True)._render())
    out = console.file.getvalue()
    assert "4/10" in out and "in flight 2/4 (max 8)" in out and "no rpm limit" in out


@pytest.mark.slow
def test_hofcat_run_imports_neither_pandas_nor_polars(tmp_path: Path) -> None:
    # pyarrow would import pandas (~0.3 s of CPU) to ask about inputs hofcat never gives it, and the unique-key
    # check polars (~0.2 s) for a few keys: a small sweep pays neither (RunDirError checks stay, see run_dir_safety)
    script = (
        "import sys; from runner.cli import main; status = main(sys.argv[1:]); "
        "print('loaded:', sorted(set(sys.modules) & {'pandas', 'polars', 'pyarrow', 'aiohttp'})); sys.exit(status)"
    )
    with SimServerThread(SimConfig(seed=1)) as sim:
        spec = tmp_path / "s.toml"
        spec.write_text(spec_text(sim.base_url))
        command = [sys.executable, "-c", script, "run", str(spec), "--out", str(tmp_path / "run")]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "48 stored, 0 failed" in done.stderr
    assert done.stdout.splitlines()[-1] == "loaded: ['aiohttp', 'pyarrow']"


@pytest.mark.slow
def test_hofcat_run_script_entry_point(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "status", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "not a readable hofcat run manifest" in done.stderr
