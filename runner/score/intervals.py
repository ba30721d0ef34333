"""Confidence intervals for tau and the CAT score of the model's *population* index scores, and their SEs.

Estimand. A model's population index score on a dimension is the index of its expected answers — the mean
over infinitely many seeds (respondents). The interval is for tau-b (and the CAT score) between those population
scores of *the countries compared* and the reference. Tau of the estimated indices is biased towards 0 (noise in
the scores breaks ranks the population keeps), so neither a bootstrap over seeds (which adds the noise once
more) nor any interval centred on the estimate covers it where the noise is large.

Construction: sign bounds. Tau-b is a sum over country pairs of sign(μ_i − μ_j)·sign(y_i − y_j) over
sqrt(n_x·n_y). The order of a pair is *determined* when Welch's t test at the interval's level orders it:
|x_i − x_j| > t_{1 − α/2}·sqrt(s_i² + s_j²) (x the estimates, s their SEs, α = 1 − level, the pair's Welch
degrees of freedom). A determined pair counts as in the estimate; an undetermined one may be concordant,
discordant or tied, and the interval is the range of tau-b over those choices (transitivity is not imposed,
which only widens it). The CAT interval is the mean of the six dimensions' bounds. Nothing is drawn (the
interval is a function of the estimates and SEs), nothing is pulled towards the reference or a fitted line —
the reference enters only through the sign of each pair — and the interval reaches ±1 whenever the data leave
every pair that could be discordant undetermined. The pairs are not adjusted for multiplicity (a Bonferroni
version is valid by construction but spans nearly [−1, 1] at 5 seeds); coverage is therefore measured rather
than proved: ≥ 0.98 for tau and 1.00 for CAT in every interior regime of benches/coverage.py, and below nominal
for a true tau of 1 with 6 or more countries, where some of the many close pairs are ordered wrongly
(``design_note`` says so).

Consistency with the exact test. The interval always contains the point estimate, and it contains 0 whenever the
exact permutation p-value (runner/score/permutation.py) exceeds 1 − level: an interval never excludes 0 where the
test does not reject. Under no association the exact test rejects with probability ≤ 1 − level, so at most that
share of intervals excludes 0 — by construction, at every design size. When the design's smallest attainable p
exceeds 1 − level (3 countries: 1/3) the interval always contains 0 (``design_note`` says so next to it). The
other direction is not forced: with few seeds the interval may contain 0 beside a small p (the test asks whether
the ranking is related to the reference; the interval also says how little the seeds fix the population's pair
orders).

Finite seeds are never certainty (``floored_covariance``): the variance of each question's answer is at least
that of an answer that leaves the observed option with the probability the rule of three cannot exclude after n
alike answers, p_n = 1 − 0.05^(1/n) (≈ 3/n), by one option step: p_n·(1 − p_n). Five identical answers give
variance 0.25 (SE 0.22 of the mean), not 0.

Coverage is measured, not assumed: ``python -m benches.coverage`` (table in docs/analysis.md).

Functions take per-question means and their covariance, so expected values computed from answer
distributions enter the same way as sample means.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import t as student_t

from runner.score.indices import WEIGHTS

__all__ = [
    "BOUNDARY_COUNTRIES",
    "RULE_OF_THREE_LEVEL",
    "agreement_intervals",
    "answer_variance_floor",
    "design_note",
    "floored_covariance",
    "index_degrees_of_freedom",
    "index_standard_errors",
    "index_variance",
    "mean_covariance",
    "sign_bounds",
    "with_test",
]

BOUNDARY_COUNTRIES = 6  # from here a true tau of 1 is under-covered (benches/coverage.py, boundary rows)
RULE_OF_THREE_LEVEL = 0.05  # p_n = 1 − RULE_OF_THREE_LEVEL^(1/n): the 95 % upper bound on an unseen answer


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


def answer_variance_floor(n: np.ndarray) -> np.ndarray:
    """The least variance of one answer that n alike answers leave (module docstring): p_n·(1 − p_n), NaN for n < 1."""
    count = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = 1.0 - RULE_OF_THREE_LEVEL ** (1.0 / np.where(count >= 1, count, np.nan))
    return p * (1.0 - p)


def floored_covariance(covariance: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The covariance of the question means with each variance at least ``answer_variance_floor(n_q) / n_q``.

    Raising the diagonal keeps the matrix positive semi-definite; NaN entries stay NaN.
    """
    out = np.array(covariance, dtype=np.float64, copy=True)
    diagonal = np.diag_indices_from(out)
    count = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        floor = answer_variance_floor(count) / count
    out[diagonal] = np.where(np.isfinite(out[diagonal]), np.fmax(out[diagonal], floor), np.nan)
    return out


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

    From ``mean_covariance``, floored (``floored_covariance``: finite seeds are never certainty), through
    ``index_variance``; NaN where an index's questions have fewer than two units.
    """
    cov, n = mean_covariance(values)
    return np.sqrt(index_variance(floored_covariance(cov, n)))


def index_degrees_of_freedom(n: np.ndarray) -> np.ndarray:
    """Degrees of freedom of each index's SE from answer counts: (..., 24) n_q → (..., 6), the least n_q − 1 used."""
    count = np.asarray(n, dtype=np.float64)
    used = WEIGHTS != 0  # (24, 6)
    least = np.where(used[None], count.reshape(-1, 24)[:, :, None], np.inf).min(axis=1)
    return (least - 1.0).reshape(count.shape[:-1] + (6,))


