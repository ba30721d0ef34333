"""The store under faults: unstorable rows, failed writes, corrupt parts, colliding writers, CLI error paths.

Everything runs on real files; exit codes come from a real ``hofcat`` subprocess against the simulator on
127.0.0.1. Read-only folders: ``chmod`` for a normal user; as root (who ignores permissions) ``chattr +i``
or a tiny tmpfs, and the test is skipped where neither is allowed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from _runner_support import check_run_dir, make_spec, spec_text
from runner.analyze.load import load_answers
from runner.endpoints.sim import Latency, SimConfig, SimServerThread
from runner.errors import RunDirError
from runner.parse.stage import update_answers
from runner.rundir import RunDir, RunWriter, read_dataset, read_manifest, stored_keys
from runner.rundir.schema import ResponseRow
from runner.sweep.session import build_manifest, run_sweep
from runner.sweep.spec import parse_spec

ROOT = os.geteuid() == 0


def _hofcat(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """The process exited 2 with one ``hofcat …: error:`` line naming ``needles``, and no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if ": error: " in x]
    for needle in needles:
        assert needle in line, line
    return line


@contextlib.contextmanager
def _unwritable(folder: Path) -> Iterator[None]:
    """``folder`` refuses new entries while the block runs (chmod, or chattr +i as root); skips if impossible."""
    if not ROOT:
        folder.chmod(0o555)
        try:
            yield
        finally:
            folder.chmod(0o755)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)], check=False).returncode:
        pytest.skip("running as root without chattr +i: cannot make a folder read-only")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def _row(key: str, **changes: object) -> ResponseRow:
    """A stored reply of item mode with ``changes``."""
    fields = {
        "cell_key": key,
        "endpoint": "sim",
        "provider": "openai",
        "model": "sim-1",
        "language": "en",
        "mode": "item",
        "questions": (1,),
        "question": 1,
        "framing": "none",
        "country": None,
        "age": None,
        "gender": None,
        "option_order": (1, 2, 3, 4, 5),
        "reply_format": "number",
        "template_hash": "t" * 16,
        "prompt_hash": "p" * 16,
        "shuffle_seed": None,
        "seed": 1,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 16,
        "constraint": "none",
        "response_text": "3",
        "finish_reason": "stop",
        "input_tokens": 10,
        "output_tokens": 1,
        "latency_s": 0.01,
        "attempts": 1,
        "http_status": 200,
        "error_class": None,
        "error_message": None,
        "started_at": 1_700_000_000_000_000,
        "finished_at": 1_700_000_000_100_000,
    }
    fields.update(changes)
    return ResponseRow(**fields)


def _writer(out: Path) -> RunWriter:
    return RunWriter.open_run(out, build_manifest(make_spec("http://127.0.0.1:9/v1")), batch_rows=1000)


# --- a bad row never sinks its batch ------------------------------------------------------------------------


def test_unstorable_rows_become_store_errors_and_the_rest_is_committed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    bad = {
        "k03": {"finish_reason": 5},
        "k07": {"input_tokens": 10**30},
        "k11": {"response_text": "\ud800 lone surrogate", "finish_reason": {"why": "object"}},
    }
    with _writer(out) as writer:
        for i in range(20):
            key = f"k{i:02d}"
            writer.add(_row(key, **bad.get(key, {})))
        writer.flush()
        writer.add(_row("k20"))  # the next flush is not poisoned either
    responses = read_dataset(out, "responses").to_pylist()
    failures = {r["cell_key"]: r for r in read_dataset(out, "failures").to_pylist()}
    assert sorted(r["cell_key"] for r in responses) == sorted({f"k{i:02d}" for i in range(21)} - set(bad))
    assert sorted(failures) == sorted(bad)
    for key, changes in bad.items():
        row = failures[key]
        assert row["error_class"] == "store_error" and row["response_text"] is None
        assert "\n" not in row["error_message"]
        for column in changes:
            assert column in row["error_message"]
    assert failures["k07"]["seed"] == 1  # the cell's own factors are kept


