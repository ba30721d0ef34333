"""A sweep spec: TOML file → validated, typed, frozen config.

Every error names the file, the dotted key, the offending value and what is allowed, e.g.
``spec.toml: endpoints[1].provider = 'openia': must be one of anthropic, gemini, openai``. Unknown keys
are errors too (a typo must not silently fall back to a default). API keys never appear in a spec: an
endpoint names the environment variable that holds its key (``api_key_env``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import SpecError
from runner.survey.vocab import CONSTRAINTS, MEASUREMENTS, MODES, OPTION_LABELS, PROVIDERS, QUESTIONS

GENDERS = ("female", "male")
# The reply formats each constraint can produce: the grammar admits one bare digit, the schema one JSON object.
CONSTRAINT_FORMATS = {"grammar": ("number", "fewshot"), "json_schema": ("json",), "choice": ("number", "fewshot")}
CONSTRAINT_PROVIDERS = ("openai",)  # OpenAI-compatible servers take grammar/response_format; others cannot
# The distribution measurement reads the first reply token, so the reply must start with the option's label.
DISTRIBUTION_FORMATS = ("number", "fewshot")
# The verbalized measurement's instruction replaces the reply format's, so it takes the formats that ask for one
# answer in so many words (never free text or a few-shot example of a bare number).
VERBALIZED_FORMATS = ("number", "json")
VERBALIZED_MIN_TOKENS = 40  # {"1": 0.05, "2": 0.25, "3": 0.4, "4": 0.2, "5": 0.1} is ~35 tokens
OPTION_ORDERS = ("given", "reversed", "shuffled")  # ``design.option_order``: a bias control (docs/measurement.md)
# What the store's columns hold (runner/rundir/schema.py): seeds are int64, max_tokens and attempts int32. An
# integer past them would be sent, then fail the part's write and lose the batch, so the spec refuses it.
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
# Requests in flight per endpoint: one asyncio worker and one pooled connection each, so a typo of 10**10
# must not make 10**10 workers (the largest local servers batch a few thousand requests at once).
MAX_CONCURRENCY = 10_000
_SHOWN = 200  # characters of a refused value quoted in its error
SEED_PROVIDER_MAX = {"gemini": INT32_MAX}  # generationConfig.seed is an int32 in Gemini's API


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The ``[run]`` table: name, master seed, reference set and store batching."""

    name: str
    seed: int = 1  # master seed: every derived seed (option shuffles) comes from it and is recorded
    reference: str = "hofstede-2015"  # reference score set the run is compared against (recorded)
    # rows buffered before a Parquet part is committed: each commit costs ~9 ms whatever its size (three Parquet
    # files of 45 columns, fsyncs, the parse stage's set-up), so 1,000-row parts doubled the flush's CPU per reply
    # (15-16 against 7-8 µs at 5,000; benches/RESULTS.md, stop 40) for ~20 MB less peak RSS
    batch_rows: int = 5000
    flush_interval_s: float = 10.0  # ... or after this many seconds, whichever comes first
    determinism_probe: bool = False  # probe every OpenAI-compatible endpoint's seed handling before the sweep
    cache: str | None = None  # shared response cache directory (runner/sweep/cache.py); None: HOFCAT_CACHE or none
    cache_force: bool = False  # also serve requests that are not determined (temperature > 0, seed not honoured)


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
    burst: int | None = None  # most requests in any 1 s, unpaced; None: admissions paced evenly over the window
    rate_window_s: float = 60.0  # the window the per-minute limits count over (shorten only to test)
    max_concurrency: int = 16
    timeout_s: float = 60.0  # per attempt
    max_retries: int = 6  # attempts after the first
    max_retry_wait_s: float = 300.0  # cap on a server-requested wait (Retry-After); longer asks are cut, noted
    stop_after_fatal: int = 5  # consecutive 401/403/404 replies or connection failures that stop the endpoint
    price_input_per_1k: float | None = None  # currency units per 1,000 input tokens
    price_output_per_1k: float | None = None  # currency units per 1,000 output tokens
    max_reply_bytes: int = 8 * 1024 * 1024  # decoded reply bodies past this are failures (OversizeReply)
    max_tokens_field: str = "auto"  # OpenAI: max_tokens | max_completion_tokens | auto (docs/runner.md)
    extra_headers: dict[str, str] = field(default_factory=dict, hash=False)  # no credentials (manifest)
    extra_body: dict[str, Any] = field(default_factory=dict, hash=False)  # merged under hofcat's body
    execution: str = "online"  # online | batch (the provider's batch API: runner/sweep/batch_run.py)
    batch_poll_s: float = 30.0  # seconds between polls of submitted batches
    max_batch_requests: int = 50_000  # requests per provider batch (also capped by the provider's own limit)
    max_batch_bytes: int = 200 * 1024 * 1024  # request bytes per provider batch (likewise)
    base_urls: tuple[str, ...] = ()  # replicas serving the same model (runner/sweep/replicas.py); () = base_url only
    replica_limits: str = "endpoint"  # endpoint: limits shared by all replicas (one key) | replica: each its own
    # models the replies may name besides ``model`` and its snapshots (runner/survey/models.py); "*": any.
    # A reply naming another model stops the endpoint: the model asked for is the model measured.
    served_models: tuple[str, ...] = ()

    @property
    def rate_limited(self) -> bool:
        """Whether any request, token or burst limit is set (each is None when unlimited)."""
        return any(x is not None for x in (self.requests_per_minute, self.tokens_per_minute, self.burst))


