"""A sweep spec: TOML file → validated, typed, frozen config.

Every error names the file, the dotted key, the offending value and what is allowed, e.g.
``spec.toml: endpoints[1].provider = 'openia': must be one of anthropic, gemini, openai``. Unknown keys
are errors too (a typo must not silently fall back to a default). API keys never appear in a spec: an
endpoint names the environment variable that holds its key (``api_key_env``).
"""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.errors import SpecError
from runner.survey.vocab import CONSTRAINTS, MODES, PROVIDERS, QUESTIONS

GENDERS = ("female", "male")
# The reply formats each constraint can produce: the grammar admits one bare digit, the schema one JSON object.
CONSTRAINT_FORMATS = {"grammar": ("number", "fewshot"), "json_schema": ("json",)}
CONSTRAINT_PROVIDERS = ("openai",)  # OpenAI-compatible servers take grammar/response_format; others cannot


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The ``[run]`` table: name, master seed, reference set and store batching."""

    name: str
    seed: int = 1  # master seed: every derived seed (option shuffles) comes from it and is recorded
    reference: str = "hofstede-2015"  # reference score set the run is compared against (recorded)
    batch_rows: int = 1000  # rows buffered before a Parquet part is committed
    flush_interval_s: float = 10.0  # ... or after this many seconds, whichever comes first
    determinism_probe: bool = False  # probe every OpenAI-compatible endpoint's seed handling before the sweep


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """One ``[[endpoints]]`` entry: where to send, how fast, how patiently, at what price."""

    name: str
    provider: str
    base_url: str
    model: str
    api_key_env: str | None = None
    requests_per_minute: int | None = None  # None: unlimited
    tokens_per_minute: int | None = None  # input + output tokens; None: unlimited
    burst: int | None = None  # most requests in any 1 s; None: no 1-s cap (max_concurrency bounds bursts)
    rate_window_s: float = 60.0  # the window the per-minute limits count over (shorten only to test)
    max_concurrency: int = 16
    timeout_s: float = 60.0  # per attempt
    max_retries: int = 6  # attempts after the first
    price_input_per_1k: float | None = None  # currency units per 1,000 input tokens
    price_output_per_1k: float | None = None  # currency units per 1,000 output tokens


@dataclass(frozen=True, slots=True)
class Identities:
    """``[design.identities]``: simulated respondents = countries × genders × ages."""

    countries: tuple[str, ...]
    genders: tuple[str, ...] = GENDERS
    ages: tuple[int, ...] = (25, 45, 65)


@dataclass(frozen=True, slots=True)
class DesignConfig:
    """The ``[design]`` table: the factors whose product is the plan."""

    mode: str = "item"
    languages: tuple[str, ...] = ("en",)
    personas: tuple[str, ...] = ()
    identities: Identities | None = None
    no_persona: bool = False  # also ask without framing when personas/identities are given
    questions: tuple[int, ...] = QUESTIONS  # item mode: one cell per question; survey: asked together
    shuffle_options: bool = False
    reply_formats: tuple[str, ...] = ("number",)
    seeds: tuple[int, ...] = (1,)
    temperature: tuple[float, ...] = (0.0,)
    top_p: tuple[float, ...] = (1.0,)
    max_tokens: tuple[int, ...] = (64,)
    constraints: tuple[str, ...] = ("none",)  # ``design.constraint``: one of runner.survey.vocab.CONSTRAINTS


@dataclass(frozen=True, slots=True)
class Spec:
    """A validated spec: the tables, the parsed TOML it came from and its hash."""

    run: RunConfig
    endpoints: tuple[EndpointConfig, ...]
    design: DesignConfig
    raw: dict[str, Any]  # the TOML as parsed (contains no secrets: keys live in the environment)
    source: str  # file name, for messages

    @property
    def spec_hash(self) -> str:
        """16-hex-digit SHA-256 of the canonical JSON of the parsed TOML (formatting and comments ignored)."""
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True).encode()).hexdigest()[:16]

    def endpoint(self, name: str) -> EndpointConfig:
        """The endpoint called ``name``."""
        for endpoint in self.endpoints:
            if endpoint.name == name:
                return endpoint
        raise KeyError(name)


def load_spec(path: str | Path) -> Spec:
    """Read and validate the TOML spec at ``path``; raises ``SpecError`` naming file, key and value."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read spec: {exc.strerror}") from None
    return parse_spec(text, source=str(path))


