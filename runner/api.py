"""hofcat's Python API: the same stages as the ``hofcat`` command, as functions (re-exported by ``runner``).

Every blocking function has an awaitable twin (``*_async``) for code that already runs an event loop, such
as a Jupyter cell: the sweep runs on the caller's loop; analysis and report, which are CPU work, run in a
worker thread so the loop stays responsive. The blocking sweep raises ``UsageError`` inside a running loop
instead of starting a second one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl

from runner.analyze import run as _analysis
from runner.analyze.combine import analyze_runs
from runner.analyze.load import load_answers
from runner.analyze.run import AnalysisOptions
from runner.errors import (
    HofcatError,
    InputError,
    LLMError,
    NotInstalledError,
    ProbeError,
    RequestError,
    RunDirError,
    SpecError,
    UsageError,
)
from runner.export.tidy import ExportResult, export_run
from runner.extract import stage as _extract
from runner.extract.stage import ExtractResult
from runner.parse.policy import Policy
from runner.parse.stage import reparse
from runner.report import html as _report
from runner.sweep import cluster as _cluster
from runner.sweep import session as _session
from runner.sweep.accounting import plan_summary, run_status
from runner.sweep.execute import RunResult
from runner.sweep.spec import EndpointConfig, Spec, load_spec, parse_spec

# The same list as ``runner.__all__`` (tests/test_python_api.py keeps them equal).
__all__ = [
    "AnalysisOptions",
    "ExportResult",
    "ExtractResult",
    "HofcatError",
    "InputError",
    "LLMError",
    "NotInstalledError",
    "Policy",
    "ProbeError",
    "RequestError",
    "RunDirError",
    "RunResult",
    "Spec",
    "SpecError",
    "UsageError",
    "analyze_run",
    "analyze_run_async",
    "analyze_runs",
    "export_run",
    "export_run_async",
    "extract_answers",
    "extract_answers_async",
    "load_spec",
    "parse_spec",
    "plan_sweep",
    "read_table",
    "render_report",
    "render_report_async",
    "reparse",
    "run_status",
    "run_sweep",
    "run_sweep_async",
    "run_sweep_on_ray",
]


def plan_sweep(spec: Spec | str | Path) -> dict[str, Any]:
    """Cells per factor, total cells, estimated input tokens, output-token bound and cost per endpoint.

    ``spec``: a ``Spec`` or the path of a TOML spec. Sends nothing.
    """
    return plan_summary(_spec(spec))


def run_sweep(
    spec: Spec | str | Path,
    out: str | Path,
    *,
    retry_failed: bool = False,
    live: bool | None = False,
    wait: bool = True,
) -> RunResult:
    """Run (or resume) a sweep into run directory ``out``; a ``RunResult`` (stored, failed, interrupted, ...).

    Blocks until the sweep ends; in a running event loop use ``await run_sweep_async(...)``. ``wait=False``:
    batch endpoints (``execution = "batch"``) submit their batches and return; a later call collects them.
    """
    return _session.run_sweep(_spec(spec), out, retry_failed=retry_failed, live=live, wait=wait)


async def run_sweep_async(
    spec: Spec | str | Path,
    out: str | Path,
    *,
    retry_failed: bool = False,
    live: bool | None = False,
    wait: bool = True,
) -> RunResult:
    """``run_sweep`` on the caller's event loop (no signal handlers: cancel the task to stop it)."""
    return await _session.run_sweep_async(_spec(spec), out, retry_failed=retry_failed, live=live, wait=wait)


def run_sweep_on_ray(
    spec: Spec | str | Path,
    out: str | Path,
    *,
    address: str | None = "auto",
    workers: int | None = None,
    retry_failed: bool = False,
    live: bool | None = False,
) -> RunResult:
    """``run_sweep`` on the Ray cluster at ``address`` (``hofcat run --ray``) in ``workers`` shards; a ``RunResult``.

    Needs ``pip install 'hofcat[ray]'`` (``UsageError`` otherwise); ``out`` must be reachable at the same path from
    every node; a later ``run_sweep`` on ``out``, with or without Ray, resumes it (docs/distributed.md).
    """
    return _cluster.run_sweep_on_ray(
        _spec(spec), out, address=address, workers=workers, retry_failed=retry_failed, live=live
    )


def analyze_run(run_dir: str | Path, options: AnalysisOptions | None = None, **choices: Any) -> Path:
    """Analyse a run directory (``AnalysisOptions``, or its fields as keywords); the ``analysis`` folder."""
    if options is not None and choices:
        raise TypeError("analyze_run: give either options or keyword choices, not both")
    return _analysis.analyze_run(run_dir, options or AnalysisOptions(**choices))


async def analyze_run_async(run_dir: str | Path, options: AnalysisOptions | None = None, **choices: Any) -> Path:
    """``analyze_run`` in a worker thread, awaitable from a running event loop."""
    return await asyncio.to_thread(analyze_run, run_dir, options, **choices)


def render_report(run_dir: str | Path) -> Path:
    """Write the run's self-contained HTML report from its analysis; the path of ``index.html``."""
    return _report.render_report(run_dir)


async def export_run_async(
    run_dir: str | Path, out: str | Path | None = None, fmt: str = "parquet", *, raw_csv: bool = False
) -> ExportResult:
    """``export_run`` in a worker thread, awaitable from a running event loop."""
    return await asyncio.to_thread(export_run, run_dir, out, fmt, raw_csv=raw_csv)  # type: ignore[arg-type]


async def render_report_async(run_dir: str | Path) -> Path:
    """``render_report`` in a worker thread, awaitable from a running event loop."""
    return await asyncio.to_thread(render_report, run_dir)


def extract_answers(run_dir: str | Path, endpoint: EndpointConfig | str, **options: Any) -> ExtractResult:
    """Ask an extractor model to restate the answers the parser found ambiguous; what was sent and stored.

    ``endpoint``: the name of an endpoint of the run's spec, or an ``EndpointConfig``. ``options``: ``statuses``,
    ``constraint``, ``retry_failed``, ``limit``, ``max_tokens`` (docs/parsing.md, "Extractor fallback"). Blocks;
    in a running event loop use ``await extract_answers_async(...)``.
    """
    return _extract.extract_answers(run_dir, _extractor(run_dir, endpoint), **options)


async def extract_answers_async(run_dir: str | Path, endpoint: EndpointConfig | str, **options: Any) -> ExtractResult:
    """``extract_answers`` on the caller's event loop."""
    return await _extract.extract_answers_async(run_dir, _extractor(run_dir, endpoint), **options)


def _extractor(run_dir: str | Path, endpoint: EndpointConfig | str) -> EndpointConfig:
    return _extract.spec_endpoint(run_dir, endpoint) if isinstance(endpoint, str) else endpoint


def read_table(run_dir: str | Path) -> pl.DataFrame:
    """The run's tidy table: one row per parsed answer, joined with its cell's design factors.

    Columns: ``cell_key``, ``question``, ``option_id`` (null unless ``status`` is ok), ``status``, the
    factors (endpoint, model, language, mode, framing, country, age, gender, reply_format, seed,
    temperature, top_p, max_tokens, constraint) and ``shuffled``. For a no-persona cell ``country`` is its
    language's country and ``language`` reads ``native`` (the convention the analysis uses).
    """
    return load_answers(run_dir, keep_keys=True).collect()


def _spec(spec: Spec | str | Path) -> Spec:
    return spec if isinstance(spec, Spec) else load_spec(spec)