@dataclass(frozen=True, slots=True)
class Identities:
    """``[design.identities]``: simulated respondents = countries × genders × ages."""

    countries: tuple[str, ...]
    genders: tuple[str, ...] = GENDERS
    ages: tuple[int, ...] = (25, 45, 65)


@dataclass(frozen=True, slots=True)
class DesignConfig:
    """The ``[design]`` table: the factors whose product is the plan."""

    modes: tuple[str, ...] = ("item",)  # ``design.mode``: one or both of item, survey (a factor like any other)
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
    measurements: tuple[str, ...] = ("sample",)  # ``design.measurement``: runner.survey.vocab.MEASUREMENTS
    samples_per_cell: int = 5  # K replies per distribution cell where the API has no log-probabilities
    top_logprobs: int = 20  # alternatives asked for per token by the distribution measurement (APIs cap at 20)
    option_labels: tuple[str, ...] = ("digits",)  # ``design.option_labels``: runner.survey.vocab.OPTION_LABELS
    option_orders: tuple[str, ...] = ("given",)  # ``design.option_order``: OPTION_ORDERS; shuffle_options = shuffled


@dataclass(frozen=True, slots=True)
class Spec:
    """A validated spec: the tables, the parsed TOML it came from and its hash."""

    run: RunConfig
    endpoints: tuple[EndpointConfig, ...]
    design: DesignConfig
    raw: dict[str, Any]  # the TOML as parsed (contains no secrets: keys live in the environment)
    source: str  # file name, for messages
    # endpoint name → its design where ``[endpoints.design]`` overrides keys of ``[design]``
    overrides: dict[str, DesignConfig] = field(default_factory=dict)

    @property
    def spec_hash(self) -> str:
        """16-hex-digit SHA-256 of the canonical JSON of the parsed TOML (formatting and comments ignored)."""
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True).encode()).hexdigest()[:16]

    def design_for(self, endpoint: EndpointConfig) -> DesignConfig:
        """The design ``endpoint``'s cells follow: ``[design]`` with its ``[endpoints.design]`` keys replaced."""
        return self.overrides.get(endpoint.name, self.design)

    def design_key(self, endpoint: EndpointConfig) -> str:
        """Where ``endpoint``'s design is written, for messages: ``design`` or ``endpoints[i].design``."""
        if endpoint.name not in self.overrides:
            return "design"
        return f"endpoints[{[e.name for e in self.endpoints].index(endpoint.name)}].design"

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
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{path}: cannot read spec: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})"
        ) from None
    return parse_spec(text, source=str(path))


