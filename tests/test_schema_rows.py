"""Every stored row type lives in ``runner.rundir.schema``: no other module declares an Arrow column."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runner.extract import stage
from runner.rundir import schema

ROOT = Path(__file__).resolve().parent.parent / "runner"


@pytest.mark.slow
def test_no_module_but_the_schema_declares_a_stored_column() -> None:
    declaring = [
        f"{path.relative_to(ROOT.parent)}:{node.lineno}"
        for path in sorted(ROOT.rglob("*.py"))
        if path != ROOT / "rundir" / "schema.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "arrow_field"
    ]
    assert declaring == []


def test_the_extraction_row_is_the_schemas_and_its_parts_have_its_schema() -> None:
    assert stage.ExtractionRow is schema.ExtractionRow
    assert schema.ExtractionRow.__module__ == "runner.rundir.schema"
    assert schema.table([], schema.ExtractionRow).schema == schema.EXTRACTION_SCHEMA
    assert schema.EXTRACTION_SCHEMA.names[:3] == ["cell_key", "question", "parse_status"]
    assert str(schema.EXTRACTION_SCHEMA.field("started_at").type) == "timestamp[us, tz=UTC]"
    assert stage.stored_extractions(ROOT / "no-such-run").schema == schema.EXTRACTION_SCHEMA
