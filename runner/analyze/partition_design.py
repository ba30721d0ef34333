"""The terms of a variance partition: which design factors vary among the profiles, and which can be told apart.

A *factor* here is a design column of the answers (runner/analyze/design.py) or a unit column (seed, simulated
identity), plus ``country`` (the respondent's country: the persona's, or the prompt language's without one).
``shuffled`` and ``reversed`` are one factor, ``option_order``. Each factor has a role — the intended cultural
factor (``country``), the respondent's other attributes, the model, the prompt's design, the replicate (seed), or
other (``run``, when several runs are analysed together) —
and the roles fix the order in which factors are admitted and the order of the sequential sums of squares.

Before any statistic, the factors are checked against each other on the profiles actually used:

- a factor with one level there does not vary: left out;
- a factor whose levels map one-to-one onto an admitted factor's (two endpoints serving two models) is *aliased*:
  merged into one term named ``model/endpoint``;
- a factor that adds no column to the design of the factors admitted before it (it is determined by them), or
  whose admission would leave an admitted factor without a column of its own (it is nested inside it: identities
  within countries), is *confounded*: refused, with a note naming the factors it is confounded with;
- a factor that adds fewer columns than its levels minus one is *partly confounded*: kept, with a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ROLES", "Term", "Terms", "admit_terms", "join_note", "level_codes", "nested_within", "role_of"]

# Role of each known factor; any other column is part of the prompt's design. Order = admission priority.
ROLES = ("cultural", "model", "respondent", "prompt design", "replicate", "other")
_ROLE_OF = {
    "country": "cultural",
    "model": "model",
    "endpoint": "model",
    "framing": "respondent",
    "respondent": "respondent",
    "gender": "respondent",
    "age": "respondent",
    "seed": "replicate",
    "run": "other",  # several runs analysed together (runner/analyze/combine.py): neither culture nor prompt
}
# Columns read together as one factor (the loader derives both from the option order of each cell).
COMPOSITES = {"option_order": ("shuffled", "reversed")}


def role_of(factor: str) -> str:
    """The role of a factor (or of a merged ``a/b`` term: its first part's)."""
    return _ROLE_OF.get(factor.split("/")[0], "prompt design")


@dataclass(frozen=True)
class Term:
    """One term of the partition: its name, role, integer level codes per profile and the columns it merges."""

    name: str
    role: str
    codes: np.ndarray  # (n,) int64, 0 … levels − 1
    columns: tuple[str, ...]
    unique_df: int  # columns of its own in the design with every admitted term
    note: str = ""

    @property
    def levels(self) -> int:
        """How many levels it takes among the profiles."""
        return int(self.codes.max()) + 1 if len(self.codes) else 0


@dataclass(frozen=True)
class Terms:
    """The admitted terms (in sequential order) and a note per factor left out."""

    terms: tuple[Term, ...]
    refused: dict[str, str] = field(default_factory=dict)  # factor → why it is not a term
    rank: int = 0  # columns of the full design beyond the intercept (its model df)


def level_codes(values: Sequence[object]) -> np.ndarray:
    """Integer codes 0… of ``values`` in order of first appearance (None is a level of its own)."""
    index: dict[object, int] = {}
    return np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=len(values))


def _dummies(codes: np.ndarray) -> np.ndarray:
    """Treatment-coded columns of a factor (its first level dropped): (n, levels − 1)."""
    levels = int(codes.max()) + 1
    return (codes[:, None] == np.arange(1, levels)[None, :]).astype(np.float64)


def _rank(blocks: Sequence[np.ndarray], n: int) -> int:
    """Rank of the intercept with the given dummy blocks (over their distinct rows: the same rank, far fewer rows)."""
    return int(np.linalg.matrix_rank(np.unique(np.hstack([np.ones((n, 1)), *blocks]), axis=0)))


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    return len(set(zip(a.tolist(), b.tolist(), strict=True))) == int(a.max()) + 1 == int(b.max()) + 1


def nested_within(fine: np.ndarray, coarse: np.ndarray) -> bool:
    """Every level of ``fine`` lies within one level of ``coarse``."""
    return len(set(zip(fine.tolist(), coarse.tolist(), strict=True))) == int(fine.max()) + 1


def factor_columns(columns: Mapping[str, Sequence[object]]) -> dict[str, list[object]]:
    """The factors from the profile's design columns: composites joined (``option_order``), each as a value list."""
    out: dict[str, list[object]] = {}
    taken: set[str] = set()
    for name, parts in COMPOSITES.items():
        present = [p for p in parts if p in columns]
        if present:
            out[name] = [tuple(v) for v in zip(*(columns[p] for p in present), strict=True)]
            if len(present) == 1:
                out[name] = [v[0] for v in out[name]]
            taken.update(present)
    for name, values in columns.items():
        if name not in taken:
            out[name] = list(values)
    return out


def admit_terms(columns: Mapping[str, Sequence[object]]) -> Terms:
    """The terms of the partition from each profile's factor values, confounding resolved (module docstring)."""
    factors = factor_columns(columns)
    known = list(_ROLE_OF)  # within a role, known factors first (model before endpoint), then by name
    order = sorted(factors, key=lambda f: (ROLES.index(role_of(f)), known.index(f) if f in known else len(known), f))
    n = len(next(iter(factors.values()))) if factors else 0
    admitted: list[list] = []  # [name, codes, columns, note]
    refused: dict[str, str] = {}
    for f in order:
        codes = level_codes(factors[f])
        if n == 0 or codes.max() < 1:
            refused[f] = "one level among the profiles: does not vary"
            continue
        alias = next((a for a in admitted if _same_partition(a[1], codes)), None)
        if alias is not None:
            alias[2] = (*alias[2], f)
            alias[3] = join_note(alias[3], f"aliased with {f} (the same partition of the profiles): merged")
            continue
        blocks = [_dummies(a[1]) for a in admitted]
        full = _rank([*blocks, _dummies(codes)], n)
        gain = full - _rank(blocks, n)
        with_f = [*blocks, _dummies(codes)]
        starved = [a[0] for i, a in enumerate(admitted) if full - _rank(with_f[:i] + with_f[i + 1 :], n) == 0]
        if gain == 0:
            within = [a[0] for a in admitted if nested_within(a[1], codes)]
            by = ", ".join(within) if within else "the combination of " + ", ".join(a[0] for a in admitted)
            refused[f] = f"confounded: determined by {by}; refused"
        elif starved:
            refused[f] = (
                f"confounded: nested within {', '.join(starved)} (it would leave them no df of their own); refused, "
                "its share within them stays in the residual"
            )
        else:
            note = "" if gain == codes.max() else f"partly confounded: {gain} of {int(codes.max())} df its own"
            admitted.append([f, codes, (f,), note])
    terms = []
    blocks = [_dummies(a[1]) for a in admitted]
    full = _rank(blocks, n) if admitted else 0
    for i, (name, codes, cols, note) in enumerate(admitted):
        unique = full - _rank([*blocks[:i], *blocks[i + 1 :]], n)
        terms.append(Term("/".join(cols), role_of(name), codes, cols, unique, note))
    return Terms(tuple(terms), refused, max(0, full - 1))


def join_note(a: str | None, b: str) -> str:
    """Notes ``a`` and ``b`` joined by "; " (``b`` alone where ``a`` is empty)."""
    return f"{a}; {b}" if a else b