def parse_spec(text: str, *, source: str = "<spec>") -> Spec:
    """Validate TOML ``text`` as a spec; ``source`` names it in error messages."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nesting level: thousands of [[[[ exhaust the stack
        raise SpecError(f"{source}: invalid TOML: arrays or tables nested too deeply") from None
    return spec_from_dict(raw, source=source)


def spec_from_dict(raw: dict[str, Any], *, source: str = "<spec>") -> Spec:
    """Validate an already-parsed spec (e.g. the copy in a run manifest); ``source`` names it in errors."""
    v = _Validator(source)
    v.keys(raw, "", {"run", "endpoints", "design", "report"}, required={"run", "endpoints", "design"})
    _report(v, raw.get("report", {}))
    run = _run(v, raw["run"])
    endpoints_raw = raw["endpoints"]
    if not isinstance(endpoints_raw, list) or not endpoints_raw:
        v.fail("endpoints", endpoints_raw, "one or more [[endpoints]] tables")
    # ``[endpoints.design]`` is read apart from the endpoint's own fields (_design_overrides)
    endpoints = tuple(
        _endpoint(v, f"endpoints[{i}]", {k: x for k, x in e.items() if k != "design"} if isinstance(e, dict) else e)
        for i, e in enumerate(endpoints_raw)
    )
    names = [e.name for e in endpoints]
    for i, name in enumerate(names):
        if name in names[:i]:
            v.fail(f"endpoints[{i}].name", name, "a name no other endpoint uses")
    design = _design(v, raw["design"])
    overrides = _design_overrides(source, endpoints_raw, endpoints, raw["design"])
    for i, e in enumerate(endpoints):  # every endpoint against the design it follows, errors named there
        d = overrides.get(e.name, design)
        dv = v if d is design else _Scoped(source, f"endpoints[{i}].")
        _check_constraints(dv, ((i, e),), d)
        _check_measurements(dv, d)
        _check_labels(dv, d)
        _check_provider_ranges(dv, ((i, e),), d)
        _check_seed_range(dv, i, e, d)
    return Spec(run=run, endpoints=endpoints, design=design, raw=raw, source=source, overrides=overrides)


def _report(v: _Validator, t: Any) -> None:
    """``[report]``: ``facets``, the one or two factors the report's small multiples are split by (the report
    reads it from the manifest's copy of the spec; ``hofcat report --facets`` overrides it)."""
    v.keys(t, "report", {"facets"})
    facets = t.get("facets", [])
    if not isinstance(facets, list) or len(facets) > 2 or not all(isinstance(f, str) and f for f in facets):
        v.fail("report.facets", facets, "a list of at most two factor names")


def _design_overrides(
    source: str, endpoints_raw: list[Any], endpoints: tuple[EndpointConfig, ...], design_raw: dict[str, Any]
) -> dict[str, DesignConfig]:
    """Endpoint name → its design, for endpoints with an ``[endpoints.design]`` table (keys replace ``[design]``'s)."""
    out = {}
    for i, (table, e) in enumerate(zip(endpoints_raw, endpoints, strict=True)):
        if "design" in table:
            scoped = _Scoped(source, f"endpoints[{i}].")
            scoped.keys(table["design"], "design", set(DESIGN_KEYS))
            out[e.name] = _design(scoped, {**design_raw, **table["design"]})
    return out


def _check_seed_range(v: _Validator, i: int, e: EndpointConfig, d: DesignConfig) -> None:
    """Seeds a provider's API holds in a narrower integer than the store (Gemini: int32)."""
    top = SEED_PROVIDER_MAX.get(e.provider)
    for seed in d.seeds if top is not None else ():
        if seed > top:
            v.fail(
                "design.seeds", seed, f"integers 0-{top} for {e.provider} endpoints[{i}] ({e.name!r}): its API's int32"
            )


