"""The linear model of a multi-term PERMANOVA, reduced to the cells of the design.

Every term's design columns (R's treatment contrasts) depend on an object only through its cell — its
combination of levels of the factors in the model — so a model is C cells with sizes w and a C × p matrix.
Centring the columns (weights w) and orthonormalising them in the object metric (columns of W^½ X) by
Gram–Schmidt with R's rank rule (LINPACK ``dqrdc2``, tolerance 1e-7: a column whose part not explained by
the kept columns before it is below 1e-7 of its norm adds no rank) gives C-vectors v_a = u_a / √w whose
object-space hat matrix is H = Z (Σ_a v_a v_aᵀ) Zᵀ (Z the n × C cell indicator). Since H 1 = 0,
tr(H G) = −½ tr(H A) with A the squared distances, so a model's SS under a permutation of the cells is
−½ Σ_a v_aᵀ B v_a, B the C × C sums of squared distances between cells — one pass over the distances
serves every term (``cell_pair_sums``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from stats_core import _validate
from stats_core.errors import InvalidInputError

# R's qr() tolerance (LINPACK dqrdc2): relative size of a column's new part below which it adds no rank.
RANK_TOL = 1e-7


@dataclass(frozen=True)
class Factors:
    """Checked factors: per factor its int codes (n,) and sorted levels; the cell of each object."""

    names: tuple[str, ...]
    codes: dict[str, np.ndarray]
    levels: dict[str, tuple]
    cells: np.ndarray  # (n,) int32 cell code of each object (cells: distinct level combinations, sorted)
    cell_levels: np.ndarray  # (C, factors) level code of each factor in each cell
    cell_sizes: np.ndarray  # (C,) objects per cell


def factor_columns(factors: object) -> dict[str, object]:
    """A mapping of factor name → labels from a Mapping or a polars/pandas DataFrame (its columns)."""
    if isinstance(factors, Mapping):
        found = {str(k): v for k, v in factors.items()}
    else:
        columns = getattr(factors, "columns", None)
        if columns is None:
            raise InvalidInputError(
                "factors", f"expected a mapping of name -> labels or a data frame, got {type(factors)}"
            )
        found = {str(name): factors[name] for name in columns}
    if not found:
        raise InvalidInputError("factors", "needs at least one factor")
    # ":" joins the factors of an interaction: a name holding one would make "a:b" mean two different terms.
    for name in found:
        if ":" in name or not name.strip():
            raise InvalidInputError("factors", f"factor name {name!r} is empty or contains ':'; rename it")
    return found


def parse_terms(terms: Sequence[str] | None, names: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Terms as tuples of factor names ("a:b" → ("a", "b")), ordered by degree as R orders a formula's terms
    (an interaction after the main effects, whatever order it was listed in); default: every main effect."""
    if terms is None:
        return tuple((name,) for name in names)
    if isinstance(terms, str):
        raise InvalidInputError("terms", f"expected a sequence of term names, got the string {terms!r}")
    parsed: list[tuple[str, ...]] = []
    for i, term in enumerate(terms):
        parts = tuple(part.strip() for part in str(term).split(":"))
        unknown = [p for p in parts if p not in names]
        if unknown:
            raise InvalidInputError(
                f"terms[{i}]", f"{term!r} names unknown factor(s) {unknown}; factors: {list(names)}"
            )
        if len(set(parts)) != len(parts):
            raise InvalidInputError(f"terms[{i}]", f"{term!r} repeats a factor")
        if any(set(parts) == set(p) for p in parsed):
            raise InvalidInputError(f"terms[{i}]", f"{term!r} appears twice in the model")
        parsed.append(parts)
    if not parsed:
        raise InvalidInputError("terms", "the model needs at least one term")
    # As R's formulas (keep.order = FALSE): main effects first, then two-way interactions, …, stable within.
    return tuple(sorted(parsed, key=len))


