"""Seeds for every random choice of the simulator, derived from the server seed and what was asked.

A reply depends only on (server seed, request content, request seed) and, for faults, on how many times the
same request arrived before, never on arrival order across different requests, so concurrent clients see
reproducible behaviour.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping

# The request fields that decide the sampled answer: "same request + same seed → same reply". max_tokens is
# left out on purpose: as with a real model, a smaller max_tokens cuts the same reply shorter.
REQUEST_FIELDS = ("model", "messages", "temperature", "top_p", "seed", "response_format")


def request_key(body: Mapping[str, object]) -> str:
    """Hex digest (32 chars) of the reply-deciding fields of a chat-completions request body."""
    canonical = json.dumps(
        [body.get(name) for name in REQUEST_FIELDS], ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    return hashlib.blake2b(canonical.encode(), digest_size=16).hexdigest()


def derived_rng(*parts: object) -> random.Random:
    """A ``random.Random`` seeded by a 64-bit hash of ``parts`` (their ``repr``s joined)."""
    digest = hashlib.blake2b("\x1f".join(map(repr, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))
