"""The simulator benchmark runs end to end (tiny size): correctness is checked before anything is timed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow  # a subprocess serving 600 requests
def test_sim_bench_runs_and_checks_replies() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benches.sim_bench", "--requests", "600", "--concurrency", "8"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    figures = json.loads(result.stdout)
    assert figures["correct_checked"] == 500 and figures["requests"] == 600
    assert figures["sim_requests_per_wall_s"] > 0 and figures["bare_requests_per_server_cpu_s"] > 0
