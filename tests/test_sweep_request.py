"""runner.sweep.request: a prompt's rendering, as the executor's workers take it cell by cell."""

from __future__ import annotations

import dataclasses
import random

import pytest

from runner.sweep.plan import iter_cells
from runner.sweep.request import PromptMemo, rendered
from runner.sweep.spec import parse_spec

SPEC = """
[run]
name = "memo"
[[endpoints]]
name = "e"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[design]
mode = ["item"]
personas = ["Japan", "Brazil"]
questions = [1, 2, 3]
seeds = [1, 2]
option_order = ["given", "shuffled"]
measurement = ["sample", "distribution"]
samples_per_cell = 2
"""


@pytest.mark.parametrize("seed", range(3))
def test_the_memo_gives_what_rendered_gives_for_cells_in_any_order(seed: int) -> None:
    cells = list(iter_cells(parse_spec(SPEC)))
    order = cells if seed == 0 else random.Random(seed).sample(cells, len(cells))
    # an equal prompt in another object (a second walk of the plan): the memo must not tell them apart
    order = [*order, *(dataclasses.replace(c, prompt=dataclasses.replace(c.prompt)) for c in order[:5])]
    memo = PromptMemo()
    for cell in order:
        assert memo.of(cell) == rendered(cell.prompt, cell.sampling.measurement)
    assert {c.sampling.measurement for c in cells} == {"sample", "distribution"}


def test_cells_of_one_prompt_in_a_row_hash_the_prompt_once_per_measurement() -> None:
    cells = list(iter_cells(parse_spec(SPEC)))
    runs: list[set[str]] = []  # the measurements of each run of cells holding one prompt object
    for before, cell in zip([None, *cells], cells, strict=False):
        if before is None or before.prompt is not cell.prompt:
            runs.append(set())
        runs[-1].add(cell.sampling.measurement)
    expected = sum(map(len, runs))
    assert expected < len(cells)  # the plan hands a prompt object to its samplings in a row
    cell_type, hashed = type(cells[0].prompt), []
    original = cell_type.__hash__

    def hashes(calls: object) -> int:
        """How often the prompts were hashed while ``calls`` ran, from an empty cache."""
        rendered.cache_clear()
        hashed.clear()
        try:
            cell_type.__hash__ = lambda self: hashed.append(1) or original(self)  # type: ignore[method-assign]
            list(calls)  # type: ignore[call-overload]
        finally:
            cell_type.__hash__ = original  # type: ignore[method-assign]
        return len(hashed)

    per_miss = hashes(rendered(c.prompt, c.sampling.measurement) for c in cells[:1])  # a rendering made anew
    memo = PromptMemo()
    assert hashes(memo.of(c) for c in cells) == per_miss * expected
    assert hashes(rendered(c.prompt, c.sampling.measurement) for c in cells) > per_miss * expected  # without it
