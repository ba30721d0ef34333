"""Spec validation (errors name key, value and what is allowed) and the plan (counts, keys, seeds, laziness)."""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
import re
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
    assert (d.modes, d.languages, d.seeds, d.temperature, d.top_p, d.max_tokens) == (
        ("item",),
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
        ({"endpoint": {"max_concurrency": 0}}, "endpoints[0].max_concurrency = 0: must be an integer 1-10000"),
        ({"endpoint": {"timeout_s": "60"}}, "endpoints[0].timeout_s = '60': must be a number > 0"),
        ({"endpoint": {"base_url": "127.0.0.1:8011"}}, "endpoints[0].base_url = '127.0.0.1:8011': must be an http"),
        ({"endpoint": {"api_key": "sk-secret"}}, "endpoints[0].api_key = '<hidden>': must be no key in a spec"),
        (
            {"endpoint": {"requests_per_minut": 5}},
            "endpoints[0].requests_per_minut = 5: must be a known key; did you mean 'requests_per_minute'? (one of ",
        ),
        ({"run": {"seeed": 1}}, "run.seeed = 1: must be a known key; did you mean 'seed'? (one of batch_rows, "),
        (
            {"design": {"persona": ["China"]}},
            "design.persona = ['China']: must be a known key; did you mean 'personas'",
        ),
        ({"design": {"zzz": 1}}, "design.zzz = 1: must be a known key (one of "),
        ({"design": {"mode": "batch"}}, "design.mode = 'batch': must be one of item, survey"),
        ({"design": {"temperature": [0.0, 2.5]}}, "design.temperature = 2.5: must be numbers in [0, 2]"),
        ({"design": {"seeds": [1, 1]}}, "design.seeds = [1, 1]: must be a list without repeated values"),
        ({"design": {"seeds": []}}, "design.seeds = []: must be a non-empty list of integers 0-9223372036854775807"),
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


# --- issue 12: ranges, mode lists, per-endpoint designs, arithmetic counts, pilots -----------------------------

INT64_MAX, INT32_MAX = 2**63 - 1, 2**31 - 1


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (
            {"design": {"seeds": [1, 99999999999999999999]}},
            "design.seeds = 99999999999999999999: must be integers 0-9223372036854775807 (int64)",
        ),
        ({"design": {"seeds": [INT64_MAX + 1]}}, f"design.seeds = {INT64_MAX + 1}: must be integers 0-{INT64_MAX}"),
        (
            {"design": {"max_tokens": [INT32_MAX + 1]}},
            f"design.max_tokens = {INT32_MAX + 1}: must be integers 1-{INT32_MAX}",
        ),
        ({"run": {"seed": 2**64}}, f"run.seed = {2**64}: must be an integer >= 0 (at most {INT64_MAX}, int64)"),
        ({"run": {"batch_rows": 10**30}}, f"run.batch_rows = {10**30}: must be an integer >= 1 (at most {INT64_MAX}"),
        ({"endpoint": {"requests_per_minute": 2**70}}, "endpoints[0].requests_per_minute = 1180591620717411303424"),
        ({"endpoint": {"max_retries": INT32_MAX}}, f"endpoints[0].max_retries = {INT32_MAX}: must be an integer 0-"),
        ({"endpoint": {"timeout_s": 10**400}}, "endpoints[0].timeout_s = 1000"),  # past a float: no OverflowError
        ({"design": {"temperature": [10**400]}}, "design.temperature = 1000"),
        ({"design": {"seeds": [True]}}, "design.seeds = True: must be integers 0-"),  # a bool is not an int
        ({"design": {"max_tokens": True}}, "design.max_tokens = True: must be integers 1-"),
        ({"design": {"questions": [False]}}, "design.questions = False: must be question numbers 1-24"),
        ({"endpoint": {"max_concurrency": True}}, "endpoints[0].max_concurrency = True: must be an integer 1-10000"),
    ],
)
def test_integers_past_what_the_store_holds_are_refused_naming_key_and_range(change: dict, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(spec_text(URL, **change), source="s.toml")
    assert str(info.value).startswith("s.toml: ") and needle in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("rate_window_s = nan", "endpoints[0].rate_window_s = nan: must be a number > 0"),
        ("rate_window_s = inf", "endpoints[0].rate_window_s = inf: must be a number > 0"),
        ("price_input_per_1k = -inf", "endpoints[0].price_input_per_1k = -inf: must be a number >= 0"),
        ("rate_window_s = true", "endpoints[0].rate_window_s = True: must be a number > 0"),
    ],
)
def test_non_finite_and_boolean_numbers_are_refused(line: str, needle: str) -> None:
    text = spec_text(URL).replace('model = "sim-1"\n', f'model = "sim-1"\n{line}\n')
    with pytest.raises(SpecError, match=re.escape(needle)):
        parse_spec(text, source="s.toml")
    with pytest.raises(SpecError, match=re.escape("design.temperature = nan: must be numbers in [0, 2]")):
        parse_spec(spec_text(URL).replace("temperature = [0.0, 1.0]", "temperature = nan"))


