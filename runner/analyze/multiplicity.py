"""Adjusted p-values per family of tests: Holm (family-wise error) and Benjamini–Hochberg (false discovery rate).

One analysis tests many things at once (one sweep: 270 tau p-values, 39 factor tests, 144 set pairs). Each
family below is adjusted on its own, over the p-values of that table that are defined (NaN stays NaN and does
not count towards m); the raw p-value is kept beside ``<p>_holm`` and ``<p>_bh``. Definitions as
``statsmodels.stats.multitest.multipletests`` (methods "holm" and "fdr_bh"), against which they are tested:

- Holm: sort p ascending; adjusted p_(i) = max over j ≤ i of min(1, (m − j + 1)·p_(j)).
- Benjamini–Hochberg: adjusted p_(i) = min over j ≥ i of min(1, m·p_(j) / j).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

__all__ = ["FAMILIES", "adjust_families", "benjamini_hochberg", "holm"]

# table → (p-value column, what the family is), in the order the summary lists them
FAMILIES: dict[str, tuple[tuple[str, str], ...]] = {
    "kendall": (("kendall_p", "tau per dimension × condition"),),
    "cat": (("cat_p", "CAT score per condition"),),
    "factor_tests": (
        ("permanova_p", "PERMANOVA per factor × stratum"),
        ("permdisp_p", "PERMDISP per factor × stratum"),
    ),
    "kendall_differences": (("p", "tau difference per dimension × condition pair"),),
    "cat_differences": (("p", "CAT difference per condition pair"),),
    "set_separation": (("ss_h_p", "SS_h per set pair"),),
    "centroid_correlations": (("pvalue", "centroid Pearson r per set pair"),),
}


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values of a 1-D array; NaN entries stay NaN and are not counted."""
    return _step(pvalues, lambda p, m: np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p)))


def benjamini_hochberg(pvalues: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg step-up adjusted p-values of a 1-D array; NaN entries stay NaN and are not counted."""
    return _step(pvalues, lambda p, m: np.minimum.accumulate(np.minimum(1.0, m * p / np.arange(1, m + 1))[::-1])[::-1])


def _step(pvalues: np.ndarray, adjust: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    """``adjust(sorted defined p, m)`` scattered back to the input's order; NaN stays NaN and is not counted in m."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size:
        order = ok[np.argsort(p[ok], kind="stable")]  # stable: tied p-values keep their table order
        out[order] = adjust(p[order], ok.size)
    return out


def adjust_families(tables: dict[str, pl.DataFrame]) -> list[dict[str, object]]:
    """Add ``<p>_holm`` and ``<p>_bh`` beside every family's p column (in place); returns the families adjusted.

    Each returned entry names the table, the column, what was tested and m (the number of defined p-values).
    A table or column that this analysis did not produce is skipped.
    """
    done = []
    for name, columns in FAMILIES.items():
        table = tables.get(name)
        if table is None:
            continue
        for column, what in columns:
            if column not in table.columns:
                continue
            p = table[column].cast(pl.Float64).fill_null(np.nan).to_numpy()
            table = table.with_columns(
                pl.Series(f"{column}_holm", holm(p), nan_to_null=False),
                pl.Series(f"{column}_bh", benjamini_hochberg(p), nan_to_null=False),
            )
            done.append({"family": f"{name}.{column}", "tests": what, "m": int(np.isfinite(p).sum())})
        tables[name] = table
    return done