def _check_constraints(v: _Validator, endpoints: tuple[tuple[int, EndpointConfig], ...], d: DesignConfig) -> None:
    """Constrained decoding needs an OpenAI-compatible endpoint, item mode and a reply format it can produce.

    ``endpoints``: (index in the spec, endpoint) pairs of the endpoints that follow ``d``.
    """
    for kind in d.constraints:
        if kind == "none":
            continue
        for i, e in endpoints:
            if e.provider not in CONSTRAINT_PROVIDERS:
                v.fail(
                    f"endpoints[{i}].provider",
                    e.provider,
                    f"{' or '.join(CONSTRAINT_PROVIDERS)} when design.constraint includes {kind!r} "
                    '(this API has no grammar/response_format; use constraint = "none")',
                )
        for mode in d.modes:
            if mode != "item":
                v.fail("design.constraint", kind, f'"none" in {mode} mode (constraints admit one item\'s answer)')
        for fmt in d.reply_formats:
            if fmt not in CONSTRAINT_FORMATS[kind]:
                v.fail(
                    "design.constraint",
                    kind,
                    f'"none" with reply_format {fmt!r} ({kind!r} produces '
                    f"only reply_format {' or '.join(repr(f) for f in CONSTRAINT_FORMATS[kind])})",
                )


def _check_labels(v: _Validator, d: DesignConfig) -> None:
    """Letters and words replace the option's number: item mode, the bare ``number`` reply, first-token readable."""
    for labels in d.option_labels:
        if labels == "digits":
            continue
        for mode in d.modes:
            if mode != "item":
                v.fail("design.option_labels", labels, f'"digits" in {mode} mode (other labels are item-mode only)')
        for fmt in d.reply_formats:
            if fmt != "number":
                v.fail("design.option_labels", labels, f"\"digits\" with reply_format {fmt!r} (others need 'number')")
        for kind in d.constraints:
            if kind != "none":  # the grammar and vLLM's choice admit digits only
                v.fail("design.option_labels", labels, f'"digits" with constraint {kind!r} (it admits only 1-5)')
        if labels == "words" and "distribution" in d.measurements:
            v.fail(
                "design.option_labels",
                labels,
                '"digits" or "letters" with measurement "distribution" (a first word does not name one option)',
            )


def _check_measurements(v: _Validator, d: DesignConfig) -> None:
    """The distribution measurement reads one item's first reply token: item mode, a reply that starts with it;
    the verbalized one asks for one item's options' probabilities keyed by their shown labels."""
    if "verbalized" in d.measurements:
        _check_verbalized(v, d)
    if "distribution" not in d.measurements:
        return
    for mode in d.modes:
        if mode != "item":
            v.fail("design.measurement", "distribution", f'"sample" in {mode} mode (a distribution is one item\'s)')
    for fmt in d.reply_formats:
        if fmt not in DISTRIBUTION_FORMATS:
            v.fail(
                "design.measurement",
                "distribution",
                f'"sample" with reply_format {fmt!r} (the distribution is read from the first reply token: '
                f"reply_format {' or '.join(repr(f) for f in DISTRIBUTION_FORMATS)})",
            )


def _check_verbalized(v: _Validator, d: DesignConfig) -> None:
    """Verbalized: item mode, labels to key the probabilities by, a constraint that admits a JSON object, room
    for the object in max_tokens, and a reply format whose instruction it replaces (docs/measurement.md)."""
    for mode in d.modes:
        if mode != "item":
            v.fail("design.measurement", "verbalized", f'"sample" in {mode} mode (the probabilities are one item\'s)')
    if "words" in d.option_labels:
        v.fail("design.option_labels", "words", '"digits" or "letters" with measurement "verbalized" (no key)')
    if "choice" in d.constraints:
        v.fail("design.constraint", "choice", '"none", "grammar" or "json_schema" with measurement "verbalized"')
    for fmt in d.reply_formats:
        if fmt not in VERBALIZED_FORMATS:
            v.fail(
                "design.measurement",
                "verbalized",
                f'"sample" with reply_format {fmt!r} (the verbalized instruction replaces the reply format\'s: '
                f"reply_format {' or '.join(repr(f) for f in VERBALIZED_FORMATS)})",
            )
    for cap in d.max_tokens:
        if cap < VERBALIZED_MIN_TOKENS:
            v.fail(
                "design.max_tokens",
                cap,
                f'at least {VERBALIZED_MIN_TOKENS} with measurement "verbalized" (five probabilities in JSON)',
            )


