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
from runner.sweep.mock import MockTransport
from runner.sweep.session import RunResult
from runner.sweep.spec import EndpointConfig, Spec, load_spec, parse_spec
from runner.sweep.transport import TransportFactory, aiohttp_transport

# The same list as ``runner.__all__`` (tests/test_python_api.py keeps them equal).
__all__ = [
    "AnalysisOptions",
    "ExportResult",
    "ExtractResult",
    "HofcatError",
    "InputError",
    "LLMError",
    "MockTransport",
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
    "compare_conditions",
    "export_run",
    "export_run_async",
    "extract_answers",
    "extract_answers_async",
    "load_spec",
    "method_agreement",
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
    "variance_partition",
]


def plan_sweep(spec: Spec | str | Path) -> dict[str, Any]:
    """Cells per factor, total cells, estimated input tokens, output-token bound and cost per endpoint.

    ``spec``: a ``Spec`` or the path of a TOML spec. Sends nothing.
    """
    return plan_summary(_spec(spec))


async def run_sweep_async(
    spec: Spec | str | Path,
    out: str | Path,
    *,
    retry_failed: bool = False,
    live: bool | None = False,
    wait: bool = True,
    handle_signals: bool = False,
    transport: TransportFactory | None = None,
) -> RunResult:
    """Run (or resume) a sweep into run directory ``out``; a ``RunResult`` (stored, failed, interrupted, ...).

    On the caller's event loop, with no signal handlers unless ``handle_signals`` (cancel the task to stop it);
    ``run_sweep`` blocks until the sweep ends. ``wait=False``: batch endpoints (``execution = "batch"``) submit
    their batches and return; a later call collects them. ``transport``: where requests go instead of HTTP (each
    endpoint's ``Transport`` from it), e.g. a ``MockTransport`` to test a spec without a server.
    """
    return await _session.run_sweep_async(
        _spec(spec),
        out,
        retry_failed=retry_failed,
        live=live,
        wait=wait,
        handle_signals=handle_signals,
        transport_factory=transport or aiohttp_transport,
    )


run_sweep = _session.blocking(run_sweep_async)


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


def compare_conditions(
    run_dir: str | Path,
    a: dict[str, Any],
    b: dict[str, Any],
    options: AnalysisOptions | None = None,
    **choices: Any,
) -> pl.DataFrame:
    """Condition ``a`` minus condition ``b`` of a run, each named by factor values (``{"model": "m1"}``).

    Over the countries both answered (paired): per dimension and for the CAT score (``dimension`` = "cat"), the two
    values, the difference, its interval, the exact paired swap p and the smallest attainable p (docs/analysis.md,
    Comparisons between conditions). ``run_dir``: a run directory, or a folder with an ``answers.parquet`` that
    has the factors (as ``analyze_run`` reads). ``options`` (or its fields as keywords) as for ``analyze_run``; the
    reference defaults to the run's. Any two conditions, not only the pairs ``analyze_run`` tabulates.
    """
    from runner.analyze.comparisons import compare_conditions as compare
    from runner.analyze.run import analysis_design
    from runner.analyze.units import unit_array
    from runner.rundir.reader import read_manifest
    from runner.survey.reference import load_reference

    if options is not None and choices:
        raise TypeError("compare_conditions: give either options or keyword choices, not both")
    options = options or AnalysisOptions(**choices)
    answers = load_answers(run_dir)
    units = unit_array(answers, analysis_design(answers, options), options.policy)
    name = options.reference
    if name is None:  # the run's reference (analyze_run's default); a plain answers table has none
        try:
            name = read_manifest(run_dir).get("reference")
        except RunDirError:
            name = None
    return compare(
        units,
        load_reference(name or "hofstede-2015"),
        a,
        b,
        undefined_tau=options.undefined_tau,
        constants=options.constants,
        confidence_level=options.confidence_level,
        seed=options.seed,
        permutations=options.permutations,
    )


def variance_partition(run_dir: str | Path, options: AnalysisOptions | None = None, **choices: Any) -> pl.DataFrame:
    """The run's variance partition, as ``analyze_run`` writes it to ``analysis/variance_partition.parquet``.

    Per scope (``all``, and each model when several answered), profile (``items``: 24 item means; ``indices``:
    the six indices) and factor: the marginal share ``r2`` with F, ω² and permutation ``p``, the sequential share,
    the rank, the smallest attainable p and a note (aliased, confounded, blocked); then Residual and Total rows
    (docs/analysis.md, Variance partition). ``options`` (or its fields as keywords) as for ``analyze_run``: its
    ``permutations``, ``seed``, ``policy`` and factors/units choices apply.
    """
    from runner.analyze.partition import variance_partition as partition
    from runner.analyze.run import analysis_design
    from runner.analyze.units import unit_array

    if options is not None and choices:
        raise TypeError("variance_partition: give either options or keyword choices, not both")
    options = options or AnalysisOptions(**choices)
    answers = load_answers(run_dir)
    units = unit_array(answers, analysis_design(answers, options), options.policy)
    return partition(units, permutations=options.permutations, seed=options.seed)


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


async def extract_answers_async(run_dir: str | Path, endpoint: EndpointConfig | str, **options: Any) -> ExtractResult:
    """Ask an extractor model to restate the answers the parser found ambiguous; what was sent and stored.

    ``endpoint``: the name of an endpoint of the run's spec, or an ``EndpointConfig``. ``options``: ``statuses``,
    ``constraint``, ``retry_failed``, ``limit``, ``max_tokens`` (docs/parsing.md, "Extractor fallback"). On the
    caller's event loop; ``extract_answers`` blocks.
    """
    return await _extract.extract_answers_async(run_dir, _extractor(run_dir, endpoint), **options)


extract_answers = _session.blocking(extract_answers_async)


def _extractor(run_dir: str | Path, endpoint: EndpointConfig | str) -> EndpointConfig:
    return _extract.spec_endpoint(run_dir, endpoint) if isinstance(endpoint, str) else endpoint


def method_agreement(
    run_dir: str | Path, options: AnalysisOptions | None = None, **choices: Any
) -> dict[str, pl.DataFrame]:
    """Agreement between the measurement methods a run crossed (sample, distribution, verbalized): the tables
    ``method_divergence`` (per cell: TV, Jensen–Shannon in bits, the sampling noise floor of TV),
    ``method_conclusions`` (per condition and statistic: each method's tau / CAT and whether the conclusions
    differ) and ``method_agreement`` (per condition and method pair), as ``analyze_run`` writes them
    (docs/analysis.md, Agreement between methods). ``run_dir`` and ``options`` as for ``compare_conditions``."""
    from runner.analyze.methods import method_tables
    from runner.analyze.run import analysis_design, condition_agreement
    from runner.analyze.units import unit_array
    from runner.survey.reference import load_reference

    if options is not None and choices:
        raise TypeError("method_agreement: give either options or keyword choices, not both")
    options = options or AnalysisOptions(**choices)
    answers = load_answers(run_dir)
    design = analysis_design(answers, options)
    units = unit_array(answers, design, options.policy)
    tables = condition_agreement(units, load_reference(options.reference or _run_reference(run_dir)), options)
    return method_tables(answers, design.factors, tables["kendall"], tables["cat"], level=options.confidence_level)


def _run_reference(run_dir: str | Path) -> str:
    """The reference a run was planned against (its manifest's), else Hofstede 2015."""
    from runner.rundir.reader import read_manifest

    try:
        return read_manifest(run_dir).get("reference") or "hofstede-2015"
    except RunDirError:
        return "hofstede-2015"


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
