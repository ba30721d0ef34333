"""Replicas behind one endpoint (base_urls): three simulator replicas on loopback, failures routed around."""

from __future__ import annotations

import io
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from _runner_support import check_run_dir, make_spec, spec_text
from runner.endpoints.sim import Latency, SimConfig, SimServerThread
from runner.errors import SpecError
from runner.rundir import read_dataset, read_manifest
from runner.sweep.session import RunResult, run_sweep
from runner.sweep.spec import Spec, parse_spec

DESIGN = {"personas": ["United States", "China", "Japan"], "questions": list(range(1, 25)), "seeds": [1, 2, 3]}


def _spec(urls: list[str], design: dict | None = None, run: dict | None = None, **endpoint: object) -> Spec:
    endpoint = {"base_urls": urls, "max_concurrency": 6, **endpoint}
    design = {**DESIGN, "temperature": [0.7], **(design or {})}
    text = spec_text(urls[0], run=run, endpoint=endpoint, design=design)
    text = text.replace(f'base_url = "{urls[0]}"\n', "")  # base_url left out: base_urls[0]
    return parse_spec(text, source="test-spec")


def _run(spec: Spec, out: Path, **kwargs: object) -> RunResult:
    result = run_sweep(spec, out, stream=io.StringIO(), live=False, **kwargs)
    assert not result.interrupted and result.failed == 0
    assert read_dataset(out, "failures").num_rows == 0
    return result


def _replicas(out: Path) -> Counter[str]:
    return Counter(read_dataset(out, "responses", ["replica"]).column(0).to_pylist())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _sims(n: int, **config: object) -> list[SimServerThread]:
    return [SimServerThread(SimConfig(seed=i, **config)) for i in range(n)]


@pytest.mark.slow
def test_three_replicas_store_every_cell_once_and_name_all_three(tmp_path: Path) -> None:
    sims = _sims(3)
    for sim in sims:
        sim.start()
    try:
        urls = [s.base_url for s in sims]
        spec = _spec(urls, design={"seeds": [1]}, run={"determinism_probe": True})
        _run(spec, tmp_path / "run")
        served = [s.stats()["by_outcome"].get("ok", 0) for s in sims]
    finally:
        for sim in sims:
            sim.close()
    rows = check_run_dir(tmp_path / "run", spec)
    assert len(rows) == 72 and set(_replicas(tmp_path / "run")) == set(urls)
    assert all(n > 0 for n in served)
    manifest = read_manifest(tmp_path / "run")
    probe = manifest["determinism_probe"]["sim"]
    assert set(probe["replicas"]) == set(urls)  # each replica probed on its own
    record = {r["base_url"]: r for r in manifest["sessions"][-1]["replicas"]["sim"]}
    assert set(record) == set(urls) and sum(r["answered"] for r in record.values()) == 72
    assert Counter(rows[k]["replica"] for k in rows) == Counter({u: record[u]["answered"] for u in urls})


@pytest.mark.slow
def test_a_replica_stopped_mid_sweep_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    sims = _sims(3, latency=Latency("fixed", 30.0))
    for sim in sims:
        sim.start()
    urls = [s.base_url for s in sims]
    spec = _spec(urls)  # 216 cells, 6 in flight: about 1 s
    done: list[RunResult | BaseException] = []

    def sweep() -> None:
        try:
            done.append(_run(spec, tmp_path / "run"))
        except BaseException as exc:  # reported by the test's thread
            done.append(exc)

    thread = threading.Thread(target=sweep)
    try:
        thread.start()
        while sims[1].log.total < 20:
            time.sleep(0.005)
        sims[1].close()  # in-flight requests still answer; new connections are refused
        stopped_at_us = time.time_ns() // 1000
        thread.join(timeout=120)
    finally:
        for sim in (sims[0], sims[2]):
            sim.close()
    assert len(done) == 1 and isinstance(done[0], RunResult), done
    rows = check_run_dir(tmp_path / "run", spec)  # every cell once
    assert len(rows) == 216
    by_replica = _replicas(tmp_path / "run")
    assert 0 < by_replica[urls[1]] <= sims[1].log.by_status[200] < 216 // 3
    assert by_replica[urls[0]] + by_replica[urls[2]] == 216 - by_replica[urls[1]]
    late = [r for r in rows.values() if r["started_at"].timestamp() * 1e6 > stopped_at_us + 50_000]
    assert late and all(r["replica"] != urls[1] for r in late)  # its cells went to the others
    record = {r["base_url"]: r for r in read_manifest(tmp_path / "run")["sessions"][-1]["replicas"]["sim"]}
    assert record[urls[1]]["taken_out"] >= 1 and not record[urls[1]]["in_service"]


@pytest.mark.slow
def test_a_replica_refusing_at_start_is_taken_out_probed_and_brought_back(tmp_path: Path) -> None:
    port = _free_port()
    dead = f"http://127.0.0.1:{port}/v1"
    sims = _sims(2, latency=Latency("fixed", 60.0))
    for sim in sims:
        sim.start()
    urls = [sims[0].base_url, dead, sims[1].base_url]
    spec = _spec(urls, max_concurrency=4)  # 216 cells, 4 in flight: about 3 s
    late = SimServerThread(SimConfig(seed=9, latency=Latency("fixed", 60.0)), port=port)
    starter = threading.Timer(0.8, late.start)  # comes up after its first cool-down began
    try:
        starter.start()
        _run(spec, tmp_path / "run")
    finally:
        starter.join()
        for sim in (*sims, late):
            sim.close()
    rows = check_run_dir(tmp_path / "run", spec)
    assert len(rows) == 216
    by_replica = _replicas(tmp_path / "run")
    assert by_replica[dead] > 0  # probed after its cool-down and brought back
    assert sum(by_replica.values()) == 216
    record = {r["base_url"]: r for r in read_manifest(tmp_path / "run")["sessions"][-1]["replicas"]["sim"]}
    assert record[dead]["taken_out"] >= 1 and record[dead]["sent"] > record[dead]["answered"]


