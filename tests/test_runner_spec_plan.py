"""Spec validation (errors name key, value and what is allowed) and the plan (counts, keys, seeds, laziness)."""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
from pathlib import Path

import pytest

from _runner_support import make_spec, spec_text
from runner.errors import SpecError
from runner.survey.cell import CANONICAL_ORDER, Framing
from runner.survey.prompts import build_messages, shuffled_order, template_hash
from runner.sweep.plan import cell_key, count_cells, derive_seed, factor_counts, iter_cells, validate_plan
from runner.sweep.spec import load_spec, parse_spec

URL = "http://127.0.0.1:9/v1"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "quickstart.toml"


def test_the_quickstart_example_is_the_issues_spec() -> None:
    spec = load_spec(EXAMPLE)
    e = spec.endpoints[0]
    assert (e.name, e.provider, e.model, e.requests_per_minute, e.tokens_per_minute, e.max_concurrency) == (
        "sim",
        "openai",
        "sim-1",
        600,
        200000,
        32,
    )
    assert (e.timeout_s, e.max_retries, e.burst) == (60.0, 6, None)
    d = spec.design
    assert (d.mode, d.languages, d.seeds, d.temperature, d.top_p, d.max_tokens) == (
        "item",
        ("en",),
        (1, 2, 3, 4, 5),
        (0.0, 0.5, 1.0),
        (1.0,),
        (64,),
    )
    validate_plan(spec)
    assert count_cells(spec) == 4 * 24 * 5 * 3 == len(list(iter_cells(spec)))


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            {"endpoint": {"provider": "openia"}},
            "endpoints[0].provider = 'openia': must be one of anthropic, gemini, openai",
        ),
        ({"endpoint": {"max_concurrency": 0}}, "endpoints[0].max_concurrency = 0: must be an integer >= 1"),
        ({"endpoint": {"timeout_s": "60"}}, "endpoints[0].timeout_s = '60': must be a number > 0"),
        ({"endpoint": {"base_url": "127.0.0.1:8011"}}, "endpoints[0].base_url = '127.0.0.1:8011': must be an http"),
        ({"endpoint": {"api_key": "sk-secret"}}, "endpoints[0].api_key = '<hidden>': must be no key in a spec"),
        ({"endpoint": {"requests_per_minut": 5}}, "endpoints[0].requests_per_minut = 5: must be a known key"),
        ({"design": {"mode": "batch"}}, "design.mode = 'batch': must be one of item, survey"),
        ({"design": {"temperature": [0.0, 2.5]}}, "design.temperature = 2.5: must be numbers in [0, 2]"),
        ({"design": {"seeds": [1, 1]}}, "design.seeds = [1, 1]: must be a list without repeated values"),
        ({"design": {"seeds": []}}, "design.seeds = []: must be a non-empty list of integers >= 0"),
        ({"design": {"questions": [0, 3]}}, "design.questions = 0: must be question numbers 1-24"),
        ({"design": {"shuffle_options": "yes"}}, "design.shuffle_options = 'yes': must be true or false"),
        ({"run": {"seed": -1}}, "run.seed = -1: must be an integer >= 0"),
    ],
)
def test_spec_errors_name_key_value_and_what_is_allowed(change: dict, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(spec_text(URL, **change), source="s.toml")
    assert str(info.value).startswith("s.toml: ") and needle in str(info.value)
    assert "sk-secret" not in str(info.value)


def test_structural_spec_errors() -> None:
    with pytest.raises(SpecError, match=r"s.toml: invalid TOML"):
        parse_spec("[run\n", source="s.toml")
    with pytest.raises(SpecError, match=r"s.toml: run.name: missing \(required\)"):
        parse_spec('[run]\nseed = 1\n[[endpoints]]\nname="a"\n[design]\n', source="s.toml")
    two = spec_text(URL) + '[[endpoints]]\nname = "sim"\nprovider = "openai"\nbase_url = "http://x"\nmodel = "m"\n'
    with pytest.raises(SpecError, match=r"endpoints\[1\].name = 'sim': must be a name no other endpoint uses"):
        parse_spec(two, source="s.toml")
    with pytest.raises(SpecError, match=r"design.personas = 'Atlantis': must be a known country"):
        iter_cells(make_spec(URL, design={"personas": ["Atlantis"]})).__next__()
    with pytest.raises(SpecError, match=r"reply_format 'haiku'"):
        validate_plan(make_spec(URL, design={"reply_format": ["number", "haiku"]}))
    with pytest.raises(SpecError, match=r"run.reference = 'nope'"):
        validate_plan(make_spec(URL, run={"reference": "nope"}))


def test_counts_per_factor_multiply_to_the_plan() -> None:
    spec = parse_spec(
        spec_text(
            URL,
            design={
                "personas": ["China", "Japan"],
                "no_persona": True,
                "questions": [1, 2, 3],
                "languages": ["en", "zh"],
                "reply_format": ["number", "json"],
                "seeds": [1, 2],
                "temperature": [0.0, 0.5, 1.0],
                "top_p": [0.5, 1.0],
            },
        )
        + '[design.identities]\ncountries = ["Slovakia"]\nages = [30]\n'
    )
    counts = factor_counts(spec)
    assert counts == {
        "endpoints": 1,
        "languages": 2,
        "framings": 3 + 2,
        "questions": 3,
        "reply_formats": 2,
        "seeds": 2,
        "temperature": 3,
        "top_p": 2,
        "max_tokens": 1,
        "constraints": 1,
    }
    cells = list(iter_cells(spec))
    assert len(cells) == count_cells(spec) == math.prod(counts.values()) == 720
    assert len({c.key for c in cells}) == 720  # every factor level changes the key
    framings = {c.prompt.framing for c in cells}
    assert Framing() in framings and Framing("identity", "Slovak Rep", 30, "female") in framings
    assert Framing("persona", "China") in framings


def test_key_is_the_documented_hash_and_stable() -> None:
    spec = make_spec(URL, design={"personas": ["United States"], "questions": [7], "seeds": [3], "temperature": [0.5]})
    (cell,) = iter_cells(spec)
    p = cell.prompt
    assert (p.framing.country, p.questions, p.option_order) == ("U.S.A.", (7,), CANONICAL_ORDER)
    definition = [
        "sim",
        "openai",
        "sim-1",
        "en",
        "item",
        [7],
        "persona",
        "U.S.A.",
        None,
        None,
        [1, 2, 3, 4, 5],
        "number",
        template_hash(p),
        3,
        0.5,
        1.0,
        64,
    ]
    expected = hashlib.sha256(json.dumps(definition, separators=(",", ":")).encode()).hexdigest()[:32]
    assert cell.key == expected == cell_key(cell.endpoint, p, cell.sampling, cell.template_hash)
    assert [
        c.key
        for c in iter_cells(
            make_spec(URL, design={"personas": ["U.S.A."], "questions": [7], "seeds": [3], "temperature": [0.5]})
        )
    ] == [expected]  # alias or name
    other = make_spec(
        URL,
        endpoint={"model": "sim-2"},
        design={"personas": ["United States"], "questions": [7], "seeds": [3], "temperature": [0.5]},
    )
    assert next(iter_cells(other)).key != expected


def test_shuffled_orders_come_from_recorded_derived_seeds() -> None:
    spec = make_spec(URL, design={"shuffle_options": True, "personas": ["China"], "seeds": [1, 2, 3, 4]})
    cells = list(iter_cells(spec))
    for c in cells:
        f = c.prompt.framing
        assert c.shuffle_seed == derive_seed(
            7, "option_order", "en", f.kind, f.country, f.age, f.gender, list(c.prompt.questions), c.sampling.seed
        )
        assert c.prompt.option_order == shuffled_order(c.shuffle_seed)
    assert len({c.prompt.option_order for c in cells}) > 5  # orders vary across questions and seeds
    assert [c.key for c in cells] == [c.key for c in iter_cells(spec)]  # same spec, same plan
    reseeded = make_spec(
        URL, run={"seed": 8}, design={"shuffle_options": True, "personas": ["China"], "seeds": [1, 2, 3, 4]}
    )
    assert [c.prompt.option_order for c in iter_cells(reseeded)] != [c.prompt.option_order for c in cells]


def test_plan_is_lazy() -> None:
    spec = make_spec(URL, design={"seeds": list(range(20_000)), "personas": ["China"], "questions": list(range(1, 25))})
    cells = iter_cells(spec)
    assert inspect.isgenerator(cells)
    first = list(itertools.islice(cells, 3))  # a million-cell plan costs nothing until consumed
    assert count_cells(spec) == 24 * 20_000 * 2 and len(first) == 3
    assert build_messages(first[0].prompt)[-1]["content"].startswith("Act like you are someone from China")
