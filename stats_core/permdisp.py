"""PERMDISP (Anderson 2006): test of homogeneous multivariate dispersions, as ``vegan::betadisper`` + ``permutest``.

Each object's distance to its group centroid in the principal-coordinate space of the distances is
z_i = sqrt(max(0, s_i / n_g − W_g / n_g²)), s_i = Σ_{j ∈ g} d²_ij, W_g = Σ_{j<k ∈ g} d²_jk. This equals
betadisper's (type = "centroid") PCoA route exactly, negative eigenvalues included: the full
pseudo-Euclidean embedding reproduces d², and betadisper subtracts the negative axes' squared distances
just as this form does. Where z_i² < 0 (possible for non-Euclidean distances) z_i is 0, as in vegan.
(vegan also drops axes with |eigenvalue| ≤ 1.5e-8 · λ₁; the difference is of that order.)

The statistic is the one-way ANOVA F of z by group; the p-value permutes the ANOVA residuals
(z minus group mean) as ``permutest.betadisper`` does: (k + 1) / (permutations + 1).

Ties (exact arithmetic). z comes out of a cancellation (s_i/n_g − W_g/n_g²), so dispersions that are equal in
exact arithmetic differ in float64 by rounding, and a between-group sum of squares B that is exactly 0 is
computed as ~1e-31 — its F then depends on the backend's summation order (issue: 0.897 vs 0.83 for one design,
24.0 vs inf for another). A sum of squares below ``ROUNDING`` (64 ulps) of Σz² is rounding of an exact 0:
B ≈ 0 is an F of exactly 0 (every permutation is at least as large: p = 1); W ≈ 0 (every group's z constant)
is F = inf, and the residuals the test permutes are all 0, so no permuted F exists (p NaN, as vegan's NA);
both ≈ 0 (z constant) is F = 0/0 = NaN with p NaN. Otherwise a permuted F counts as ≥ the observed F when
its between-group share of the residuals' sum of squares is within ``TIE_RTOL`` (1e-9) of the observed share
B/(B + W) or above — ties in exact arithmetic always count, on every backend.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from stats_core import _resample
from stats_core.distance import group_row_sums
from stats_core.results import PermutationTestResult

# Relative size (to Σz²) below which a sum of squared differences of z is rounding of an exact 0: z² carries an
# error of a few ulps of the d² sums it is the difference of, so even a z of exactly 0 is off by at most ~1e-8·d.
ROUNDING = 64 * float(np.finfo(np.float64).eps)


def distances_to_centroid(
    distances: np.ndarray, codes: np.ndarray, sizes: np.ndarray, *, backend: str = "auto"
) -> np.ndarray:
    """z_i, each object's distance to its group centroid (inputs validated, condensed values by the kernel's pass)."""
    g = sizes.shape[0]
    within = group_row_sums(distances, codes, g, squared=True, backend=backend)[np.arange(codes.shape[0]), codes]
    per_group = np.bincount(codes, weights=within, minlength=g) / 2.0
    n_g = sizes.astype(np.float64)[codes]
    squared = within / n_g - per_group[codes] / (n_g * n_g)
    return np.sqrt(np.maximum(squared, 0.0))


def permdisp(
    distances: object,
    grouping: object,
    permutations: int = 999,
    seed: int | None = None,
    *,
    strata: object = None,
    backend: str = "auto",
) -> PermutationTestResult:
    """PERMDISP of ``distances`` (condensed or square) by ``grouping`` (n labels, every group ≥ 2 members).

    Returns the ANOVA F of distances-to-centroid as ``statistic``, the permutation ``pvalue`` and the
    distances themselves (``distances_to_centroid``, shape (n,), units of the input distances). ``strata``
    (n block labels) keeps the residual permutations within blocks, as ``permutest(..., how(blocks =))``.
    """
    # The row-sum kernel checks finite/non-negative in its own pass; the full check runs only to name a bad value.
    d = _resample.design(distances, grouping, permutations, seed, backend, min_size=2, strata=strata)
    group_f = d.kernels.group_f
    z = distances_to_centroid(d.distances, d.codes, d.sizes, backend=backend)
    g = d.sizes.shape[0]
    means = np.bincount(d.codes, weights=z, minlength=g) * d.inverse_sizes
    residuals = z - means[d.codes]
    within = float((residuals * residuals).sum())
    between = float((d.sizes * (means - z.mean()) ** 2).sum())
    total = between + within
    noise = ROUNDING * float((z * z).sum())  # what rounding can leave of a sum of squares that is exactly 0
    if within <= noise:
        # z constant (F = 0/0) or constant within every group (F = inf): the permuted residuals are all 0
        observed = math.nan if between <= noise else math.inf
        result = _resample.permutation_test("PERMDISP", observed, lambda block: 0, d, distances_to_centroid=z)
        return replace(result, pvalue=math.nan)
    if between <= noise:  # exactly 0 within rounding: every permuted F is at least as large
        return _resample.permutation_test("PERMDISP", 0.0, lambda block: block.shape[0], d, distances_to_centroid=z)
    observed = float(group_f(z, d.codes[None, :], d.inverse_sizes)[0])
    # F ≥ F_obs ⟺ the permuted between-group share of the residuals' sum of squares reaches the observed
    # share B/T; ties within TIE_RTOL of that share count (module docstring), as F of the lowered share
    share = max(between / total - _resample.TIE_RTOL, 0.0)
    lowest = (share / (g - 1)) / ((1.0 - share) / (d.n - g))

    def count_block(block: np.ndarray) -> int:
        with np.errstate(invalid="ignore", divide="ignore"):
            return int((group_f(residuals, block, d.inverse_sizes) >= min(lowest, observed)).sum())

    return _resample.permutation_test("PERMDISP", observed, count_block, d, distances_to_centroid=z)
