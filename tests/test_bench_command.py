"""``hofcat bench``: every arm's statistic checked against stats_core before timing, work counted right, peers
that are missing skipped with a note, a disagreeing peer refused, and the results file written safely."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stats_core
from stats_core import benchmark

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--sizes", "40", "--countries", "7", "--permutations", "19", "--resamples", "30", "--repeat", "1"]


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", "bench", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


@pytest.mark.slow
def test_bench_checks_every_peer_and_counts_the_work(tmp_path: Path) -> None:
    done = _bench(*SMALL, "--out", "r.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = report["measurements"]
    missing = {(s["workload"], s["implementation"]) for s in report["skipped"]}
    if os.environ.get("HOFCAT_REQUIRE_EXTERNAL"):
        assert not missing, report["skipped"]
    expected_peers = {
        "permanova-factored": {"scikit-bio", "vegan"},
        "permanova-fullrank": {"scikit-bio", "vegan"},
        "permdisp": {"scikit-bio", "vegan"},
        "pdist": {"scipy"},
        "kendall-bootstrap": {"scipy"},
    }
    for workload, peers in expected_peers.items():
        for size in (7,) if workload == "kendall-bootstrap" else (40,):
            arms = {r["implementation"]: r for r in rows if r["workload"] == workload and r["size"] == size}
            assert set(arms) == {"stats_core"} | {p for p in peers if (workload, p) not in missing}
            ours = arms.pop("stats_core")
            assert ours["check"] == "reference" and ours["speedup"] == 1.0 and ours["threads"] >= 1
            for peer in arms.values():
                assert peer["check"].startswith("equal"), peer
                assert peer["speedup"] == pytest.approx(peer["seconds"] / ours["seconds"])
            n = size
            work = {
                "permanova-factored": n * (n - 1) / 2 * 20,
                "permanova-fullrank": n * (n - 1) / 2 * 20,
                "permdisp": 20,
                "pdist": n * (n - 1) / 2 * 4,
                "kendall-bootstrap": 30,
            }[workload]
            assert ours["work"] == work
            assert ours["rate"] == pytest.approx(work / ours["seconds"])
    assert "| permanova-factored | 40 | stats_core |" in done.stdout
    assert f"stats_core backend {stats_core.backend()}" in done.stdout


@pytest.mark.slow
def test_bench_writes_csv_and_honours_threads(tmp_path: Path) -> None:
    done = _bench(*SMALL, "--workloads", "pdist", "--peers", "none", "--threads", "1", "--out", "r.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with (tmp_path / "r.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["workload"], r["size"], r["implementation"], r["threads"]) for r in rows] == [
        ("pdist", "40", "stats_core", "1")
    ]


def test_a_missing_peer_is_skipped_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    reasons = {"scikit-bio": "not installed (pip install scikit-bio)", "scipy": None, "vegan": "Rscript is not on PATH"}
    monkeypatch.setattr(benchmark, "available_peers", lambda: reasons)
    report = benchmark.run(["permanova-fullrank", "pdist"], [30], permutations=9, repeat=1)
    assert {(m.workload, m.implementation) for m in report.measurements} == {
        ("permanova-fullrank", "stats_core"),
        ("pdist", "stats_core"),
        ("pdist", "scipy"),
    }
    assert {(s.workload, s.implementation, s.reason) for s in report.skipped} == {
        ("permanova-fullrank", "scikit-bio", reasons["scikit-bio"]),
        ("permanova-fullrank", "vegan", reasons["vegan"]),
    }


@pytest.mark.slow
def test_a_peer_that_disagrees_gets_no_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    real = benchmark._scipy_pdist_arm

    def off_by_a_little(x: np.ndarray) -> benchmark._Arm:
        arm = real(x)
        return benchmark._Arm(arm.implementation, arm.engine, lambda: benchmark._Outcome(arm.call().statistic * 1.001))

    monkeypatch.setattr(benchmark, "_scipy_pdist_arm", off_by_a_little)
    with pytest.raises(benchmark.BenchmarkMismatchError, match=r"pdist n=30: scipy .*max relative difference 0\.001"):
        benchmark.run(["pdist"], [30], peers=["scipy"], repeat=1)


@pytest.mark.parametrize("args", [["--workloads", "permanova,pdist"], ["--peers", "skbio"], ["--sizes", "5"]])
def test_bad_options_are_one_line_errors(tmp_path: Path, args: list[str]) -> None:
    done = _bench(*args, "--out", "r.json", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("hofcat bench: error: ")
    assert not (tmp_path / "r.json").exists()


def test_the_results_file_is_never_written_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (tmp_path / "r.json").symlink_to(target)
    done = _bench(*SMALL, "--workloads", "pdist", "--peers", "none", "--out", "r.json", cwd=tmp_path)
    assert done.returncode == 2 and "is a symbolic link" in done.stderr
    assert target.read_text() == "keep me" and (tmp_path / "r.json").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.txt", "r.json"]