def _run(v: _Validator, t: Any) -> RunConfig:
    v.keys(
        t,
        "run",
        {"name", "seed", "reference", "batch_rows", "flush_interval_s", "determinism_probe", "cache", "cache_force"},
        required={"name"},
    )
    d = _Defaults(RunConfig)
    return RunConfig(
        name=v.string(t, "run", "name"),
        seed=v.integer(t, "run", "seed", d.seed, minimum=0),  # within int64: derive_seed's JSON, the manifest
        reference=v.string(t, "run", "reference", d.reference),
        batch_rows=v.integer(t, "run", "batch_rows", d.batch_rows, minimum=1),
        flush_interval_s=v.number(t, "run", "flush_interval_s", d.flush_interval_s, positive=True),
        determinism_probe=v.boolean(t, "run", "determinism_probe", d.determinism_probe),
        cache=v.string(t, "run", "cache", None),
        cache_force=v.boolean(t, "run", "cache_force", d.cache_force),
    )


def _endpoint(v: _Validator, where: str, t: Any) -> EndpointConfig:
    fields = set(EndpointConfig.__dataclass_fields__)
    if isinstance(t, dict) and "api_key" in t:
        v.fail(f"{where}.api_key", "<hidden>", "no key in a spec: name its environment variable in api_key_env")
    replicas = isinstance(t, dict) and "base_urls" in t  # base_url may then be left out: base_urls[0]
    v.keys(t, where, fields, required={"name", "provider", "model"} | (set() if replicas else {"base_url"}))
    provider = v.string(t, where, "provider")
    if provider not in PROVIDERS:
        v.fail(f"{where}.provider", provider, f"one of {', '.join(PROVIDERS)}")
    base_urls = _base_urls(v, where, t) if replicas else ()
    base_url = v.string(t, where, "base_url") if "base_url" in t else base_urls[0]
    _check_url(v, where, base_url)
    if base_urls and base_url.rstrip("/") not in base_urls:
        v.fail(f"{where}.base_url", base_url, "one of base_urls (the canonical replica), or left out")
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
        max_concurrency=v.integer(t, where, "max_concurrency", d.max_concurrency, minimum=1, maximum=MAX_CONCURRENCY),
        timeout_s=v.number(t, where, "timeout_s", d.timeout_s, positive=True),
        max_retries=v.integer(t, where, "max_retries", d.max_retries, minimum=0, maximum=INT32_MAX - 1),  # attempts
        max_retry_wait_s=v.number(t, where, "max_retry_wait_s", d.max_retry_wait_s, positive=True),
        stop_after_fatal=v.integer(t, where, "stop_after_fatal", d.stop_after_fatal, minimum=1),
        price_input_per_1k=v.number(t, where, "price_input_per_1k", None),
        price_output_per_1k=v.number(t, where, "price_output_per_1k", None),
        **_wire_options(v, where, t),
        **_execution_options(v, where, t, provider),
        base_urls=base_urls,
        replica_limits=_replica_limits(v, where, t, base_urls),
        served_models=v.strings(t, where, "served_models", ()),
    )


REPLICA_LIMITS = ("endpoint", "replica")


def _base_urls(v: _Validator, where: str, t: dict[str, Any]) -> tuple[str, ...]:
    """``base_urls``: distinct http(s) URLs without credentials, each checked like ``base_url``."""
    urls = t["base_urls"]
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        v.fail(f"{where}.base_urls", "<list>", "a non-empty list of http:// or https:// URL strings")
    out: list[str] = []
    for i, url in enumerate(urls):
        _check_url(v, where, url, f"base_urls[{i}]")
        if url.rstrip("/") in out:
            v.fail(f"{where}.base_urls[{i}]", url, "a URL not listed twice")
        out.append(url.rstrip("/"))
    if t.get("execution", "online") != "online":
        v.fail(f"{where}.base_urls", "<list>", 'absent with execution = "batch" (a provider batch has one host)')
    return tuple(out)


def _replica_limits(v: _Validator, where: str, t: dict[str, Any], base_urls: tuple[str, ...]) -> str:
    """``replica_limits``: endpoint (one key's limits over all replicas) or replica (each replica its own)."""
    value = v.string(t, where, "replica_limits", "endpoint")
    if value not in REPLICA_LIMITS:
        v.fail(f"{where}.replica_limits", value, f"one of {', '.join(REPLICA_LIMITS)}")
    if value != "endpoint" and not base_urls:
        v.fail(f"{where}.replica_limits", value, "set only with base_urls")
    return value