@pytest.mark.slow
def test_a_replica_dead_for_the_whole_sweep_is_routed_around(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    sims = _sims(2)
    for sim in sims:
        sim.start()
    try:
        spec = _spec([dead, sims[0].base_url, sims[1].base_url], design={"seeds": [1]})
        _run(spec, tmp_path / "run")
    finally:
        for sim in sims:
            sim.close()
    assert len(check_run_dir(tmp_path / "run", spec)) == 72
    assert dead not in _replicas(tmp_path / "run")
    record = {r["base_url"]: r for r in read_manifest(tmp_path / "run")["sessions"][-1]["replicas"]["sim"]}
    assert record[dead]["answered"] == 0 and 1 <= record[dead]["sent"] < 10


@pytest.mark.slow
def test_a_replica_answering_only_5xx_is_taken_out(tmp_path: Path) -> None:
    sims = [SimServerThread(SimConfig(seed=0, error_rate=1.0)), *_sims(2)]
    for sim in sims:
        sim.start()
    try:
        urls = [s.base_url for s in sims]
        spec = _spec(urls, design={"seeds": [1]})
        _run(spec, tmp_path / "run")
        errors = sims[0].stats()["total"]
    finally:
        for sim in sims:
            sim.close()
    assert len(check_run_dir(tmp_path / "run", spec)) == 72
    assert urls[0] not in _replicas(tmp_path / "run")
    record = {r["base_url"]: r for r in read_manifest(tmp_path / "run")["sessions"][-1]["replicas"]["sim"]}
    assert record[urls[0]]["taken_out"] >= 1 and record[urls[0]]["answered"] == 0
    assert 3 <= errors == record[urls[0]]["sent"] < 24  # out after 3 in a row, probed now and then


@pytest.mark.slow
def test_replica_limits_hold_per_replica_on_each_servers_log(tmp_path: Path) -> None:
    """Each replica allows 16 requests a minute (server-enforced, 429 past it); 48 cells need all three at once.

    One replica answers at once, two take 100 ms: least-loaded routing alone would send the fast one more than
    its 16; its own limiter sends the rest to the slow ones."""
    sims = [
        SimServerThread(SimConfig(seed=i, requests_per_minute=16, latency=Latency("fixed", 100.0 * (i > 0))))
        for i in range(3)
    ]
    for sim in sims:
        sim.start()
    try:
        urls = [s.base_url for s in sims]
        design = {"personas": ["United States", "China"], "questions": list(range(1, 13)), "seeds": [1, 2]}
        limits = {"requests_per_minute": 16, "burst": 16, "max_concurrency": 4}
        spec = _spec(urls, design=design, replica_limits="replica", **limits)
        _run(spec, tmp_path / "run")
        stats = [s.stats() for s in sims]
    finally:
        for sim in sims:
            sim.close()
    assert len(check_run_dir(tmp_path / "run", spec)) == 48
    for s in stats:  # the server's own clock: never more than its limit in any 60 s, never refused
        assert s["max_requests_in_60s"] <= 16 and s["by_status"].get("429", 0) == 0
    assert [s["total"] for s in stats] == [16, 16, 16]  # the sum is three limits: each replica its own


def test_base_urls_are_checked_like_base_url() -> None:
    base = {"name": "x", "provider": "openai", "model": "m"}

    def parse(**endpoint: object) -> Spec:
        text = spec_text("http://127.0.0.1:1/v1", endpoint={**base, **endpoint})
        if "base_url" not in endpoint:
            text = text.replace('base_url = "http://127.0.0.1:1/v1"\n', "")
        return parse_spec(text, source="s")

    spec = parse(base_urls=["http://127.0.0.1:1/v1/", "http://127.0.0.1:2/v1"])
    assert spec.endpoints[0].base_url == "http://127.0.0.1:1/v1" and len(spec.endpoints[0].base_urls) == 2
    with pytest.raises(SpecError, match=r"base_urls\[1\] = 'http://127.0.0.1:2/v1<hidden>'") as err:
        parse(base_urls=["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1?key=sk-secret"])
    assert "sk-secret" not in str(err.value)
    with pytest.raises(SpecError, match="user:password"):
        parse(base_urls=["http://u:sk-secret@127.0.0.1:1/v1"])
    with pytest.raises(SpecError, match="one of base_urls"):
        parse(base_url="http://127.0.0.1:3/v1", base_urls=["http://127.0.0.1:1/v1"])
    with pytest.raises(SpecError, match="not listed twice"):
        parse(base_urls=["http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1/"])
    with pytest.raises(SpecError, match="set only with base_urls"):
        parse(base_url="http://127.0.0.1:1/v1", replica_limits="replica")
    with pytest.raises(SpecError, match="endpoint, replica"):
        parse(base_urls=["http://127.0.0.1:1/v1"], replica_limits="server")
    assert make_spec("http://127.0.0.1:1/v1").endpoints[0].base_urls == ()
