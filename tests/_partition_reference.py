"""An independent variance partition: multivariate least squares (numpy ``lstsq``) on the profiles themselves.

For Euclidean distances PERMANOVA's sums of squares are the trace sums of squares of a linear model (MANOVA):
SS_total = ‖Z − mean‖², a term's marginal SS = RSS(model without it) − RSS(full model), its sequential SS =
RSS(terms before it) − RSS(terms up to it). No distance matrix, no stats_core: a check of the shares the
partition reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def dummies(codes: Sequence[object]) -> np.ndarray:
    """Treatment-coded columns of a factor."""
    levels = sorted(set(codes), key=str)
    return np.array([[float(c == level) for level in levels[1:]] for c in codes]).reshape(len(codes), -1)


def rss(z: np.ndarray, blocks: Sequence[np.ndarray]) -> float:
    """Residual trace SS of ``z`` on an intercept and the given column blocks."""
    x = np.hstack([np.ones((len(z), 1)), *blocks])
    beta, *_ = np.linalg.lstsq(x, z, rcond=None)
    return float(((z - x @ beta) ** 2).sum())


def shares(z: np.ndarray, factors: Mapping[str, Sequence[object]]) -> dict[str, dict[str, float]]:
    """Per factor: marginal and sequential R² (factors in the mapping's order), and the residual's share."""
    names = list(factors)
    blocks = [dummies(factors[f]) for f in names]
    total = float(((z - z.mean(axis=0)) ** 2).sum())
    full = rss(z, blocks)
    out: dict[str, dict[str, float]] = {}
    previous = total
    for i, name in enumerate(names):
        upto = rss(z, blocks[: i + 1])
        out[name] = {
            "margin": (rss(z, blocks[:i] + blocks[i + 1 :]) - full) / total,
            "sequential": (previous - upto) / total,
        }
        previous = upto
    out["Residual"] = {"margin": full / total, "sequential": full / total}
    return out


def standardised(x: np.ndarray) -> np.ndarray:
    """Columns z-scored (ddof 1), constant ones dropped (the partition's own rule, restated)."""
    sd = x.std(axis=0, ddof=1)
    keep = sd > 1e-12
    return (x[:, keep] - x[:, keep].mean(axis=0)) / sd[keep]
