"""hofcat: measure the cultural values language models express with Hofstede's VSM 2013, at sweep scale.

The Python API (documented in docs/python-api.md); ``import hofcat`` is its entry point (it loads this package by
location, so a user's own ``runner`` module cannot shadow it)::

    import hofcat
    spec = hofcat.load_spec("spec.toml")
    hofcat.plan_sweep(spec)                   # cells, token and cost bounds; sends nothing
    hofcat.run_sweep(spec, "runs/r1")         # or: await hofcat.run_sweep_async(spec, "runs/r1") in a notebook
    hofcat.analyze_run("runs/r1")             # RUN/analysis; await hofcat.analyze_run_async(...) likewise
    hofcat.render_report("runs/r1")           # RUN/report/index.html
    table = hofcat.read_table("runs/r1")      # polars: one row per answer with its design factors

The package is organised by stage, in data-flow order: ``survey`` (shared vocabulary) → ``sweep`` (spec,
plan, execute) → ``rundir`` (the run directory) → ``parse`` → ``score`` → ``analyze`` → ``report``, with
``endpoints`` (simulator, local llama.cpp server, demo) and ``commands`` (one module per subcommand) on top.
Names are imported on first use, so ``import runner`` stays light. The functions are named for what they
do (``analyze_run``, ``render_report``), never for a stage package (``runner.analyze``, ``runner.report``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

try:
    __version__ = importlib.metadata.version("hofcat")
except importlib.metadata.PackageNotFoundError:  # running from a checkout that was never built
    __version__ = "0+unknown"

# The public names, all defined or imported by ``runner.api`` (whose ``__all__`` is the same list).
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

if TYPE_CHECKING:
    from runner.api import *  # noqa: F403


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module("runner.api"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
