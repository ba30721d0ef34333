"""One error hierarchy: every exception class under ``runner/`` derives from ``HofcatError``, and the tree
drawn in ``runner.errors``'s docstring is the real one (names, parents and stdlib bases)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import runner
from runner import errors
from runner.errors import HofcatError


def _runner_modules() -> list[str]:
    """Dotted names of every module in the runner package (imported by the walk)."""
    return sorted(info.name for info in pkgutil.walk_packages(runner.__path__, prefix="runner."))


def _exception_classes() -> dict[str, type[BaseException]]:
    """``module.Class`` -> class, for every exception class defined (not imported) in a runner module."""
    found = {}
    for name in _runner_modules():
        module = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            # warnings are signalled, not raised: they keep their own roots
            if cls.__module__ == name and issubclass(cls, BaseException) and not issubclass(cls, Warning):
                found[f"{name}.{cls_name}"] = cls
    return found


def _tree() -> list[tuple[str, str | None, set[str]]]:
    """(class name, parent in the drawing or None for the root, stdlib bases in parentheses) per tree line."""
    rows: list[tuple[str, str | None, set[str]]] = []
    stack: list[str] = []
    for line in errors.__doc__.splitlines():
        m = re.match(r"^(?P<lead>[ │├└─]*)(?P<name>[A-Z]\w+)(?: \((?P<bases>[\w, ]+)\))?(?:\s|$)", line)
        if not m or (rows == [] and m["name"] != "HofcatError"):
            continue
        depth = len(m["lead"]) // 4 - 1  # the root is indented by 4, each level by 4 more
        del stack[depth:]
        stdlib = {base.strip() for base in (m["bases"] or "").split(",") if base.strip()}
        rows.append((m["name"], stack[-1] if stack else None, stdlib))
        stack.append(m["name"])
    return rows


def test_walk_imports_the_whole_package_and_finds_the_tree() -> None:
    modules = _runner_modules()
    assert {"runner.commands.run", "runner.endpoints.sim.app", "runner.parse.policy", "runner.sweep.providers"} <= set(
        modules
    )
    classes = _exception_classes()
    assert {"runner.errors.HofcatError", "runner.errors.SpecError", "runner.errors.LLMError"} <= set(classes)


def test_every_exception_class_under_runner_derives_from_hofcat_error() -> None:
    strays = sorted(name for name, cls in _exception_classes().items() if not issubclass(cls, HofcatError))
    assert strays == []


def test_docstring_tree_names_every_class_once_with_its_real_parent_and_stdlib_bases() -> None:
    rows = _tree()
    drawn = [name for name, _, _ in rows]
    assert len(drawn) == len(set(drawn)), "a class is drawn twice"
    defined = {cls.__name__ for cls in _exception_classes().values()}
    assert sorted(drawn) == sorted(defined)
    for name, parent, stdlib in rows:
        cls = getattr(errors, name)
        own = [b.__name__ for b in cls.__bases__ if issubclass(b, HofcatError)]
        assert own == ([parent] if parent else []), name
        others = {b.__name__ for b in cls.__bases__ if not issubclass(b, HofcatError) and b is not Exception}
        assert others == stdlib, name


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("runner.endpoints.llm", "LLMError"),
        ("runner.sweep.probe", "ProbeError"),
        ("runner.survey.prompts", "PromptError"),
        ("runner.survey.instrument", "InstrumentError"),
        ("runner.parse", "PolicyError"),
        ("runner.endpoints.sim", "SimConfigError"),
        ("runner.endpoints.sim.chat_request", "BadRequest"),
    ],
)
def test_old_import_places_still_give_the_one_class(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_bad_input_errors_stay_value_errors() -> None:
    for cls in (
        errors.InputError,
        errors.PromptError,
        errors.PolicyError,
        errors.InstrumentError,
        errors.SpecError,
        errors.SimConfigError,
    ):
        assert issubclass(cls, ValueError) and issubclass(cls, HofcatError)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("plan", "missing.toml"),
        ("status", "not-a-run"),
        ("report", "not-a-run"),
        ("analyze", "not-a-run"),
    ],
)
def test_cli_turns_any_hofcat_error_into_one_line_and_exit_2(command: str, expected: str, tmp_path, capsys) -> None:
    from runner.cli import main

    target = tmp_path / ("missing.toml" if command == "plan" else "not-a-run")
    assert main([command, str(target)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hofcat {command}: error: ") and expected in lines[0]
    assert captured.out == ""