EXECUTIONS = ("online", "batch")
BATCH_PROVIDERS = ("openai", "anthropic", "gemini")


def _execution_options(v: _Validator, where: str, t: dict[str, Any], provider: str) -> dict[str, Any]:
    """``execution`` (online, or batch where the provider has a batch API) and the batch settings, checked."""
    d = _Defaults(EndpointConfig)
    execution = v.string(t, where, "execution", d.execution)
    if execution not in EXECUTIONS:
        v.fail(f"{where}.execution", execution, f"one of {', '.join(EXECUTIONS)}")
    if execution == "batch" and provider not in BATCH_PROVIDERS:
        v.fail(
            f"{where}.execution", execution, f"online for provider {provider!r} (batch: {', '.join(BATCH_PROVIDERS)})"
        )
    return {
        "execution": execution,
        "batch_poll_s": v.number(t, where, "batch_poll_s", d.batch_poll_s, positive=True),
        "max_batch_requests": v.integer(t, where, "max_batch_requests", d.max_batch_requests, minimum=1),
        "max_batch_bytes": v.integer(t, where, "max_batch_bytes", d.max_batch_bytes, minimum=1024),
    }


MAX_TOKENS_FIELDS = ("auto", "max_tokens", "max_completion_tokens")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token
# Headers hofcat sets itself, and words that mark a credential: extra_headers are copied into manifest.json.
_RESERVED_HEADERS = frozenset({"content-type", "content-length", "host", "transfer-encoding", "connection"})
_CREDENTIAL_WORDS = ("auth", "key", "token", "secret", "cookie", "password", "session")


def _check_url(v: _Validator, where: str, url: str, key: str = "base_url") -> None:
    """Refuse ``url`` unless it is an http(s) URL that can be sent as it is: no credentials (checked first: the
    other messages quote the URL), no whitespace or control characters, a host, a port in 1-65535."""
    from yarl import URL

    _check_no_credentials_in_url(v, where, url, key)
    if not url.startswith(("http://", "https://")):
        v.fail(f"{where}.{key}", url, "an http:// or https:// URL")
    if any(c.isspace() or not c.isprintable() for c in url):
        v.fail(f"{where}.{key}", url, "a URL without spaces or control characters (percent-encode them)")
    try:
        parsed = URL(url)
        port = parsed.port
    except ValueError as exc:
        v.fail(f"{where}.{key}", url, f"a URL that parses ({exc})")
    if not parsed.host or not port:
        v.fail(f"{where}.{key}", url, "a URL with a host and a port in 1-65535")


def _check_no_credentials_in_url(v: _Validator, where: str, base_url: str, key: str = "base_url") -> None:
    """Refuse a base_url with user info, a query or a fragment (a ``?key=`` would reach manifest.json)."""
    scheme, _, rest = base_url.partition("://")
    kept = re.split(r"[?#]", rest, maxsplit=1)[0]  # without query and fragment
    authority, slash, path = kept.partition("/")
    if "@" in authority or len(kept) < len(rest):
        shown = f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}<hidden>"
        raise SpecError(
            f"{v.source}: {where}.{key} = {shown!r}: must be a URL without user:password@, query or fragment "
            "(a key there would be copied into manifest.json; name its environment variable in api_key_env)"
        )


