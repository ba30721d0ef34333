"""hofcat keeps working beside the user's own code (issue 26, item 6): a research folder that holds its own
``runner.py`` or ``runner/`` package (and ``stats_core.py``) does not shadow hofcat's packages.

Every child runs with that folder as its working directory: ``python -m hofcat`` (the command, including a sweep
against the simulator, analyze and report), a script and a notebook-style coroutine using ``import hofcat``, and
``SimProcess`` (a Python child hofcat itself starts). The user's modules raise when imported, so any shadowing
fails loudly; a user module imported before hofcat is refused in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _runner_support import spec_text
from runner.endpoints.sim import SimServerThread

ROOT = Path(__file__).resolve().parent.parent
TRAP = "raise ImportError('the user\\'s own {name} was imported instead of hofcat\\'s')\n"


@pytest.fixture(params=["module", "package"])
def research_folder(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A folder with the user's own ``runner`` (a module or a package) and ``stats_core.py``, both traps."""
    if request.param == "module":
        (tmp_path / "runner.py").write_text(TRAP.format(name="runner.py"))
    else:
        (tmp_path / "runner").mkdir()
        (tmp_path / "runner" / "__init__.py").write_text(TRAP.format(name="runner/"))
    (tmp_path / "stats_core.py").write_text(TRAP.format(name="stats_core.py"))
    return tmp_path


def child(folder: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``folder`` (hofcat importable as it is for this test run); asserts no traceback."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, *args], cwd=folder, capture_output=True, text=True, timeout=timeout, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.mark.slow
def test_python_m_hofcat_runs_analyzes_and_reports_beside_a_user_runner(research_folder: Path) -> None:
    info = child(research_folder, "-m", "hofcat", "info")
    assert info.returncode == 0, info.stderr
    assert Path(json.loads(info.stdout)["data_dir"]).resolve() == (ROOT / "runner" / "data").resolve()
    with SimServerThread() as sim:
        design = {"personas": ["United States", "China", "Germany"], "questions": [1, 2], "seeds": [1, 2]}
        (research_folder / "spec.toml").write_text(spec_text(sim.base_url, design=design))
        done = child(research_folder, "-m", "hofcat", "run", "spec.toml", "--out", "r", "--log-every", "1000")
        assert done.returncode == 0, done.stderr
        assert "24 stored" in done.stderr
    for command in ("analyze", "report"):
        done = child(research_folder, "-m", "hofcat", command, "r", *(["--resamples", "20"] * (command == "analyze")))
        assert done.returncode == 0, done.stderr
    assert (research_folder / "r" / "report" / "index.html").is_file()


SCRIPT = """
import asyncio
import hofcat
import runner, stats_core
assert runner.__file__.startswith({root!r}) and stats_core.__file__.startswith({root!r}), (runner, stats_core)
from runner.endpoints.sim.server import SimProcess

with SimProcess() as sim:  # a Python child hofcat starts itself
    text = open("spec.toml").read().replace("BASE_URL", sim.base_url)
    spec = hofcat.parse_spec(text)

    async def notebook_cell():  # a notebook's cells run inside an event loop: the awaitable forms
        result = await hofcat.run_sweep_async(spec, "nb")
        await hofcat.analyze_run_async("nb", hofcat.AnalysisOptions(n_resamples=20))
        return result

    result = asyncio.run(notebook_cell())
    print("stored", result.stored)
    hofcat.run_sweep(spec, "script")
    print("rows", hofcat.read_table("nb").height)
"""


@pytest.mark.slow
def test_a_script_and_a_notebook_cell_use_import_hofcat_beside_a_user_runner(research_folder: Path) -> None:
    design = {"personas": ["United States", "China"], "questions": [3], "seeds": [1, 2]}
    (research_folder / "spec.toml").write_text(spec_text("BASE_URL", design=design))
    (research_folder / "study.py").write_text(SCRIPT.format(root=str(ROOT)))
    done = child(research_folder, "study.py", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "stored 8" in done.stdout and "rows 8" in done.stdout


def test_a_user_runner_imported_first_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "runner.py").write_text("NAME = 'mine'\n")
    done = subprocess.run(
        [sys.executable, "-c", "import runner, hofcat"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: hofcat needs the module name 'runner', but ")
    assert str(tmp_path / "runner.py") in last and "import hofcat before it, or rename that module" in last


def test_import_hofcat_is_light_and_exposes_the_python_api() -> None:
    heavy = "('polars', 'numpy', 'aiohttp', 'runner.sweep')"
    code = f"import hofcat, runner, sys; print(sorted(m for m in {heavy} if m in sys.modules)); print(hofcat.__all__)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, cwd=ROOT
    )
    light, names = done.stdout.strip().splitlines()
    assert light == "[]"
    import hofcat
    import runner

    assert names == str(runner.__all__) and hofcat.__version__ == runner.__version__
    assert hofcat.run_sweep is runner.run_sweep and hofcat.AnalysisOptions is runner.AnalysisOptions
    with pytest.raises(AttributeError, match="module 'hofcat' has no attribute 'nope'"):
        hofcat.nope
