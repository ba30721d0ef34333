"""Hostile command-line input: every option and spec value outside what its use can hold is a one-line error
with exit 2 at parse time, never a traceback from deep inside a socket, numpy or the pool."""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path

import pytest

from _runner_support import spec_text
from runner.cli import main
from runner.errors import SpecError
from runner.survey.paths import EXAMPLES_DIR
from runner.sweep.spec import MAX_CONCURRENCY, load_spec, parse_spec, spec_from_dict

BASE = "http://127.0.0.1:9/v1"  # nothing listens: no case here may send anything


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_spec_that_is_not_utf8_is_a_located_one_line_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "spec.toml"
    path.write_bytes(spec_text(BASE).encode() + b"\n# caf\xe9\n")
    with pytest.raises(SpecError, match=r"spec\.toml: cannot read spec: not UTF-8 text \(byte \d+ is 0xe9\)"):
        load_spec(path)
    for command in (["plan", str(path)], ["run", str(path), "--out", str(tmp_path / "run")]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "not UTF-8 text" in err and str(path) in err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:99999/v1", "a URL that parses"),
        ("http://127.0.0.1:0/v1", "a port in 1-65535"),
        ("http:///v1", "a host"),
        ("http://127.0.0.1:8011/v 1", "without spaces or control characters"),
        ("http://127.0.0.1:8011/v1\r\nX-Injected: 1", "without spaces or control characters"),
        ("http://127.0.0.1:8011/v1\u0000", "without spaces or control characters"),
        ("http://127.0.0.1:8011/v1\u202e", "without spaces or control characters"),
    ],
)
def test_base_urls_that_cannot_be_sent_as_written_are_spec_errors(url: str, message: str) -> None:
    for endpoint in ({"base_url": url}, {"base_url": "http://127.0.0.1:8011/v1", "base_urls": [BASE, url]}):
        with pytest.raises(SpecError, match=message):
            parse_spec(spec_text(BASE, endpoint=endpoint))


def test_sendable_urls_still_pass() -> None:
    for url in ("http://[::1]:8000/v1", "https://api.example.com/v1", "http://localhost/v1", "http://h:65535"):
        assert parse_spec(spec_text(BASE, endpoint={"base_url": url})).endpoints[0].base_url == url.rstrip("/")


def test_max_concurrency_is_bounded(tmp_path: Path, capsys) -> None:
    """10**10 workers used to be spawned one by one: ``hofcat run --limit 1`` never returned."""
    assert parse_spec(spec_text(BASE, endpoint={"max_concurrency": MAX_CONCURRENCY})).endpoints[0].max_concurrency
    path = _spec(tmp_path, spec_text(BASE, endpoint={"max_concurrency": 10**10}))
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "--limit", "1"]) == 2
    assert f"max_concurrency = 10000000000: must be an integer 1-{MAX_CONCURRENCY}" in capsys.readouterr().err


PROBE = ["probe", "--base-url", BASE, "--model", "m"]


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [
        (["serve-sim"], "--port", "99999"),
        (["serve-sim"], "--port", "-1"),
        (["serve-sim"], "--seed", "-1"),
        (["serve-sim"], "--seed", str(2**64)),
        (["serve-sim"], "--rpm", "0"),
        (["serve-llm"], "--port", "70000"),
        (["serve-llm"], "--slots", "99999999999"),
        (["serve-llm"], "--threads", "0"),
        (["serve-llm"], "--ctx-size", str(10**30)),
        (["analyze", "RUN"], "--seed", "-1"),
        (["analyze", "RUN"], "--seed", str(10**23)),
        (["analyze", "RUN"], "--resamples", str(10**23)),
        (["analyze", "RUN"], "--permutations", "-5"),
        (["analyze", "RUN"], "--max-points", str(10**40)),
        (PROBE, "--repeats", str(10**23)),
        (PROBE, "--max-tokens", str(2**40)),
        (PROBE, "--seed", "x"),
        (["demo", "--out", "OUT"], "--seeds", str(10**30)),
        (["demo", "--out", "OUT"], "--seed", "-3"),
        (["run", "spec.toml", "--out", "OUT"], "--log-every", "0"),  # 0 or less printed progress in a busy loop
        (["run", "spec.toml", "--out", "OUT"], "--log-every", "-5"),
        (["run", "spec.toml", "--out", "OUT"], "--log-every", "nan"),  # NaN never printed at all
        (["run", "spec.toml", "--out", "OUT"], "--log-every", "inf"),
        (["plan", "spec.toml"], "--show-prompts", "10001"),  # built and held before printing: bounded
    ],
)
def test_numeric_options_out_of_range_are_usage_errors(
    command: list[str], option: str, value: str, tmp_path: Path, capsys
) -> None:
    argv = [str(tmp_path / a) if a in ("RUN", "OUT") else a for a in [*command, option, value]]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {value}" in err.replace("'", "") and "Traceback" not in err
    assert not (tmp_path / "OUT").exists()