def test_the_largest_values_the_store_holds_are_accepted_and_gemini_seeds_are_int32() -> None:
    spec = make_spec(URL, run={"seed": INT64_MAX}, design={"seeds": [0, INT64_MAX], "max_tokens": [INT32_MAX]})
    assert spec.design.seeds == (0, INT64_MAX) and spec.design.max_tokens == (INT32_MAX,)
    assert len({c.key for c in iter_cells(spec)}) == count_cells(spec) == 2 * 6 * 2 * 2
    gemini = {"provider": "gemini", "base_url": "https://generativelanguage.googleapis.com/v1beta"}
    with pytest.raises(
        SpecError, match=re.escape(f"design.seeds = {INT32_MAX + 1}: must be integers 0-{INT32_MAX} for gemini")
    ):
        make_spec(URL, endpoint=gemini, design={"seeds": [INT32_MAX + 1]})
    assert make_spec(URL, endpoint=gemini, design={"seeds": [INT32_MAX]}).design.seeds == (INT32_MAX,)


GOLDEN = json.loads((Path(__file__).resolve().parent / "golden" / "plan_cell_keys.json").read_text())
GOLDEN_SPECS = {
    "survey": """
[run]
name = "golden-survey"
seed = 11
[[endpoints]]
name = "a"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m-a"
[[endpoints]]
name = "b"
provider = "anthropic"
base_url = "http://127.0.0.1:9/v1"
model = "m-b"
[design]
mode = "survey"
languages = ["en", "zh"]
personas = ["China", "Japan"]
no_persona = true
shuffle_options = true
reply_format = ["number", "json"]
seeds = [1, 2, 3]
temperature = [0.0, 0.7]
max_tokens = [64, 512]
[design.identities]
countries = ["Slovakia"]
ages = [30, 60]
""",
    "item": """
[run]
name = "golden-item"
seed = 3
[[endpoints]]
name = "local"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "small"
[[endpoints]]
name = "g"
provider = "gemini"
base_url = "http://127.0.0.1:9/v1"
model = "gm"
[design]
mode = "item"
personas = ["United States"]
questions = [1, 5, 24]
shuffle_options = true
reply_format = "number"
seeds = [1, 2]
temperature = [0.0, 1.0]
top_p = [0.9, 1.0]
""",
    "constrained": """
[run]
name = "golden-constrained"
[[endpoints]]
name = "o"
provider = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
[design]
questions = [2, 3]
reply_format = "json"
constraint = ["none", "json_schema"]
seeds = [5]
""",
}


def test_cell_keys_of_existing_specs_are_unchanged() -> None:
    """Keys computed by the planner of commit 1a7a2cc: a run started then resumes without re-sending a cell."""
    assert [c.key for c in iter_cells(load_spec(EXAMPLE))] == GOLDEN["quickstart"]  # byte-identical, in order
    for name, text in GOLDEN_SPECS.items():
        keys = [c.key for c in iter_cells(parse_spec(text, source=name))]
        want = GOLDEN["specs"][name]
        assert (len(keys), keys[0], keys[-1]) == (want["cells"], want["first"], want["last"]), name
        assert hashlib.sha256("\n".join(keys).encode()).hexdigest() == want["sha256"], name


def test_mode_can_be_a_list_and_is_a_factor_like_any_other() -> None:
    both = make_spec(URL, design={"mode": ["item", "survey"]})
    item, survey = make_spec(URL, design={"mode": "item"}), make_spec(URL, design={"mode": "survey"})
    assert both.design.modes == ("item", "survey") and item.design.modes == ("item",)
    keys = [c.key for c in iter_cells(both)]
    assert keys == [c.key for c in iter_cells(item)] + [c.key for c in iter_cells(survey)]  # same keys as alone
    assert count_cells(both) == len(keys) == 2 * 6 * 2 * 2 + 2 * 1 * 2 * 2
    assert {c.prompt.mode for c in iter_cells(both)} == {"item", "survey"}
    counts = factor_counts(both)
    assert counts["modes"] == 2 and counts["questions"] == 6 + 1 and "modes" not in factor_counts(item)
    with pytest.raises(SpecError, match=re.escape("design.mode = 'batch': must be one of item, survey")):
        make_spec(URL, design={"mode": ["item", "batch"]})
    with pytest.raises(SpecError, match=re.escape("design.constraint = 'grammar': must be \"none\" in survey mode")):
        make_spec(URL, design={"mode": ["item", "survey"], "constraint": "grammar"})


