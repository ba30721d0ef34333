"""The public Python API (``import runner``): blocking and awaitable forms, and the docs' notebook example runs."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import runner as hofcat
from _runner_support import spec_text
from runner.endpoints.sim import SimConfig, SimServerThread

ROOT = Path(__file__).resolve().parent.parent


def test_import_is_light_and_every_public_name_resolves() -> None:
    import subprocess
    import sys

    heavy = "('polars', 'numpy', 'aiohttp', 'runner.sweep')"
    code = f"import runner, sys; print(sorted(m for m in {heavy} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    import runner.api

    assert hofcat.__all__ == runner.api.__all__
    for name in hofcat.__all__:
        assert getattr(hofcat, name) is getattr(runner.api, name)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        hofcat.nope


def test_the_blocking_run_refuses_a_running_loop_and_names_the_awaitable(tmp_path: Path) -> None:
    spec = hofcat.parse_spec(spec_text("http://127.0.0.1:9/v1"))

    async def in_a_notebook_cell() -> None:
        hofcat.run_sweep(spec, tmp_path / "run")

    with pytest.raises(hofcat.UsageError, match=r"await run_sweep_async"):
        asyncio.run(in_a_notebook_cell())
    assert not (tmp_path / "run").exists()  # refused before touching anything


@pytest.mark.slow
def test_awaitable_api_runs_analyses_reports_and_reads_the_tidy_table(tmp_path: Path) -> None:
    with SimServerThread(SimConfig(seed=4)) as sim:
        spec = hofcat.parse_spec(spec_text(sim.base_url))
        assert hofcat.plan_sweep(spec)["cells"] == 48

        async def notebook() -> tuple:
            result = await hofcat.run_sweep_async(spec, tmp_path / "run")
            analysis = await hofcat.analyze_run_async(tmp_path / "run", n_resamples=50, permutations=19)
            page = await hofcat.render_report_async(tmp_path / "run")
            return result, analysis, page

        result, analysis, page = asyncio.run(notebook())
    assert (result.stored, result.failed, result.interrupted) == (48, 0, False)
    assert (analysis / "summary.json").is_file() and page.name == "index.html" and page.is_file()
    table = hofcat.read_table(tmp_path / "run")
    assert table.height == 48 and table["cell_key"].n_unique() == 48
    assert {"cell_key", "question", "option_id", "status", "country", "seed", "temperature"} <= set(table.columns)
    assert set(table["country"]) == {"U.S.A.", "China"}  # canonical reference-set names
    assert hofcat.run_status(tmp_path / "run")["done"] == 48
    with pytest.raises(TypeError, match="either options or keyword"):
        hofcat.analyze_run(tmp_path / "run", hofcat.AnalysisOptions(), seed=1)


def _doc_code() -> str:
    """The Python blocks of docs/python-api.md, in order (the notebook example)."""
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    return "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL))


@pytest.mark.slow
def test_the_documented_notebook_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = _doc_code()
    assert "await hofcat.run_sweep_async" in code and "read_table" in code
    monkeypatch.chdir(tmp_path)
    with SimServerThread(SimConfig(seed=2)) as sim:
        quickstart = (ROOT / "runner" / "data" / "examples" / "quickstart.toml").read_text(encoding="utf-8")
        small = (
            quickstart.replace("http://127.0.0.1:8011/v1", sim.base_url)
            .replace("seeds = [1, 2, 3, 4, 5]", "seeds = [1, 2]")
            .replace("temperature = [0.0, 0.5, 1.0]", "temperature = [0.7]")
        )
        assert small != quickstart
        Path("quickstart.toml").write_text(small, encoding="utf-8")
        # A notebook runs top-level ``await``: the same cells as the body of one coroutine.
        body = "".join(f"    {line}\n" for line in code.splitlines())
        namespace: dict = {}
        exec(f"async def notebook():\n{body}    return locals()\n", namespace)
        cells = asyncio.run(namespace["notebook"]())
    assert cells["table"].height == 4 * 24 * 2
    assert cells["result"].stored == 4 * 24 * 2


@pytest.mark.slow
def test_the_documented_mock_transport_runs_a_spec_without_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```py\n(.*?)```", text, flags=re.DOTALL)
    assert "transport=mock" in code
    monkeypatch.chdir(tmp_path)
    spec = hofcat.parse_spec(spec_text("http://127.0.0.1:9/v1", endpoint={"max_retries": 1}))  # nothing listens
    namespace = {"hofcat": hofcat, "spec": spec}
    exec(code, namespace)
    cells = hofcat.plan_sweep(spec)["cells"]
    assert namespace["checked"].stored == cells == 2 * 6 * 2 * 2 and namespace["checked"].failed == 0
    assert len(namespace["mock"].sent) == 2 * cells and set(namespace["mock"].attempts.values()) == {2}
    stored = hofcat.read_table(tmp_path / "runs" / "mock")
    assert stored.height == cells and set(stored["option_id"].to_list()) == {3}
