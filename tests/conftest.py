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
