"""Design → cells: the lazy expansion of a spec into requests, each with a stable key.

A cell is one request: a ``PromptCell`` (what is asked), an endpoint (who is asked) and sampling parameters
(how it is answered). Its key is a hash of everything that defines the request, including the hash of the
templates that render it, so that a changed template or factor makes a new cell instead of reusing an
answer to a different prompt. Cells are generated lazily in a fixed order: a 10-million-cell plan costs no
memory until it is consumed.

Derived seeds: with ``shuffle_options``, a cell's option order is ``shuffled_order(shuffle_seed)`` where
``shuffle_seed`` is derived from the master seed and the cell's prompt factors and sampling seed (see
``derive_seed``); it is stored in every row.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from runner.errors import SpecError
from runner.survey.cell import CANONICAL_ORDER, Framing, PromptCell
from runner.sweep.spec import DesignConfig, EndpointConfig, Spec

KEY_HEX_DIGITS = 32
REVERSED_ORDER: tuple[int, ...] = tuple(reversed(CANONICAL_ORDER))  # design.option_order = "reversed"


@dataclass(frozen=True, slots=True)
class Sampling:
    """How a request is answered: sampling seed, temperature, nucleus mass, output cap (tokens), constraint."""

    seed: int
    temperature: float
    top_p: float
    max_tokens: int
    constraint: str = "none"  # constrained decoding kind (runner.sweep.spec.CONSTRAINTS)
    measurement: str = "sample"  # runner.survey.vocab.MEASUREMENTS
    top_logprobs: int = 0  # > 0: the request asks for this many next-token alternatives (distribution)
    draw: int | None = None  # distribution without log-probabilities: which of the K sampled replies (0-based)


@dataclass(slots=True)  # not frozen, never changed: one is made per cell sent, and a frozen __init__ costs ~3×
class PlannedCell:
    """One request of the plan: key, endpoint, prompt design, sampling and the derived shuffle seed."""

    key: str  # KEY_HEX_DIGITS hex digits of SHA-256 over the request's definition (see cell_key)
    endpoint: EndpointConfig
    prompt: PromptCell
    sampling: Sampling
    template_hash: str
    shuffle_seed: int | None  # None when options keep the canonical order


def derive_seed(master_seed: int, *parts: object) -> int:
    """A 63-bit seed from the master seed and labelled parts (SHA-256, platform-independent)."""
    text = json.dumps([master_seed, *parts], separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def cell_key(endpoint: EndpointConfig, prompt: PromptCell, sampling: Sampling, template_hash: str) -> str:
    """Stable hash of everything that defines a request (endpoint, model, prompt factors, templates, sampling).

    The SHA-256 of the compact JSON list [endpoint name, provider, model, language, mode, questions, framing
    kind, country, age, gender, option order, reply format, template hash, seed, temperature, top_p,
    max_tokens], followed by the constraint only when it is not "none" (so specs without constraints keep the
    keys they had before constraints existed), then, for the other measurements only, the measurement's name
    ("distribution", "verbalized"), top_logprobs (0 for verbalized) and the draw index of a K-sample fallback;
    first ``KEY_HEX_DIGITS`` hex digits.
    """
    return _key_with(_key_prefix(endpoint, prompt, template_hash), _sampling_json(sampling))


def _key_prefix(endpoint: EndpointConfig, prompt: PromptCell, template_hash: str) -> hashlib._Hash:
    """The hash state after the request-definition JSON up to the sampling fields (shared by many cells)."""
    f = prompt.framing
    head = [
        endpoint.name,
        endpoint.provider,
        endpoint.model,
        prompt.language,
        prompt.mode,
        list(prompt.questions),
        f.kind,
        f.country,
        f.age,
        f.gender,
        list(prompt.option_order),
        prompt.reply_format,
        template_hash,
    ]
    if prompt.labels != "digits":  # a factor at its default stays out of the key: old keys hold
        head.append(prompt.labels)
    return hashlib.sha256(json.dumps(head, separators=(",", ":"))[:-1].encode())


def _sampling_json(sampling: Sampling) -> bytes:
    """The sampling fields' tail of the request-definition JSON."""
    tail: list = [sampling.seed, sampling.temperature, sampling.top_p, sampling.max_tokens]
    if sampling.constraint != "none":
        tail.append(sampling.constraint)
    if sampling.measurement != "sample":  # a factor at its default stays out of the key: old keys hold
        tail.extend([sampling.measurement, sampling.top_logprobs])
        if sampling.measurement == "verbalized":  # its instruction is not in the prompt cell's template hash
            tail.append(_verbalized_hash())
        if sampling.draw is not None:
            tail.append(sampling.draw)
    return ("," + json.dumps(tail, separators=(",", ":"))[1:]).encode()


