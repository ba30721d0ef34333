"""runner.sweep.request: a prompt's rendering, as the executor's workers take it cell by cell."""

from __future__ import annotations

import dataclasses
import random

import pytest

from runner.sweep import request
from runner.sweep.plan import iter_cells
from runner.sweep.request import PromptMemo, rendered
from tests._runner_support import make_spec

SPEC = make_spec(
    "http://127.0.0.1:9/v1",
    design={
        "personas": ["Japan", "Brazil"],
        "questions": [1, 2, 3],
        "seeds": [1, 2],
        "option_order": ["given", "shuffled"],
        "measurement": ["sample", "distribution"],
        "samples_per_cell": 2,
    },
)


@pytest.mark.parametrize("seed", range(3))
def test_the_memo_gives_what_rendered_gives_for_cells_in_any_order(seed: int) -> None:
    cells = list(iter_cells(SPEC))
    order = cells if seed == 0 else random.Random(seed).sample(cells, len(cells))
    # an equal prompt in another object (a second walk of the plan): the memo must not tell them apart
    order = [*order, *(dataclasses.replace(c, prompt=dataclasses.replace(c.prompt)) for c in order[:5])]
    memo = PromptMemo()
    for cell in order:
        assert memo.of(cell) == rendered(cell.prompt, cell.sampling.measurement)
    assert {c.sampling.measurement for c in cells} == {"sample", "distribution"}


def test_cells_of_one_prompt_in_a_row_ask_the_cache_once_per_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = list(iter_cells(SPEC))
    runs: list[set[str]] = []  # the measurements of each run of cells holding one prompt object
    for before, cell in zip([None, *cells], cells, strict=False):
        if before is None or before.prompt is not cell.prompt:
            runs.append(set())
        runs[-1].add(cell.sampling.measurement)
    expected = sum(map(len, runs))
    assert expected < len(cells)  # the plan hands a prompt object to its samplings in a row
    asked: list[tuple[object, str]] = []  # each lookup hashes the prompt (a frozen dataclass, in Python)
    monkeypatch.setattr(request, "rendered", lambda prompt, m: asked.append((prompt, m)) or rendered(prompt, m))
    memo = PromptMemo()
    assert [memo.of(c) for c in cells] == [rendered(c.prompt, c.sampling.measurement) for c in cells]
    assert len(asked) == expected
