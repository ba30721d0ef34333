"""Shared test fixtures and the policy for tests that need programs outside Python."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

# .ci/run installs R (vegan) and Chromium and sets this, so that a missing program fails CI instead of
# silently skipping the comparison it guards.
REQUIRE_EXTERNAL = os.environ.get("HOFCAT_REQUIRE_EXTERNAL") == "1"


def require_program(name: str) -> str:
    """Path of a system program; skips the test locally, fails it in CI, when the program is missing."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (.ci/run installs it)"
        if REQUIRE_EXTERNAL:
            pytest.fail(message)
        pytest.skip(message)
    return path


@dataclass(frozen=True)
class DemoRun:
    """One ``hofcat demo --endpoint sim`` run: what the command printed and what ``run_demo`` returned."""

    out: Path  # the --out folder
    exit_code: int
    stdout: str
    result: object  # runner.endpoints.demo.DemoResult


@pytest.fixture(scope="session")
def sim_demo_run(tmp_path_factory) -> DemoRun:
    """The demo on the simulated endpoint, run once for the whole suite (5 seeds).

    It runs through the command (``runner.cli.main``, in-process) so that the command's output and the
    ``DemoResult`` it printed are both checked from the same single run; ``run_demo`` is wrapped to keep the
    value it returned. Tests must not modify the run directory.
    """
    from runner import cli
    from runner.endpoints import demo

    out = tmp_path_factory.mktemp("demo")
    returned = []
    real = demo.run_demo

    def recording(*args, **kwargs):
        returned.append(real(*args, **kwargs))
        return returned[-1]

    stdout = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(stdout):
        patch.setattr(demo, "run_demo", recording)
        code = cli.main(["demo", "--endpoint", "sim", "--seeds", "5", "--out", str(out)])
    assert len(returned) == 1, f"hofcat demo (exit status {code}) did not call runner.endpoints.demo.run_demo once"
    return DemoRun(out, code, stdout.getvalue(), returned[0])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any sweep of the suite reported more input tokens than its plan's bound (issue 16).

    Every sweep session records ``token_bounds`` in its run directory's manifest; this walks the run
    directories the tests made under pytest's base temp folder.
    """
    import json

    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or exitstatus not in (0, 1):
        return
    broken = []
    for manifest in Path(factory.getbasetemp()).rglob("manifest.json"):
        try:
            sessions = json.loads(manifest.read_text(encoding="utf-8")).get("sessions", [])
        except (OSError, ValueError, AttributeError):
            continue
        for entry in sessions if isinstance(sessions, list) else []:
            for name, bound in (entry.get("token_bounds") or {}).items():
                if not bound.get("held", True):
                    broken.append(f"{manifest.parent}: {name} {bound}")
    if broken:
        print("\nthe plan's input-token bound did not hold:\n  " + "\n  ".join(broken))
        session.exitstatus = 1