def _key_with(prefix: hashlib._Hash, tail: bytes) -> str:
    digest = prefix.copy()
    digest.update(tail)
    return digest.hexdigest()[:KEY_HEX_DIGITS]


def framings(spec: Spec, endpoint: EndpointConfig | None = None) -> tuple[Framing, ...]:
    """The design's framings in plan order: none (if asked), personas, then identities; countries canonical.

    With ``endpoint``, those of the design that endpoint follows (``Spec.design_for``).
    """
    from runner.survey.reference import resolve_country

    d = spec.design if endpoint is None else spec.design_for(endpoint)
    where = "design" if endpoint is None else spec.design_key(endpoint)
    out: list[Framing] = []
    if d.no_persona or (not d.personas and d.identities is None):
        out.append(Framing())

    def canonical(key: str, name: str) -> str:
        try:
            return resolve_country(name)
        except ValueError as exc:
            raise SpecError(f"{spec.source}: {where}.{key} = {name!r}: must be a known country ({exc})") from None

    out.extend(Framing("persona", canonical("personas", p)) for p in d.personas)
    if d.identities is not None:
        i = d.identities
        for country, gender, age in itertools.product(i.countries, i.genders, i.ages):
            out.append(Framing("identity", canonical("identities.countries", country), age, gender))
    if len(set(out)) != len(out):
        raise SpecError(f"{spec.source}: {where}: the personas/identities name the same country twice")
    return tuple(out)


def question_sets(
    spec: Spec, endpoint: EndpointConfig | None = None, mode: str | None = None
) -> tuple[tuple[int, ...], ...]:
    """One question per cell in item mode; all chosen questions together in survey mode.

    ``mode`` defaults to the design's first; ``endpoint`` picks the design that endpoint follows.
    """
    d = spec.design if endpoint is None else spec.design_for(endpoint)
    qs = d.questions
    return tuple((q,) for q in qs) if (mode or d.modes[0]) == "item" else (qs,)


def factor_counts(spec: Spec) -> dict[str, int]:
    """Levels per factor over the whole plan, in plan order.

    Their product is the number of cells when the plan is one grid (one mode, one design for every endpoint,
    no K-sample fallback); ``count_cells`` is exact always. ``questions`` counts question sets: one per item,
    one per survey (so with both modes, questions nest in modes rather than multiply).
    """
    designs = [spec.design_for(e) for e in spec.endpoints]

    def levels(get) -> int:
        return len({x for d in designs for x in get(d)})

    modes = levels(lambda d: d.modes)
    sets = {qs for e in spec.endpoints for m in spec.design_for(e).modes for qs in question_sets(spec, e, m)}
    return {
        "endpoints": len(spec.endpoints),
        # listed only when the spec sets them, so the plan of a spec without them reads as before
        **({"modes": modes} if modes > 1 else {}),
        "languages": levels(lambda d: d.languages),
        "framings": len({f for e in spec.endpoints for f in framings(spec, e)}),
        "questions": len(sets),
        "reply_formats": levels(lambda d: d.reply_formats),
        "seeds": levels(lambda d: d.seeds),
        "temperature": levels(lambda d: d.temperature),
        "top_p": levels(lambda d: d.top_p),
        "max_tokens": levels(lambda d: d.max_tokens),
        "constraints": levels(lambda d: d.constraints),
        **({"option_orders": levels(lambda d: d.option_orders)} if levels(lambda d: d.option_orders) > 1 else {}),
        **({"option_labels": levels(lambda d: d.option_labels)} if levels(lambda d: d.option_labels) > 1 else {}),
        **(
            {"measurements": levels(lambda d: d.measurements)}
            if any(d.measurements != ("sample",) for d in designs)
            else {}
        ),
    }


