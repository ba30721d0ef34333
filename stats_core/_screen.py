"""Screens for PERMANOVA's permutation count: a cheap SS_W for every relabelling, with a rigorous margin.

The count needs, for each permutation, whether SS_W ≤ bound. A screen computes an approximation s with
|s − SS_W| ≤ margin for every permutation; only permutations with |s − bound| ≤ margin are recomputed
exactly (``permanova_within``), so the count is the exact count. Two screens, chosen per call:

- **factored**: when Gower's centred matrix G = −½ J D² J has low rank — distances between points in few
  dimensions, as hofcat's Euclidean distances between dimension scores or item answers are — a pivoted
  Cholesky factor G ≈ Y Yᵀ (k columns) gives SS_W = SS_T − Σ_g (1/n_g) ‖Σ_{i∈g} y_i‖² in O(n·k) per
  permutation instead of O(n²). The residual E = G − Y Yᵀ is measured entry by entry in one O(n²·k) pass
  (``gower_residual``), and |Σ_g (1/n_g) 1_gᵀ E 1_g| ≤ Σ_g (1/n_g) n_g² max|E_ij| = n · max|E_ij|: that,
  plus rounding allowances, is the margin — no assumption about the distances is needed.
- **quantized**: otherwise, every d² is rounded to an integer q = round(d² · scale) ≤ 2²³ and the compiled
  kernels sum the q exactly in integers; the only error is the rounding, ≤ ½ / scale per pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np

# The quantized screen's largest q: 256 of them fit an unsigned 32-bit lane (src/screen.rs).
QUANTUM_MAX = 2.0**23
# The factored screen is tried up to this rank; beyond it the O(n·k) work per permutation and the
# factorisation stop paying for themselves against the quantized screen at the sizes that matter.
MAX_RANK = 48
# Stop factoring once the residual diagonal is this small relative to tr G (for a positive semi-definite G
# it bounds every residual entry); the measured margin is then far below the spread of SS_W over
# permutations (~1e-4 relative at n = 5000) and almost nothing is recomputed.
RESIDUAL_RTOL = 1e-10
# A factored screen whose measured margin exceeds this fraction of SS_T (an indefinite G that fooled the
# diagonal test) would recompute too much: the quantized screen is used instead.
USEFUL_RTOL = 1e-7
# Allowances for f64 rounding: the kernels' sums are good to ~1e-11 relative (≤ 1e5 additions each), and
# each computed residual entry to ~30·2⁻⁵³ of 4 · max d² (|G_ij| and |y_i·y_j| are at most 2 · max d²);
# both leave a factor of 100 or more to spare.
SUM_RTOL = 1e-9
ENTRY_RTOL = 1e-10


@dataclass(frozen=True)
class Screen:
    """Approximate SS_W for a block of label rows, and the bound on its distance from the exact SS_W."""

    name: str
    within: Callable[[np.ndarray], np.ndarray]
    margin: float


def quantized(
    kernels: ModuleType,
    distances: np.ndarray,
    inverse_sizes: np.ndarray,
    sizes: np.ndarray,
    largest_square: float,
    bound: float,
) -> Screen:
    """The integer screen: d² quantized by scale = 2²³ / max d²; margin (½ + 2⁻³⁰)/scale · Σ_g (n_g − 1)/2.

    Per pair |q / scale − d²| ≤ (½ + 2⁻³⁰) / scale (rounding to an integer, and the f64 product d² · scale
    ≤ 2²³); SS_W weighs the pairs of group g by 1/n_g and group g has n_g(n_g − 1)/2 of them.
    """
    scale = QUANTUM_MAX / largest_square if largest_square > 0 else 1.0
    if not math.isfinite(scale):
        scale = 1.0  # subnormal d²: every q is 0 and every permutation is recomputed exactly
    pairs_weight = float(np.sum(sizes.astype(np.float64) - 1.0)) / 2.0
    margin = (0.5 + 2.0**-20) / scale * pairs_weight + SUM_RTOL * abs(bound)
    return Screen(
        "quantized", lambda block: kernels.permanova_quantized(distances, block, inverse_sizes, scale), margin
    )


def gower_factor(distances: np.ndarray, row_sums: np.ndarray, total: float) -> tuple[np.ndarray, float] | None:
    """(Y (n, k), Σ|diag(G − Y Yᵀ)|) for Gower's centred G of condensed/square ``distances``, or None.

    ``row_sums``: Σ_j d²_ij per object; ``total``: Σ_{i<j} d²_ij. Pivoted Cholesky, one column of G per
    step; None when a residual diagonal entry turns clearly negative (G is not positive semi-definite) or
    the residual diagonal still sums above RESIDUAL_RTOL · tr G after MAX_RANK columns.
    """
    n = row_sums.shape[0]
    means = row_sums / n
    grand = 2.0 * total / (n * n)
    residual = means - grand / 2.0  # G_ii
    trace = float(residual.sum())
    if not trace > 0.0:
        return None
    rank = min(MAX_RANK, n)
    factor = np.zeros((n, rank))
    for k in range(rank + 1):
        left = float(np.abs(residual).sum())
        if left <= RESIDUAL_RTOL * trace:
            return np.ascontiguousarray(factor[:, :k]), left
        if k == rank or residual.min() < -RESIDUAL_RTOL * trace:
            return None
        p = int(np.argmax(residual))
        if not residual[p] > 0.0:
            return None
        column = -0.5 * (_squared_column(distances, p, n) - means - means[p] + grand)
        column -= factor[:, :k] @ factor[p, :k]
        factor[:, k] = column / math.sqrt(residual[p])
        residual = residual - factor[:, k] ** 2
        residual[p] = 0.0
    return None


def _squared_column(distances: np.ndarray, p: int, n: int) -> np.ndarray:
    """d²_ip for every i (0 at i = p) from a condensed or square matrix."""
    if distances.ndim == 2:
        column = distances[:, p].copy()
    else:
        i = np.arange(n, dtype=np.int64)
        lo, hi = np.minimum(i, p), np.maximum(i, p)
        column = distances[np.where(i == p, 0, lo * n - lo * (lo + 1) // 2 + hi - lo - 1)]
        column[p] = 0.0
    return column * column


def factored(
    kernels: ModuleType,
    distances: np.ndarray,
    inverse_sizes: np.ndarray,
    row_sums: np.ndarray,
    total: float,
    largest_square: float,
) -> Screen | None:
    """The factored screen when Gower's matrix has a low-rank factor whose residual is measured small, else None.

    SS_W = SS_T − Σ_g (1/n_g) 1_gᵀ G 1_g with SS_T = tr G = Σ_{i<j} d²_ij / n; the factor's part of the
    second term is computed per permutation, the residual's is at most n · max|E_ij| in size.
    """
    found = gower_factor(distances, row_sums, total)
    if found is None:
        return None
    factor, _ = found
    n = row_sums.shape[0]
    means, grand = row_sums / n, 2.0 * total / (n * n)
    diagonal = np.abs(means - grand / 2.0 - np.einsum("ik,ik->i", factor, factor)).max()
    worst = max(float(kernels.gower_residual(distances, factor, means, grand)), float(diagonal))
    ss_total = total / n
    margin = n * (worst + ENTRY_RTOL * largest_square) + SUM_RTOL * ss_total
    if not margin <= USEFUL_RTOL * ss_total:  # also False for NaN
        return None
    return Screen("factored", lambda block: ss_total - kernels.permanova_factored(factor, block, inverse_sizes), margin)


def choose(
    kernels: ModuleType,
    distances: np.ndarray,
    inverse_sizes: np.ndarray,
    sizes: np.ndarray,
    observed: tuple,
    bound: float,
) -> Screen:
    """The factored screen where it applies, else the quantized one (``observed``: ``permanova_observed``'s tuple)."""
    _, total, largest_square, row_sums, _ = observed
    return factored(kernels, distances, inverse_sizes, row_sums, total, largest_square) or quantized(
        kernels, distances, inverse_sizes, sizes, largest_square, bound
    )


def count_at_most(
    kernels: ModuleType,
    distances: np.ndarray,
    block: np.ndarray,
    inverse_sizes: np.ndarray,
    bound: float,
    screen: Screen,
) -> int:
    """Number of label rows of ``block`` (P, n) whose exact SS_W is ≤ bound: screened, rechecked near the bound."""
    screened = screen.within(block)
    certain = int(np.count_nonzero(screened < bound - screen.margin))
    unsure = np.abs(screened - bound) <= screen.margin
    if not unsure.any():
        return certain
    exact = kernels.permanova_within(distances, np.ascontiguousarray(block[unsure]), inverse_sizes)
    return certain + int(np.count_nonzero(exact <= bound))
