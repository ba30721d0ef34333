"""The parse stage: responses part N → answers part N, through the run directory's writer.

``update_answers`` parses the responses parts that have no answers part yet (after each flush of a sweep,
after a crash between the two commits, before an analysis). ``reparse`` rewrites every answers part that
an older parser wrote, so a parser fix reaches stored runs without re-sending anything. Both commit each
part atomically: a crash leaves every part either as it was or rewritten whole, and running again finishes
the job. Responses are only ever read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from runner.parse.answers import CELL_COLUMNS, CURRENT, PARSE_COLUMNS, Parser, answers_table
from runner.parse.distribution import DISTRIBUTION_COLUMNS, with_distributions
from runner.parse.verbalized import with_verbalized
from runner.rundir.reader import answers_parser_version, part_columns, part_pairs, read_part
from runner.rundir.writer import RunWriter, now_iso

__all__ = ["ReparseResult", "parse_part", "reparse", "update_answers"]


def parse_part(writer: RunWriter, n: str, responses: pa.Table | None = None, parser: Parser = CURRENT) -> None:
    """Parse responses part ``n`` (a part ID) of the writer's run (read and verified unless the caller has its
    table; committed parts only) and commit it as answers part ``n`` (replacing it: never a second copy)."""
    if responses is None:
        path = writer.layout.part("responses", n)
        have = part_columns(path)  # parts stored before the distribution measurement lack its columns
        extra = [c for c in (*PARSE_COLUMNS[len(CELL_COLUMNS) :], *DISTRIBUTION_COLUMNS) if c in have]
        responses = read_part(path, [*CELL_COLUMNS, *extra], "cell_key")
    answers = answers_table(responses, parser)
    # each pass below leaves a part without its measurement as it is; asked once here, not by each (a sweep's part)
    measured = (
        set(responses.column("measurement").unique().to_pylist()) if "measurement" in responses.column_names else set()
    )
    if "distribution" in measured:
        answers = with_distributions(answers, responses)
    if "verbalized" in measured:
        answers = with_verbalized(answers, responses)
    writer.commit("answers", n, answers)


def update_answers(writer: RunWriter, parser: Parser = CURRENT) -> int:
    """Parse every responses part that has no answers part yet; the number of parts parsed."""
    missing = [pair.n for pair in part_pairs(writer.layout) if pair.answers is None]
    for n in missing:
        parse_part(writer, n, parser=parser)
    return len(missing)


@dataclass(frozen=True, slots=True)
class ReparseResult:
    """What a re-parse did: parts rewritten, parts already current, and the parser version they now carry."""

    rewritten: int
    current: int
    parser_version: str
    previous_versions: tuple[str, ...]  # versions found on the rewritten parts ("missing" for absent parts)


def reparse(run_dir: str | Path, parser: Parser = CURRENT) -> ReparseResult:
    """Rewrite every answers part of ``run_dir`` not written by ``parser`` (missing ones too); record it.

    Idempotent: a second call finds every part current and changes nothing, the manifest included.
    """
    with RunWriter.attach(run_dir) as writer:
        pairs = part_pairs(writer.layout)
        stale: dict[int, str] = {}
        for pair in pairs:
            version = "missing" if pair.answers is None else answers_parser_version(pair.answers) or "unknown"
            if version != parser.version:
                stale[pair.n] = version
        for n in stale:
            parse_part(writer, n, parser=parser)
        if stale and writer.manifest is not None:
            writer.manifest.setdefault("reparses", []).append(
                {
                    "at": now_iso(),
                    "parser_version": parser.version,
                    "parts": len(stale),
                    "previous_versions": sorted(set(stale.values())),
                }
            )
            writer.manifest["parser_version"] = parser.version
            writer.write_manifest()
        return ReparseResult(len(stale), len(pairs) - len(stale), parser.version, tuple(sorted(set(stale.values()))))
