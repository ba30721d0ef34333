"""Frozen result objects with scipy-style field names (``statistic``, ``pvalue``, ``confidence_interval``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


class ConfidenceInterval(NamedTuple):
    """Lower and upper confidence limits, as in ``scipy.stats.bootstrap``; arrays shaped like the statistic."""

    low: float | np.ndarray
    high: float | np.ndarray


@dataclass(frozen=True)
class PermutationTestResult:
    """PERMANOVA or PERMDISP outcome: pseudo-F, its permutation p-value and the design it was computed on.

    ``pvalue`` is (k + 1) / (permutations + 1), k = permutations whose F ≥ the observed F; NaN when
    ``permutations`` is 0, or when no permuted F exists (PERMDISP with every group's distances constant).
    ``seed`` is the integer that reproduces the permutations; ``strata`` the block
    labels permutations stayed within (None: unrestricted). PERMANOVA also reports its sums of squares and
    effect sizes: R² = SS_A / SS_T (adonis2's ``R2``) and ω² = (SS_A − (g − 1) MS_W) / (SS_T + MS_W),
    MS_W = SS_W / (n − g) (the less biased estimate of the share of variation the grouping explains; can be < 0).
    With strata, R² and ω² are those of the groups within the strata: the same formulas on
    ``ss_total_within_strata`` (Σ over strata of each one's SS_T) split into SS_A,s and ``ss_within_cells`` (the
    stratum × group cells' SS_W), with df cells − strata and n − cells; adonis2's R², which ignores strata, is
    1 − ss_within / ss_total.
    """

    method: str
    statistic: float
    pvalue: float
    permutations: int
    n: int
    groups: tuple
    group_sizes: tuple[int, ...]
    seed: int
    strata: tuple | None = None
    distances_to_centroid: np.ndarray | None = None
    ss_total: float | None = None
    ss_within: float | None = None
    r_squared: float | None = None
    omega_squared: float | None = None
    ss_total_within_strata: float | None = None  # PERMANOVA with strata: Σ_s SS_T(s)
    ss_within_cells: float | None = None  # PERMANOVA with strata: SS_W of the stratum × group cells
    null_distribution: np.ndarray | None = None  # the permuted statistics, where kept (SS_h)

    @property
    def test_statistic_name(self) -> str:
        """Always 'pseudo-F' (the name skbio uses)."""
        return "pseudo-F"


@dataclass(frozen=True)
class BootstrapResult:
    """Bootstrap confidence intervals of Kendall's tau-b, shaped (groups?, dimensions) like the statistic.

    Mirrors ``scipy.stats.BootstrapResult``; ``undefined`` counts resamples whose tau was NaN (a constant
    side), which are left out of the interval and the standard error.
    """

    statistic: np.ndarray
    confidence_interval: ConfidenceInterval
    standard_error: np.ndarray
    bootstrap_distribution: np.ndarray | None
    undefined: np.ndarray
    n_resamples: int
    confidence_level: float
    method: str
    seed: int


@dataclass(frozen=True)
class DisparityResult:
    """Model Cultural Disparity (MCD = D_model / D_human) with its parts: per-dimension σ and their means D."""

    statistic: float
    model_disparity: float
    human_disparity: float
    model_sigma: np.ndarray
    human_sigma: np.ndarray
