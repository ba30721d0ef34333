"""Coverage of hofcat's tau and CAT intervals for the population estimand, per regime, with binomial intervals.

Run: ``python -m benches.coverage [--quick] [--replicates N] [--seed S]``. No HTTP: answers are drawn in process
from ``runner.endpoints.sim.respondent.AnswerModel`` — the response model ``hofcat serve-sim`` serves (its
answer distributions at temperature 1, top_p 1) — for K countries whose planted scores are known, so the
estimand is known exactly: tau (per dimension) and the CAT score between the model's *expected* indices
(``AnswerModel.expected_indices``, infinitely many seeds) and the reference. Each replicate plants a new truth
(reference scores uniform in 15–85) and draws the seeds; the point estimates, SEs, exact p-values and intervals
are hofcat's own functions (``runner.analyze.agreement`` computes them the same way).

Regimes (``REGIMES``): *null* — signal 0, every country answers alike (tau undefined; the measure is how often
an interval excludes 0, which must be ≤ 1 − level); *weak* — planted scores unrelated to the reference, signal
0.5 (index points per score point: the countries differ by less than the SE of 5 seeds); *strong* — planted =
reference + N(0, 5), signal 4; *boundary* — planted = reference, signal 2 (tau = 1 everywhere). Countries 3, 4,
6, 10, 20; seeds 5, 20. Printed per cell: the truth's mean tau and CAT; coverage of the tau intervals (the six
dimensions of every replicate pooled: their answers are independent draws, so 6 × replicates Bernoulli trials)
and of the CAT interval, each with its Clopper–Pearson 95 % interval; the share of tau / CAT intervals that
exclude 0 and of exact p ≤ 1 − level; the mean width; and whether an interval ever excluded 0 beside p > 1 − level
(it must not). ``--quick`` runs a reduced grid (the test uses ``cell``).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
from scipy.stats import binomtest

from runner.analyze.agreement import masked_mean
from runner.endpoints.sim.respondent import AnswerModel
from runner.score.indices import indices_from_means
from runner.score.intervals import agreement_intervals, index_degrees_of_freedom, index_standard_errors, with_test
from runner.score.permutation import permutation_pvalues
from runner.score.ranking import rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.vocab import QUESTIONS

LEVEL = 0.95
SEEDS = (5, 20)
COUNTRIES = (3, 4, 6, 10, 20)
REGIMES = {  # name → (signal, planted scores from the reference)
    "null": 0.0,
    "weak": 0.5,
    "strong": 4.0,
    "boundary": 2.0,
}
PERMUTATIONS = 999  # Monte Carlo relabellings beyond 9 countries
EPS = 1e-12  # a bound equal to the truth up to rounding covers it


def planted(k: int, regime: str, rng: np.random.Generator) -> tuple[dict, np.ndarray]:
    """Planted scores (country → dimension → score) for the simulator and the (K, 6) reference."""
    reference = rng.uniform(15, 85, size=(k, len(DIMENSIONS)))
    if regime == "weak":
        scores = rng.uniform(15, 85, size=reference.shape)
    elif regime == "strong":
        scores = np.clip(reference + rng.normal(0, 5, size=reference.shape), 0, 100)
    else:  # null (the signal is 0: scores do not matter) and boundary
        scores = reference
    table = {f"c{i}": {d: float(scores[i, j]) for j, d in enumerate(DIMENSIONS)} for i in range(k)}
    return table, reference


def replicate(seeds: int, k: int, regime: str, rng: np.random.Generator) -> dict[str, np.ndarray | float]:
    """One planted truth and one draw of seeds → truth, estimates, p-values and intervals."""
    table, reference = planted(k, regime, rng)
    model = AnswerModel(table, signal=REGIMES[regime])
    names = list(table)
    probs = np.array([[model.distribution(c, q, 1.0, 1.0) for q in QUESTIONS] for c in names])  # (K, 24, 5)
    expected = np.array([[model.expected_indices(c)[d] for d in DIMENSIONS] for c in names])
    truth = rank_agreement(expected[None], reference)
    u = rng.random((k, seeds, 24, 1))
    own = list(1.0 + (u >= np.cumsum(probs, axis=-1)[:, None]).sum(axis=-1))  # (seeds, 24) answers per country
    point = indices_from_means(np.stack([masked_mean(x, axis=0) for x in own]))
    se = np.stack([index_standard_errors(x) for x in own])
    df = np.stack([index_degrees_of_freedom(np.isfinite(x).sum(axis=0)) for x in own])
    agree = rank_agreement(point[None], reference, tie_resolution=0.0)
    tau, cat = agree.kendall[0], float(agree.cat_score[0])
    pv = permutation_pvalues(
        point, reference, monte_carlo=PERMUTATIONS, seed=int(rng.integers(2**32)), tie_resolution=0
    )
    (t_low, t_high), (c_low, c_high) = agreement_intervals(point, se, df, reference, tau, LEVEL)
    tau_ci = np.array([with_test(t_low[j], t_high[j], tau[j], pv.kendall_p[j], LEVEL) for j in range(6)])
    cat_ci = with_test(c_low, c_high, cat, pv.cat_p, LEVEL)
    return {
        "true_tau": truth.kendall[0],
        "true_cat": float(truth.cat_score[0]),
        "tau_ci": tau_ci,
        "cat_ci": np.array(cat_ci),
        "tau_p": pv.kendall_p,
        "cat_p": pv.cat_p,
    }


def _rate(hits: int, trials: int) -> tuple[float, float, float]:
    """Share with its Clopper–Pearson 95 % interval; NaN when there were no trials."""
    if trials == 0:
        return np.nan, np.nan, np.nan
    ci = binomtest(hits, trials).proportion_ci(0.95, method="exact")
    return hits / trials, ci.low, ci.high


def cell(seeds: int, k: int, regime: str, replicates: int, seed: int) -> dict[str, object]:
    """Coverage (or null exclusion) of one grid cell over ``replicates`` planted truths."""
    rng = np.random.default_rng([seed, seeds, k, list(REGIMES).index(regime)])
    counts = dict.fromkeys(("tau_cov", "tau_n", "cat_cov", "cat_n", "tau_ex", "tau_def", "cat_ex", "tau_p", "cat_p"), 0)
    counts["contradictions"] = 0
    widths, true_tau, true_cat = [], [], []
    for _ in range(replicates):
        r = replicate(seeds, k, regime, rng)
        lo, hi = r["tau_ci"][:, 0], r["tau_ci"][:, 1]
        defined = np.isfinite(lo)
        counts["tau_def"] += int(defined.sum())
        counts["tau_ex"] += int(((lo > 0) | (hi < 0))[defined].sum())
        counts["tau_p"] += int((r["tau_p"] <= 1 - LEVEL)[defined].sum())
        counts["contradictions"] += int((((lo > 0) | (hi < 0)) & ~(r["tau_p"] <= 1 - LEVEL))[defined].sum())
        widths += list((hi - lo)[defined])
        c_lo, c_hi = r["cat_ci"]
        counts["cat_ex"] += int(c_lo > 0 or c_hi < 0)
        counts["cat_p"] += int(r["cat_p"] <= 1 - LEVEL)
        counts["contradictions"] += int((c_lo > 0 or c_hi < 0) and not r["cat_p"] <= 1 - LEVEL)
        truth = r["true_tau"]
        ok = defined & np.isfinite(truth)
        counts["tau_n"] += int(ok.sum())
        counts["tau_cov"] += int(((lo - EPS <= truth) & (truth <= hi + EPS))[ok].sum())
        if np.isfinite(r["true_cat"]) and np.isfinite(c_lo):
            counts["cat_n"] += 1
            counts["cat_cov"] += int(c_lo - EPS <= r["true_cat"] <= c_hi + EPS)
            true_cat.append(r["true_cat"])
        true_tau += list(truth[np.isfinite(truth)])
    return {
        "true_tau": float(np.mean(true_tau)) if true_tau else np.nan,
        "true_cat": float(np.mean(true_cat)) if true_cat else np.nan,
        "tau": _rate(counts["tau_cov"], counts["tau_n"]),
        "cat": _rate(counts["cat_cov"], counts["cat_n"]),
        "tau_excludes_0": _rate(counts["tau_ex"], counts["tau_def"]),
        "cat_excludes_0": _rate(counts["cat_ex"], replicates),
        "tau_p_share": counts["tau_p"] / max(counts["tau_def"], 1),
        "cat_p_share": counts["cat_p"] / replicates,
        "width": float(np.mean(widths)) if widths else np.nan,
        "contradictions": counts["contradictions"],
    }


def run(quick: bool, replicates: int, seed: int) -> list[dict]:
    """Every cell of the grid (reduced when ``quick``) → one row each."""
    grid = itertools.product((5,), (4, 10), REGIMES) if quick else itertools.product(SEEDS, COUNTRIES, REGIMES)
    return [
        {"seeds": s, "countries": k, "regime": regime} | cell(s, k, regime, replicates, seed) for s, k, regime in grid
    ]


def _share(rate: tuple[float, float, float]) -> str:
    """'0.95 (0.90–0.98)' or '–'."""
    value, low, high = rate
    return "–" if not np.isfinite(value) else f"{value:.3f} ({low:.2f}–{high:.2f})"


def render(rows: list[dict]) -> str:
    """The table docs/analysis.md shows (markdown)."""
    head = (
        "| seeds | countries | regime | true tau (mean) | true CAT | tau coverage | CAT coverage | tau excl. 0 "
        "| CAT excl. 0 | tau p ≤ 0.05 | CAT p ≤ 0.05 | mean tau width | excl. 0 with p > 0.05 |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [
        f"| {r['seeds']} | {r['countries']} | {r['regime']} | {r['true_tau']:.2f} | {r['true_cat']:.2f} "
        f"| {_share(r['tau'])} | {_share(r['cat'])} | {_share(r['tau_excludes_0'])} | {_share(r['cat_excludes_0'])} "
        f"| {r['tau_p_share']:.3f} | {r['cat_p_share']:.3f} | {r['width']:.2f} | {r['contradictions']} |"
        for r in rows
    ]
    return "\n".join(lines)


def main() -> None:
    """Print coverage and null exclusion per regime."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced grid (5 seeds, 4 and 10 countries)")
    parser.add_argument("--replicates", type=int, default=None, help="replicates per cell (default 100, quick 30)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    replicates = args.replicates or (30 if args.quick else 100)
    start = time.perf_counter()
    rows = run(args.quick, replicates, args.seed)
    print(f"nominal coverage {LEVEL}; {replicates} replicates per cell; {time.perf_counter() - start:.0f} s")
    print(render(rows))


if __name__ == "__main__":
    main()
