"""What checking ``cell_key`` uniqueness adds to reading a run's keys: the check against the set a resume builds.

Run: ``python -m benches.unique_cells [--cells N] [--parts P]``. Readers that gather a run's responses check that
no cell is stored twice (``runner.rundir.reader._check_unique``). The peer is what a resume and ``hofcat status``
already do with the same keys: build a Python set of them. Correctness first: the check passes on unique keys
and names a duplicate planted in the last part.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import pyarrow as pa

from runner.errors import RunDirError
from runner.rundir.reader import _check_unique


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--parts", type=int, default=100)
    args = parser.parse_args()
    keys = [hashlib.sha256(str(i).encode()).hexdigest()[:32] for i in range(args.cells)]
    size = -(-args.cells // args.parts)
    parts = [f"{i + 1:06d}-0badc0de" for i in range(args.parts)]
    cols = [pa.chunked_array([pa.array(keys[i * size : (i + 1) * size], pa.string())]) for i in range(args.parts)]
    _check_unique(parts, cols)  # correct on unique keys, and finds a planted duplicate
    planted = [*cols[:-1], pa.chunked_array([pa.array([*cols[-1].to_pylist(), keys[0]], pa.string())])]
    try:
        _check_unique(parts, planted)
        raise SystemExit("a planted duplicate went unnoticed")
    except RunDirError as exc:
        assert parts[0] in str(exc) and parts[-1] in str(exc)
    check, peer = [], []
    for _ in range(3):
        start = time.perf_counter()
        _check_unique(parts, cols)
        check.append(time.perf_counter() - start)
        start = time.perf_counter()
        seen: set[str] = set()
        for col in cols:
            seen.update(col.to_pylist())
        peer.append(time.perf_counter() - start)
    print(
        f"{args.cells} keys in {args.parts} parts: check {min(check):.3f} s, set of keys {min(peer):.3f} s "
        f"(check/set {min(check) / min(peer):.2f}; best of 3)"
    )


if __name__ == "__main__":
    main()
