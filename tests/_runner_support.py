"""Helpers of the runner tests: spec text for a loopback endpoint and checks of a run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from runner.rundir import read_dataset
from runner.sweep.plan import iter_cells
from runner.sweep.spec import Spec, parse_spec


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


def spec_text(
    base_url: str, *, run: dict | None = None, endpoint: dict | None = None, design: dict | None = None
) -> str:
    """A small item-mode spec against one endpoint at ``base_url``; tables updated from the keyword dicts."""
    tables = {
        "run": {"name": "test", "seed": 7, "batch_rows": 50, "flush_interval_s": 0.5, **(run or {})},
        "endpoints": {
            "name": "sim",
            "provider": "openai",
            "base_url": base_url,
            "model": "sim-1",
            "max_concurrency": 8,
            "timeout_s": 2.0,
            "max_retries": 10,
            **(endpoint or {}),
        },
        "design": {
            "personas": ["United States", "China"],
            "questions": [1, 2, 3, 4, 5, 6],
            "seeds": [1, 2],
            "temperature": [0.0, 1.0],
            **(design or {}),
        },
    }
    out = []
    for name, table in tables.items():
        out.append(f"[[{name}]]" if name == "endpoints" else f"[{name}]")
        out.extend(f"{k} = {_toml_value(v)}" for k, v in table.items())
    return "\n".join(out) + "\n"


def make_spec(base_url: str, **tables: dict) -> Spec:
    """``spec_text`` parsed and validated."""
    return parse_spec(spec_text(base_url, **tables), source="test-spec")


def check_run_dir(run_dir: Path, spec: Spec) -> dict[str, Any]:
    """Assert every Parquet file reads, no cell is stored twice and every planned cell has an outcome.

    Returns the responses as a list of dicts keyed by cell_key.
    """
    for path in sorted(run_dir.rglob("*.parquet")):
        pq.read_table(path)  # raises on a truncated or half-written file
    assert not list((run_dir / ".tmp").glob("*.parquet")), "a temp part survived"
    responses = read_dataset(run_dir, "responses").to_pylist()
    keys = [r["cell_key"] for r in responses]
    assert len(keys) == len(set(keys)), "a cell was stored twice"
    failed = set(read_dataset(run_dir, "failures", ["cell_key"]).column(0).to_pylist()) - set(keys)
    planned = {c.key for c in iter_cells(spec)}
    assert set(keys) | failed == planned
    return {r["cell_key"]: r for r in responses}


def sent_request_keys(run_dir: Path, rows: dict[str, dict]) -> dict[str, str]:
    """cell_key → the simulator's request_key of the body hofcat sent for that cell (from stored data)."""
    from runner.endpoints.sim import request_key

    prompts = {p["prompt_hash"]: json.loads(p["messages_json"]) for p in read_dataset(run_dir, "prompts").to_pylist()}
    return {
        key: request_key(
            {
                "model": r["model"],
                "messages": prompts[r["prompt_hash"]],
                "temperature": r["temperature"],
                "top_p": r["top_p"],
                "seed": r["seed"],
            }
        )
        for key, r in rows.items()
    }
