"""Export lists say the truth: ``__all__`` is sorted and names only what exists, and the compiled extension
is reached only through ``stats_core/_backend.py`` (so backend selection cannot be bypassed)."""

from __future__ import annotations

import ast
import importlib
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = [
    "stats_core",
    "runner",
    "runner.rundir",
    "runner.survey.vocab",
    "runner.parse",
    "runner.endpoints.sim",
    "runner.sweep.providers",
]


def _isort_key(name: str) -> tuple[int, str]:
    """CONSTANTS, then Classes, then functions, each alphabetical (the order isort/ruff give ``__all__``)."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted_unique_and_every_name_exists(package: str) -> None:
    module = importlib.import_module(package)
    names = list(module.__all__)
    assert names, f"{package}.__all__ is empty"
    assert len(names) == len(set(names)), f"{package}.__all__ repeats a name"
    assert names == sorted(names, key=_isort_key), f"{package}.__all__ is not sorted"
    missing = [name for name in names if not hasattr(module, name)]
    assert missing == [], f"{package}.__all__ names what it does not define"


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from stats_core import *", namespace)
    assert sorted(set(namespace) - {"__builtins__"}) == sorted(importlib.import_module("stats_core").__all__)


def _python_sources() -> list[Path]:
    """Every Python file git knows in the repository, tests excepted (they check the extension directly)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / p for p in listed if not p.startswith("tests/") and (ROOT / p).exists()]


def _reaches_native(tree: ast.AST) -> bool:
    """True when the module imports ``stats_core._native`` statically or names it for ``import_module``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[-1] == "_native" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (
            (node.module or "").split(".")[-1] == "_native" or any(a.name == "_native" for a in node.names)
        ):
            return True
        if isinstance(node, ast.Constant) and node.value == "stats_core._native":
            return True
    return False


@pytest.mark.slow
def test_only_the_backend_module_imports_the_compiled_extension() -> None:
    sources = _python_sources()
    assert ROOT / "stats_core" / "_backend.py" in sources and len(sources) > 50
    importers = sorted(str(p.relative_to(ROOT)) for p in sources if _reaches_native(ast.parse(p.read_text())))
    assert importers == ["stats_core/_backend.py"]


@pytest.mark.parametrize(
    "snippet",
    [
        "from stats_core import _native",
        "import stats_core._native as n",
        "from stats_core._native import kendall_tau",
        "from ._native import x",
        "importlib.import_module('stats_core._native')",
    ],
)
def test_the_import_check_sees_every_way_of_importing(snippet: str) -> None:
    assert _reaches_native(ast.parse(snippet))
    assert not _reaches_native(ast.parse("from stats_core import _numba  # not _native"))
