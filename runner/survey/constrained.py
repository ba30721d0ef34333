"""Constrained decoding as OpenAI request extensions: fields a provider merges into a chat request body.

Two kinds, both restricting the reply to a valid answer to one VSM item (item mode):

- ``json_schema``: OpenAI's ``response_format`` with a JSON schema ``{"option_id": 1-5, "reason": str}``;
  honoured by OpenAI, llama.cpp's server and others that implement structured outputs.
- ``grammar``: llama.cpp's own ``grammar`` field, a GBNF grammar admitting exactly one digit 1-5.
  Other servers ignore or reject unknown fields, so use it with llama.cpp only.
- ``choice``: vLLM's ``guided_choice`` field: the reply is exactly one of "1" … "5" (vLLM only; the
  distribution measurement's one-option-token constraint there).
"""

from __future__ import annotations

from typing import Any, Literal

ConstraintKind = Literal["json_schema", "grammar", "choice"]
CONSTRAINT_KINDS: tuple[str, ...] = ("json_schema", "grammar", "choice")
OPTION_CHOICES: tuple[str, ...] = ("1", "2", "3", "4", "5")  # vLLM guided_choice: the reply is one of these

# The same object the `json` reply format asks for in words (data/prompts/<lang>.json).
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "option_id": {"type": "integer", "minimum": 1, "maximum": 5},
        # Bounded so that a reply fits in a small max_tokens (48 is enough) instead of being cut mid-string.
        "reason": {"type": "string", "maxLength": 40},
    },
    "required": ["option_id", "reason"],
    "additionalProperties": False,
}

# GBNF (llama.cpp grammar syntax): the whole reply is one option number.
DIGIT_GRAMMAR = "root ::= [1-5]\n"


def verbalized_schema(labels: tuple[str, ...]) -> dict[str, Any]:
    """The verbalized measurement's JSON schema: an object with each option label a required number in [0, 1]."""
    number = {"type": "number", "minimum": 0, "maximum": 1}
    return {
        "type": "object",
        "properties": {label: dict(number) for label in labels},
        "required": list(labels),
        "additionalProperties": False,
    }


def verbalized_grammar(labels: tuple[str, ...]) -> str:
    """GBNF admitting exactly ``{"<label 1>": p, …, "<label 5>": p}``, each p a decimal in [0, 1] (at most four
    decimal places), keys in the shown order: what llama.cpp can enforce where it has no JSON-schema support."""
    pairs = ' ", " '.join(f'"\\"{label}\\": " prob' for label in labels)
    return f'root ::= "{{" {pairs} "}}"\nprob ::= "0" ("." [0-9] [0-9]? [0-9]? [0-9]?)? | "1" (".0")?\n'


def constrained_request_fields(kind: ConstraintKind, verbalized: tuple[str, ...] = ()) -> dict[str, Any]:
    """Request-body fields (fresh dicts) that constrain a chat reply; ``kind`` is json_schema or grammar.

    ``verbalized``: the option labels of a verbalized cell, whose reply is the probability object instead
    (``verbalized_schema`` / ``verbalized_grammar``; vLLM's ``choice`` cannot express it)."""
    if verbalized and kind in ("json_schema", "grammar"):
        if kind == "grammar":
            return {"grammar": verbalized_grammar(verbalized)}
        schema = verbalized_schema(verbalized)
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "vsm_probabilities", "strict": True, "schema": schema},
            }
        }
    if kind == "json_schema":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "vsm_answer", "strict": True, "schema": _copy(ANSWER_SCHEMA)},
            }
        }
    if kind == "grammar":
        return {"grammar": DIGIT_GRAMMAR}
    if kind == "choice":
        return {"guided_choice": list(OPTION_CHOICES)}
    raise ValueError(f"constrained_request_fields: kind {kind!r} is not one of {', '.join(CONSTRAINT_KINDS)}")


def _copy(value: Any) -> Any:
    """A deep copy of JSON-like data, so callers may mutate the request body freely."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value
