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
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from runner.errors import SpecError
from runner.survey.cell import CANONICAL_ORDER, Framing, PromptCell
from runner.sweep.spec import EndpointConfig, Spec

KEY_HEX_DIGITS = 32


@dataclass(frozen=True, slots=True)
class Sampling:
    """How a request is answered: sampling seed, temperature, nucleus mass, output cap (tokens), constraint."""

    seed: int
    temperature: float
    top_p: float
    max_tokens: int
    constraint: str = "none"  # constrained decoding kind (runner.sweep.spec.CONSTRAINTS)


@dataclass(frozen=True, slots=True)
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
    keys they had before constraints existed); first ``KEY_HEX_DIGITS`` hex digits.
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
    return hashlib.sha256(json.dumps(head, separators=(",", ":"))[:-1].encode())


def _sampling_json(sampling: Sampling) -> bytes:
    """The sampling fields' tail of the request-definition JSON."""
    tail: list = [sampling.seed, sampling.temperature, sampling.top_p, sampling.max_tokens]
    if sampling.constraint != "none":
        tail.append(sampling.constraint)
    return ("," + json.dumps(tail, separators=(",", ":"))[1:]).encode()


def _key_with(prefix: hashlib._Hash, tail: bytes) -> str:
    digest = prefix.copy()
    digest.update(tail)
    return digest.hexdigest()[:KEY_HEX_DIGITS]


def framings(spec: Spec) -> tuple[Framing, ...]:
    """The design's framings in plan order: none (if asked), personas, then identities; countries canonical."""
    from runner.survey.reference import resolve_country

    d = spec.design
    out: list[Framing] = []
    if d.no_persona or (not d.personas and d.identities is None):
        out.append(Framing())

    def canonical(key: str, name: str) -> str:
        try:
            return resolve_country(name)
        except ValueError as exc:
            raise SpecError(f"{spec.source}: {key} = {name!r}: must be a known country ({exc})") from None

    out.extend(Framing("persona", canonical("design.personas", p)) for p in d.personas)
    if d.identities is not None:
        i = d.identities
        for country, gender, age in itertools.product(i.countries, i.genders, i.ages):
            out.append(Framing("identity", canonical("design.identities.countries", country), age, gender))
    if len(set(out)) != len(out):
        raise SpecError(f"{spec.source}: design: the personas/identities name the same country twice")
    return tuple(out)


def question_sets(spec: Spec) -> tuple[tuple[int, ...], ...]:
    """One question per cell in item mode; all chosen questions together in survey mode."""
    qs = spec.design.questions
    return tuple((q,) for q in qs) if spec.design.mode == "item" else (qs,)


def factor_counts(spec: Spec) -> dict[str, int]:
    """Levels per factor, in plan order (their product is the number of cells)."""
    d = spec.design
    return {
        "endpoints": len(spec.endpoints),
        "languages": len(d.languages),
        "framings": len(framings(spec)),
        "questions": len(question_sets(spec)),
        "reply_formats": len(d.reply_formats),
        "seeds": len(d.seeds),
        "temperature": len(d.temperature),
        "top_p": len(d.top_p),
        "max_tokens": len(d.max_tokens),
        "constraints": len(d.constraints),
    }


def count_cells(spec: Spec) -> int:
    """Number of cells in the plan, without generating them."""
    return math.prod(factor_counts(spec).values())


def validate_plan(spec: Spec) -> None:
    """Check, without sending anything, that every prompt of the plan renders and the reference exists."""
    from runner.survey.prompts import validate_cell
    from runner.survey.reference import load_reference

    try:
        load_reference(spec.run.reference)
    except ValueError as exc:
        raise SpecError(f"{spec.source}: run.reference = {spec.run.reference!r}: {exc}") from None
    d = spec.design
    for language, framing, fmt in itertools.product(d.languages, framings(spec), d.reply_formats):
        try:
            validate_cell(PromptCell(language, d.mode, question_sets(spec)[0], framing, reply_format=fmt))
        except ValueError as exc:
            raise SpecError(f"{spec.source}: design (language {language!r}, reply_format {fmt!r}): {exc}") from None


def iter_cells(spec: Spec, endpoint: EndpointConfig | None = None) -> Iterator[PlannedCell]:
    """The plan's cells in order (endpoint, language, framing, questions, format, seed, T, top_p, max tokens,
    constraint).

    With ``endpoint``, only that endpoint's cells. Lazy: holds one cell at a time.
    """
    d = spec.design
    endpoints = spec.endpoints if endpoint is None else (endpoint,)
    samplings = [
        (Sampling(*s), _sampling_json(Sampling(*s)))
        for s in itertools.product(d.seeds, d.temperature, d.top_p, d.max_tokens, d.constraints)
    ]
    for ep, language, framing, questions, fmt in itertools.product(
        endpoints, d.languages, framings(spec), question_sets(spec), d.reply_formats
    ):
        prompt = PromptCell(language, d.mode, questions, framing, CANONICAL_ORDER, fmt)
        thash = _template_hash(prompt)
        prefix = _key_prefix(ep, prompt, thash)
        for sampling, tail in samplings:
            shuffle_seed = None
            if d.shuffle_options:  # the order, hence the prompt, differs per sampling seed
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
                prompt = PromptCell(language, d.mode, questions, framing, _shuffled(shuffle_seed), fmt)
                thash = _template_hash(prompt)
                prefix = _key_prefix(ep, prompt, thash)
            yield PlannedCell(_key_with(prefix, tail), ep, prompt, sampling, thash, shuffle_seed)


@lru_cache(maxsize=4096)
def _shuffled(seed: int) -> tuple[int, ...]:
    from runner.survey.prompts import shuffled_order

    return shuffled_order(seed)


@lru_cache(maxsize=4096)
def _template_hash(prompt: PromptCell) -> str:
    from runner.survey.prompts import template_hash

    return template_hash(prompt)