def check_factors(columns: Mapping[str, object], used: Sequence[str], n: int) -> Factors:
    """Factor labels of n objects checked (≥ 2 levels each) and crossed into cells."""
    codes: dict[str, np.ndarray] = {}
    levels: dict[str, tuple] = {}
    for name in used:
        values = columns[name]
        to_numpy = getattr(values, "to_numpy", None)  # polars / pandas Series
        array = to_numpy() if callable(to_numpy) else values
        codes[name], levels[name], _ = _validate.grouping(f"factors[{name!r}]", array, n)
    stacked = np.stack([codes[name] for name in used], axis=1)
    cell_levels, cells, cell_sizes = np.unique(stacked, axis=0, return_inverse=True, return_counts=True)
    return Factors(tuple(used), codes, levels, cells.reshape(-1).astype(np.int32), cell_levels, cell_sizes)


def term_columns(term: tuple[str, ...], earlier: Sequence[tuple[str, ...]], factors: Factors) -> np.ndarray:
    """The (C, k) design columns of ``term`` at the cells, coded as R's model.matrix codes them.

    A factor of the term is coded by treatment contrasts (indicators of every level but the first) when the
    term without it is the intercept or an earlier term of the model, else by indicators of every level.
    """
    columns = np.ones((factors.cell_levels.shape[0], 1))
    for f in term:
        rest = set(term) - {f}
        contrasts = not rest or any(set(e) == rest for e in earlier)
        level = factors.cell_levels[:, factors.names.index(f)]
        first = 1 if contrasts else 0
        dummies = (level[:, None] == np.arange(first, len(factors.levels[f]))[None, :]).astype(np.float64)
        columns = (columns[:, :, None] * dummies[:, None, :]).reshape(columns.shape[0], -1)
    return columns


@dataclass(frozen=True)
class Basis:
    """An orthonormal basis of a model's centred column space, as cell vectors: H = Z V Vᵀ Zᵀ."""

    vectors: np.ndarray  # (C, rank)
    term_of: np.ndarray  # (rank,) index of the term each kept column belongs to


def basis(terms: Sequence[tuple[str, ...]], model: Sequence[tuple[str, ...]], factors: Factors) -> Basis:
    """Orthonormal basis of the terms ``terms`` (coded in the context of the full ``model``) in model order.

    Columns are centred with the cell sizes as weights and orthonormalised in order in the object metric;
    one that adds less than RANK_TOL of its norm is dropped (R's pivoting rule), so a confounded term
    contributes no vectors.
    """
    w = factors.cell_sizes.astype(np.float64)
    root = np.sqrt(w)
    kept: list[np.ndarray] = []
    owner: list[int] = []
    for t, term in enumerate(terms):
        earlier = model[: model.index(term)]
        x = term_columns(term, earlier, factors)
        x = x - (w @ x) / w.sum()
        for column in (root[:, None] * x).T:
            norm = float(np.linalg.norm(column))
            residual = column.copy()
            for _ in range(2):  # twice: classical Gram–Schmidt is then as orthogonal as Householder
                for u in kept:
                    residual -= (u @ residual) * u
            left = float(np.linalg.norm(residual))
            if norm == 0.0 or left <= RANK_TOL * norm:
                continue
            kept.append(residual / left)
            owner.append(t)
    vectors = np.array(kept).T / root[:, None] if kept else np.zeros((len(w), 0))
    return Basis(np.ascontiguousarray(vectors.reshape(len(w), len(kept))), np.array(owner, dtype=np.int64))


def model_ss(pair_sums: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Per row of ``pair_sums`` (…, C, C: Σ d² over ordered i < j cell pairs) the SS −½ v_aᵀ B v_a of each vector.

    B = U + Uᵀ from the upper sums U; returns (…, rank).
    """
    b = pair_sums + np.swapaxes(pair_sums, -1, -2)
    return -0.5 * np.einsum("...ij,ia,ja->...a", b, vectors, vectors)
