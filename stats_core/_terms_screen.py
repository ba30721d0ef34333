"""Counting a multi-term PERMANOVA's permutations: exactly, or screened by a low-rank factor of Gower's matrix.

Each tested term's F under a permutation comes from per-vector sums of squares f_a = v_aᵀ Z_πᵀ G Z_π v_a
(``_terms_model``). Exactly, they take one O(n²) pass over the squared distances (``cell_pair_sums``).
When G = −½ J D² J has low rank — Euclidean distances between points in few dimensions, as hofcat's item
or dimension profiles are — the pivoted Cholesky factor G ≈ Y Yᵀ of the one-way PERMANOVA's screen
(``_screen.gower_factor``, k ≤ 48 columns) gives f_a ≈ ‖(Z_π v_a)ᵀ Y‖² in O(n·k) per permutation
(``cell_factor_sums``). The residual E = G − Y Yᵀ is measured entry by entry (max |E_ij| = ε), so
|f_a − f̃_a| = |(Z v_a)ᵀ E (Z v_a)| ≤ ε (Σ_c n_c |v_ac|)², plus an allowance for rounding. That bounds
every term's SS and the residual SS, hence an interval for each F; a permutation whose interval does not
straddle a term's threshold is decided by the screen, the rest are recomputed exactly. The count is
therefore the exact count, whichever path decided it, on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from stats_core import _resample, _screen, _terms_model

# Doubles of per-permutation sums (C × C bins, or C × k factor sums) held at once: 16 MiB, whatever the design.
CHUNK_VALUES = 1 << 21
# The integer screen's largest quantum: 256 of them fit a u32 lane (src/cell_sums.rs).
QUANTUM_MAX = 2.0**23


@dataclass(frozen=True)
class Model:
    """The tested terms as signed sums of per-vector SS, and what turns them into F."""

    vectors: np.ndarray  # (C, m) every model's basis vectors, the full model's first
    signs: np.ndarray  # (m, T) term t's SS = Σ_a signs[a, t] f_a
    rank: int  # the full model's vectors are the first `rank`
    df: np.ndarray  # (T,) the rank each tested term adds
    df_residual: int
    ss_total: float

    def stats(self, forms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(SS per term, residual SS, F per term) from per-vector SS forms (…, m); NaN F where df is 0."""
        gains = np.where(self.df == 0, 0.0, forms @ self.signs)
        residual = self.ss_total - forms[..., : self.rank].sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(self.df == 0, np.nan, (gains / self.df) / (residual[..., None] / self.df_residual))
        return gains, residual, f

    def exact_forms(self, kernels: ModuleType, squares: np.ndarray, rows: np.ndarray, cells: int) -> np.ndarray:
        """Per-vector SS (rows, m), exactly: from the between-cell sums of the squared distances (C × C bins,
        CHUNK_VALUES at a time), or — where the C²·m quadratic-form work would exceed the n²/2 pass, i.e. with
        many occupied cells — as −Σ_{i<j} d²_ij w_i w_j in object space (``cell_forms``, O(n²·m))."""
        n, m = rows.shape[1], self.vectors.shape[1]
        if cells * cells * m > n * (n - 1) // 2:
            return -kernels.cell_forms(squares, np.ascontiguousarray(rows), np.ascontiguousarray(self.vectors))
        step = max(1, CHUNK_VALUES // max(cells * cells, 1))
        parts = [
            _terms_model.model_ss(
                kernels.cell_pair_sums(squares, np.ascontiguousarray(rows[s : s + step]), cells), self.vectors
            )
            for s in range(0, rows.shape[0], step)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, m))


@dataclass(frozen=True)
class FactorScreen:
    """G ≈ Y Yᵀ with the bound on each per-vector SS's error."""

    factor: np.ndarray  # (n, k)
    errors: np.ndarray  # (m,) bound on |f̃_a − f_a|

    def width(self, cells: int) -> int:
        """Sums held per permutation."""
        return cells * self.factor.shape[1]

    def forms(self, kernels: ModuleType, model: Model, rows: np.ndarray, cells: int) -> np.ndarray:
        """Screened per-vector SS (P, m) of label rows (P, n): ‖(Z_π v_a)ᵀ Y‖²."""
        projected = np.matmul(model.vectors.T, kernels.cell_factor_sums(self.factor, rows, cells))  # (P, m, k)
        return (projected * projected).sum(axis=-1)