def count_cells(spec: Spec) -> int:
    """Number of cells in the plan, by arithmetic over factor sizes (no cell is generated)."""
    return sum(endpoint_cell_count(spec, e) for e in spec.endpoints)


def prompt_count(spec: Spec, endpoint: EndpointConfig) -> int:
    """Distinct prompts (before option shuffles) of one endpoint: modes' question sets × languages × framings × ..."""
    d = spec.design_for(endpoint)
    sets = sum(len(question_sets(spec, endpoint, m)) for m in d.modes)
    per_set = len(d.languages) * len(framings(spec, endpoint)) * len(d.reply_formats) * len(d.option_orders)
    return sets * per_set * len(d.option_labels)


def sampling_count(d: DesignConfig, provider: str) -> int:
    """``len(_samplings(d, provider))`` by arithmetic: the sampling grid, K draws per fallback distribution cell."""
    from runner.sweep.providers.logprobs import supports_logprobs

    grid = len(d.seeds) * len(d.temperature) * len(d.top_p) * len(d.max_tokens) * len(d.constraints)
    per = sum(1 if m != "distribution" or supports_logprobs(provider) else d.samples_per_cell for m in d.measurements)
    return grid * per


def distribution_repeats(spec: Spec, endpoint: EndpointConfig) -> tuple[int, int]:
    """(distribution cells, of them repeats) of ``endpoint``: a distribution cell reads the first token's
    log-probabilities, which temperature and top_p do not change, so of each temperature × top_p group of
    otherwise equal cells all but one send the same request again. (0, 0) where the cells are K samples."""
    from runner.sweep.providers.logprobs import supports_logprobs

    d = spec.design_for(endpoint)
    if "distribution" not in d.measurements or not supports_logprobs(endpoint.provider):
        return 0, 0
    group = len(d.temperature) * len(d.top_p)
    cells = prompt_count(spec, endpoint) * len(d.seeds) * len(d.max_tokens) * len(d.constraints) * group
    return cells, cells - cells // group


def validate_plan(spec: Spec) -> None:
    """Check, without sending anything, that every prompt of the plan renders and the reference exists."""
    from runner.survey.prompts import validate_cell
    from runner.survey.reference import load_reference

    try:
        load_reference(spec.run.reference)
    except ValueError as exc:
        raise SpecError(f"{spec.source}: run.reference = {spec.run.reference!r}: {exc}") from None
    seen = set()
    for endpoint in spec.endpoints:
        d = spec.design_for(endpoint)
        if id(d) in seen:
            continue
        seen.add(id(d))
        where = spec.design_key(endpoint)
        for mode, language, framing, fmt in itertools.product(
            d.modes, d.languages, framings(spec, endpoint), d.reply_formats
        ):
            try:
                cell = PromptCell(language, mode, question_sets(spec, endpoint, mode)[0], framing, reply_format=fmt)
                validate_cell(cell)
                if "verbalized" in d.measurements:
                    validate_cell(cell, "verbalized")
            except ValueError as exc:
                raise SpecError(
                    f"{spec.source}: {where} (language {language!r}, reply_format {fmt!r}): {exc}"
                ) from None


def iter_cells(spec: Spec, endpoint: EndpointConfig | None = None) -> Iterator[PlannedCell]:
    """The plan's cells in order (endpoint, mode, language, framing, questions, format, option order, seed, T,
    top_p, max tokens, constraint, measurement).

    With ``endpoint``, only that endpoint's cells. Each endpoint's cells follow its design
    (``Spec.design_for``). Lazy: holds one cell at a time.
    """
    for ep in spec.endpoints if endpoint is None else (endpoint,):
        yield from _endpoint_cells(spec, ep)


def cells_at(spec: Spec, endpoint: EndpointConfig, ordinals: Iterable[int]) -> Iterator[PlannedCell]:
    """``endpoint``'s cells at 0-based positions ``ordinals`` of its plan order, in the order given, by arithmetic.

    Equal to picking those positions out of ``iter_cells(spec, endpoint)``, without making the cells between
    them; consecutive positions of one prompt share its rendering and hash state. Lazy. ``IndexError`` for a
    position outside ``0 <= ordinal < endpoint_cell_count(spec, endpoint)``.
    """
    return _endpoint_cells(spec, endpoint, ordinals)


def endpoint_cell_count(spec: Spec, endpoint: EndpointConfig) -> int:
    """Number of ``endpoint``'s cells in the plan, by arithmetic (no cell is generated)."""
    return prompt_count(spec, endpoint) * sampling_count(spec.design_for(endpoint), endpoint.provider)


def iter_keys(spec: Spec) -> Iterator[str]:
    """The plan's cell keys in ``iter_cells`` order, without making the cells (about half the time per cell)."""
    for ep in spec.endpoints:
        yield from _endpoint_cells(spec, ep, keys_only=True)


def _endpoint_cells(
    spec: Spec, ep: EndpointConfig, ordinals: Iterable[int] | None = None, *, keys_only: bool = False
) -> Iterator:
    """``ep``'s cells (their keys alone if ``keys_only``) at ``ordinals`` (all, in order, when None): the one
    place a cell is made from the design."""
    d = spec.design_for(ep)
    samplings = _samplings(d, ep.provider)
    fs = framings(spec, ep)
    blocks = []  # per mode, in plan order: (first ordinal, end, mode, the factor levels its prompts range over)
    end = 0
    for mode in d.modes:
        axes = (d.languages, fs, question_sets(spec, ep, mode), d.reply_formats, d.option_orders, d.option_labels)
        start, end = end, end + math.prod(map(len, axes)) * len(samplings)
        blocks.append((start, end, mode, axes))
    start, stop, mode, axes = blocks[0] if blocks else (0, 0, "", ())
    n_samplings, current = len(samplings), -1  # current: the prompt made last (ordinal // n_samplings)
    for ordinal in range(end) if ordinals is None else ordinals:
        if not start <= ordinal < stop:  # another mode's block (checked first: the hot path is one comparison)
            if not 0 <= ordinal < end:
                raise IndexError(f"cell {ordinal} of endpoint {ep.name!r}: the plan has {end} of its cells")
            start, stop, mode, axes = next(b for b in blocks if ordinal < b[1])
        if ordinal // n_samplings != current:  # blocks hold whole prompts, so this names one prompt plan-wide
            current = ordinal // n_samplings
            language, framing, questions, fmt, order, labels = _unrank(axes, (ordinal - start) // n_samplings)
            fixed = REVERSED_ORDER if order == "reversed" else CANONICAL_ORDER
            base = PromptCell(language, mode, questions, framing, fixed, fmt, labels)
            base_hash = _template_hash(base)
            base_prefix = _key_prefix(ep, base, base_hash)
        sampling, tail = samplings[ordinal % n_samplings]
        prompt, thash, prefix, shuffle_seed = base, base_hash, base_prefix, None
        if order == "shuffled":  # the order, hence the prompt, differs per sampling seed
            shuffle_seed = derive_seed(
                spec.run.seed,
                "option_order",
                language,
                framing.kind,
                framing.country,
                framing.age,
                framing.gender,
                list(questions),
                sampling.seed,
            )
            prompt = PromptCell(language, mode, questions, framing, _shuffled(shuffle_seed), fmt, labels)
            thash = _template_hash(prompt)
            prefix = _key_prefix(ep, prompt, thash)
            if len(d.option_orders) > 1 and prompt.option_order in (CANONICAL_ORDER, REVERSED_ORDER):
                # a shuffle that happens to give a fixed order the design also asks: a cell of its own
                prefix.update(b',"shuffled"')
        key = _key_with(prefix, tail)
        yield key if keys_only else PlannedCell(key, ep, prompt, sampling, thash, shuffle_seed)


def _unrank(axes: Sequence[Sequence], index: int) -> list:
    """The levels at position ``index`` of ``itertools.product(*axes)`` (the last axis varies fastest)."""
    out = []
    for axis in reversed(axes):
        index, i = divmod(index, len(axis))
        out.append(axis[i])
    return out[::-1]


SAMPLINGS_HELD = 1 << 16  # a design's samplings made at once up to this many; a larger grid is made as indexed


@lru_cache(maxsize=64)  # a design of 10^4 seeds takes ~0.3 s to serialize; a resume asks for it several times
def _samplings(d: DesignConfig, provider: str) -> Sequence[tuple[Sampling, bytes]]:
    """Every sampling of design ``d`` for one provider, with its key tail, in plan order (measurement last).

    A distribution cell asks for ``top_logprobs`` alternatives where the provider's API returns them, and
    becomes ``samples_per_cell`` sampled replies (draws 0…K-1) where it cannot (``measurement_fallback``).
    Up to ``SAMPLINGS_HELD`` of them are made at once; a larger grid (10^5 seeds × a temperature × top_p grid is
    10^7 samplings, gigabytes) is a ``SamplingGrid`` that makes each one when indexed, so a pilot of a huge plan
    holds only what it sends.
    """
    grid = SamplingGrid(d, provider)
    return tuple(grid[i] for i in range(len(grid))) if len(grid) <= SAMPLINGS_HELD else grid


class SamplingGrid(Sequence[tuple[Sampling, bytes]]):
    """A design's samplings with their key tails, by position, made when indexed (``_samplings``' order)."""

    def __init__(self, d: DesignConfig, provider: str) -> None:
        from runner.sweep.providers.logprobs import supports_logprobs

        self._base = (d.seeds, d.temperature, d.top_p, d.max_tokens, d.constraints)
        variants: list[tuple[str, int | None]] = []  # per base: (measurement, draw) in order
        for m in d.measurements:
            if m != "distribution" or supports_logprobs(provider):  # sample, verbalized: one request each
                variants.append((m, None))
            else:
                variants.extend((m, i) for i in range(d.samples_per_cell))
        self._variants = tuple(variants)
        self._top_logprobs = d.top_logprobs
        self._len = math.prod(map(len, self._base)) * len(variants)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> tuple[Sampling, bytes]:  # type: ignore[override]
        if not 0 <= index < self._len:
            raise IndexError(index)
        base, variant = divmod(index, len(self._variants))
        measurement, draw = self._variants[variant]
        values = _unrank(self._base, base)
        if measurement == "sample":
            sampling = Sampling(*values)
        elif measurement == "verbalized":  # the stated probabilities are the reply's text: no log-probabilities
            sampling = Sampling(*values, measurement=measurement)
        elif draw is None:
            sampling = Sampling(*values, measurement=measurement, top_logprobs=self._top_logprobs)
        else:
            sampling = Sampling(*values, measurement=measurement, draw=draw)
        return sampling, _sampling_json(sampling)


def measurement_fallback(spec: Spec) -> dict[str, str]:
    """Endpoint name → how its distribution cells are measured instead, for endpoints without log-probabilities."""
    from runner.sweep.providers.logprobs import supports_logprobs

    out = {}
    for e in spec.endpoints:
        d = spec.design_for(e)
        if "distribution" in d.measurements and not supports_logprobs(e.provider):
            k = d.samples_per_cell
            out[e.name] = (
                f"{k} sampled replies per distribution cell (the {e.provider} API returns no log-probabilities)"
            )
    return out


@dataclass(frozen=True, slots=True)
class Selection:
    """The part of a plan one session sends: per endpoint, in spec order, how many of its first cells.

    ``select(spec)`` is the whole plan; ``--limit`` and ``--endpoint`` narrow it. Each endpoint's cells are
    always a prefix of its plan order, so a later session without them resumes exactly the rest.
    """

    quotas: tuple[tuple[EndpointConfig, int], ...]
    planned: int  # cells in the whole plan
    limit: int | None = None  # the --limit that made it, if any

    @property
    def cells(self) -> int:
        """Cells selected."""
        return sum(n for _, n in self.quotas)

    @property
    def endpoints(self) -> tuple[EndpointConfig, ...]:
        """The endpoints with cells selected, in spec order."""
        return tuple(e for e, n in self.quotas if n > 0)

    def quota(self, endpoint: EndpointConfig) -> int:
        """How many of ``endpoint``'s first cells are selected (0 when it is not)."""
        return next((n for e, n in self.quotas if e.name == endpoint.name), 0)

    def iter_cells(self, spec: Spec, endpoint: EndpointConfig) -> Iterator[PlannedCell]:
        """``endpoint``'s selected cells: the first ``quota(endpoint)`` of its plan order. Lazy."""
        return itertools.islice(iter_cells(spec, endpoint), self.quota(endpoint))


def select(spec: Spec, *, endpoints: Sequence[str] = (), limit: int | None = None) -> Selection:
    """The cells a session sends: only ``endpoints`` (names; all when empty), then the first ``limit`` of them.

    The limit is stratified: cells are dealt round-robin by endpoint in spec order (an endpoint whose cells
    run out drops out of the deal), so a pilot of N cells asks every endpoint about equally. Deterministic;
    computed from the counts alone. ``SpecError`` for an unknown name or a limit below 1.
    """
    names = [e.name for e in spec.endpoints]
    for name in endpoints:
        if name not in names:
            raise SpecError(f"{spec.source}: --endpoint {name!r}: no such endpoint (endpoints: {', '.join(names)})")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise SpecError(f"{spec.source}: --limit {limit!r}: must be an integer >= 1")
    sizes = {e.name: endpoint_cell_count(spec, e) for e in spec.endpoints}
    chosen = [e for e in spec.endpoints if not endpoints or e.name in endpoints]
    quotas = {e.name: sizes[e.name] for e in chosen}
    if limit is not None:
        quotas = _round_robin({e.name: sizes[e.name] for e in chosen}, limit)
    return Selection(tuple((e, quotas[e.name]) for e in chosen), sum(sizes.values()), limit)


def _round_robin(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """How many cells each endpoint gets when ``limit`` cells are dealt one per endpoint per round, in order.

    By whole rounds at a time (water-filling), so a deal of 10^9 cells costs one step per endpoint.
    """
    quotas = dict.fromkeys(sizes, 0)
    left = limit
    active = [name for name, n in sizes.items() if n > 0]
    while left > 0 and active:
        rounds = left // len(active)
        if rounds == 0:  # the last, partial round: one each to the first endpoints in order
            for name in active[:left]:
                quotas[name] += 1
            break
        for name in active:
            take = min(rounds, sizes[name] - quotas[name])
            quotas[name] += take
            left -= take
        active = [name for name in active if quotas[name] < sizes[name]]
    return quotas


@lru_cache(maxsize=4096)
def _verbalized_hash() -> str:
    from runner.survey.prompts import verbalized_templates_hash

    return verbalized_templates_hash()


def _shuffled(seed: int) -> tuple[int, ...]:
    from runner.survey.prompts import shuffled_order

    return shuffled_order(seed)


@lru_cache(maxsize=4096)
def _template_hash(prompt: PromptCell) -> str:
    from runner.survey.prompts import template_hash

    return template_hash(prompt)