def _wire_options(v: _Validator, where: str, t: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's ``max_reply_bytes``, ``max_tokens_field``, ``extra_headers`` and ``extra_body``, checked."""
    d = _Defaults(EndpointConfig)
    tokens_field = v.string(t, where, "max_tokens_field", d.max_tokens_field)
    if tokens_field not in MAX_TOKENS_FIELDS:
        v.fail(f"{where}.max_tokens_field", tokens_field, f"one of {', '.join(MAX_TOKENS_FIELDS)}")
    headers = t.get("extra_headers", {})
    if not isinstance(headers, dict):
        v.fail(f"{where}.extra_headers", "<hidden>", "a table of header names to string values")
    for name, value in headers.items():
        key, lower = f"{where}.extra_headers.{name}", name.lower()
        if not _HEADER_NAME.fullmatch(name) or lower in _RESERVED_HEADERS:
            v.fail(key, "<hidden>", "a header name hofcat does not set itself (not Content-Type, Host, ...)")
        if any(word in lower for word in _CREDENTIAL_WORDS):
            v.fail(key, "<hidden>", "a header without credentials (keys come from api_key_env, never the spec)")
        if not isinstance(value, str) or not (value.isascii() and value.isprintable()):
            v.fail(key, "<hidden>", "a printable ASCII string (one line)")
    body = t.get("extra_body", {})
    try:
        ok = isinstance(body, dict) and bool(json.dumps(body, allow_nan=False))
    except (TypeError, ValueError):  # TOML dates and times have no JSON form
        ok = False
    if not ok:
        v.fail(f"{where}.extra_body", "<hidden>", "a table of JSON values (no dates or times)")
    return {
        "max_reply_bytes": v.integer(t, where, "max_reply_bytes", d.max_reply_bytes, minimum=1024),
        "max_tokens_field": tokens_field,
        "extra_headers": dict(headers),
        "extra_body": dict(body),
    }


def _check_provider_ranges(v: _Validator, endpoints: tuple[tuple[int, EndpointConfig], ...], d: DesignConfig) -> None:
    """Anthropic's Messages API takes temperature in [0, 1], and temperature or top_p, never both.

    hofcat sends top_p (alone) only where temperature is 1.0, the API's default, so a design pairing a
    top_p below 1 with another temperature cannot be sent as written and is refused.
    """
    for i, e in endpoints:
        if e.provider != "anthropic":
            continue
        for x in d.temperature:
            if x > 1:
                v.fail("design.temperature", x, f"at most 1 for anthropic endpoints[{i}] ({e.name!r})")
        if any(p != 1.0 for p in d.top_p) and any(x != 1.0 for x in d.temperature):
            v.fail(
                "design.top_p",
                next(p for p in d.top_p if p != 1.0),
                f"1.0 for anthropic endpoints[{i}] ({e.name!r}) unless temperature = 1.0 "
                "(the API takes temperature or top_p, not both)",
            )


DESIGN_KEYS = (
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
    "measurement",
    "samples_per_cell",
    "top_logprobs",
    "option_order",
    "option_labels",
)


def _design(v: _Validator, t: Any) -> DesignConfig:
    w = "design"
    v.keys(t, w, set(DESIGN_KEYS))
    d = DesignConfig()
    modes = v.many(t, w, "mode", d.modes, lambda x: x in MODES, f"one of {', '.join(MODES)}")
    identities = None
    if "identities" in t and t["identities"] is not False:  # false: none (an endpoint's design removing [design]'s)
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
    shuffle = v.boolean(t, w, "shuffle_options", d.shuffle_options)  # the older spelling of "shuffled"
    orders = ("shuffled",) if shuffle else d.option_orders
    option_orders = v.many(
        t, w, "option_order", orders, lambda x: x in OPTION_ORDERS, f"one of {', '.join(OPTION_ORDERS)}"
    )
    if shuffle and "shuffled" not in option_orders:
        v.fail("design.shuffle_options", True, 'false when design.option_order does not include "shuffled"')
    return DesignConfig(
        modes=modes,
        languages=v.strings(t, w, "languages", d.languages),
        personas=v.strings(t, w, "personas", ()),
        identities=identities,
        no_persona=v.boolean(t, w, "no_persona", d.no_persona),
        questions=tuple(sorted(questions)),
        shuffle_options="shuffled" in option_orders,
        reply_formats=v.strings(t, w, "reply_format", d.reply_formats),
        seeds=v.many(
            t, w, "seeds", d.seeds, lambda x: _is_int(x) and 0 <= x <= INT64_MAX, f"integers 0-{INT64_MAX} (int64)"
        ),
        temperature=tuple(
            float(x)
            for x in v.many(
                t, w, "temperature", d.temperature, lambda x: _is_num(x) and 0 <= x <= 2, "numbers in [0, 2]"
            )
        ),
        top_p=tuple(
            float(x) for x in v.many(t, w, "top_p", d.top_p, lambda x: _is_num(x) and 0 <= x <= 1, "numbers in [0, 1]")
        ),
        max_tokens=v.many(
            t,
            w,
            "max_tokens",
            d.max_tokens,
            lambda x: _is_int(x) and 1 <= x <= INT32_MAX,
            f"integers 1-{INT32_MAX} (int32)",
        ),
        constraints=v.many(
            t, w, "constraint", d.constraints, lambda x: x in CONSTRAINTS, f"one of {', '.join(CONSTRAINTS)}"
        ),
        measurements=v.many(
            t, w, "measurement", d.measurements, lambda x: x in MEASUREMENTS, f"one of {', '.join(MEASUREMENTS)}"
        ),
        samples_per_cell=v.integer(t, w, "samples_per_cell", d.samples_per_cell, minimum=1),
        top_logprobs=v.integer(t, w, "top_logprobs", d.top_logprobs, minimum=1, maximum=20),
        option_orders=option_orders,
        option_labels=v.many(
            t, w, "option_labels", d.option_labels, lambda x: x in OPTION_LABELS, f"one of {', '.join(OPTION_LABELS)}"
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
    """A finite int or float, not a bool (an int past a float's range, 10**400, is not a number either)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    return math.isfinite(x) if isinstance(x, float) else abs(x) <= INT64_MAX


class _Validator:
    """Typed getters that raise ``SpecError`` naming source, dotted key, value and what is allowed."""

    _MISSING = object()

    def __init__(self, source: str) -> None:
        self.source = source

    def name(self, key: str) -> str:
        """The dotted key as the spec file spells it."""
        return key

    def fail(self, key: str, value: Any, allowed: str) -> None:
        try:
            shown = repr(value)
        except RecursionError:  # a 20,000-deep dotted key is a table nested as deep: shown by its depth
            shown = "<a table nested too deeply to show>"
        if len(shown) > _SHOWN:  # a 100,000-character value stays a one-line error a terminal can show
            shown = f"{shown[:_SHOWN]}… ({len(shown)} characters)"
        raise SpecError(f"{self.source}: {self.name(key)} = {shown}: must be {allowed}")

    def keys(self, table: Any, where: str, allowed: set[str], required: set[str] = frozenset()) -> None:
        if not isinstance(table, dict):
            self.fail(where, table, "a table")
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                self.fail(
                    f"{where}.{key}".lstrip("."),
                    table[key],
                    f"a known key{hint} (one of {', '.join(sorted(allowed))})",
                )
        for key in sorted(required - set(table)):
            raise SpecError(f"{self.source}: {self.name(f'{where}.{key}'.lstrip('.'))}: missing (required)")

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

    def integer(self, t: dict, where: str, key: str, default: Any, minimum: int, maximum: int | None = None) -> Any:
        if maximum is not None:
            ok = lambda x: _is_int(x) and minimum <= x <= maximum  # noqa: E731
            return self._get(t, where, key, default, ok, f"an integer {minimum}-{maximum}")
        # every integer the spec takes fits the store's int64 (a bigger one fails the part's write)
        ok = lambda x: _is_int(x) and minimum <= x <= INT64_MAX  # noqa: E731
        return self._get(t, where, key, default, ok, f"an integer >= {minimum} (at most {INT64_MAX}, int64)")

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
            raise SpecError(f"{self.source}: {self.name(f'{where}.{key}')}: missing (required)")
        return self.many(t, where, key, default, lambda x: isinstance(x, str) and x != "", "non-empty strings")


class _Scoped(_Validator):
    """A validator for one endpoint's ``[endpoints.design]``: design keys are named under ``prefix``."""

    def __init__(self, source: str, prefix: str) -> None:
        super().__init__(source)
        self.prefix = prefix  # "endpoints[i]."

    def name(self, key: str) -> str:
        """``design.x`` as ``endpoints[i].design.x``; other keys as they are."""
        return self.prefix + key if key.startswith("design") else key