@dataclass(frozen=True)
class QuantizedScreen:
    """Every d² as an integer quantum q = round(d² · scale) ≤ QUANTUM_MAX; the model's vectors as v_a = X̃ c_a
    on 0/1 design columns X̃ = [1, columns]; the bound on each per-vector SS's error."""

    quanta: np.ndarray  # (n(n−1)/2,) uint32
    scale: float
    columns: np.ndarray  # (C, p) uint8
    coefficients: np.ndarray  # (p + 1, m)
    errors: np.ndarray  # (m,) bound on |f̃_a − f_a|

    def width(self, cells: int) -> int:
        """Sums held per permutation."""
        return (self.columns.shape[1] + 1) ** 2

    def forms(self, kernels: ModuleType, model: Model, rows: np.ndarray, cells: int) -> np.ndarray:
        """Screened per-vector SS (P, m) of label rows (P, n): −c_aᵀ M c_a from the exact integer sums
        M = X̃ᵀ U X̃ (U the quanta's sums between ordered cell pairs, ``cell_column_quanta``)."""
        sums = kernels.cell_column_quanta(self.quanta, rows, self.columns).astype(np.float64) / self.scale
        return -np.einsum("...rs,ra,sa->...a", sums, self.coefficients, self.coefficients)


def factor_screen(
    kernels: ModuleType, distances: np.ndarray, n: int, model: Model, cell_sizes: np.ndarray
) -> FactorScreen | None:
    """The screen when Gower's matrix has a low-rank factor with a small measured residual, else None."""
    codes, inverse = np.zeros(n, dtype=np.int32), np.array([1.0 / n])
    _, total, largest, row_sums, _ = kernels.permanova_observed(distances, codes, inverse)
    found = _screen.gower_factor(distances, row_sums, total)
    if found is None:
        return None
    factor = found[0]
    means, grand = row_sums / n, 2.0 * total / (n * n)
    diagonal = np.abs(means - grand / 2.0 - np.einsum("ik,ik->i", factor, factor)).max()
    worst = max(float(kernels.gower_residual(distances, factor, means, grand)), float(diagonal))
    weights = (cell_sizes[:, None] * np.abs(model.vectors)).sum(axis=0) ** 2  # ≤ n: Σ n_c v_c² = 1
    errors = (worst + _screen.ENTRY_RTOL * largest) * weights + _screen.SUM_RTOL * model.ss_total
    if not errors.sum() <= _screen.USEFUL_RTOL * model.ss_total:  # also False for NaN
        return None
    return FactorScreen(factor, errors)


def quantized_screen(
    squares: np.ndarray, model: Model, cell_sizes: np.ndarray, design: np.ndarray
) -> QuantizedScreen | None:
    """The integer screen on the model's 0/1 design columns ``design`` (C, ·), or None without distances to scale.

    Per pair |q / scale − d²| ≤ ε = (½ + 2⁻²⁰) / scale (rounding to an integer, and the f64 product
    d² · scale ≤ 2²³); the integer sums are exact, so with w = Z X̃ c_a, |f̃_a − f_a| = |Σ_{i<j} e_ij w_i w_j|
    ≤ ε (Σ_i |w_i|)². Added: the f64 arithmetic on the sums, ((p + 1)² + 8) · 2⁻⁵⁰ of (max d² + ε)
    (Σ_r |c_r| N_r)² (N_r the objects in column r's cells); the residual δ of v_a = X̃ c_a, at most
    2 · max d² · δ n (Σ_i |w_i|); and the F arithmetic, SUM_RTOL of SS_T as for the factor screen.
    """
    largest = float(squares.max()) if squares.size else 0.0
    scale = QUANTUM_MAX / largest if largest > 0.0 else np.inf
    if not np.isfinite(scale):
        return None  # no distances, or subnormal d²
    sizes = cell_sizes.astype(np.float64)
    columns = _independent(design, sizes)
    full = np.concatenate([np.ones((len(sizes), 1)), columns], axis=1)
    coefficients = np.linalg.lstsq(full, model.vectors, rcond=None)[0]
    fitted = np.abs(full) @ np.abs(coefficients)
    delta = np.abs(full @ coefficients - model.vectors).max(axis=0) + (full.shape[1] + 3) * 2.0**-52 * fitted.max(
        axis=0
    )
    n = sizes.sum()
    spread = (sizes[:, None] * np.abs(model.vectors)).sum(axis=0) + n * delta  # ≥ Σ_i |w_i|
    epsilon = (0.5 + 2.0**-20) / scale
    counts = np.abs(full).T @ sizes
    rounding = (full.shape[1] ** 2 + 8) * 2.0**-50 * (largest + epsilon) * (counts @ np.abs(coefficients)) ** 2
    errors = epsilon * spread**2 + rounding + 2.0 * largest * delta * n * spread + _screen.SUM_RTOL * model.ss_total
    scaled = squares * scale  # rounded and clipped in place: fresh n² temporaries cost more than the arithmetic
    np.rint(scaled, out=scaled)
    quanta = np.minimum(scaled, QUANTUM_MAX, out=scaled).astype(np.uint32)
    return QuantizedScreen(quanta, scale, np.ascontiguousarray(columns, dtype=np.uint8), coefficients, errors)