def parse_spec(text: str, *, source: str = "<spec>") -> Spec:
    """Validate TOML ``text`` as a spec; ``source`` names it in error messages."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: invalid TOML: {exc}") from None
    return spec_from_dict(raw, source=source)


def spec_from_dict(raw: dict[str, Any], *, source: str = "<spec>") -> Spec:
    """Validate an already-parsed spec (e.g. the copy in a run manifest); ``source`` names it in errors."""
    v = _Validator(source)
    v.keys(raw, "", {"run", "endpoints", "design"}, required={"run", "endpoints", "design"})
    run = _run(v, raw["run"])
    endpoints_raw = raw["endpoints"]
    if not isinstance(endpoints_raw, list) or not endpoints_raw:
        v.fail("endpoints", endpoints_raw, "one or more [[endpoints]] tables")
    endpoints = tuple(_endpoint(v, f"endpoints[{i}]", e) for i, e in enumerate(endpoints_raw))
    names = [e.name for e in endpoints]
    for i, name in enumerate(names):
        if name in names[:i]:
            v.fail(f"endpoints[{i}].name", name, "a name no other endpoint uses")
    design = _design(v, raw["design"])
    _check_constraints(v, endpoints, design)
    return Spec(run=run, endpoints=endpoints, design=design, raw=raw, source=source)


def _check_constraints(v: _Validator, endpoints: tuple[EndpointConfig, ...], d: DesignConfig) -> None:
    """Constrained decoding needs an OpenAI-compatible endpoint, item mode and a reply format it can produce."""
    for kind in d.constraints:
        if kind == "none":
            continue
        for i, e in enumerate(endpoints):
            if e.provider not in CONSTRAINT_PROVIDERS:
                v.fail(
                    f"endpoints[{i}].provider",
                    e.provider,
                    f"{' or '.join(CONSTRAINT_PROVIDERS)} when design.constraint includes {kind!r} "
                    '(this API has no grammar/response_format; use constraint = "none")',
                )
        if d.mode != "item":
            v.fail("design.constraint", kind, f'"none" in {d.mode} mode (constraints admit one item\'s answer)')
        for fmt in d.reply_formats:
            if fmt not in CONSTRAINT_FORMATS[kind]:
                v.fail(
                    "design.constraint",
                    kind,
                    f'"none" with reply_format {fmt!r} ({kind!r} produces '
                    f"only reply_format {' or '.join(repr(f) for f in CONSTRAINT_FORMATS[kind])})",
                )


def _run(v: _Validator, t: Any) -> RunConfig:
    v.keys(
        t,
        "run",
        {"name", "seed", "reference", "batch_rows", "flush_interval_s", "determinism_probe"},
        required={"name"},
    )
    d = _Defaults(RunConfig)
    return RunConfig(
        name=v.string(t, "run", "name"),
        seed=v.integer(t, "run", "seed", d.seed, minimum=0),
        reference=v.string(t, "run", "reference", d.reference),
        batch_rows=v.integer(t, "run", "batch_rows", d.batch_rows, minimum=1),
        flush_interval_s=v.number(t, "run", "flush_interval_s", d.flush_interval_s, positive=True),
        determinism_probe=v.boolean(t, "run", "determinism_probe", d.determinism_probe),
    )


def _endpoint(v: _Validator, where: str, t: Any) -> EndpointConfig:
    fields = set(EndpointConfig.__dataclass_fields__)
    if isinstance(t, dict) and "api_key" in t:
        v.fail(f"{where}.api_key", "<hidden>", "no key in a spec: name its environment variable in api_key_env")
    v.keys(t, where, fields, required={"name", "provider", "base_url", "model"})
    provider = v.string(t, where, "provider")
    if provider not in PROVIDERS:
        v.fail(f"{where}.provider", provider, f"one of {', '.join(PROVIDERS)}")
    base_url = v.string(t, where, "base_url")
    if not base_url.startswith(("http://", "https://")):
        v.fail(f"{where}.base_url", base_url, "an http:// or https:// URL")
    d = _Defaults(EndpointConfig)
    return EndpointConfig(
        name=v.string(t, where, "name"),
        provider=provider,
        base_url=base_url.rstrip("/"),
        model=v.string(t, where, "model"),
        api_key_env=v.string(t, where, "api_key_env", None),
        requests_per_minute=v.integer(t, where, "requests_per_minute", None, minimum=1),
        tokens_per_minute=v.integer(t, where, "tokens_per_minute", None, minimum=1),
        burst=v.integer(t, where, "burst", None, minimum=1),
        rate_window_s=v.number(t, where, "rate_window_s", d.rate_window_s, positive=True),
        max_concurrency=v.integer(t, where, "max_concurrency", d.max_concurrency, minimum=1),
        timeout_s=v.number(t, where, "timeout_s", d.timeout_s, positive=True),
        max_retries=v.integer(t, where, "max_retries", d.max_retries, minimum=0),
        price_input_per_1k=v.number(t, where, "price_input_per_1k", None),
        price_output_per_1k=v.number(t, where, "price_output_per_1k", None),
    )


def _design(v: _Validator, t: Any) -> DesignConfig:
    w = "design"
    allowed = {
        "mode",
        "languages",
        "personas",
        "identities",
        "no_persona",
        "questions",
        "shuffle_options",
        "reply_format",
        "seeds",
        "temperature",
        "top_p",
        "max_tokens",
        "constraint",
    }
    v.keys(t, w, allowed)
    d = DesignConfig()
    mode = v.string(t, w, "mode", d.mode)
    if mode not in MODES:
        v.fail("design.mode", mode, f"one of {', '.join(MODES)}")
    identities = None
    if "identities" in t:
        it = t["identities"]
        iw = "design.identities"
        v.keys(it, iw, {"countries", "genders", "ages"}, required={"countries"})
        genders = v.strings(it, iw, "genders", GENDERS)
        for g in genders:
            if g not in GENDERS:
                v.fail(f"{iw}.genders", g, f"one of {', '.join(GENDERS)}")
        identities = Identities(
            countries=v.strings(it, iw, "countries"),
            genders=genders,
            ages=v.many(it, iw, "ages", (25, 45, 65), lambda x: _is_int(x) and 0 < x < 130, "ages in years 1-129"),
        )
    questions = v.many(t, w, "questions", QUESTIONS, lambda x: _is_int(x) and 1 <= x <= 24, "question numbers 1-24")
    return DesignConfig(
        mode=mode,
        languages=v.strings(t, w, "languages", d.languages),
        personas=v.strings(t, w, "personas", ()),
        identities=identities,
        no_persona=v.boolean(t, w, "no_persona", d.no_persona),
        questions=tuple(sorted(questions)),
        shuffle_options=v.boolean(t, w, "shuffle_options", d.shuffle_options),
        reply_formats=v.strings(t, w, "reply_format", d.reply_formats),
        seeds=v.many(t, w, "seeds", d.seeds, lambda x: _is_int(x) and x >= 0, "integers >= 0"),
        temperature=tuple(
            float(x)
            for x in v.many(
                t, w, "temperature", d.temperature, lambda x: _is_num(x) and 0 <= x <= 2, "numbers in [0, 2]"
            )
        ),
        top_p=tuple(
            float(x) for x in v.many(t, w, "top_p", d.top_p, lambda x: _is_num(x) and 0 <= x <= 1, "numbers in [0, 1]")
        ),
        max_tokens=v.many(t, w, "max_tokens", d.max_tokens, lambda x: _is_int(x) and x >= 1, "integers >= 1"),
        constraints=v.many(
            t, w, "constraint", d.constraints, lambda x: x in CONSTRAINTS, f"one of {', '.join(CONSTRAINTS)}"
        ),
    )


class _Defaults:
    """Attribute access to a dataclass's field defaults (slots dataclasses hide them on the class)."""

    def __init__(self, cls: type) -> None:
        self._fields = cls.__dataclass_fields__

    def __getattr__(self, name: str) -> Any:
        return self._fields[name].default


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


