"""End to end over HTTP: parsed simulated replies recover the reference ranking, and parse to what was sent."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import numpy as np
import pytest

import stats_core
from _sim_client import chat_body, content, post, run
from runner.endpoints.sim import SimConfig, SimServer, request_key
from runner.parse import parse_reply
from runner.score.indices import indices_from_means
from runner.survey.cell import Framing, PromptCell
from runner.survey.prompts import load_templates, shuffled_order
from runner.survey.reference import load_reference

REFERENCE = "hofstede-2015-arab-revised"


def persona_countries(language: str) -> list[str]:
    """Every persona country the language's templates can name (17 in English)."""
    return sorted(load_templates(language)["countries"])


async def collect(
    config: SimConfig, cells: list[PromptCell], seeds: range, temperature: float
) -> tuple[list, SimServer]:
    """(cell, reply text, request key) for every cell × seed, sent with bounded concurrency."""
    async with SimServer(config) as sim, aiohttp.ClientSession() as session:
        gate = asyncio.Semaphore(16)

        async def one(cell: PromptCell, seed: int) -> tuple[PromptCell, str, str]:
            body = chat_body(cell, seed=seed, temperature=temperature)
            async with gate:
                status, _, text = await post(session, sim.base_url, body)
                assert status == 200
                return cell, content(text), request_key(body)

        return list(await asyncio.gather(*(one(c, s) for c in cells for s in seeds))), sim


def country_indices(replies: list[tuple[PromptCell, str, str]]) -> dict[str, np.ndarray]:
    """Parse every reply, average per country and question, score the six indices (C = 0)."""
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    for cell, text, _ in replies:
        country = cell.framing.country
        sums.setdefault(country, np.zeros(24))
        counts.setdefault(country, np.zeros(24))
        for answer in parse_reply(text, cell).answers:
            if answer.status == "ok":
                sums[country][answer.question - 1] += answer.option_id
                counts[country][answer.question - 1] += 1
    return {c: indices_from_means(sums[c] / counts[c]) for c in sums}


def taus(indices: dict[str, np.ndarray]) -> np.ndarray:
    """Kendall tau-b per dimension between the countries' indices and the reference scores (where published)."""
    countries = sorted(indices)
    reference = load_reference(REFERENCE).matrix(countries)
    model = np.array([indices[c] for c in countries])
    known = ~np.isnan(reference)
    return np.array([stats_core.kendall_tau(model[known[:, j], j], reference[known[:, j], j]) for j in range(6)])


@pytest.mark.slow
def test_survey_replies_recover_the_reference_ranking() -> None:
    countries = persona_countries("en")
    cells = [PromptCell("en", "survey", tuple(range(1, 25)), Framing("persona", c)) for c in countries]
    replies, _ = run(collect(SimConfig(seed=7, reference=REFERENCE), cells, range(40), 1.0))
    tau = taus(country_indices(replies))
    assert np.all(tau > 0.6), tau  # 17 countries, 40 respondents each: the truth shows clearly
    # With no signal the same design finds nothing: the positive taus above come from the reference.
    flat, _ = run(collect(SimConfig(seed=7, reference=REFERENCE, signal=0.0), cells, range(40), 1.0))
    assert abs(float(np.mean(taus(country_indices(flat))))) < 0.3


def test_temperature_zero_item_replies_rank_countries_with_ties() -> None:
    countries = persona_countries("zh")
    cells = [PromptCell("zh", "item", (q,), Framing("persona", c)) for c in countries for q in range(1, 25)]
    replies, _ = run(collect(SimConfig(seed=1, reference=REFERENCE), cells, range(1), 0.0))
    tau = taus(country_indices(replies))
    assert np.all(tau > 0.5), tau


def test_every_reply_parses_to_the_answers_the_server_logged() -> None:
    """Shuffled options, JSON and number formats, chatty replies and refusals: the parser agrees with the log."""
    cells = [
        PromptCell(
            lang,
            mode,
            (q,) if mode == "item" else tuple(range(1, 25)),
            Framing("persona", "China"),
            option_order=shuffled_order(q * 7 + len(lang)),
            reply_format=fmt,
        )
        for lang in ("en", "zh", "ar", "sk")
        for mode in ("item", "survey")
        for fmt in ("number", "json")
        for q in ((3, 15, 20) if mode == "item" else (1,))
    ]
    config = SimConfig(seed=5, reference=REFERENCE, chatty_rate=0.4, refusal_rate=0.1)
    replies, sim = run(collect(config, cells, range(6), 1.0))
    by_key = {entry.request_key: entry for entry in sim.log.entries()}
    assert len(by_key) == len(replies)
    outcomes = set()
    for cell, text, key in replies:
        entry = by_key[key]
        assert entry.reply == text
        outcomes.add(entry.outcome)
        parsed = parse_reply(text, cell)
        if entry.outcome == "refusal":
            assert {a.status for a in parsed.answers} == {"refusal"}, text
        else:
            assert tuple(a.option_id for a in parsed.answers) == entry.answers, (cell, text)
    assert outcomes == {"ok", "chatty", "refusal"}


def test_model_level_prompts_answer_as_the_language_country() -> None:
    """No persona: Chinese prompts answer as China, English ones as the U.S.A. (documented default)."""
    cells = [PromptCell(lang, "survey", tuple(range(1, 25))) for lang in ("en", "zh")]
    _, sim = run(collect(SimConfig(seed=2, reference=REFERENCE), cells, range(3), 1.0))
    countries = {(e.language, e.country, e.persona) for e in sim.log.entries()}
    assert countries == {("en", "U.S.A.", False), ("zh", "China", False)}
    truth = json.loads(json.dumps(sim.sim.model.truth("China")))
    assert truth["reference"]["pdi"] == 80.0
