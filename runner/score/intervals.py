"""Confidence intervals for tau and the CAT score of the model's *population* index scores.

Estimand. A model's population index score on a dimension is the index of its expected answers — the mean
over infinitely many seeds (respondents). The quantity a user asks about is tau (and the CAT score) between
those population scores and the reference, not the distribution of tau over a finite set of seeds: tau of the
estimated indices is biased towards 0 (measurement error in the scores breaks ranks the population keeps), and
a percentile bootstrap over seeds adds the same error once more, so it describes a quantity still further from
the estimand (issue 13 measured 12.5 % coverage at 5 seeds with it).

Construction: a measurement-error model with an empirical-Bayes posterior of the population scores. Per
dimension, the estimated index of country k is x_k = μ_k + e_k with e_k ~ N(0, s_k²) (s_k the SE propagated from
the item variances and covariances, ``index_standard_errors``), and the population scores scatter around a line
in the reference, μ_k = a + b·y_k + r_k, r_k ~ N(0, τ²) — the model neither assumes nor excludes an association
(b = 0 is no association, τ² = 0 a perfect linear one). Each draw m takes the hyperparameters from their
sampling distribution around the least-squares fit of x on y (residual variance σ²_m = RSS / χ²_{K−2},
τ²_m = max(σ²_m − mean s², 0), (a, b)_m ~ N(fit, (XᵀX)⁻¹·RSS/(K − 2))), then the population scores from their
posterior, μ_k ~ N((1 − B_k)·x_k + B_k·(a + b·y_k)_m, (1 − B_k)·s_k²) with B_k = s_k² / (s_k² + τ²_m) — the
estimates shrunk towards the line by as much as their noise warrants, so the draws have the spread of the
population scores rather than of the noisy estimates. tau-b of each draw against the reference, and their mean
over the defined dimensions (the CAT score; dimensions drawn independently), give the posterior of the
estimand; the interval is its equal-tailed ``level`` quantile range, widened where needed to contain the point
estimate (so the estimate always lies inside its interval; widening only adds coverage). Deterministic answers
(s_k = 0) give B_k = 0: the scores are taken as exact.

Coverage is measured, not assumed: ``python -m benches.coverage`` (table in docs/analysis.md). Interior truths
reach the nominal level; a CAT score whose truth is 1 (every dimension ranked perfectly) is a boundary the
posterior rarely reaches, and is under-covered — ``CAT_BOUNDARY_NOTE`` is shown next to such intervals.

Functions take per-question means and their covariance, so expected values computed from answer
distributions enter the same way as sample means.
"""

from __future__ import annotations

import numpy as np

from runner.score.indices import WEIGHTS
from runner.score.ranking import Agreement, exact_cat, rank_agreement

__all__ = [
    "CAT_BOUNDARY_NOTE",
    "DRAWS",
    "agreement_intervals",
    "index_standard_errors",
    "index_variance",
    "mean_covariance",
    "posterior_scores",
]

DRAWS = 2000  # posterior draws per condition
CAT_BOUNDARY_NOTE = "upper limit near 1: a true CAT score of 1 is covered less often than nominal"
CAT_BOUNDARY = 0.9  # an interval reaching this high carries CAT_BOUNDARY_NOTE


