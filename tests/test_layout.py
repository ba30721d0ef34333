"""The folder tree is the data flow: each stage imports only stages before it, and nothing imports in a cycle.

Layers, lowest first (a module may import its own layer and any lower one, anywhere in the file, lazily or
not): errors, escape and survey → rundir → parse → sweep → extract → score → analyze → report and export → endpoints
→ api → commands and cli. ``from runner import __version__`` is allowed everywhere: the package root imports
nothing else.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = [
    {"runner.errors", "runner.escape", "runner.process", "runner.survey"},
    {"runner.rundir"},
    {"runner.parse"},
    {"runner.sweep"},
    {"runner.extract"},  # the extractor fallback: sends through the sweep's machinery
    {"runner.score"},
    {"runner.analyze"},
    {"runner.report", "runner.export"},
    {"runner.endpoints"},
    {"runner.api"},
    {"runner.commands", "runner.cli"},
]


def _unit(module: str) -> str:
    """The layer unit of a dotted module name: ``runner.sweep.plan`` → ``runner.sweep``."""
    return ".".join(module.split(".")[:2])


def _layer(module: str) -> int:
    unit = _unit(module)
    for i, units in enumerate(LAYERS):
        if unit in units:
            return i
    raise AssertionError(f"{module}: in no layer of tests/test_layout.py; add its package to LAYERS")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "runner").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path, *, top_level_only: bool = False) -> list[tuple[str, int]]:
    """(imported runner module, line) for every import in ``path`` (module level only if asked)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("runner")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("runner") and node.level == 0:
            for a in node.names:  # ``from package import submodule`` imports the submodule, not the package
                submodule = f"{node.module}.{a.name}"
                if submodule in MODULES:
                    out.append((submodule, node.lineno))
                elif not (node.module == "runner" and a.name == "__version__"):
                    out.append((node.module, node.lineno))
    return out


def test_every_module_is_in_a_layer() -> None:
    modules = [m for m in MODULES if m != "runner"]
    assert len(modules) > 80
    for module in modules:
        _layer(module)


@pytest.mark.parametrize("module", [m for m in MODULES if m != "runner"])
def test_no_module_imports_a_later_stage(module: str) -> None:
    path = MODULES[module]
    upward = [
        f"{path.relative_to(ROOT)}:{line}: imports {target}"
        for target, line in _imports(path)
        if _layer(target) > _layer(module)
    ]
    assert upward == []


def test_the_package_root_imports_nothing_at_import_time() -> None:
    assert _imports(ROOT / "runner" / "__init__.py", top_level_only=True) == []


@pytest.mark.slow
def test_module_level_imports_have_no_cycle() -> None:
    graph = {m: {t for t, _ in _imports(p, top_level_only=True) if t in MODULES and t != m} for m, p in MODULES.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " → ".join([*trail[trail.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