def test_unstorable_factor_values_are_nulled_in_the_failure_row(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with _writer(out) as writer:
        writer.add(_row("a", seed=99999999999999999999))
        writer.add(_row("b"))
    assert read_dataset(out, "responses").column("cell_key").to_pylist() == ["b"]
    [failure] = read_dataset(out, "failures").to_pylist()
    assert failure["cell_key"] == "a" and failure["seed"] is None and "seed" in failure["error_message"]


# --- part names, numbers, two writers -----------------------------------------------------------------------


def test_part_numbers_past_999999_are_read_in_numeric_order(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with _writer(out) as writer:
        writer._next_part = 999_999
        writer.add(_row("a"))
        writer.flush()
        writer.add(_row("b"))
        writer.flush()
        writer._next_part = 9
        writer.add(_row("c"))
    parts = RunDir(out).parts("responses")
    assert [int(p.split("-")[0]) for p in parts] == [9, 999_999, 1_000_000]
    assert stored_keys(out)[0] == {"a", "b", "c"}
    assert read_dataset(out, "responses").column("cell_key").to_pylist() == ["c", "a", "b"]


def test_deleting_the_lock_file_lets_no_second_writer_in(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _writer(out)
    holder = (out / ".lock").read_text().split()
    assert holder == [str(os.getpid()), socket.gethostname()]
    with pytest.raises(RunDirError, match=f"pid {os.getpid()} on host"):
        _writer(out)
    (out / ".lock").unlink()  # someone "cleans up" while the first writer runs: the directory itself stays locked
    with pytest.raises(RunDirError, match="another hofcat process is using this directory"):
        _writer(out)
    with pytest.raises(RunDirError, match="another hofcat process"):
        RunWriter.attach(out)
    first.add(_row("from-first"))
    first.close()
    second = _writer(out)  # free again once the first writer closed
    second.add(_row("from-second"))
    second.close()
    assert len(RunDir(out).parts("responses")) == 2
    assert stored_keys(out)[0] == {"from-first", "from-second"}


# --- integrity ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stored") / "run"
    with SimServerThread(SimConfig(seed=4)) as sim:
        text = spec_text(sim.base_url, run={"batch_rows": 12})
        (out.parent / "spec.toml").write_text(text)
        run_sweep(parse_spec(text), out, live=False)
    return out


def _damaged_copy(stored_run: Path, tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "run"
    shutil.copytree(stored_run, out)
    return out, RunDir(out).part("responses", RunDir(out).parts("responses")[1])


def _flip_in_column(path: Path, column: str) -> None:
    """Flip one bit in the middle of ``column``'s first data page."""
    meta = pq.ParquetFile(path).metadata.row_group(0)
    chunk = next(meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == column)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + chunk.total_compressed_size // 2] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage", ["flipped", "truncated", "junk", "rewritten key", "name not UTF-8", "digest not UTF-8"]
)
def test_a_damaged_part_is_refused_with_its_name(stored_run: Path, tmp_path: Path, damage: str) -> None:
    out, part = _damaged_copy(stored_run, tmp_path)
    if damage == "flipped":
        _flip_in_column(part, "cell_key")
    elif damage == "truncated":
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    elif damage == "junk":
        part.write_bytes(b"not a parquet file at all" * 10)
    elif damage == "name not UTF-8":  # a column name in the footer no longer decodes (pyarrow raised ValueError)
        data = part.read_bytes()
        footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
        at = data.index(b"input_tokens", footer)  # the schema's element, first in the footer
        part.write_bytes(data[:at] + b"\xf2" + data[at + 1 :])
    elif damage == "digest not UTF-8":  # pages intact, the recorded key digest is bytes that do not decode
        data = pq.read_table(part)
        meta = {**data.schema.metadata, b"hofcat.key_digest": b"\xf2\xff" * 16}
        pq.write_table(data.replace_schema_metadata(meta), part, write_page_checksum=True)
    else:  # every page consistent, one key changed: only the recorded key digest can tell
        data = pq.read_table(part)
        keys = data.column("cell_key").to_pylist()
        keys[0] = "0" * 32
        changed = data.set_column(data.column_names.index("cell_key"), "cell_key", pa.array(keys))
        pq.write_table(changed.replace_schema_metadata(data.schema.metadata), part, write_page_checksum=True)
    expected = "checksum mismatch" if damage in ("rewritten key", "digest not UTF-8") else "is corrupt"
    _one_line_error(_hofcat("status", str(out)), f"part responses/{part.name}", expected)
    spec_path = stored_run.parent / "spec.toml"  # the server is gone: a resume must stop before sending
    _one_line_error(_hofcat("run", str(spec_path), "--out", str(out)), f"part responses/{part.name}", expected)


# --- analyze never drops cells silently -----------------------------------------------------------------------


def test_analysis_refuses_a_responses_part_without_answers_and_repair_restores_it(
    stored_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    shutil.copytree(stored_run, out)
    complete = load_answers(out).collect().height
    answers = RunDir(out).part("answers", RunDir(out).parts("answers")[2])
    answers.unlink()
    with pytest.raises(RunDirError, match=f"responses/{answers.name} has no answers part"):
        load_answers(out)
    with RunWriter.attach(out) as writer:
        assert update_answers(writer) == 1
    assert load_answers(out).collect().height == complete


# --- failed writes during a run ---------------------------------------------------------------------------


def _spec_file(tmp_path: Path, base_url: str, cells_design: dict | None = None) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(
        spec_text(
            base_url,
            run={"batch_rows": 20, "flush_interval_s": 0.1},
            endpoint={"max_concurrency": 4},
            design=cells_design or {"personas": ["United States", "China", "Japan"], "seeds": [1, 2, 3, 4]},
        )
    )
    return path


@pytest.mark.slow  # a sweep subprocess with a write fault in the middle
def test_a_briefly_readonly_answers_folder_is_retried_reported_and_never_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimServerThread(SimConfig(seed=6, latency=Latency("fixed", 10.0))) as sim:
        spec_path = _spec_file(tmp_path, sim.base_url)
        process = subprocess.Popen(
            [sys.executable, "-m", "runner.cli", "run", str(spec_path), "--out", str(out), "--log-every", "0.2"],
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not list((out / "answers").glob("part-*.parquet")):
            assert time.monotonic() < deadline and process.poll() is None, process.communicate()
            time.sleep(0.01)
        with _unwritable(out / "answers"):
            time.sleep(1.2)
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert "retrying in" in stderr and "Traceback" not in stderr
    spec = parse_spec(spec_path.read_text())
    rows = check_run_dir(out, spec)
    answers = read_dataset(out, "answers", ["cell_key"]).column(0).to_pylist()
    assert len(rows) == 144 and sorted(answers) == sorted(rows)  # item mode: one answer per stored reply


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 320 KiB tmpfs (root only; skipped elsewhere)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if not ROOT or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320k", "tmpfs", str(mount)]).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow  # a sweep subprocess that fills a disk
def test_a_full_disk_ends_the_run_with_one_line_and_an_end_record(tmp_path: Path, tiny_disk: Path) -> None:
    out = tiny_disk / "run"
    design = {"personas": ["United States", "China", "Japan", "Germany"], "seeds": list(range(1, 41))}
    with SimServerThread(SimConfig(seed=6, chatty_rate=1.0)) as sim:
        proc = _hofcat("run", str(_spec_file(tmp_path, sim.base_url, design)), "--out", str(out))
    _one_line_error(proc, "no space left on device")
    session = read_manifest(out)["sessions"][-1]
    assert session["outcome"] == "store_error" and "ended_at" in session


# --- one-line errors of the CLI -----------------------------------------------------------------------------


@pytest.mark.slow
def test_out_naming_a_file_is_one_line(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(spec_text("http://127.0.0.1:9/v1"))
    target = tmp_path / "a-file"
    target.write_text("x")
    _one_line_error(_hofcat("run", str(spec_path), "--out", str(target)), str(target), "is a file")


@pytest.mark.slow
def test_a_readonly_run_directory_is_one_line(stored_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(stored_run, out)
    (out / ".lock").unlink()
    spec_path = stored_run.parent / "spec.toml"
    with _unwritable(out):
        _one_line_error(_hofcat("run", str(spec_path), "--out", str(out)), str(out))
        _one_line_error(_hofcat("reparse", str(out)), str(out))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["status", "plan"])
def test_a_reader_that_goes_away_is_not_a_traceback(stored_run: Path, tmp_path: Path, command: str) -> None:
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(spec_text("http://127.0.0.1:9/v1"))
    target = str(stored_run) if command == "status" else str(spec_path)
    pipeline = f"{sys.executable} -m runner.cli {command} {target} | head -c 1 >/dev/null; echo ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, timeout=60, check=False)
    assert proc.stderr == "" and proc.stdout.strip() in {"0", "141"}, proc


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"group,country,question,mean\nm,Japan,1,2.5\nm,Jap\xe9n,2,2.5\n", "means.csv:3: byte 0xe9 is not UTF-8"),
        (b"group,country,question,mean\n" + b"m" * 200_000 + b",Japan,1,2.5\n", "means.csv:2: not a readable CSV"),
    ],
)
def test_bad_bytes_in_a_means_file_are_one_line(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "means.csv"
    path.write_bytes(content)
    _one_line_error(_hofcat("score", "--means", str(path), "--reference", "hofstede-2015"), needle)


# --- resume -------------------------------------------------------------------------------------------------


def test_a_resume_redoes_exactly_the_cells_of_a_part_moved_away(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimServerThread(SimConfig(seed=4)) as sim:
        spec = make_spec(sim.base_url, run={"batch_rows": 12})
        run_sweep(spec, out, live=False)
        again = run_sweep(spec, out, live=False)  # the stored keys cover the plan: nothing is walked or sent
        assert again.stored == 0 and again.already_stored == 48
        moved = RunDir(out).part("responses", RunDir(out).parts("responses")[0])
        lost = set(pq.read_table(moved, columns=["cell_key"]).column(0).to_pylist())
        moved.rename(tmp_path / moved.name)
        resumed = run_sweep(spec, out, live=False)
    assert resumed.stored == len(lost) == 12 and resumed.already_stored == 36
    assert set(check_run_dir(out, spec)) >= lost


def test_flushes_run_in_one_worker_thread_one_at_a_time_in_parts_of_at_most_a_batch(tmp_path: Path) -> None:
    import asyncio
    import io
    import threading

    from runner.rundir import Batch, Committed
    from runner.sweep.execute import Executor
    from runner.sweep.mock import MockTransport, VirtualTime, openai_reply
    from runner.sweep.plan import count_cells, iter_cells
    from runner.sweep.progress import Progress, RunStats

    spec = make_spec("http://memory.invalid/v1", run={"batch_rows": 5}, endpoint={"max_concurrency": 8})
    clock = VirtualTime()
    transport = MockTransport(lambda body, attempt: openai_reply("3"), clock)
    writer = RunWriter.open_run(tmp_path / "run", build_manifest(spec), batch_rows=spec.run.batch_rows)
    threads: list[str] = []
    active = [0, 0]  # running now, most at once

    def commit_batch(batch: Batch) -> Committed:
        active[0] += 1
        active[1] = max(active)
        threads.append(threading.current_thread().name)
        time.sleep(0.005)  # a slow disk: the loop keeps adding rows meanwhile
        try:
            return writer.commit_batch(batch)
        finally:
            active[0] -= 1

    stats = RunStats(total=count_cells(spec))
    executor = Executor(
        writer,
        stats,
        Progress(stats, stream=io.StringIO(), live=False),
        flush_interval_s=3600,
        rng_seed=5,
        commit_batch=commit_batch,
        transport_factory=lambda endpoint: transport,
        handle_signals=False,
        wait=clock.wait,
        clock=clock.clock,
    )
    asyncio.run(executor.run([(e, iter_cells(spec, e)) for e in spec.endpoints]))
    writer.close({})
    assert threads and {t.split("_")[0] for t in threads} == {"hofcat-flush"} and active[1] == 1
    assert threading.main_thread().name not in threads
    sizes = [
        pq.read_metadata(RunDir(tmp_path / "run").part("responses", p)).num_rows
        for p in RunDir(tmp_path / "run").parts("responses")
    ]
    assert sum(sizes) == 48 and max(sizes) <= 5


def test_a_flusher_that_cannot_write_stops_the_run_with_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    import runner.sweep.execute as execute

    monkeypatch.setattr(execute, "FLUSH_RETRY_WAITS_S", (0.05, 0.05))  # the policy's shape, quicker
    out = tmp_path / "run"
    (out / "answers").mkdir(parents=True)
    stream = io.StringIO()
    with SimServerThread(SimConfig(seed=4)) as sim, _unwritable(out / "answers"):
        spec = make_spec(sim.base_url, run={"batch_rows": 12, "flush_interval_s": 0.05})
        with pytest.raises(RunDirError, match="cannot commit part") as caught:
            run_sweep(spec, out, live=False, stream=stream)
    assert "\n" not in str(caught.value)
    assert stream.getvalue().count("retrying in") == 2  # each failed attempt reported
    session = read_manifest(out)["sessions"][-1]
    assert session["outcome"] == "store_error" and "cannot commit part" in session["error"]
    assert read_dataset(out, "answers").num_rows == 0 < read_dataset(out, "responses").num_rows
