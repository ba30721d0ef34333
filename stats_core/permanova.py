"""PERMANOVA (Anderson 2001): pseudo-F of a one-way design on a distance matrix, with a permutation test.

F = [SS_A / (g − 1)] / [SS_W / (n − g)], SS_T = (1/n) Σ_{i<j} d²_ij, SS_W = Σ_g (1/n_g) Σ_{i<j ∈ g} d²_ij,
SS_A = SS_T − SS_W. The p-value is (k + 1) / (permutations + 1), k = label permutations whose F is at
least the observed F — the definition of ``vegan::adonis2`` and ``skbio.stats.distance.permanova``.

With strata (blocks) the effect sizes are those of the groups within the strata: SS_T,s = Σ_s SS_T(s) (what
varies inside the strata), SS_R = Σ over stratum × group cells of their within-cell SS, SS_A,s = SS_T,s − SS_R
with df_A = cells − strata and df_R = n − cells — the ``strata:groups`` and residual rows of
``adonis2(d ~ strata / groups)``; R² = SS_A,s / SS_T,s (partial R²) and ω² = (SS_A,s − df_A MS_R) /
(SS_A,s + (n − df_A) MS_R), MS_R = SS_R / df_R (partial ω²). F and its p-value stay adonis2's
(``adonis2(d ~ groups, strata = strata)``, whose R² ignores the strata).
"""

from __future__ import annotations

import numpy as np

from stats_core import _resample, _screen, _validate
from stats_core.errors import InvalidInputError
from stats_core.results import PermutationTestResult


def pseudo_f(ss_total: float, ss_within: np.ndarray, n: int, g: int) -> np.ndarray:
    """Pseudo-F from total and within-group sums of squares (inf where SS_W is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return ((ss_total - ss_within) / (g - 1)) / (ss_within / (n - g))


def effect_sizes(ss_total: float, ss_within: float, df_among: int, df_within: int, n: int) -> tuple[float, float]:
    """(R², ω²) of SS_T = SS_A + SS_W on n objects: SS_A / SS_T and the (partial) ω² of Olejnik & Algina (2003),
    (SS_A − df_among · MS_W) / (SS_A + (n − df_among) · MS_W), MS_W = SS_W / df_within — one-way, the
    denominator is SS_T + MS_W. NaN where SS_T = 0 (ω²: also where df_within = 0)."""
    if not ss_total > 0.0:
        return float("nan"), float("nan")
    ss_among = ss_total - ss_within
    if df_within == 0:
        return ss_among / ss_total, float("nan")
    ms_within = ss_within / df_within
    return ss_among / ss_total, (ss_among - df_among * ms_within) / (ss_among + (n - df_among) * ms_within)


def within_strata(d: _resample.Design) -> tuple[float, float, int, int]:
    """(SS_T,s, SS_R, df_A, df_R) of a design with strata: the sums of squares inside the strata (module doc).

    One pass of the exact kernel with two label rows — the stratum × group cells and the strata — whose
    weights 1/size share one array (cells first, then strata).
    """
    assert d.strata is not None
    strata_sizes = np.diff(d.strata.starts)
    stratum = np.empty(d.n, dtype=np.int64)
    stratum[d.strata.order] = np.repeat(np.arange(len(strata_sizes)), strata_sizes)
    cells, cell, cell_sizes = np.unique(stratum * len(d.groups) + d.codes, return_inverse=True, return_counts=True)
    labels = np.stack([cell, len(cells) + stratum]).astype(np.int32)
    weights = 1.0 / np.concatenate([cell_sizes, strata_sizes]).astype(np.float64)
    ss_residual, ss_total = d.kernels.permanova_within(d.distances, labels, weights)
    return float(ss_total), float(ss_residual), len(cells) - len(strata_sizes), d.n - len(cells)


def permanova(
    distances: object,
    grouping: object,
    permutations: int = 999,
    seed: int | None = None,
    *,
    strata: object = None,
    backend: str = "auto",
) -> PermutationTestResult:
    """PERMANOVA of ``distances`` (condensed (n(n−1)/2,) or square (n, n)) by ``grouping`` (n labels).

    Returns pseudo-F as ``statistic``, the permutation ``pvalue``, R² and ω²; ``seed`` (int) fixes the
    permutations, drawn by the counter-based generator of ``_resample``; ``strata`` (n block labels, e.g. the
    country of each object) keeps every permutation within blocks, as ``adonis2(..., strata =)``, and makes R²
    and ω² those of the groups within the strata (module doc). Memory: the distances plus O(block · n) labels.
    """
    # One kernel pass gives the observed SS_W, Σd², max d², per-object Σd² and the finite/non-negative check
    # of a condensed matrix; the separate check runs only to name a bad value. The permutations are then
    # counted through a screen (_screen: factored where Gower's matrix has low rank, else quantized).
    d = _resample.design(distances, grouping, permutations, seed, backend, strata=strata)
    g = len(d.groups)
    if g == d.n:
        raise InvalidInputError("grouping", "every group has a single member: SS_W has no degrees of freedom")
    sums = d.kernels.permanova_observed(d.distances, d.codes, d.inverse_sizes)
    ss_within, squares, _, _, valid = sums
    if not valid:
        _validate.condensed_values_check("distances", d.distances)
    ss_total = squares / d.n
    observed = float(pseudo_f(ss_total, np.array([ss_within]), d.n, g)[0])
    if d.strata is None:
        blocked: dict[str, float] = {}
        r_squared, omega_squared = effect_sizes(ss_total, ss_within, g - 1, d.n - g, d.n)
    else:
        ss_strata_total, ss_cells, df_among, df_cells = within_strata(d)
        blocked = {"ss_total_within_strata": ss_strata_total, "ss_within_cells": ss_cells}
        r_squared, omega_squared = effect_sizes(ss_strata_total, ss_cells, df_among, df_cells, d.n)
    # F decreases with SS_W (SS_T is fixed), so "F_perm >= F" is "SS_W_perm <= SS_W", ties within TIE_RTOL.
    bound = ss_within * (1.0 + _resample.TIE_RTOL)
    screen = _screen.choose(d.kernels, d.distances, d.inverse_sizes, d.sizes, sums, bound) if d.permutations else None
    return _resample.permutation_test(
        "PERMANOVA",
        observed,
        lambda block: _screen.count_at_most(d.kernels, d.distances, block, d.inverse_sizes, bound, screen),
        d,
        ss_total=ss_total,
        ss_within=ss_within,
        r_squared=r_squared,
        omega_squared=omega_squared,
        **blocked,
    )
