"""Resume by plan keys (issue 12): the cells left are the walked plan minus the stored keys, exactly.

A resume reads the plan's keys from the run directory's plan-keys file, subtracts the stored keys in Arrow and
makes only the cells left, by position (``plan.cells_at``). These tests hold that path to two references on
random specs (modes, option orders incl. shuffled, labels, per-endpoint designs, K-sample fallbacks),
selections (``--limit``, ``--endpoint``), stores (responses, failures, both, keys not in the plan) and
``retry_failed``: the old path (every cell made and filtered, ``PLAN_KEYS_MAX_CELLS = 0``) and a plain
filter written here. A plan-keys file that is damaged, made for another spec, by other code, or simply wrong
is never trusted.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runner.errors import RunDirError, ServerError
from runner.rundir import RunWriter, read_manifest
from runner.rundir.plan_keys import read_plan_keys, write_plan_keys
from runner.sweep import remaining
from runner.sweep.outcome import Outcome, response_row
from runner.sweep.plan import Selection, cells_at, count_cells, endpoint_cell_count, iter_cells, iter_keys, select
from runner.sweep.providers import Reply
from runner.sweep.session import build_manifest
from runner.sweep.spec import Spec, parse_spec

DONE = Outcome(Reply("3", "stop", 10, 1), None, 1, 0.01, 200, 0, 0)
FAILED = Outcome(None, ServerError("HTTP 500", status=500), 3, None, 500, 0, 0)
PERSONAS = ["United States", "China", "Japan", "Germany", "Brazil"]


def random_spec(rng: random.Random) -> Spec:
    """A valid spec drawn from ``rng``: 1-3 endpoints (openai/anthropic), some with their own design."""

    def design(table: str) -> str:
        modes = rng.choice([["item"], ["survey"], ["item", "survey"]])
        lines = [f"[{table}]", f"mode = {json.dumps(modes)}"]
        if rng.random() < 0.8:
            lines.append(f"personas = {json.dumps(rng.sample(PERSONAS, rng.randint(1, 3)))}")
        if rng.random() < 0.3:
            lines.append("no_persona = true")
        lines.append(f"questions = {sorted(rng.sample(range(1, 25), rng.randint(1, 4)))}")
        lines.append(f"seeds = {rng.sample(range(1, 50), rng.randint(1, 3))}")
        lines.append(f"temperature = {sorted(rng.sample([0.0, 0.5, 1.0], rng.randint(1, 2)))}")
        orders = rng.sample(["given", "reversed", "shuffled"], rng.randint(1, 3))
        lines.append(f"option_order = {json.dumps(orders)}")
        # written out always: an [endpoints.design] key left out would be [design]'s, maybe not valid here
        labels = ["digits", "letters"] if modes == ["item"] and rng.random() < 0.4 else ["digits"]
        lines.append(f"option_labels = {json.dumps(labels)}")
        distribution = modes == ["item"] and rng.random() < 0.3
        lines.append(f"measurement = {json.dumps(['sample', 'distribution'] if distribution else ['sample'])}")
        lines.append("samples_per_cell = 2")
        return "\n".join(lines) + "\n"

    text = f'[run]\nname = "fast"\nseed = {rng.randint(0, 1000)}\n'
    for i in range(rng.randint(1, 3)):
        provider = rng.choice(["openai", "anthropic"])
        text += f'[[endpoints]]\nname = "e{i}"\nprovider = "{provider}"\nbase_url = "http://127.0.0.1:9/v1"\n'
        text += f'model = "m{i}"\napi_key_env = "HOFCAT_TEST_KEY"\n'
        if rng.random() < 0.4:
            text += design("endpoints.design")
    return parse_spec(text + design("design"), source="random-spec")


def store(out: Path, spec: Spec, done: list, failed: list) -> None:
    """A run directory of ``spec`` holding responses for the ``done`` cells and failures for ``failed``."""
    with RunWriter.open_run(out, build_manifest(spec), batch_rows=7) as writer:
        for cells, outcome in ((done, DONE), (failed, FAILED)):
            for cell in cells:
                writer.add(response_row(cell, "p", outcome))
                if writer.full:
                    writer.flush()


def remaining_now(out: Path, spec: Spec, selection: Selection, retry_failed: bool, *, walk: bool = False):
    """(endpoint name → its cells left, in order; already_stored; failed_before) from ``remaining_work``."""
    saved = remaining.PLAN_KEYS_MAX_CELLS
    remaining.PLAN_KEYS_MAX_CELLS = 0 if walk else saved
    try:
        writer = RunWriter.open_run(out, build_manifest(spec), batch_rows=7)
        try:
            work = remaining.remaining_work(spec, writer, retry_failed, selection)
            left = {e.name: list(cells) for e, cells in work}  # consumed: the walk counts as it goes
            return left, work.already_stored, work.failed_before
        finally:
            writer.close({"outcome": "test"})  # the session's entry written, as a sweep's end writes it
    finally:
        remaining.PLAN_KEYS_MAX_CELLS = saved


def plain_filter(spec: Spec, selection: Selection, done: set, failed: set, retry_failed: bool):
    """The reference: each selected cell not stored, by set membership, with the counts."""
    left, skipped, failed_before = {}, 0, 0
    for e in selection.endpoints:
        left[e.name] = []
        for cell in selection.iter_cells(spec, e):
            if cell.key in done:
                skipped += 1
            elif cell.key in failed and not retry_failed:
                skipped += 1
                failed_before += 1
            else:
                left[e.name].append(cell)
    return left, skipped, failed_before


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(14))
def test_cells_left_by_plan_keys_equal_the_walked_plan_minus_the_stored_keys(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    spec = random_spec(rng)
    plan = list(iter_cells(spec))
    share = rng.choice([0.0, 0.3, 0.9, 1.0])
    done = [c for c in plan if rng.random() < share]
    failed = [c for c in plan if rng.random() < 0.15]  # some of them also have a response
    foreign = [dataclasses.replace(plan[0], key=f"{i:032x}") for i in range(rng.randint(0, 3))]  # not planned
    store(tmp_path / "run", spec, done + foreign, failed)
    names = [e.name for e in spec.endpoints]
    selection = rng.choice(
        [
            select(spec),
            select(spec, endpoints=[rng.choice(names)]),
            select(spec, limit=rng.randint(1, len(plan) + 5)),
            select(spec, endpoints=rng.sample(names, 1), limit=rng.randint(1, len(plan))),
        ]
    )
    retry_failed = rng.random() < 0.5
    expected = plain_filter(spec, selection, {c.key for c in done}, {c.key for c in failed}, retry_failed)
    by_keys = remaining_now(tmp_path / "run", spec, selection, retry_failed)
    assert by_keys == expected
    assert remaining_now(tmp_path / "run", spec, selection, retry_failed, walk=True) == expected
    assert remaining_now(tmp_path / "run", spec, selection, retry_failed) == expected  # from the file written
    filed = (tmp_path / "run" / "plan-keys" / f"{spec.spec_hash}.parquet").is_file()
    if selection.limit is not None and selection.cells < len(plan):  # a pilot walks its own cells only
        assert not filed
    elif any(expected[0].values()) and (done or foreign or (failed and not retry_failed)):
        assert filed  # cells left after some were stored: the plan was not covered, so the file was made
    elif not (done or foreign or (failed and not retry_failed)):
        assert not filed  # nothing stored: a first session walks, holding no file of the whole plan's keys


@pytest.mark.parametrize("seed", range(6))
def test_cells_at_any_positions_equal_those_positions_of_the_walk(seed: int) -> None:
    rng = random.Random(100 + seed)
    spec = random_spec(rng)
    for e in spec.endpoints:
        walked = list(iter_cells(spec, e))
        assert len(walked) == endpoint_cell_count(spec, e)
        picks = [rng.randrange(len(walked)) for _ in range(40)] + [len(walked) - 1, 0, 0]
        assert list(cells_at(spec, e, picks)) == [walked[i] for i in picks]
        with pytest.raises(IndexError):
            list(cells_at(spec, e, [len(walked)]))
    assert list(iter_keys(spec)) == [c.key for c in iter_cells(spec)]


TWO_ENDPOINTS = """
[run]
name = "half"
seed = 3
[[endpoints]]
name = "big"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[[endpoints]]
name = "small"
provider = "anthropic"
base_url = "http://127.0.0.1:9/v1"
model = "m"
api_key_env = "HOFCAT_TEST_KEY"
[endpoints.design]
questions = [3]
[design]
personas = ["United States", "China", "Japan"]
questions = [1, 2, 3, 4, 5, 6]
seeds = [1, 2]
temperature = [0.0, 1.0]
option_order = ["given", "shuffled"]
"""


def _half_stored(tmp_path: Path) -> tuple[Spec, Path, tuple]:
    """A two-endpoint spec (144 + 8 cells) whose every other cell is stored, and the cells left (plain filter)."""
    spec = parse_spec(TWO_ENDPOINTS, source="two-endpoints")
    plan = list(iter_cells(spec))
    out = tmp_path / "run"
    store(out, spec, plan[::2], [])
    expected = plain_filter(spec, select(spec), {c.key for c in plan[::2]}, set(), False)
    assert remaining_now(out, spec, select(spec), False) == expected  # writes the plan-keys file
    return spec, out, expected


def _rebuilt_because(out: Path) -> str | None:
    return read_manifest(out)["sessions"][-1].get("plan_keys_rebuilt")


def _fingerprint(out: Path, spec: Spec) -> str:
    with RunWriter.open_run(out, build_manifest(spec), batch_rows=1) as writer:
        return remaining.plan_fingerprint(spec, writer)


def test_a_damaged_plan_keys_file_is_detected_and_rebuilt(tmp_path: Path) -> None:
    spec, out, expected = _half_stored(tmp_path)
    path = out / "plan-keys" / f"{spec.spec_hash}.parquet"
    good = path.read_bytes()
    fingerprint, cells = _fingerprint(out, spec), count_cells(spec)
    assert read_plan_keys(out_layout(out), spec.spec_hash, fingerprint, cells)[1] == ""
    damaged = {
        "flipped": good[:200] + bytes([good[200] ^ 0x10]) + good[201:],
        "truncated": good[: len(good) // 2],
        "junk": b"not parquet at all",
    }
    for how, data in damaged.items():
        path.write_bytes(data)
        keys, why = read_plan_keys(out_layout(out), spec.spec_hash, fingerprint, cells)
        assert keys is None and "corrupt" in why, (how, why)
        assert remaining_now(out, spec, select(spec), False) == expected, how
        assert "corrupt" in _rebuilt_because(out), how
        assert path.read_bytes() != data  # rewritten whole
        assert read_plan_keys(out_layout(out), spec.spec_hash, fingerprint, cells)[1] == ""


def test_a_plan_keys_file_of_another_spec_or_other_code_is_stale(tmp_path: Path) -> None:
    spec, out, expected = _half_stored(tmp_path)
    path = out / "plan-keys" / f"{spec.spec_hash}.parquet"
    fingerprint, cells = _fingerprint(out, spec), count_cells(spec)
    other = parse_spec(TWO_ENDPOINTS.replace("seed = 3", "seed = 4"), source="other")  # its file in this one's place
    store(tmp_path / "other", other, list(iter_cells(other))[:1], [])  # one stored: a session that files its keys
    remaining_now(tmp_path / "other", other, select(other), False)
    path.write_bytes((tmp_path / "other" / "plan-keys" / f"{other.spec_hash}.parquet").read_bytes())
    assert "made for spec" in read_plan_keys(out_layout(out), spec.spec_hash, fingerprint, cells)[1]
    assert remaining_now(out, spec, select(spec), False) == expected
    assert "made for spec" in _rebuilt_because(out)
    # other hofcat versions (or templates, or key-defining code): another fingerprint
    assert "another hofcat version" in read_plan_keys(out_layout(out), spec.spec_hash, "0" * 16, cells)[1]
    assert "the plan has" in read_plan_keys(out_layout(out), spec.spec_hash, fingerprint, cells + 1)[1]


def test_plan_keys_that_are_not_the_plans_are_never_used(tmp_path: Path) -> None:
    spec, out, expected = _half_stored(tmp_path)
    plan = list(iter_cells(spec))
    fingerprint = _fingerprint(out, spec)
    with RunWriter.open_run(out, build_manifest(spec), batch_rows=1) as writer:  # every check but the sample
        write_plan_keys(writer, spec.spec_hash, fingerprint, pa.chunked_array([[c.key for c in reversed(plan)]]))
    assert remaining_now(out, spec, select(spec), False) == expected
    assert "sample check" in _rebuilt_because(out)
    # wrong at one position the sample does not cover, of a cell left: found when that cell is made
    big = endpoint_cell_count(spec, spec.endpoints[0])
    left = remaining.PLAN_SAMPLE + 11  # odd: not stored; past the sample, before the endpoint's last cell
    assert left < big - 1 and plan[left] in expected[0]["big"]
    keys = [c.key for c in plan]
    keys[left] = "f" * 32
    with RunWriter.open_run(out, build_manifest(spec), batch_rows=1) as writer:
        write_plan_keys(writer, spec.spec_hash, fingerprint, pa.chunked_array([keys]))
    with pytest.raises(RunDirError, match="differs from the file's"):
        remaining_now(out, spec, select(spec), False)


def out_layout(out: Path):
    from runner.rundir import RunDir

    return RunDir(out)


def test_the_plan_keys_file_is_a_verified_part_like_file(tmp_path: Path) -> None:
    spec, out, _ = _half_stored(tmp_path)
    meta = pq.read_schema(out / "plan-keys" / f"{spec.spec_hash}.parquet").metadata
    assert meta[b"hofcat.spec_hash"] == spec.spec_hash.encode()
    assert int(meta[b"hofcat.cells"]) == count_cells(spec)
    assert pq.read_table(out / "plan-keys" / f"{spec.spec_hash}.parquet").column(0).to_pylist() == list(iter_keys(spec))
    assert not list((out / ".tmp").iterdir())


def test_unstored_cells_shared_by_workers_are_each_taken_once_with_final_counts() -> None:
    # the executor's workers share one iterator: with keys to skip it is the walk itself, counting as it goes;
    # with none (a first session, or cells already filtered) the cells themselves, its counts given and final
    spec = random_spec(random.Random(3))
    plan = list(iter_cells(spec))
    skip = {c.key for c in plan[::3]}
    for cells, done, given in ((plan, skip, 0), ([c for c in plan if c.key not in skip], set(), len(skip))):
        unstored = remaining.Unstored(cells, already_stored=given, done=done)
        shared = iter(unstored)
        assert (shared is unstored) == bool(done)
        taken, workers = [], [iter(shared), iter(shared)]  # each worker's ``for`` takes from the one iterator
        while (cell := next(workers[len(taken) % 2], None)) is not None:
            taken.append(cell)
        assert [c.key for c in taken] == [c.key for c in plan if c.key not in skip]
        assert unstored.already_stored == len(skip)