def mean_covariance(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Covariance of the 24 question means of U units and the answer count per question.

    ``values`` (U, 24): one row per unit (seed, respondent), NaN = not answered. Returns ((24, 24) covariance
    of the means, (24,) counts n_q). Entry (q, r) is the pairwise-complete sample covariance (ddof 1) of the
    units that answered both, times n_qr / (n_q · n_r) — for complete data the usual S / n. Off the diagonal, 0
    where fewer than two units answered both (taken as uncorrelated); on it, NaN where fewer than two answered.
    """
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    n = finite.sum(axis=0).astype(np.float64)
    f = finite.astype(np.float64)
    both = f.T @ f  # n_qr
    x = np.where(finite, v, 0.0)
    sx = x.T @ f  # Σ over units answering both of x_q (row q, column r)
    sxy = x.T @ x
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = (sxy - sx * sx.T / both) / (both - 1.0)  # pairwise-complete covariance, ddof 1
        out = cov * both / np.outer(n, n)
    out[both < 2] = 0.0  # too few units answered both: the pair is taken as uncorrelated
    diagonal = np.diag_indices_from(out)
    out[diagonal] = np.where(n >= 2, out[diagonal], np.nan)
    return out, n


def index_variance(covariance: np.ndarray) -> np.ndarray:
    """Variance of the six indices from the covariance of the question means: (..., 24, 24) → (..., 6).

    var(index_d) = w_dᵀ Σ w_d with w_d the formula weights (``WEIGHTS``); a NaN entry an index needs makes it NaN.
    """
    c = np.asarray(covariance, dtype=np.float64)
    used = WEIGHTS != 0
    out = np.einsum("...qr,qd,rd->...d", np.where(np.isfinite(c), c, 0.0), WEIGHTS, WEIGHTS)
    bad = ~np.isfinite(c)
    spoiled = np.einsum("...qr,qd,rd->...d", bad.astype(np.float64), used.astype(np.float64), used.astype(np.float64))
    return np.where(spoiled > 0, np.nan, np.maximum(out, 0.0))


def index_standard_errors(values: np.ndarray) -> np.ndarray:
    """Standard errors (index points) of the six indices of a country's units: (U, 24) unit means → (6,).

    From ``mean_covariance`` through ``index_variance``; NaN where an index's questions have fewer than two units.
    """
    cov, _ = mean_covariance(values)
    return np.sqrt(index_variance(cov))


def posterior_scores(
    point: np.ndarray, se: np.ndarray, reference: np.ndarray, draws: int, rng: np.random.Generator
) -> np.ndarray:
    """Draws of the population scores of one dimension: (K,) estimates, SEs, reference → (draws, K).

    The empirical-Bayes posterior of the module docstring; needs K ≥ 3 finite rows (NaN draws otherwise).
    """
    x, s, y = (np.asarray(a, dtype=np.float64) for a in (point, se, reference))
    k = x.shape[0]
    if k < 3 or not (np.isfinite(x).all() and np.isfinite(s).all() and np.isfinite(y).all()):
        return np.full((draws, k), np.nan)
    design = np.column_stack([np.ones(k), y])
    beta, *_ = np.linalg.lstsq(design, x, rcond=None)
    rss = float(((x - design @ beta) ** 2).sum())
    df = k - 2
    total = rss / rng.chisquare(df, draws)  # residual variance σ²: scaled inverse χ² around RSS / df
    tau2 = np.maximum(total - float(np.mean(s**2)), 0.0)
    gram = design.T @ design
    if np.linalg.matrix_rank(gram) < 2:  # a constant reference: tau is undefined, nothing to draw
        return np.full((draws, k), np.nan)
    lines = rng.multivariate_normal(beta, np.linalg.inv(gram) * rss / df, draws) @ design.T
    with np.errstate(invalid="ignore", divide="ignore"):
        shrink = np.where(s > 0, s**2 / (s**2 + tau2[:, None]), 0.0)  # B_k; exact scores (s = 0) keep x
    mean = (1.0 - shrink) * x + shrink * lines
    return mean + rng.normal(size=(draws, k)) * np.sqrt((1.0 - shrink) * s**2)


def agreement_intervals(
    point: np.ndarray,
    se: np.ndarray,
    ref: np.ndarray,
    agree: Agreement,
    level: float,
    undefined_tau: str = "nan",
    *,
    draws: int = DRAWS,
    seed: int | tuple[int, ...] = 0,
    backend: str = "auto",
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[float, float]]:
    """Intervals for the population tau per dimension and for the CAT score (module docstring).

    ``point``, ``se``, ``ref`` (K, 6): estimated indices, their SEs, reference scores (NaN = not compared);
    ``agree`` = ``rank_agreement(point[None], ref)``; ``level`` e.g. 0.95; dimension j draws from
    ``default_rng(SeedSequence([*seed, j]))`` → (((6,) low, (6,) high), (cat_low, cat_high)). NaN where tau is
    undefined, an SE is missing or fewer than 3 countries are compared.
    """
    entropy = [seed] if isinstance(seed, (int, np.integer)) else list(seed)
    k, dims = point.shape
    sampled = np.full((draws, k, dims), np.nan)
    for j in range(dims):
        cols = agree.compared[:, j]
        if np.isfinite(agree.kendall[0, j]):
            rng = np.random.default_rng(np.random.SeedSequence([*entropy, j]))  # one stream per dimension
            sampled[:, cols, j] = posterior_scores(point[cols, j], se[cols, j], ref[cols, j], draws, rng)
    filled = np.where(np.isfinite(sampled), sampled, 0.0)  # placeholder; the dimension is masked below
    post = rank_agreement(filled, ref, undefined_tau=undefined_tau, backend=backend)
    ok = np.array([np.isfinite(sampled[:, agree.compared[:, j], j]).all() for j in range(dims)])
    taus = np.where(ok, post.kendall, np.nan)
    alpha = (1.0 - level) / 2.0
    low, high = np.full(dims, np.nan), np.full(dims, np.nan)
    tau = agree.kendall[0]
    for j in np.flatnonzero(ok & np.isfinite(tau)):
        values = taus[:, j][np.isfinite(taus[:, j])]
        if values.size:
            low[j] = min(float(np.quantile(values, alpha)), tau[j])
            high[j] = max(float(np.quantile(values, 1.0 - alpha)), tau[j])
    defined = np.isfinite(tau)
    cat = float(agree.cat_score[0])
    if not defined.any() or not ok[defined].all():
        return (low, high), (np.nan, np.nan)
    # the same exact mean as the point CAT score (runner/score/ranking.py), over the dimensions defined there
    use = defined[None, :] & (post.tau_denominator > 0)
    cats = exact_cat(post.tau_numerator, post.tau_denominator, use)
    cats = cats[np.isfinite(cats)]
    if cats.size == 0:
        return (low, high), (np.nan, np.nan)
    return (low, high), (min(float(np.quantile(cats, alpha)), cat), max(float(np.quantile(cats, 1.0 - alpha)), cat))
