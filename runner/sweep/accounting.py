"""Counting a sweep before and after: the plan's size, tokens and cost; a run directory's progress and spend.

Token estimates before a run: input = characters of the rendered messages / 4 (+4 per message), output =
``max_tokens`` (an upper bound). Costs use the endpoint's ``price_input_per_1k`` / ``price_output_per_1k``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from runner.sweep.spec import EndpointConfig, Spec, spec_from_dict


def cost(endpoint: EndpointConfig, input_tokens: float, output_tokens: float) -> float | None:
    """Price of the tokens at the endpoint's rates; None when the spec gives no prices for it."""
    if endpoint.price_input_per_1k is None and endpoint.price_output_per_1k is None:
        return None
    return (
        input_tokens * (endpoint.price_input_per_1k or 0.0) + output_tokens * (endpoint.price_output_per_1k or 0.0)
    ) / 1000.0


def plan_summary(spec: Spec) -> dict[str, Any]:
    """Cells per factor, total cells, estimated tokens and cost per endpoint; renders prompts, sends nothing."""
    from runner.sweep.execute import prompt_estimate
    from runner.sweep.plan import count_cells, factor_counts, iter_cells, validate_plan

    validate_plan(spec)
    endpoints = {}
    for endpoint in spec.endpoints:
        cells = input_tokens = output_tokens = 0
        for cell in iter_cells(spec, endpoint):
            cells += 1
            input_tokens += prompt_estimate(cell.prompt)
            output_tokens += cell.sampling.max_tokens
        endpoints[endpoint.name] = {
            "cells": cells,
            "input_tokens_estimate": input_tokens,
            "output_tokens_max": output_tokens,
            "cost_max": cost(endpoint, input_tokens, output_tokens),
        }
    costs = [e["cost_max"] for e in endpoints.values() if e["cost_max"] is not None]
    return {
        "run": spec.run.name,
        "spec_hash": spec.spec_hash,
        "cells": count_cells(spec),
        "factors": factor_counts(spec),
        "endpoints": endpoints,
        "cost_max": sum(costs) if costs else None,
    }


def run_status(run_dir: str | Path) -> dict[str, Any]:
    """Done, failed, remaining cells, tokens and cost of a run directory, in total and per endpoint."""
    from runner.rundir import read_dataset, read_manifest

    manifest = read_manifest(run_dir)
    spec = spec_from_dict(manifest["spec"], source=f"{run_dir}/manifest.json spec")
    responses = read_dataset(run_dir, "responses", ["cell_key", "endpoint", "input_tokens", "output_tokens"])
    failures = read_dataset(run_dir, "failures", ["cell_key", "endpoint"])
    done_keys = set(responses.column("cell_key").to_pylist())
    failed = {}
    for key, name in zip(failures.column("cell_key").to_pylist(), failures.column("endpoint").to_pylist(), strict=True):
        if key not in done_keys:
            failed[key] = name
    planned = manifest["plan"]["cells"]
    per_endpoint = {}
    for endpoint in spec.endpoints:
        mine = responses.filter(pc.equal(responses.column("endpoint"), endpoint.name))
        tokens_in = pc.sum(mine.column("input_tokens")).as_py() or 0
        tokens_out = pc.sum(mine.column("output_tokens")).as_py() or 0
        per_endpoint[endpoint.name] = {
            "done": mine.num_rows,
            "failed": sum(1 for n in failed.values() if n == endpoint.name),
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost": cost(endpoint, tokens_in, tokens_out),
        }
    costs = [e["cost"] for e in per_endpoint.values() if e["cost"] is not None]
    sessions = manifest.get("sessions", [])
    return {
        "run": manifest["run_name"],
        "spec_hash": manifest["spec_hash"],
        "planned": planned,
        "done": len(done_keys),
        "failed": len(failed),
        "remaining": planned - len(done_keys) - len(failed),
        "input_tokens": sum(e["input_tokens"] for e in per_endpoint.values()),
        "output_tokens": sum(e["output_tokens"] for e in per_endpoint.values()),
        "cost": sum(costs) if costs else None,
        "endpoints": per_endpoint,
        "sessions": len(sessions),
        "last_session": sessions[-1] if sessions else None,
    }
