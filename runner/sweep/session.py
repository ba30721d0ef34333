"""One sweep session: spec → manifest → open the run directory → execute the unstored cells → close.

Running the same spec into the same directory again resumes: the plan minus the keys already stored (and,
unless ``retry_failed``, minus the cells that already failed for good).

With ``run.determinism_probe``, every OpenAI-compatible endpoint is probed (``runner.probe``, 4 repeats,
8 tokens) before any cell is sent, and the result goes into the manifest under
``determinism_probe.<endpoint>``. A resumed session keeps the result an earlier session recorded: the probe
describes the endpoint the run started against, and re-probing would silently replace it.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any, TextIO

from runner.answers import parser_version
from runner.execute import Executor, RunResult, api_key_for, unsupported_parameters
from runner.plan import count_cells, factor_counts, iter_cells, validate_plan
from runner.progress import Progress, RunStats
from runner.retry import RetryPolicy
from runner.spec import EndpointConfig, Spec
from runner.store import FORMAT, RunStore, versions


def build_manifest(spec: Spec) -> dict[str, Any]:
    """The manifest of a run of ``spec``: spec and hash, versions, parser version, policies, seeds, plan size.

    Holds no secrets: endpoints name the environment variable of their key, never the key.
    """
    d = spec.design
    return {
        "format": FORMAT,
        "run_name": spec.run.name,
        "spec_hash": spec.spec_hash,
        "spec": spec.raw,
        "spec_source": spec.source,
        "versions": versions(),
        "parser_version": parser_version(),
        "reference": spec.run.reference,
        "seeds": {
            "master": spec.run.seed,
            "sampling": list(d.seeds),
            "option_order": ("per cell: shuffle_seed = derive_seed(master, 'option_order', language, framing kind, "
                             "country, age, gender, questions, sampling seed); order = shuffled_order(shuffle_seed); "
                             "stored in column shuffle_seed") if d.shuffle_options else "canonical order 1-5",
        },
        "policies": {
            "retry": {e.name: RetryPolicy(e.max_retries).describe() for e in spec.endpoints},
            "limits": {e.name: {"requests_per_minute": e.requests_per_minute, "tokens_per_minute": e.tokens_per_minute,
                                "burst_per_s": e.burst, "window_s": e.rate_window_s,
                                "window_counts": "from admission until window_s after the response",
                                "max_concurrency": e.max_concurrency,
                                "timeout_s": e.timeout_s, "adaptive_concurrency": "halve on 429, +1 per cap successes"}
                       for e in spec.endpoints},
            "failed_cells": "stored in failures/; retried only with --retry-failed",
        },
        "unsupported_parameters": {e.name: unsupported_parameters(e) for e in spec.endpoints},
        "plan": {"cells": count_cells(spec), "factors": factor_counts(spec)},
    }


def run_sweep(spec: Spec, out: str | Path, *, retry_failed: bool = False, stream: TextIO | None = None,
              live: bool | None = None, log_every_s: float = 60.0) -> RunResult:
    """Run (or resume) ``spec`` into run directory ``out``; progress goes to ``stream`` (stderr)."""
    validate_plan(spec)
    for endpoint in spec.endpoints:
        api_key_for(endpoint, spec.source)  # fail before touching the directory when a key is missing
    return asyncio.run(_session(spec, Path(out), retry_failed, stream or sys.stderr, live, log_every_s))


async def _session(spec: Spec, out: Path, retry_failed: bool, stream: TextIO, live: bool | None,
                   log_every_s: float) -> RunResult:
    store = RunStore.open(out, build_manifest(spec), batch_rows=spec.run.batch_rows)
    stats = RunStats(total=count_cells(spec))
    progress = Progress(stats, stream=stream, live=live, log_every_s=log_every_s)
    executor = Executor(store, stats, progress, flush_interval_s=spec.run.flush_interval_s, rng_seed=spec.run.seed)
    interrupted = True
    try:
        if spec.run.determinism_probe:
            await _probe_endpoints(spec, store, stream)
        done, failed = store.stored_keys()
        if retry_failed:
            failed = set()
        work = [(e, _unstored(iter_cells(spec, e), done, failed, stats)) for e in spec.endpoints]
        interrupted = await executor.run(work)
    finally:
        store.close({"outcome": "interrupted" if interrupted else "complete", "stored": stats.done,
                     "failed": stats.failed, "already_stored": stats.already_stored,
                     "failed_before": stats.failed_before, "retry_failed": retry_failed})
    return RunResult(stats.done, stats.failed, stats.already_stored, interrupted,
                     {e.name: unsupported_parameters(e) for e in spec.endpoints}, stats.failed_before)


PROBE_REPEATS = 4  # small: 5 × 4 requests per endpoint before the sweep
PROBE_MAX_TOKENS = 8


async def _probe_endpoints(spec: Spec, store: RunStore, stream: TextIO) -> None:
    """Probe each OpenAI-compatible endpoint not yet probed in this run; record results (or errors) in the manifest."""
    from runner.errors import ProbeError

    for endpoint in spec.endpoints:
        if endpoint.provider != "openai" or store.probe_result(endpoint.name) is not None:
            continue
        try:
            result = (await _probe(endpoint)).to_dict()
            print(f"hofcat: endpoint {endpoint.name!r}: determinism probe: seed {result['seed']}, greedy identical "
                  f"share {result['greedy_identical_share']:.2f}", file=stream)
        except ProbeError as exc:  # an unreachable endpoint: the sweep's own retries and errors will tell more
            result = {"error": str(exc)}
            print(f"hofcat: endpoint {endpoint.name!r}: determinism probe failed: {exc}", file=stream)
        store.record_probe(endpoint.name, result)


async def _probe(endpoint: EndpointConfig) -> Any:
    """The small determinism probe of one endpoint (a ``DeterminismProbe``)."""
    from runner.probe import probe_determinism

    return await probe_determinism(endpoint.base_url, endpoint.model, repeats=PROBE_REPEATS,
                                   max_tokens=PROBE_MAX_TOKENS, api_key_env=endpoint.api_key_env,
                                   timeout_s=endpoint.timeout_s)


def _unstored(cells, done: set[str], failed: set[str], stats: RunStats):
    """The cells without an outcome yet; counts the skipped ones (and, of those, the earlier failures)."""
    for cell in cells:
        if cell.key in done:
            stats.already_stored += 1
        elif cell.key in failed:
            stats.already_stored += 1
            stats.failed_before += 1
        else:
            yield cell