OVERRIDE = (
    spec_text(URL)
    + '[[endpoints]]\nname = "local"\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "tiny"\n'
    + '[endpoints.design]\nseeds = [1]\ntemperature = 0.0\npersonas = ["China"]\n'
)


def test_an_endpoint_can_override_keys_of_the_design() -> None:
    spec = parse_spec(OVERRIDE, source="s.toml")
    sim, local = spec.endpoints
    assert spec.design_for(sim) is spec.design and spec.design_for(local).seeds == (1,)
    assert spec.design_key(sim) == "design" and spec.design_key(local) == "endpoints[1].design"
    assert spec.design_for(local).questions == spec.design.questions  # keys not overridden come from [design]
    cells = {e.name: [c.key for c in iter_cells(spec, e)] for e in spec.endpoints}
    assert len(cells["sim"]) == 2 * 6 * 2 * 2 and len(cells["local"]) == 1 * 6 * 1 * 1
    assert count_cells(spec) == 48 + 6 == len(list(iter_cells(spec)))
    alone = make_spec(URL)  # the other endpoint's cells keep the keys they have without the override
    assert cells["sim"] == [c.key for c in iter_cells(alone)]
    local_cells = list(iter_cells(spec, local))
    assert {(c.sampling.seed, c.sampling.temperature, c.prompt.framing.country) for c in local_cells} == {
        (1, 0.0, "China")
    }


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        (
            "seeds = [99999999999999999999]",
            "s.toml: endpoints[1].design.seeds = 99999999999999999999: must be integers",
        ),
        ("sedes = [1]", "s.toml: endpoints[1].design.sedes = [1]: must be a known key; did you mean 'seeds'?"),
        (
            'constraint = "grammar"\nmode = "survey"',
            "endpoints[1].design.constraint = 'grammar': must be \"none\" in survey",
        ),
        ("temperature = 3.0", "endpoints[1].design.temperature = 3.0: must be numbers in [0, 2]"),
    ],
)
def test_endpoint_design_errors_are_located_there(table: str, needle: str) -> None:
    text = OVERRIDE.replace("seeds = [1]\ntemperature = 0.0\n", table + "\n")
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="s.toml")
    assert needle in str(info.value)
    not_a_table = OVERRIDE.replace("[endpoints.design]\nseeds = [1]\ntemperature = 0.0\n", "design = 3\n")
    with pytest.raises(SpecError, match=re.escape("s.toml: endpoints[1].design = 3: must be a table")):
        parse_spec(not_a_table.replace('personas = ["China"]\n', ""), source="s.toml")


def test_the_plan_estimate_is_the_sum_over_its_cells() -> None:
    """``estimate`` multiplies factor sizes; it must equal expanding every cell (tokens included)."""
    from runner.sweep.accounting import estimate
    from runner.sweep.request import prompt_estimate

    specs = [
        load_spec(EXAMPLE),
        parse_spec(GOLDEN_SPECS["survey"]),
        parse_spec(OVERRIDE),
        make_spec(
            URL,
            design={
                "mode": ["item", "survey"],
                "languages": ["en", "zh"],
                "option_order": ["given", "reversed", "shuffled"],
                "reply_format": ["number", "json"],
                "no_persona": True,
                "max_tokens": [16, 64],
            },
        ),
    ]
    for spec in specs:
        for e in spec.endpoints:
            cells = list(iter_cells(spec, e))
            want = (
                len(cells),
                sum(prompt_estimate(c.prompt) for c in cells),
                sum(c.sampling.max_tokens for c in cells),
            )
            est = estimate(spec, e)
            assert (est.cells, est.input_tokens, est.output_tokens) == want


def test_a_billion_cell_plan_is_counted_by_arithmetic(tmp_path: Path) -> None:
    import time

    from runner.sweep.accounting import plan_summary

    path = tmp_path / "huge.toml"
    path.write_text(
        spec_text(
            URL,
            design={
                "seeds": list(range(52_084)),
                "temperature": [x / 10 for x in range(10)],
                "max_tokens": list(range(16, 23)),
            },
        ).replace(
            "[design]\n", '[design]\nlanguages = ["en", "zh"]\nno_persona = true\nreply_format = ["number", "json"]\n'
        )
        + "".join(
            f'[[endpoints]]\nname = "e{i}"\nprovider = "openai"\nbase_url = "{URL}"\nmodel = "m{i}"\n' for i in range(3)
        )
    )
    started = time.process_time()  # CPU seconds: other work on a busy machine does not count
    summary = plan_summary(load_spec(path))
    elapsed = time.process_time() - started
    cells = 4 * 2 * 3 * 6 * 2 * 52_084 * 10 * 7
    assert summary["cells"] == cells == sum(e["cells"] for e in summary["endpoints"].values()) and cells > 10**9
    assert summary["endpoints"]["e0"]["output_tokens_max"] == cells // 4 // 7 * sum(range(16, 23))
    assert elapsed < 5.0, f"{cells} cells planned in {elapsed:.1f} s"  # generous: arithmetic takes well under 1 s


