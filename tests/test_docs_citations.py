"""The documentation's citations and quick starts hold outside the developers' machines (issue 26, item 7).

Every Markdown file the docs, the README, the code or the shipped data cite exists in the repository (the docs
once cited a METHODOLOGY.md that shipped nowhere), and the scoring quick start's commands run as written in an
empty folder — no checkout, so no ``data/`` beside it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CITED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]*[A-Za-z][\w.-]*\.md)\b")


def citing_files() -> list[Path]:
    """README, docs, the code and the shipped data's notes."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in ("runner", "stats_core", "hofcat", "tests", "benches"):
        found += sorted((ROOT / folder).rglob("*.py")) + sorted((ROOT / folder).rglob("*.md"))
    return [p for p in found if p.name != "test_docs_citations.py"]


SHIPPED_MD = [
    p.relative_to(ROOT).as_posix()
    for folder in ("docs", "runner", "benches", "tests", "hofcat", "stats_core")
    for p in (ROOT / folder).rglob("*.md")
] + ["README.md"]


def resolves(citation: str, source: Path) -> bool:
    """A cited path is a file of the repository: from its root, beside the citing file, or any file it ends."""
    if (source.parent / citation).is_file():
        return True
    # a bare name may be a suffix ("its provenance.md" of x.provenance.md)
    suffix = citation if "/" not in citation else "/" + citation
    return any(shipped == citation or shipped.endswith(suffix) for shipped in SHIPPED_MD)


def test_every_cited_markdown_file_exists() -> None:
    missing = []
    for source in citing_files():
        text = source.read_text(encoding="utf-8")
        for match in CITED.finditer(text):
            citation = match.group(1)
            if citation.startswith(("shared/", "/", ".")):  # the science folder; a suffix (*.provenance.md)
                continue
            around = text[match.start() - 1 : match.start()] + text[match.end() : match.end() + 1]
            if source.suffix == ".py" and around in ('""', "''"):  # a file name the code writes, not a citation
                continue
            if not resolves(citation, source):
                missing.append(f"{source.relative_to(ROOT)}: {citation}")
    assert not missing, missing


def test_the_methodology_ships_in_the_docs_and_no_file_cites_it_elsewhere() -> None:
    assert (ROOT / "docs" / "methodology.md").read_text(encoding="utf-8").startswith("# Methodology digest")
    for source in citing_files():
        assert "METHODOLOGY.md" not in source.read_text(encoding="utf-8"), source


def quick_start(doc: Path) -> list[list[str]]:
    """The commands of a doc's "Quick start" section that use only shipped files (no MY_… placeholders)."""
    section = doc.read_text(encoding="utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    lines = [line.strip().split("  #")[0] for line in section.splitlines() if line.startswith("    hofcat ")]
    return [shlex.split(line) for line in lines if "MY_" not in line]


@pytest.mark.slow
def test_the_scoring_quick_start_runs_in_an_empty_folder(tmp_path: Path) -> None:
    commands = quick_start(ROOT / "docs" / "scoring.md")
    assert [c[:2] for c in commands] == [["hofcat", "examples"], ["hofcat", "score"]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for command in commands:
        done = subprocess.run(
            [sys.executable, "-m", "hofcat", *command[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == 0, done.stderr
    assert "group: gpt-3.5 model-level" in done.stdout and "Kendall tau-b" in done.stdout, done.stdout
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
@pytest.mark.parametrize("doc", ["README.md"])
def test_the_readme_scoring_example_runs_after_copying_the_examples(doc: str, tmp_path: Path) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    (line,) = re.findall(r"^    (hofcat score --means examples/.*)$", text, flags=re.MULTILINE)
    args = shlex.split(line)[1:]
    assert args[2].startswith("examples/")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for argv in (["examples", "--copy", "examples"], args):
        done = subprocess.run(
            [sys.executable, "-m", "hofcat", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr
