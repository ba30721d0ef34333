"""Answers drawn in-process from the simulator's respondents with planted design-factor effects.

The same code the server answers with (``AnswerModel.sample`` with ``effects.planted``), without HTTP and parsing,
so a test can draw hundreds of replicate sweeps in seconds. Factors: ``language``, ``option_labels``,
``reply_format``, ``model``, ``temperature`` and ``option_order`` (``given``, ``reversed`` or ``shuffled``: a
seeded random order per cell), crossed with countries (personas) and seeds. Returns an answers frame with the
columns a run directory's loaded answers have (``shuffled`` and ``reversed`` for the order, as the loader derives).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import polars as pl

from runner.endpoints.sim import AnswerModel, SimConfig
from runner.endpoints.sim.data import load_scores
from runner.endpoints.sim.effects import planted
from runner.endpoints.sim.seeding import Draws
from runner.survey.cell import Framing, PromptCell

COUNTRIES = ("U.S.A.", "China", "Japan", "Germany", "Brazil")


def _order(kind: str, rng: Draws) -> tuple[int, ...]:
    if kind == "given":
        return (1, 2, 3, 4, 5)
    if kind == "reversed":
        return (5, 4, 3, 2, 1)
    order = [1, 2, 3, 4, 5]
    for i in range(4, 0, -1):  # Fisher–Yates from the seeded stream
        j = rng.randrange(i + 1)
        order[i], order[j] = order[j], order[i]
    return tuple(order)


def simulated_answers(
    config: SimConfig,
    factors: Mapping[str, Sequence[object]],
    *,
    countries: Sequence[str] = COUNTRIES,
    seeds: Sequence[int] = (1, 2, 3),
    model: AnswerModel | None = None,
) -> pl.DataFrame:
    """One answer per condition × country × seed × question (1…24), drawn as the simulator draws them."""
    model = model or AnswerModel(load_scores(config.reference), signal=config.signal, spread=config.spread)
    names = list(factors)
    rows: dict[str, list] = {c: [] for c in ("country", "question", "option_id", "status", "seed", *names)}
    order_kind = "option_order" in factors
    if order_kind:
        rows.update(shuffled=[], reversed=[])
        del rows["option_order"]
    for values in itertools.product(*factors.values()):
        level = dict(zip(names, values, strict=True))
        for country, seed, q in itertools.product(countries, seeds, range(1, 25)):
            rng = Draws(config.seed, "answer", repr(sorted(level.items())), country, seed, q)
            order = _order(str(level.get("option_order", "given")), rng)
            cell = PromptCell(
                language=str(level.get("language", "en")),
                mode="item",
                questions=(q,),
                framing=Framing("persona", country),
                option_order=order,
                reply_format=str(level.get("reply_format", "number")),
                labels=str(level.get("option_labels", "digits")),
            )
            name = str(level.get("model", "m"))
            effects = planted(config.seed, config.position_bias, config.effects, cell, name, False)
            temperature = float(level.get("temperature", 1.0))  # type: ignore[arg-type]
            answer = model.sample(country, q, temperature, 1.0, rng, effects)
            for name, value in level.items():
                if name != "option_order":
                    rows[name].append(value)
            if order_kind:
                rows["shuffled"].append(level["option_order"] == "shuffled")
                rows["reversed"].append(level["option_order"] == "reversed")
            rows["country"].append(country)
            rows["question"].append(q)
            rows["option_id"].append(answer)
            rows["status"].append("ok")
            rows["seed"].append(seed)
    return pl.DataFrame(rows)