class _Validator:
    """Typed getters that raise ``SpecError`` naming source, dotted key, value and what is allowed."""

    _MISSING = object()

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, value: Any, allowed: str) -> None:
        raise SpecError(f"{self.source}: {key} = {value!r}: must be {allowed}")

    def keys(self, table: Any, where: str, allowed: set[str], required: set[str] = frozenset()) -> None:
        if not isinstance(table, dict):
            self.fail(where, table, "a table")
        for key in table:
            if key not in allowed:
                self.fail(
                    f"{where}.{key}".lstrip("."), table[key], f"a known key (one of {', '.join(sorted(allowed))})"
                )
        for key in sorted(required - set(table)):
            raise SpecError(f"{self.source}: {where}.{key}: missing (required)".replace(": .", ": "))

    def _get(self, t: dict, where: str, key: str, default: Any, ok: Callable[[Any], bool], allowed: str) -> Any:
        value = t.get(key, self._MISSING)
        if value is self._MISSING:
            return default
        if not ok(value):
            self.fail(f"{where}.{key}", value, allowed)
        return value

    def string(self, t: dict, where: str, key: str, default: Any = _MISSING) -> Any:
        return self._get(t, where, key, default, lambda x: isinstance(x, str) and x != "", "a non-empty string")

    def boolean(self, t: dict, where: str, key: str, default: bool) -> bool:
        return self._get(t, where, key, default, lambda x: isinstance(x, bool), "true or false")

    def integer(self, t: dict, where: str, key: str, default: Any, minimum: int) -> Any:
        return self._get(t, where, key, default, lambda x: _is_int(x) and x >= minimum, f"an integer >= {minimum}")

    def number(self, t: dict, where: str, key: str, default: Any, positive: bool = False) -> Any:
        ok = (lambda x: _is_num(x) and x > 0) if positive else (lambda x: _is_num(x) and x >= 0)
        value = self._get(t, where, key, default, ok, "a number > 0" if positive else "a number >= 0")
        return None if value is None else float(value)

    def many(self, t: dict, where: str, key: str, default: Any, ok: Callable[[Any], bool], allowed: str) -> tuple:
        """A scalar or a non-empty list of distinct values, each satisfying ``ok``; always a tuple."""
        value = t.get(key, self._MISSING)
        if value is self._MISSING:
            return tuple(default)
        items = value if isinstance(value, list) else [value]
        if not items:
            self.fail(f"{where}.{key}", value, f"a non-empty list of {allowed}")
        for item in items:
            if not ok(item):
                self.fail(f"{where}.{key}", item, allowed)
        if len(set(items)) != len(items):
            self.fail(f"{where}.{key}", value, "a list without repeated values")
        return tuple(items)

    def strings(self, t: dict, where: str, key: str, default: Any = _MISSING) -> tuple[str, ...]:
        if default is self._MISSING and key not in t:
            raise SpecError(f"{self.source}: {where}.{key}: missing (required)")
        return self.many(t, where, key, default, lambda x: isinstance(x, str) and x != "", "non-empty strings")
