"""PERMANOVA (Anderson 2001): pseudo-F of a one-way design on a distance matrix, with a permutation test.

F = [SS_A / (g − 1)] / [SS_W / (n − g)], SS_T = (1/n) Σ_{i<j} d²_ij, SS_W = Σ_g (1/n_g) Σ_{i<j ∈ g} d²_ij,
SS_A = SS_T − SS_W. The p-value is (k + 1) / (permutations + 1), k = label permutations whose F is at
least the observed F — the definition of ``vegan::adonis2`` and ``skbio.stats.distance.permanova``.
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


def effect_sizes(ss_total: float, ss_within: float, n: int, g: int) -> tuple[float, float]:
    """(R², ω²) of a one-way design: SS_A / SS_T and (SS_A − (g − 1) MS_W) / (SS_T + MS_W); NaN when SS_T = 0."""
    if not ss_total > 0.0:
        return float("nan"), float("nan")
    ss_among, ms_within = ss_total - ss_within, ss_within / (n - g)
    return ss_among / ss_total, (ss_among - (g - 1) * ms_within) / (ss_total + ms_within)


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
    country of each object) keeps every permutation within blocks, as ``adonis2(..., strata =)``. Memory:
    the distances plus O(block · n) labels.
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
    r_squared, omega_squared = effect_sizes(ss_total, ss_within, d.n, g)
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
    )