def _pair_terms(
    x: np.ndarray, s: np.ndarray, df: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per country pair (i < j): sign(y_i − y_j), x_i − x_j, its SE and Welch degrees of freedom (inf when exact)."""
    i, j = np.triu_indices(x.shape[0], 1)
    sy = np.sign(y[i] - y[j])
    se2 = s[i] ** 2 + s[j] ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        welch = np.where(se2 > 0, se2**2 / (s[i] ** 4 / df[i] + s[j] ** 4 / df[j]), np.inf)
    return sy, x[i] - x[j], np.sqrt(se2), np.where(np.isfinite(welch) | (se2 == 0), welch, np.inf)


def sign_bounds(
    x: np.ndarray, s: np.ndarray, df: np.ndarray, y: np.ndarray, pair_alpha: float
) -> tuple[float, float, bool]:
    """Range of tau-b(μ, y) over the population scores μ whose pair orders agree with every determined pair.

    ``x``, ``s``, ``df``, ``y`` (K,): estimates, SEs, SE degrees of freedom, reference; a pair is determined when
    |x_i − x_j| > t_{1 − pair_alpha/2, Welch df}·SE (or its SE is 0). Undetermined pairs may be concordant,
    discordant or tied. Returns (low, high, whether μ may be constant — tau undefined — within the bounds).
    """
    sy, d, se, nu = _pair_terms(x, s, df, y)
    n0 = d.shape[0]
    n_y = int((sy != 0).sum())
    critical = student_t.ppf(1.0 - pair_alpha / 2.0, np.where(np.isfinite(nu), nu, 1e12))
    sd = np.sign(d)
    determined = (se == 0) | (np.abs(d) > critical * se)
    s_det = float((sd * sy)[determined].sum())
    n_x = n0 - int((determined & (sd == 0)).sum())  # determined ties leave n_x
    free_y = int((~determined & (sy != 0)).sum())  # undetermined pairs whose order moves tau
    free_0 = int((~determined & (sy == 0)).sum())  # undetermined pairs tied in y: only n_x moves
    ties = np.arange(free_y + 1, dtype=np.float64)  # undetermined y-pairs taken as tied
    values = []
    for tied_0 in (0, free_0):
        pairs_x = n_x - tied_0 - ties
        ok = pairs_x > 0
        scale = 1.0 / np.sqrt(np.where(ok, pairs_x, 1.0) * max(n_y, 1))
        values += list(((s_det + free_y - ties) * scale)[ok]) + list(((s_det - free_y + ties) * scale)[ok])
    constant = n_x - free_0 - free_y <= 0
    if not values or n_y == 0:
        return math.nan, math.nan, constant
    return max(-1.0, min(values)), min(1.0, max(values)), constant


def with_test(low: float, high: float, point: float, p: float, level: float) -> tuple[float, float]:
    """The interval widened to contain the point estimate, and 0 when the exact p exceeds 1 − ``level``."""
    if not (np.isfinite(low) and np.isfinite(high) and np.isfinite(point)):
        return math.nan, math.nan
    low, high = min(low, point), max(high, point)
    if not p <= 1.0 - level:  # NaN p (no test) cannot vouch for an association either
        low, high = min(low, 0.0), max(high, 0.0)
    return low, high


def unreachable_note(p_min: float, alpha: float = 0.05) -> str:
    """'' or the note that a test whose smallest attainable p is ``p_min`` cannot reach p < ``alpha``."""
    return f"cannot reach p < {alpha:g}: smallest attainable p = {p_min:.3g}" if p_min > alpha else ""


def design_note(p_min: float, level: float, countries: int) -> str:
    """What the design cannot show, decided from the design (its smallest attainable p, its number of countries),
    never from the data; '' when nothing."""
    notes = []
    if np.isfinite(p_min) and p_min > 1.0 - level:
        notes.append(f"smallest attainable p {p_min:.3g} > {1.0 - level:.3g}: the interval always contains 0")
    if countries >= BOUNDARY_COUNTRIES:
        notes.append(f"{countries} countries: a true tau of 1 is covered less often than nominal")
    return "; ".join(notes)


def agreement_intervals(
    point: np.ndarray,
    se: np.ndarray,
    df: np.ndarray,
    ref: np.ndarray,
    tau: np.ndarray,
    level: float,
    undefined_tau: str = "nan",
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[float, float]]:
    """Sign bounds for the population tau per dimension and for the CAT score (module docstring), before the test.

    ``point``, ``se``, ``df``, ``ref`` (K, 6): estimated indices, their SEs and SE degrees of freedom, reference
    scores (NaN = not compared); ``tau`` (6,) the point taus (NaN = undefined, no interval). Returns (((6,) low,
    (6,) high), (cat_low, cat_high)); NaN where an SE is missing or fewer than 3 countries are compared. Apply
    ``with_test`` with the exact p-values for the published interval.
    """
    alpha = 1.0 - level
    dims = point.shape[1]
    usable = np.zeros(dims, dtype=bool)
    for j in range(dims):
        cols = np.isfinite(ref[:, j])
        usable[j] = (
            np.isfinite(tau[j])
            and cols.sum() >= 3
            and bool(np.isfinite(point[cols, j]).all() and np.isfinite(se[cols, j]).all())
        )
    low, high = np.full(dims, np.nan), np.full(dims, np.nan)
    cat_low = cat_high = 0.0
    for dim in np.flatnonzero(usable):
        j = int(dim)
        cols = np.isfinite(ref[:, j])
        args = (point[cols, j], se[cols, j], df[cols, j], ref[cols, j])
        low[j], high[j], constant = sign_bounds(*args, alpha)
        if undefined_tau == "-1" and constant:
            low[j] = -1.0
        cat_low, cat_high = cat_low + low[j], cat_high + high[j]
    defined = np.isfinite(tau)
    if not defined.any() or not usable[defined].all():
        return (low, high), (math.nan, math.nan)
    n = int(defined.sum())
    return (low, high), (cat_low / n, cat_high / n)
