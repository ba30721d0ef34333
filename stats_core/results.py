"""Frozen result objects with scipy-style field names (``statistic``, ``pvalue``, ``confidence_interval``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import polars as pl


class ConfidenceInterval(NamedTuple):
    """Lower and upper confidence limits, as in ``scipy.stats.bootstrap``; arrays shaped like the statistic."""

    low: float | np.ndarray
    high: float | np.ndarray


@dataclass(frozen=True)
class PermutationTestResult:
    """PERMANOVA or PERMDISP outcome: pseudo-F, its permutation p-value and the design it was computed on.

    ``pvalue`` is (k + 1) / (permutations + 1), k = permutations whose F ≥ the observed F; NaN when
    ``permutations`` is 0, or when no permuted F exists (PERMDISP with every group's distances constant).
    With ``exact``, ``permutations`` counts every distinct relabelling but the observed one, each visited once,
    and ``pvalue`` is exact: the proportion of all distinct relabellings, the observed one included, whose
    statistic is at least the observed (the seed is then unused). Else ``seed`` is the integer that reproduces
    the permutations; ``strata`` the block
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
    exact: bool = False  # every distinct relabelling was visited once (``permutations`` of them): p is exact

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


@dataclass(frozen=True)
class PermanovaTerm:
    """One term's row of a multi-term PERMANOVA (``stats_core.permanova_terms``; definitions in docs/analysis.md).

    ``df`` is the rank the term adds (0 when it is confounded with the terms it is tested against: its
    ``f``, ``omega_squared`` and ``p_value`` are then NaN); ``ss`` its sum of squares (sequential or
    marginal); ``r_squared`` = ss / SS_total; ``f`` = (ss / df) / (SS_residual / df_residual); ``omega_squared``
    the partial ω² (ss − df·MS_R) / (ss + (n − df)·MS_R); ``p_value`` = (k + 1) / (permutations + 1).
    """

    term: str
    df: int
    ss: float
    r_squared: float
    f: float
    omega_squared: float
    p_value: float


@dataclass(frozen=True)
class PermanovaTermsResult:
    """Multi-term PERMANOVA (``adonis2``'s table): one row per tested term, then the residual and the total.

    ``by`` is "terms" (sequential, type I SS) or "margin" (marginal, type III SS: as vegan, only terms not
    contained in a higher-order term of the model are tested). With ``exact``, ``permutations`` counts every
    distinct relabelling but the observed one, each visited once (p exact); else ``seed`` reproduces the permutations
    (``stats_core.permutation_indices``); ``strata`` are the block labels permutations stayed within.
    """

    rows: tuple[PermanovaTerm, ...]
    residual_df: int
    residual_ss: float
    total_df: int
    total_ss: float
    n: int
    permutations: int
    seed: int
    backend: str
    by: str
    strata: tuple | None = None
    exact: bool = False  # every distinct relabelling was visited once (``permutations`` of them): p is exact

    def row(self, term: str) -> PermanovaTerm:
        """The row of ``term`` (KeyError naming the tested terms when it has none)."""
        for row in self.rows:
            if row.term == term:
                return row
        raise KeyError(f"no row for term {term!r}; tested terms: {[r.term for r in self.rows]}")

    def to_polars(self) -> pl.DataFrame:
        """One table: a row per term, then "Residual" and "Total" (NaN F, ω² and p there), as adonis2 prints."""
        import polars as pl

        nan = float("nan")
        rows = [
            *self.rows,
            PermanovaTerm(
                "Residual", self.residual_df, self.residual_ss, self.residual_ss / self.total_ss, nan, nan, nan
            ),
            PermanovaTerm("Total", self.total_df, self.total_ss, 1.0, nan, nan, nan),
        ]
        table = pl.DataFrame(
            {
                "term": [r.term for r in rows],
                "df": [r.df for r in rows],
                "ss": [r.ss for r in rows],
                "r_squared": [r.r_squared for r in rows],
                "f": [r.f for r in rows],
                "omega_squared": [r.omega_squared for r in rows],
                "p_value": [r.p_value for r in rows],
            },
            schema={
                "term": pl.String,
                "df": pl.Int64,
                "ss": pl.Float64,
                "r_squared": pl.Float64,
                "f": pl.Float64,
                "omega_squared": pl.Float64,
                "p_value": pl.Float64,
            },
        )
        return table