def test_select_deals_a_limit_round_robin_by_endpoint() -> None:
    from runner.sweep.plan import select

    spec = parse_spec(OVERRIDE)  # sim: 48 cells, local: 6
    assert [(e.name, n) for e, n in select(spec).quotas] == [("sim", 48), ("local", 6)]
    assert [n for _, n in select(spec, limit=5).quotas] == [3, 2]
    assert [n for _, n in select(spec, limit=20).quotas] == [14, 6]  # local runs out, sim takes the rest
    assert [n for _, n in select(spec, limit=10**9).quotas] == [48, 6]
    only = select(spec, endpoints=["local"], limit=4)
    assert [(e.name, n) for e, n in only.quotas] == [("local", 4)] and (only.cells, only.planned) == (4, 54)
    local = spec.endpoints[1]
    assert [c.key for c in only.iter_cells(spec, local)] == [c.key for c in iter_cells(spec, local)][:4]
    with pytest.raises(SpecError, match=re.escape("--endpoint 'nope': no such endpoint (endpoints: sim, local)")):
        select(spec, endpoints=["nope"])
    with pytest.raises(SpecError, match="--limit 0: must be an integer >= 1"):
        select(spec, limit=0)


def test_an_endpoint_design_removes_the_identities_with_false() -> None:
    text = spec_text(URL, design={"personas": ["Germany"], "questions": [1], "seeds": [1], "temperature": [0.0]})
    text += '[design.identities]\ncountries = ["China", "Japan"]\ngenders = ["female"]\nages = [30]\n'
    text += '[[endpoints]]\nname = "b"\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    text += "[endpoints.design]\nidentities = false\n"
    spec = parse_spec(text, source="s.toml")
    kinds = {e.name: sorted({c.prompt.framing.kind for c in iter_cells(spec, e)}) for e in spec.endpoints}
    counts = {e.name: sum(1 for _ in iter_cells(spec, e)) for e in spec.endpoints}
    assert spec.design_for(spec.endpoint("b")).identities is None
    assert spec.design_for(spec.endpoint("sim")).identities is not None
    assert kinds == {"sim": ["identity", "persona"], "b": ["persona"]} and counts == {"sim": 3, "b": 1}
    with pytest.raises(SpecError, match=r"endpoints\[1\]\.design\.identities = True: must be a table"):
        parse_spec(text.replace("identities = false", "identities = true"), source="s.toml")


def test_served_models_are_read_as_a_list_of_names() -> None:
    spec = parse_spec(spec_text(URL, endpoint={"served_models": ["SmolLM2-135M-Instruct"]}), source="s.toml")
    assert spec.endpoints[0].served_models == ("SmolLM2-135M-Instruct",)
    assert parse_spec(spec_text(URL), source="s.toml").endpoints[0].served_models == ()
    with pytest.raises(SpecError, match=r"endpoints\[0\]\.served_models = 3: must be non-empty strings"):
        parse_spec(spec_text(URL, endpoint={"served_models": [3]}), source="s.toml")


@pytest.mark.slow
def test_plan_says_how_many_distribution_cells_repeat_a_request(tmp_path: Path) -> None:
    import subprocess
    import sys

    design = {"measurement": "distribution", "questions": [1, 2], "seeds": [1, 2], "temperature": [0.0, 0.5, 1.0]}
    path = tmp_path / "s.toml"
    path.write_text(spec_text(URL, design={**design, "top_p": [1.0, 0.9]}))
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "plan", str(path), "--json"], capture_output=True, text=True, cwd=root
    )
    assert done.returncode == 0, done.stderr
    repeats = json.loads(done.stdout)["endpoints"]["sim"]["distribution_repeats"]
    cells = 2 * 2 * 2 * 6  # personas × questions × seeds × (3 temperatures × 2 top_p)
    assert repeats == {"cells": cells, "repeats": cells - cells // 6}
    text = subprocess.run(
        [sys.executable, "-m", "runner.cli", "plan", str(path)], capture_output=True, text=True, cwd=root
    ).stdout
    assert f"{cells - cells // 6} of its {cells} distribution cells repeat another cell's request" in text
    path.write_text(spec_text(URL, design={**design, "measurement": "sample"}))
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "plan", str(path), "--json"], capture_output=True, text=True, cwd=root
    )
    assert json.loads(done.stdout)["endpoints"]["sim"]["distribution_repeats"] == {"cells": 0, "repeats": 0}
