"""Budgets of a sweep before and after: the plan's tokens (estimate and bound), cost and least duration; a run
directory's progress and spend.

``runner.sweep.plan`` says which cells there are (keys, counts, selection); this module says what they cost.
Before a run: input tokens estimated (characters / 4, + 4 per message) and bounded (UTF-8 bytes + the chat
template's tokens: ``TEMPLATE_TOKENS``; a bound for every tokenizer whose tokens each cover at least one byte),
output tokens bounded by ``max_tokens``, the least time at the endpoint's limits (``eta_s``). Costs use the
endpoint's ``price_input_per_1k`` / ``price_output_per_1k``; batch execution is billed at ``BATCH_PRICE_FACTOR``
of them (OpenAI's and Anthropic's batch APIs: half price). ``cost_max`` is the cost of the bounds at the
endpoint's execution's price.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from runner.errors import RunDirError
from runner.survey.cell import CANONICAL_ORDER, Framing, PromptCell
from runner.sweep.plan import (
    count_cells,
    factor_counts,
    framings,
    measurement_fallback,
    prompt_count,
    question_sets,
    sampling_count,
    validate_plan,
)
from runner.sweep.spec import EndpointConfig, Spec, spec_from_dict

if TYPE_CHECKING:
    from runner.rundir import RunDir

CHARS_PER_TOKEN = 4  # input-token estimate before the server reports usage
BATCH_PRICE_FACTOR = 0.5  # provider batch APIs bill half the online price (OpenAI Batch, Anthropic Message Batches)


@dataclass(frozen=True, slots=True)
class PlanEstimate:
    """One endpoint's share of a plan: cells, input tokens (estimate and bound), output tokens at most."""

    cells: int
    input_tokens: int  # characters of the rendered messages / 4, + 4 per message (``request.prompt_estimate``)
    output_tokens: int  # every request's max_tokens: no server returns more
    input_bound: int = 0  # UTF-8 bytes of the messages + TEMPLATE_TOKENS per message and per request (see below)


# Upper bound on input tokens, for tokenizers whose every token covers at least one byte of text (byte-level BPE:
# GPT, Llama 3, Qwen, SmolLM2; SentencePiece with byte fallback: Llama 2, Gemma, Mistral — plus one "▁" per
# message): UTF-8 bytes of each message's content, plus at most TEMPLATE_TOKENS per message for the chat template
# (OpenAI documents 3-4; ChatML, Llama 3 and Gemma templates add 4-6) and TEMPLATE_TOKENS per request (priming,
# BOS). ``hofcat plan --tokenize`` replaces the bound by exact counts from a llama.cpp server's own tokenizer.
TEMPLATE_TOKENS = 8


def estimate(spec: Spec, endpoint: EndpointConfig) -> PlanEstimate:
    """Cells and tokens of ``endpoint``'s part of the plan, by arithmetic over factor sizes (no cell is made).

    Tokens count every distinct prompt once times the samplings that send it. The input estimate of a prompt
    is separable, as the templates are: system text (reply format) + framing text + question text. So each
    framing and each question set is rendered once per language, mode and format, and the sum over their
    product comes from the counts of the distinct lengths. The separation is checked on one more prompt and,
    should a template ever join framing and question, every prompt is rendered instead. Option orders only
    permute the options (the length stays), so the canonical order stands for all; option labels change it,
    so the bound sums over them.
    """
    d = spec.design_for(endpoint)
    samplings = sampling_count(d, endpoint.provider)
    grid = samplings // len(d.max_tokens)  # samplings per max_tokens level
    prompts = prompt_count(spec, endpoint)
    fs = framings(spec, endpoint)
    total = bound = 0
    for mode, language, fmt in itertools.product(d.modes, d.languages, d.reply_formats):
        sets = question_sets(spec, endpoint, mode)
        total += _prompt_tokens(language, mode, fmt, fs, sets, _ESTIMATE)
        # verbalized cells carry a longer instruction: the bound takes each prompt at its longer rendering
        renderings = {"verbalized" if m == "verbalized" else "sample" for m in d.measurements}
        bound += sum(
            max(_prompt_tokens(language, mode, fmt, fs, sets, _BOUND, labels, m) for m in renderings)
            for labels in d.option_labels
        )
    return PlanEstimate(
        cells=prompts * samplings,
        input_tokens=total * len(d.option_orders) * len(d.option_labels) * samplings,  # labels: about equal length
        output_tokens=prompts * grid * sum(d.max_tokens),
        input_bound=bound * len(d.option_orders) * samplings,
    )


@dataclass(frozen=True, slots=True)
class _Measure:
    """How a prompt's size is counted: per-text size, size units per token, tokens per message and per request."""

    size: Callable[[str], int]
    per_token: int
    per_message: int
    per_request: int


_ESTIMATE = _Measure(len, CHARS_PER_TOKEN, 4, 0)
_BOUND = _Measure(lambda text: len(text.encode("utf-8", "surrogatepass")), 1, TEMPLATE_TOKENS, TEMPLATE_TOKENS)


