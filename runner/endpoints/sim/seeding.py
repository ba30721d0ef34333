"""Seeds for every random choice of the simulator, derived from the server seed and what was asked.

A reply depends only on (server seed, request content, request seed) and, for faults, on how many times the
same request arrived before, never on arrival order across different requests, so concurrent clients see
reproducible behaviour. Draws come from BLAKE2b in counter mode rather than ``random.Random``: seeding a
Mersenne Twister costs more than answering a request, and a hash stream is the same on every platform.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from functools import lru_cache

# The request fields that decide the sampled answer: "same request + same seed → same reply". max_tokens is
# left out on purpose: as with a real model, a smaller max_tokens cuts the same reply shorter.
REQUEST_FIELDS = ("model", "temperature", "top_p", "seed", "response_format")
_UNIT = 1.0 / (1 << 53)


def request_key(body: Mapping[str, object]) -> str:
    """Hex digest (32 chars) of the reply-deciding fields of a chat-completions request body.

    Covers every message's role and content plus ``REQUEST_FIELDS``; JSON formatting and key order of the
    body do not matter.
    """
    messages = body.get("messages")
    pairs = tuple(
        (str(m.get("role")), m["content"] if isinstance(m.get("content"), str) else repr(m.get("content")))
        for m in (messages if isinstance(messages, list) else ())
        if isinstance(m, dict)
    )
    return key_of(pairs, body)


def key_of(messages: tuple[tuple[str, str], ...], body: Mapping[str, object]) -> str:
    """``request_key`` from already-extracted (role, content) pairs (the server's hot path)."""
    h = hashlib.blake2b(_messages_digest(messages), digest_size=16)
    h.update(repr([body.get(name) for name in REQUEST_FIELDS]).encode())
    return h.hexdigest()


@lru_cache(maxsize=16_384)
def _messages_digest(messages: tuple[tuple[str, str], ...]) -> bytes:
    """Digest of the messages; a sweep repeats each prompt for every seed and sampling setting, so cache it."""
    return hashlib.blake2b("\x1e".join(f"{role}\x1f{content}" for role, content in messages).encode()).digest()


class Draws:
    """A reproducible stream of uniforms from BLAKE2b(parts, counter); the few methods the simulator needs."""

    __slots__ = ("_block", "_counter", "_pos", "_prefix")

    def __init__(self, *parts: object) -> None:
        self._prefix = "\x1f".join(map(str, parts)).encode() + b"\x1e"
        self._counter = 0
        self._block = b""
        self._pos = 0

    def random(self) -> float:
        """A uniform float in [0, 1) with 53 random bits."""
        if self._pos >= len(self._block):
            # Block i = BLAKE2b-512(parts, i): eight uniforms per hash.
            self._block = hashlib.blake2b(self._prefix + self._counter.to_bytes(8, "little")).digest()
            self._counter += 1
            self._pos = 0
        value = int.from_bytes(self._block[self._pos : self._pos + 8], "little") >> 11
        self._pos += 8
        return value * _UNIT

    def randrange(self, n: int) -> int:
        """A uniform integer in [0, n) (n small: the bias of one 53-bit draw is negligible)."""
        return int(self.random() * n)

    def uniform(self, a: float, b: float) -> float:
        """A uniform float in [a, b)."""
        return a + (b - a) * self.random()

    def expovariate(self, rate: float) -> float:
        """An exponential draw with mean 1 / rate."""
        return -math.log(1.0 - self.random()) / rate

    def gauss(self, mu: float = 0.0, sigma: float = 1.0) -> float:
        """A normal draw (Box–Muller)."""
        u1, u2 = 1.0 - self.random(), self.random()
        return mu + sigma * math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
