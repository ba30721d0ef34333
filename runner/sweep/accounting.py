"""Counting a sweep before and after: the plan's size, tokens and cost; a run directory's progress and spend.

Before a run: input tokens estimated (characters / 4, + 4 per message) and bounded (UTF-8 bytes + the chat
template's tokens: ``runner.sweep.plan.TEMPLATE_TOKENS``; a bound for every tokenizer whose tokens each cover at
least one byte), output tokens bounded by ``max_tokens``. Costs use the endpoint's ``price_input_per_1k`` /
``price_output_per_1k``; batch execution is billed at ``BATCH_PRICE_FACTOR`` of them (OpenAI's and Anthropic's
batch APIs: half price). ``cost_max`` is the cost of the bounds at the endpoint's execution's price.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from runner.errors import RunDirError
from runner.sweep.spec import EndpointConfig, Spec, spec_from_dict

BATCH_PRICE_FACTOR = 0.5  # provider batch APIs bill half the online price (OpenAI Batch, Anthropic Message Batches)


def cost(
    endpoint: EndpointConfig, input_tokens: float, output_tokens: float, execution: str | None = None
) -> float | None:
    """Price of the tokens at the endpoint's rates for ``execution`` (default: the endpoint's own); None
    when the spec gives no prices for it."""
    if endpoint.price_input_per_1k is None and endpoint.price_output_per_1k is None:
        return None
    factor = BATCH_PRICE_FACTOR if (execution or endpoint.execution) == "batch" else 1.0
    return (
        factor
        * (input_tokens * (endpoint.price_input_per_1k or 0.0) + output_tokens * (endpoint.price_output_per_1k or 0.0))
        / 1000.0
    )


def per_million(endpoint: EndpointConfig) -> dict[str, dict[str, float | None]]:
    """Prices per million input and output tokens, online and batch (None where the spec gives none)."""
    out: dict[str, dict[str, float | None]] = {}
    for execution, factor in (("online", 1.0), ("batch", BATCH_PRICE_FACTOR)):
        out[execution] = {
            side: None if price is None else price * 1000.0 * factor
            for side, price in (("input", endpoint.price_input_per_1k), ("output", endpoint.price_output_per_1k))
        }
    return out


def plan_summary(spec: Spec) -> dict[str, Any]:
    """Cells per factor, total cells, estimated tokens, cost and least duration (s) per endpoint; sends nothing.

    By arithmetic over factor sizes (``runner.sweep.plan.estimate``): a 10^9-cell plan counts in well under a
    second; each distinct framing and question set is rendered once.
    """
    from runner.sweep.plan import count_cells, estimate, eta_s, factor_counts, measurement_fallback, validate_plan

    validate_plan(spec)
    endpoints = {}
    for endpoint in spec.endpoints:
        est = estimate(spec, endpoint)
        seconds, basis = eta_s(endpoint, est)
        endpoints[endpoint.name] = {
            "cells": est.cells,
            "input_tokens_estimate": est.input_tokens,
            "input_tokens_max": est.input_bound,  # a bound (UTF-8 bytes + template tokens), not an estimate
            "input_bound": "utf8_bytes_plus_template",
            "output_tokens_max": est.output_tokens,
            "execution": endpoint.execution,
            "price_per_million": per_million(endpoint),
            "cost_max": cost(endpoint, est.input_bound, est.output_tokens),
            "cost_max_online": cost(endpoint, est.input_bound, est.output_tokens, "online"),
            "cost_max_batch": cost(endpoint, est.input_bound, est.output_tokens, "batch"),
            "design": spec.design_key(endpoint),  # "design", or "endpoints[i].design" where it is overridden
            "eta_s": seconds,  # least time at its limits (endpoints run in parallel)
            "eta_basis": basis,
        }
    costs = [e["cost_max"] for e in endpoints.values() if e["cost_max"] is not None]
    return {
        "run": spec.run.name,
        "spec_hash": spec.spec_hash,
        "cells": count_cells(spec),
        "factors": factor_counts(spec),
        "measurement_fallback": measurement_fallback(spec),
        "endpoints": endpoints,
        "cost_max": sum(costs) if costs else None,
    }


def endpoint_usage(responses: pa.Table, endpoint: str) -> tuple[int, int, int]:
    """(stored responses, input tokens, output tokens) of ``endpoint`` in a responses table with those columns;
    unreported counts add nothing."""
    mine = responses.filter(pc.equal(responses.column("endpoint"), endpoint))
    return (
        mine.num_rows,
        pc.sum(mine.column("input_tokens")).as_py() or 0,
        pc.sum(mine.column("output_tokens")).as_py() or 0,
    )


def failed_for_good(
    run_dir: str | Path, columns: Sequence[str] = (), done: set[str] | None = None
) -> dict[str, tuple[Any, ...]]:
    """Cells with a failure and no stored response: cell key → ``columns`` of its last failure row (a cell retried
    with --retry-failed may have failed again: it counts once, as it last failed). ``done``: the stored keys, when
    the caller has read them already."""
    from runner.rundir import read_dataset

    if done is None:
        done = set(read_dataset(run_dir, "responses", ["cell_key"]).column("cell_key").to_pylist())
    failures = read_dataset(run_dir, "failures", ["cell_key", *columns])
    latest: dict[str, tuple[Any, ...]] = {}
    for key, *row in zip(*(failures.column(c).to_pylist() for c in failures.column_names), strict=True):
        if key not in done:
            latest[key] = tuple(row)
    return latest


def run_status(run_dir: str | Path) -> dict[str, Any]:
    """Done, failed, remaining cells, tokens and cost of a run directory, in total and per endpoint."""
    from runner.rundir import read_dataset, read_manifest
    from runner.sweep.plan import estimate

    manifest = read_manifest(run_dir)
    spec = spec_from_dict(manifest.get("spec"), source=f"{run_dir}/manifest.json spec")  # type: ignore[arg-type]
    if manifest.get("plan", {}).get("cells") is None:
        raise RunDirError(f"{run_dir}/manifest.json: has no plan size (plan.cells); not a manifest hofcat wrote")
    responses = read_dataset(run_dir, "responses", ["cell_key", "endpoint", "input_tokens", "output_tokens"])
    done_keys = set(responses.column("cell_key").to_pylist())
    failed = {key: row[0] for key, row in failed_for_good(run_dir, ["endpoint"], done_keys).items()}
    planned = manifest["plan"]["cells"]
    per_endpoint = {}
    for endpoint in spec.endpoints:
        done, tokens_in, tokens_out = endpoint_usage(responses, endpoint.name)
        bound = estimate(spec, endpoint)
        per_endpoint[endpoint.name] = {
            "input_tokens_max": bound.input_bound,  # the plan's bounds, to compare spending with
            "output_tokens_max": bound.output_tokens,
            "cost_max": cost(endpoint, bound.input_bound, bound.output_tokens),
            "done": done,
            "failed": sum(1 for n in failed.values() if n == endpoint.name),
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost": cost(endpoint, tokens_in, tokens_out),
        }
    costs = [e["cost"] for e in per_endpoint.values() if e["cost"] is not None]
    sessions = manifest.get("sessions", [])
    return {
        "run": manifest.get("run_name"),
        "spec_hash": manifest.get("spec_hash"),
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
