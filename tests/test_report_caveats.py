"""The report's caveats say each fact once: too few countries, and a reference without some dimensions.

The analysis warns per condition (fewer than 3 countries with reference scores) and per country × dimension ×
condition (no reference score); the caveats sum each kind up in one line and the Warnings table keeps every row.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import polars as pl
import pytest
from markupsafe import escape

from runner.cli import main
from test_analysis_core import make_answers


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """Model "few" asked for 2 countries, model "many" for 4; Saudi Arabia lacks dimensions in hofstede-2015."""
    few = make_answers(3, models=("few",), countries=("U.S.A.", "Saudi Arabia"), seeds=3, temps=(0.0, 1.0))
    many = make_answers(4, models=("many",), countries=("U.S.A.", "China", "Japan", "Saudi Arabia"), seeds=3)
    root = tmp_path_factory.mktemp("caveats")
    (root / "answers").mkdir()
    pl.concat([few, many]).write_parquet(root / "answers" / "part-000001.parquet")
    assert main(["analyze", str(root), "--resamples", "20", "--permutations", "19", "--seed", "1"]) == 0
    assert main(["report", str(root)]) == 0
    return root


def _caveats(run: Path) -> list[str]:
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    block = re.search(r"<h3>Caveats</h3><ul[^>]*>(.*?)</ul>", page, re.DOTALL)
    assert block is not None
    return [html.unescape(item) for item in re.findall(r"<li>(.*?)</li>", block.group(1), re.DOTALL)]


@pytest.mark.slow
def test_each_fact_is_one_caveat_and_every_warning_stays_in_the_table(run):
    warnings = pl.read_parquet(run / "analysis" / "warnings.parquet")
    kinds = dict(warnings["kind"].value_counts().iter_rows())
    assert kinds["few_countries"] == 2  # both conditions of "few"
    assert kinds["missing_reference"] >= 3  # Saudi Arabia in each of the 3 conditions
    caveats = _caveats(run)
    few = [c for c in caveats if "countries with reference scores" in c]
    assert few == [
        "2 condition(s) with fewer than 3 countries with reference scores (not ranked, or tau only ±1 there): "
        + "; ".join(warnings.filter(pl.col("kind") == "few_countries")["condition"])
    ]
    lacking = [c for c in caveats if "lacks some dimensions" in c or "score for" in c]
    assert len(lacking) == 1 and lacking[0].startswith("hofstede-2015 lacks some dimensions for: Saudi Arabia ("), (
        caveats
    )
    dims = sorted(set(warnings.filter(pl.col("kind") == "missing_reference")["dimension"].str.to_uppercase()))
    assert all(d in lacking[0] for d in dims)
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    for message in warnings["message"]:  # the appendix's Warnings table keeps each one
        assert escape(message) in page