def test_toml_nested_past_the_stack_is_a_spec_error() -> None:
    deep = spec_text(BASE).replace("[run]", "[run]\nx = " + "[" * 5000 + "]" * 5000, 1)
    with pytest.raises(SpecError, match="nested too deeply"):
        parse_spec(deep)


HOSTILE_VALUES = [
    -1,
    0,
    2**63,
    2**64,
    10**30,
    1e308,
    float("nan"),
    float("inf"),
    -float("inf"),
    True,
    "",
    "x" * 100_000,
    "\x00\r\n",
    [],
    [[[[[[1]]]]]],
    {},
    {"a": {"b": 1}},
    datetime.date(1979, 5, 27),
]


def _tables() -> tuple[dict, list[tuple[str, ...]]]:
    """A valid spec as TOML-decoded tables, and the path of every key a user can set in it."""
    raw = tomllib.loads(
        spec_text(
            BASE,
            endpoint={"requests_per_minute": 60, "tokens_per_minute": 9000, "price_input_per_1k": 0.1, "burst": 2},
            design={"languages": ["en"], "shuffle_options": True},
        )
    )
    paths = [(table, key) for table in ("run", "design") for key in raw[table]]
    paths += [("endpoints", 0, key) for key in raw["endpoints"][0]]
    return raw, paths


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=lambda v: type(v).__name__ + repr(v)[:12])
def test_every_spec_key_given_a_hostile_value_is_valid_or_a_short_spec_error(value: object) -> None:
    """Not one key of a spec may let a value through to a traceback, a hang or a 100 KB error line."""
    _, paths = _tables()
    for path in paths:
        raw, _ = _tables()
        table = raw
        for step in path[:-1]:
            table = table[step]
        table[path[-1]] = value
        try:
            spec_from_dict(raw)
        except SpecError as exc:
            message = str(exc)
            assert "\n" not in message.strip() and len(message) < 1000, (path, message[:300])


@pytest.mark.parametrize(
    ("constants", "message"),
    [
        ("pdi=1e999", "'1e999' (for pdi) is not a finite number"),
        ("pdi=nan", "'nan' (for pdi) is not a finite number"),
        ("pdi=1,PDI=2", "pdi is given twice"),  # the later one used to win silently
    ],
)
def test_score_constants_that_cannot_score_are_one_line_errors(constants: str, message: str, capsys) -> None:
    means = str(EXAMPLES_DIR / "cat_v2_table5_gpt35.csv")
    assert main(["score", "--means", means, "--reference", "hofstede-2015", "--constants", constants]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"hofcat score: error: --constants: {message}"


def test_score_means_that_is_a_folder_is_named_as_such(tmp_path: Path, capsys) -> None:
    """A folder given as --means was reported as ``no such file``."""
    assert main(["score", "--means", str(tmp_path), "--reference", "hofstede-2015"]) == 2
    assert capsys.readouterr().err.startswith(f"hofcat score: error: {tmp_path}: is not a regular file")
