"""PERMDISP (Anderson 2006): test of homogeneous multivariate dispersions, as ``vegan::betadisper`` + ``permutest``.

Each object's distance to its group centroid in the principal-coordinate space of the distances is
z_i = sqrt(max(0, s_i / n_g − W_g / n_g²)), s_i = Σ_{j ∈ g} d²_ij, W_g = Σ_{j<k ∈ g} d²_jk. This equals
betadisper's (type = "centroid") PCoA route exactly, negative eigenvalues included: the full
pseudo-Euclidean embedding reproduces d², and betadisper subtracts the negative axes' squared distances
just as this form does. Where z_i² < 0 (possible for non-Euclidean distances) z_i is 0, as in vegan.
(vegan also drops axes with |eigenvalue| ≤ 1.5e-8 · λ₁; the difference is of that order.)

The statistic is the one-way ANOVA F of z by group; the p-value permutes the ANOVA residuals
(z minus group mean) as ``permutest.betadisper`` does: (k + 1) / (permutations + 1).
"""

from __future__ import annotations

import numpy as np

from stats_core import _resample
from stats_core.distance import group_row_sums
from stats_core.results import PermutationTestResult


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
    observed = float(group_f(z, d.codes[None, :], d.inverse_sizes)[0])
    residuals = z - (np.bincount(d.codes, weights=z) * d.inverse_sizes)[d.codes]

    def count_block(block: np.ndarray) -> int:
        return _resample.count_at_least(group_f(residuals, block, d.inverse_sizes), observed)

    return _resample.permutation_test("PERMDISP", observed, count_block, d, distances_to_centroid=z)