def _independent(design: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The columns of ``design`` (C, ·) that add rank to the constant and the columns kept before them
    (Gram–Schmidt in the object metric, ``_terms_model.RANK_TOL``): the fewest sweeps of the integer kernel."""
    root = np.sqrt(sizes)
    kept = [root / np.linalg.norm(root)]
    chosen = []
    for k, column in enumerate((root[:, None] * design).T):
        residual = column.copy()
        for _ in range(2):
            for u in kept:
                residual -= (u @ residual) * u
        left, norm = float(np.linalg.norm(residual)), float(np.linalg.norm(column))
        if norm > 0.0 and left > _terms_model.RANK_TOL * norm:
            kept.append(residual / left)
            chosen.append(k)
    return design[:, chosen]


def count_block(
    kernels: ModuleType,
    model: Model,
    screen: FactorScreen | QuantizedScreen | None,
    squares: np.ndarray,
    rows: np.ndarray,
    cells: int,
    observed: np.ndarray,
) -> np.ndarray:
    """Per tested term, the permutations among label rows (P, n) whose F is at least ``observed``'s (ties in
    TIE_RTOL, as ``_resample.count_at_least``); 0 for a term with df 0. Memory: CHUNK_VALUES sums at a time."""
    step = max(1, CHUNK_VALUES // max(screen.width(cells) if screen is not None else cells * cells, 1))
    counts = np.zeros(len(model.df), dtype=np.int64)
    for start in range(0, rows.shape[0], step):
        chunk = np.ascontiguousarray(rows[start : start + step])
        counts += _count_chunk(kernels, model, screen, squares, chunk, cells, observed)
    return counts


def _count_chunk(
    kernels: ModuleType,
    model: Model,
    screen: FactorScreen | QuantizedScreen | None,
    squares: np.ndarray,
    rows: np.ndarray,
    cells: int,
    observed: np.ndarray,
) -> np.ndarray:
    """``count_block`` for one chunk of label rows."""
    tested = model.df > 0
    with np.errstate(invalid="ignore"):
        threshold = np.where(np.isposinf(observed), np.inf, observed - _resample.TIE_RTOL * np.abs(observed))
    if screen is None or not np.isfinite(observed[tested]).all():
        exact = model.stats(model.exact_forms(kernels, squares, rows, cells))[2]
        return np.where(tested, (exact >= threshold).sum(axis=0), 0)
    gains, residual, _ = model.stats(screen.forms(kernels, model, rows, cells))
    gain_error = screen.errors @ np.abs(model.signs)
    residual_error = screen.errors[: model.rank].sum()
    scale = model.df_residual / np.where(tested, model.df, 1)
    low_den, high_den = residual - residual_error, residual + residual_error
    with np.errstate(divide="ignore", invalid="ignore"):
        corners = [(gains + s * gain_error) * scale / den[:, None] for s in (-1, 1) for den in (low_den, high_den)]
    low, high = np.minimum.reduce(corners), np.maximum.reduce(corners)
    decided = (low_den > 0)[:, None] & ((low >= threshold) | (high < threshold))
    unsure = ~decided[:, tested].all(axis=1)
    counts = (decided & (low >= threshold) & ~unsure[:, None]).sum(axis=0)
    if unsure.any():
        exact = model.stats(model.exact_forms(kernels, squares, np.ascontiguousarray(rows[unsure]), cells))[2]
        counts = counts + (exact >= threshold).sum(axis=0)
    return np.where(tested, counts, 0)