def _prompt_tokens(
    language: str,
    mode: str,
    fmt: str,
    fs: tuple[Framing, ...],
    sets: tuple[tuple[int, ...], ...],
    measure: _Measure,
    labels: str = "digits",
    measurement: str = "sample",
) -> int:
    """Σ over framings × question sets of the prompts' sizes in tokens under ``measure`` (see ``estimate``)."""
    from runner.survey.prompts import build_messages

    def cell(framing: Framing, questions: tuple[int, ...]) -> PromptCell:
        return PromptCell(language, mode, questions, framing, CANONICAL_ORDER, fmt, labels)

    def prompt_tokens(prompt: PromptCell) -> int:
        messages = build_messages(prompt, measurement)
        size = sum(measure.size(m["content"]) for m in messages)
        return size // measure.per_token + measure.per_message * len(messages) + measure.per_request

    def chars(framing: Framing, questions: tuple[int, ...]) -> tuple[int, int]:
        messages = build_messages(cell(framing, questions), measurement)
        return sum(measure.size(m["content"]) for m in messages), len(messages)

    base, n_messages = chars(fs[0], sets[0])
    by_framing = Counter(chars(f, sets[0])[0] for f in fs)
    by_questions = Counter(chars(fs[0], q)[0] - base for q in sets)
    if chars(fs[-1], sets[-1])[0] != chars(fs[-1], sets[0])[0] + chars(fs[0], sets[-1])[0] - base:
        return sum(prompt_tokens(cell(f, q)) for f in fs for q in sets)  # not separable: every prompt, rendered
    overhead = measure.per_message * n_messages + measure.per_request
    return sum(
        nf * nq * ((a + b) // measure.per_token) for a, nf in by_framing.items() for b, nq in by_questions.items()
    ) + overhead * len(fs) * len(sets)


def input_bound(messages: list[dict[str, str]]) -> int:
    """Most input tokens chat messages can take (``TEMPLATE_TOKENS``): UTF-8 bytes plus the template's tokens."""
    return _BOUND.per_message * len(messages) + _BOUND.per_request + sum(_BOUND.size(m["content"]) for m in messages)


def input_estimate(messages: list[dict[str, str]]) -> int:
    """Estimated input tokens of chat messages: their characters / ``CHARS_PER_TOKEN``, plus 4 per message."""
    return sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN + 4 * len(messages)


ASSUMED_REPLY_S = 1.0  # seconds per reply assumed for an endpoint without rate limits (only concurrency bounds it)


def eta_s(endpoint: EndpointConfig, est: PlanEstimate) -> tuple[float, str]:
    """The least time (seconds) ``est``'s cells take at ``endpoint``'s limits, and how it was estimated.

    The slowest of: ``requests_per_minute`` per ``rate_window_s``; ``tokens_per_minute`` at the estimated
    prompt + ``max_tokens`` per request (what providers count); ``max_concurrency`` requests per
    ``ASSUMED_REPLY_S``. A lower bound: retries and slower replies only add to it.
    """
    if est.cells == 0:
        return 0.0, "nothing to send"
    bounds = [
        (
            endpoint.max_concurrency / ASSUMED_REPLY_S,
            f"max_concurrency {endpoint.max_concurrency} at an assumed {ASSUMED_REPLY_S:g} s per reply",
        )
    ]
    if endpoint.requests_per_minute:
        bounds.append(
            (
                endpoint.requests_per_minute / endpoint.rate_window_s,
                f"requests_per_minute {endpoint.requests_per_minute}",
            )
        )
    if endpoint.tokens_per_minute:
        per_request = max((est.input_tokens + est.output_tokens) / est.cells, 1.0)
        bounds.append(
            (
                endpoint.tokens_per_minute / endpoint.rate_window_s / per_request,
                f"tokens_per_minute {endpoint.tokens_per_minute} at ~{per_request:.0f} tokens per request",
            )
        )
    rate, basis = min(bounds, key=lambda b: b[0])
    return est.cells / rate, f"{rate * 60:.6g} requests/min ({basis})"


def format_duration(seconds: float) -> str:
    """``seconds`` as a short human duration: 45 s, 12 min, 3.5 h, 2.1 days, 3.2 years."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size if unit != "min" else seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


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

    By arithmetic over factor sizes (``estimate``): a 10^9-cell plan counts in well under a
    second; each distinct framing and question set is rendered once.
    """
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


def stored_usage(run_dir: str | Path | RunDir, endpoints: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """Per endpoint in ``endpoints``: (stored responses, input tokens, output tokens) of run directory ``run_dir``.

    Reads one responses part at a time, so memory stays bounded by a part (a batch), not by the run: a session's
    close sums its run's spending this way at any run size (issue 28). It does not check that keys are unique
    (``runner.rundir.unique_cells`` does: that needs every key at once).
    """
    from runner.rundir import part_pairs, read_part

    totals = {name: [0, 0, 0] for name in endpoints}
    for pair in part_pairs(run_dir):
        part = read_part(pair.responses, ["endpoint", "input_tokens", "output_tokens"])
        for name, sums in totals.items():
            for i, value in enumerate(endpoint_usage(part, name)):
                sums[i] += value
    return {name: (rows, tokens_in, tokens_out) for name, (rows, tokens_in, tokens_out) in totals.items()}


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
