"""A run directory from elsewhere cannot harm the machine that opens it, and one cell is one row.

A real run against the simulator is copied and booby-trapped as an outside security pass did: ``.tmp``,
``.lock``, ``report/``, ``export/``, parts and the manifest replaced by links (to a victim folder or file
beside the run) or special files; ``--out`` naming a link or a FIFO; the same cells stored twice by two
writers; leftover temp parts of a killed writer. Every command that opens the directory must refuse with a
one-line error naming the entry (exit 2, no traceback), the victims and everything around the run directory
must be unchanged, and hofcat's own leftovers must be cleaned. A seeded fuzz pass then corrupts, truncates and
links parts and runs every command over each damaged copy.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from _runner_support import spec_text
from runner.cli import main
from runner.endpoints.sim import SimConfig, SimServerThread
from runner.errors import RunDirError
from runner.rundir import RunDir, RunWriter, read_dataset, reader
from runner.sweep.cluster.writer import ShardWriter

DESIGN = {
    "personas": ["United States", "China", "Japan", "Germany"],
    "questions": list(range(1, 25)),
    "seeds": [1, 2],
    "temperature": [0.0],
}


@pytest.fixture(scope="module")
def server() -> Iterator[SimServerThread]:
    with SimServerThread(SimConfig(seed=11)) as sim:
        yield sim


@pytest.fixture(scope="module")
def stored(server, tmp_path_factory) -> Path:
    """A finished, analysed run (several responses parts) and its spec file beside it."""
    base = tmp_path_factory.mktemp("stored")
    spec = base / "spec.toml"
    spec.write_text(spec_text(server.base_url, run={"batch_rows": 40}, design=DESIGN), encoding="utf-8")
    run = base / "run"
    assert main(["run", str(spec), "--out", str(run)]) == 0
    assert main(["analyze", str(run), "--resamples", "20", "--permutations", "9"]) == 0
    assert len(RunDir(run).parts("responses")) >= 4
    return run


def _snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (links not followed): its kind and, for files, a hash of its bytes."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir" if path.is_dir() else "special"
    return out


class Scene:
    """A copy of the stored run beside a victim folder, and everything around the run, snapshotted."""

    def __init__(self, stored: Path, tmp_path: Path) -> None:
        self.base = tmp_path
        self.run = tmp_path / "run"
        shutil.copytree(stored, self.run, symlinks=True)
        shutil.copy(stored.parent / "spec.toml", tmp_path / "spec.toml")
        self.victim = tmp_path / "victim"
        self.victim.mkdir()
        (self.victim / "precious.txt").write_text("do not touch")
        (self.victim / "part-000001-aaaaaaaa.parquet").write_bytes(
            RunDir(stored).part("responses", RunDir(stored).parts("responses")[0]).read_bytes()
        )
        self.before: dict[str, str] = {}

    def armed(self) -> Scene:
        """Take the snapshot of everything outside the run directory (call after planting the traps)."""
        self.before = self.around()
        return self

    def around(self) -> dict[str, str]:
        return {k: v for k, v in _snapshot(self.base).items() if k != "run" and not k.startswith("run/")}

    def commands(self) -> dict[str, list[str]]:
        run = str(self.run)
        return {
            "status": ["status", run],
            "run": ["run", str(self.base / "spec.toml"), "--out", run],
            "reparse": ["reparse", run],
            "analyze": ["analyze", run, "--resamples", "20", "--permutations", "9"],
            "report": ["report", run],
            "export": ["export", run],
            "export-csv": ["export", run, "--format", "csv"],
            "repair": ["repair", run],
        }


def _refused(argv: list[str], capsys, *, naming: str = "") -> str:
    """Run ``hofcat argv``; assert exit 2 with a one-line error (naming ``naming``); the error line."""
    capsys.readouterr()
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith(f"hofcat {argv[0]}: error: "), err
    assert "Traceback" not in "\n".join(err)
    assert naming in err[-1], err[-1]
    return err[-1]


def _link(path: Path, target: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)


# --- links inside the run directory -------------------------------------------------------------------------


@pytest.mark.parametrize("entry", [".tmp", ".lock", "report", "export", "manifest.json", "responses"])
def test_a_link_inside_the_run_is_refused_by_every_command_and_its_target_untouched(entry, stored, tmp_path, capsys):
    scene = Scene(stored, tmp_path)
    target = scene.victim / "precious.txt" if entry in (".lock", "manifest.json") else scene.victim
    _link(scene.run / entry, target)
    scene.armed()
    refusing = {
        ".tmp": ["run", "reparse", "analyze", "report", "export", "repair"],
        ".lock": ["run", "reparse", "analyze", "report", "export", "repair"],
        "report": ["report"],
        "export": ["export", "export-csv"],
        "manifest.json": ["status", "run", "reparse", "analyze", "export", "repair"],
        "responses": ["status", "run", "reparse", "analyze", "export", "repair"],
    }[entry]
    commands = scene.commands()
    for name in refusing:
        line = _refused(commands[name], capsys, naming=str(scene.run / entry))
        assert "link" in line
    assert scene.around() == scene.before
    assert (scene.victim / "precious.txt").read_text() == "do not touch"


def test_a_part_that_is_a_link_or_a_special_file_is_refused_by_name(stored, tmp_path, capsys):
    scene = Scene(stored, tmp_path)
    layout = RunDir(scene.run)
    linked = layout.part("responses", layout.parts("responses")[2])
    _link(linked, scene.victim / "part-000001-aaaaaaaa.parquet")  # a valid part, from elsewhere
    fifo = layout.part("answers", layout.parts("answers")[3])
    fifo.unlink()
    os.mkfifo(fifo)
    scene.armed()
    commands = scene.commands()
    for name in ("status", "analyze", "export", "repair"):
        _refused(commands[name], capsys, naming=linked.name)
    linked.unlink()  # with the link gone, the FIFO in a part's place is named (and never waited on)
    for name in ("analyze", "export"):
        _refused(commands[name], capsys, naming=fifo.name)
    assert scene.around() == scene.before


def test_export_out_refuses_links_fifos_and_directories(stored, tmp_path, capsys):
    scene = Scene(stored, tmp_path)
    link = tmp_path / "answers.parquet"
    link.symlink_to(scene.victim / "precious.txt")
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    scene.armed()
    run = str(scene.run)
    assert "symbolic link" in _refused(["export", run, "--out", str(link)], capsys, naming=str(link))
    assert "not a regular file" in _refused(["export", run, "--out", str(fifo)], capsys, naming=str(fifo))
    assert "not a regular file" in _refused(["export", run, "--out", "/dev/null"], capsys, naming="/dev/null")
    assert "directory" in _refused(["export", run, "--out", str(scene.victim)], capsys)
    assert scene.around() == scene.before
    plain = tmp_path / "plain.csv"
    plain.write_text("old")
    assert main(["export", run, "--format", "csv", "--out", str(plain)]) == 0  # a regular file is replaced
    assert plain.read_text().startswith('"run_id",')


# --- temp files: hofcat's own are cleared, nothing else ------------------------------------------------------


def test_leftover_temp_parts_of_any_writer_are_cleared_and_nothing_else(stored, tmp_path):
    scene = Scene(stored, tmp_path)
    tmp = scene.run / ".tmp"
    ours = [tmp / "1a2b3c4d-responses-part-000009-1a2b3c4d.parquet", tmp / "responses-part-000099.parquet"]
    for path in ours:
        path.write_bytes(b"PAR1 half a part")
    foreign = tmp / "notes.txt"
    foreign.write_text("a user's file")
    trap = tmp / "deadbeef-answers-part-000001-deadbeef.parquet"  # named like ours, but a link
    trap.symlink_to(scene.victim / "precious.txt")
    scene.armed()
    with RunWriter.attach(scene.run) as writer:
        assert not any(p.exists() for p in ours)  # cleared when the directory is opened
        # a Ray shard's writer (no lock of its own) killed mid-write: its temp part is left behind
        shard = ShardWriter.secondary(scene.run, batch_rows=10, session=1)
        writing = shard._atomic(writer.layout.part("responses", f"000077-{shard.token}"))
        half = writing.__enter__()
        half.write_bytes(b"PAR1 half a part")
        assert half.parent == tmp and half.name.startswith(shard.token)
    assert not half.exists()  # cleared when the writer that owns the directory closes it
    assert foreign.read_text() == "a user's file" and trap.is_symlink()
    assert scene.around() == scene.before


# --- exactly one writer, one row per cell --------------------------------------------------------------------


def _duplicate_parts(run: Path, count: int = 2) -> list[str]:
    """Copy ``count`` committed responses parts (with their answers) under new part IDs, as a second writer that
    ignored the lock would have stored the same cells again; the new IDs."""
    layout = RunDir(run)
    made = []
    for i, part in enumerate(layout.parts("responses")[:count]):
        new = f"{900 + i:06d}-feedf00d"
        for dataset in ("responses", "answers"):
            shutil.copy(layout.part(dataset, part), layout.part(dataset, new))
        made.append(new)
    return made


def test_a_cell_stored_twice_is_a_located_error_until_repaired(stored, tmp_path, capsys):
    scene = Scene(stored, tmp_path)
    cells = read_dataset(scene.run, "responses", ["cell_key"]).num_rows
    first = RunDir(scene.run).parts("responses")[0]
    made = _duplicate_parts(scene.run)
    commands = scene.commands()
    for name in ("status", "analyze", "export", "run"):
        line = _refused(commands[name], capsys, naming=f"responses/part-{first}.parquet")
        assert f"part-{made[0]}.parquet" in line and "stored more than once" in line and "hofcat repair" in line
    capsys.readouterr()
    assert main(commands["repair"]) == 0
    report = capsys.readouterr().err
    assert f"responses/part-{made[0]}.parquet" in report and f"{cells} cells kept" in report
    assert read_dataset(scene.run, "responses", ["cell_key"]).num_rows == cells
    assert pq.read_table(scene.run / "responses" / f"part-{made[0]}.parquet").num_rows == 0
    assert main(commands["analyze"]) == 0 and main(commands["status"]) == 0
    assert main(commands["repair"]) == 0  # idempotent: nothing left to drop
    assert "0 duplicate response rows dropped" in capsys.readouterr().err


@pytest.mark.parametrize("route", ["count_distinct", "polars"])
def test_both_routes_of_the_unique_key_check_find_a_cell_stored_twice(route, stored, tmp_path, monkeypatch):
    # Arrow's count_distinct below POLARS_FROM_KEYS keys, polars' n_unique from there: each finds the duplicate
    monkeypatch.setattr(reader, "POLARS_FROM_KEYS", 0 if route == "polars" else 10**9)
    scene = Scene(stored, tmp_path)
    keys = read_dataset(scene.run, "responses", ["cell_key"]).column("cell_key").to_pylist()
    assert len(keys) == len(set(keys)) > 0
    made = _duplicate_parts(scene.run, count=1)
    with pytest.raises(RunDirError, match=f"part-{made[0]}.parquet.*stored more than once"):
        read_dataset(scene.run, "responses", ["cell_key"])


# --- fuzz: corrupt, truncate and link parts; every command answers in one line --------------------------------


DAMAGE = ("truncate", "flip", "link", "empty", "fifo", "folder", "junk", "manifest", "flip")


def _damage(rng: random.Random, scene: Scene, kind: str) -> str:
    """Damage ``kind`` done to a seeded choice of part (or the manifest); what was done."""
    layout = RunDir(scene.run)
    dataset = rng.choice(["responses", "answers", "failures", "prompts", "responses"])
    parts = layout.parts(dataset) or layout.parts("responses")
    dataset = dataset if layout.parts(dataset) else "responses"
    path = layout.part(dataset, rng.choice(parts))
    data = path.read_bytes()
    if kind == "truncate":
        path.write_bytes(data[: rng.randrange(1, len(data))])
    elif kind == "flip":
        at = rng.randrange(len(data))
        path.write_bytes(data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1 :])
    elif kind == "link":
        _link(path, rng.choice([scene.victim / "precious.txt", scene.victim / "part-000001-aaaaaaaa.parquet"]))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif kind == "folder":
        path.unlink()
        path.mkdir()
    elif kind == "junk":
        path.write_bytes(rng.randbytes(len(data)))
    else:
        manifest = scene.run / "manifest.json"
        text = manifest.read_bytes()
        manifest.write_bytes(text[: rng.randrange(len(text))])
        return "manifest truncated"
    return f"{kind} {dataset}/{path.name}"


@pytest.mark.slow  # 12 damaged copies × 8 commands
def test_fuzzed_parts_give_one_line_errors_and_leave_everything_around_unchanged(stored, tmp_path, capsys):
    rng = random.Random(27)
    for case in range(12):
        scene = Scene(stored, tmp_path / f"case{case}")
        what = _damage(rng, scene, DAMAGE[case % len(DAMAGE)])
        scene.armed()
        for name, argv in scene.commands().items():
            if name == "report" and case % 3:
                continue  # the report re-renders every figure: a third of the cases suffice
            capsys.readouterr()
            status = main(argv)  # an exception here is the traceback the test forbids
            err = capsys.readouterr().err.strip().splitlines()
            assert status in (0, 2), (what, name, status, err)
            if status == 2:
                assert err and err[-1].startswith(f"hofcat {argv[0]}: error: "), (what, name, err)
                assert len(err[-1]) < 1000, (what, name)
            unreadable = what.startswith(("link", "truncate", "empty", "fifo", "folder"))
            if unreadable and what.split()[1].startswith(("responses/", "answers/")):
                # nothing of such a part can be read, and the analysis and the export read every one
                assert name not in ("analyze", "export", "export-csv") or status == 2, (what, name)
        assert scene.around() == scene.before, what


@pytest.mark.slow
def test_analyze_on_a_full_disk_is_a_one_line_error(stored, tmp_path):
    """Writes past a file-size limit fail as a full disk does (EFBIG instead of ENOSPC), inside polars too."""
    import resource
    import signal
    import subprocess
    import sys

    scene = Scene(stored, tmp_path)
    shutil.rmtree(scene.run / "analysis")

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing us
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000, 2_000))

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "analyze", str(scene.run), "--resamples", "20", "--permutations", "9"],
        preexec_fn=small_files,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert err[-1].startswith("hofcat analyze: error: ") and "File too large" in err[-1], err


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sessions", "x"),
        ("sessions", [1]),
        ("determinism_probe", {"a": [1]}),
        ("run_name", 5),
        ("plan", {"cells": "many"}),
        ("spec", []),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_a_one_line_error(key, value, stored, tmp_path, capsys):
    import json

    scene = Scene(stored, tmp_path)
    path = scene.run / "manifest.json"
    good = path.read_text()
    path.write_text(json.dumps({**json.loads(good), key: value}))
    commands = scene.commands()
    try:
        for name in ("status", "analyze", "export", "repair"):
            if key == "spec" and name != "status":
                continue  # only status (and a resume) read the spec
            _refused(commands[name], capsys, naming="manifest.json")
    finally:
        path.write_text(good)  # the suite's end-of-session check reads every manifest left behind


@pytest.mark.parametrize(
    ("field", "value"),
    [("started_at", 5), ("started_at", "yesterday"), ("started_at", None), ("stopped_endpoints", "x")],
)
def test_a_session_of_the_wrong_shape_is_a_one_line_error(field, value, stored, tmp_path, capsys):
    """A session's ``started_at`` that is no ISO time ended ``export`` in a traceback, a ``stopped_endpoints``
    that is no table ended ``status`` in one."""
    import json

    scene = Scene(stored, tmp_path)
    path = scene.run / "manifest.json"
    good = path.read_text()
    manifest = json.loads(good)
    manifest["sessions"][-1][field] = value
    path.write_text(json.dumps(manifest))
    try:
        for name in ("status", "export"):
            _refused(scene.commands()[name], capsys, naming=f"manifest.json: sessions[0].{field}")
    finally:
        path.write_text(good)  # the suite's end-of-session check reads every manifest left behind


def test_a_part_of_another_dataset_in_a_datasets_folder_is_refused_by_name(stored, tmp_path, capsys):
    """A prompts part copied over a responses part (no ``cell_key``) ended status, export, analyze and repair in
    a KeyError or IndexError traceback; a responses part over an answers part ended reparse in one."""
    scene = Scene(stored, tmp_path)
    layout = RunDir(scene.run)
    responses = layout.part("responses", layout.parts("responses")[0])
    shutil.copy(layout.part("prompts", layout.parts("prompts")[0]), responses)
    commands = scene.commands()
    for name in ("status", "export", "repair"):
        _refused(commands[name], capsys, naming=f"{responses.name} has no cell_key column")
    shutil.copy(RunDir(stored).part("responses", layout.parts("responses")[0]), responses)  # put back
    answers = layout.part("answers", layout.parts("answers")[1])
    shutil.copy(layout.part("responses", layout.parts("responses")[1]), answers)
    _refused(commands["reparse"], capsys, naming=f"answers/{answers.name} is corrupt (a column hofcat does not write")


def test_a_column_renamed_by_a_changed_footer_byte_is_refused_by_name(stored, tmp_path, capsys):
    """No checksum covers a footer's column names: a changed byte there renames a column, and export (reading
    the answers by name) ended in a KeyError (the fuzz test, stop 35). Every reader now refuses the part."""
    scene = Scene(stored, tmp_path)
    layout = RunDir(scene.run)
    answers = layout.part("answers", layout.parts("answers")[0])
    data = answers.read_bytes()
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    at = data.index(b"stated_sum", footer)  # the name in the Parquet schema: the fuzz made it statet_sum
    answers.write_bytes(data[:at] + b"statet_sum" + data[at + len(b"statet_sum") :])
    for name in ("export", "analyze"):  # the readers of the answers' columns (reparse reads only the footer)
        _refused(scene.commands()[name], capsys, naming=f"answers/{answers.name} is corrupt")


def test_a_run_directory_path_that_is_not_utf8_is_refused_before_any_write(stored, tmp_path, capsys):
    """Arrow and Polars take paths as UTF-8: ``export`` and ``analyze`` of ``run\\xff`` ended in a
    UnicodeEncodeError or TypeError traceback, and ``run`` would have failed only at its first flush."""
    run = Path(os.fsdecode(bytes(tmp_path) + b"/run\xff"))
    shutil.copytree(stored, run, symlinks=True)
    assert main(["status", str(run)]) == 0  # reading needs no UTF-8 path
    spec = str(stored.parent / "spec.toml")
    for argv in (["export", str(run)], ["analyze", str(run)], ["run", spec, "--out", str(run)]):
        _refused(argv, capsys, naming="run\\xff: the path is not UTF-8")
    _refused(["export", str(stored), "--out", str(run / "x.parquet")], capsys, naming="--out")
