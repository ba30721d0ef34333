"""A stale plan-keys file is refused from its footer: its metadata is checked before its pages are read.

A file made for another spec (or fingerprint, or cell count) whose pages are damaged reads as stale, not as
corrupt: the pages were never read. A current file with the same damage still reads as corrupt.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from runner.rundir import RunDir, RunWriter
from runner.rundir.plan_keys import read_plan_keys, write_plan_keys
from runner.sweep.plan import iter_keys
from runner.sweep.session import build_manifest
from runner.sweep.spec import parse_spec
from test_runner_resume_fast import TWO_ENDPOINTS


def _damaged_pages(tmp_path: Path) -> tuple[RunDir, str, list[str]]:
    """A run directory holding the plan-keys file of TWO_ENDPOINTS with a byte of its first page flipped."""
    spec = parse_spec(TWO_ENDPOINTS, source="two-endpoints")
    keys = list(iter_keys(spec))
    out = tmp_path / "run"
    with RunWriter.open_run(out, build_manifest(spec), batch_rows=1) as writer:
        path = write_plan_keys(writer, spec.spec_hash, "f" * 16, pa.chunked_array([keys]))
    data = path.read_bytes()
    path.write_bytes(data[:200] + bytes([data[200] ^ 0x10]) + data[201:])  # inside the data page, footer whole
    return RunDir(out), spec.spec_hash, keys


def test_a_current_file_with_damaged_pages_is_corrupt(tmp_path: Path) -> None:
    layout, spec_hash, keys = _damaged_pages(tmp_path)
    found, why = read_plan_keys(layout, spec_hash, "f" * 16, len(keys))
    assert found is None and "corrupt" in why


def test_a_stale_file_is_refused_by_its_metadata_before_its_pages_are_read(tmp_path: Path) -> None:
    layout, spec_hash, keys = _damaged_pages(tmp_path)
    # same file, asked about by a session with another fingerprint or another plan size: stale, pages unread
    found, why = read_plan_keys(layout, spec_hash, "0" * 16, len(keys))
    assert found is None and "another hofcat version" in why, why
    found, why = read_plan_keys(layout, spec_hash, "f" * 16, len(keys) + 1)
    assert found is None and why.endswith(f"holds {len(keys)} keys, the plan has {len(keys) + 1} cells"), why
    # another spec's file in this spec's place
    other = layout.plan_keys("0123456789abcdef")
    other.write_bytes(layout.plan_keys(spec_hash).read_bytes())
    found, why = read_plan_keys(layout, "0123456789abcdef", "f" * 16, len(keys))
    assert found is None and f"made for spec {spec_hash}" in why, why


def test_an_unreadable_footer_is_corrupt(tmp_path: Path) -> None:
    layout, spec_hash, keys = _damaged_pages(tmp_path)
    path = layout.plan_keys(spec_hash)
    path.write_bytes(path.read_bytes()[:-12])  # the footer's length and magic cut off
    found, why = read_plan_keys(layout, spec_hash, "f" * 16, len(keys))
    assert found is None and "corrupt" in why, why
