"""Coverage of hofcat's tau and CAT intervals for the population estimand, on the simulator's respondent model.

Run: ``python -m benches.coverage [--quick] [--replicates N] [--seed S]``. No HTTP: answers are drawn in process
from ``runner.endpoints.sim.respondent.AnswerModel`` — the response model ``hofcat serve-sim`` serves (its
answer distributions at temperature 1, top_p 1) — for K countries whose planted scores are known, so the
estimand is known exactly: tau (per dimension) and the CAT score between the model's *expected* indices
(``AnswerModel.expected_indices``, infinitely many seeds) and the reference.

Grid: seeds per country (5, 20, 100) × countries (4, 10, 20) × signal (the simulator's index points per score
point: 0.5, 2, 4) × truth ("interior": planted scores = reference + noise, tau around 0.5–0.8; "boundary": planted
= reference, tau = 1). Each cell draws ``--replicates`` independent sets of seeds. Printed per cell: the truth's
mean tau and CAT, and the share of replicates whose interval covers it — hofcat's interval (``ci``,
runner/score/intervals.py) and the percentile bootstrap over seeds (``boot``, 200 resamples; the old interval) —
and whether every point estimate lay inside its own interval. ``--quick`` runs a reduced grid (the test uses it).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from runner.analyze.agreement import bootstrap_indices_of, masked_mean
from runner.endpoints.sim.respondent import AnswerModel
from runner.score.indices import indices_from_means
from runner.score.intervals import agreement_intervals, index_standard_errors
from runner.score.ranking import rank_agreement
from runner.survey.dimensions import DIMENSIONS
from runner.survey.vocab import QUESTIONS

LEVEL = 0.95
SEEDS = (5, 20, 100)
COUNTRIES = (4, 10, 20)
SIGNALS = (0.5, 2.0, 4.0)
TRUTHS = ("interior", "boundary")
BOOT_RESAMPLES = 200
EPS = 1e-12  # a bound equal to the truth up to rounding covers it


def planted(k: int, truth: str, rng: np.random.Generator) -> tuple[dict, np.ndarray]:
    """Planted scores (country → dimension → score) for the simulator and the (K, 6) reference."""
    reference = rng.uniform(15, 85, size=(k, len(DIMENSIONS)))
    scores = reference if truth == "boundary" else np.clip(reference + rng.normal(0, 15, size=reference.shape), 0, 100)
    table = {f"c{i}": {d: float(scores[i, j]) for j, d in enumerate(DIMENSIONS)} for i in range(k)}
    return table, reference


def cell(seeds: int, k: int, signal: float, truth: str, replicates: int, seed: int) -> dict[str, float]:
    """Coverage of one grid cell: shares of replicates whose intervals cover the truth, and the truth itself."""
    rng = np.random.default_rng([seed, seeds, k, int(signal * 10), TRUTHS.index(truth)])
    table, reference = planted(k, truth, rng)
    model = AnswerModel(table, signal=signal)
    names = list(table)
    probs = np.array([[model.distribution(c, q, 1.0, 1.0) for q in QUESTIONS] for c in names])  # (K, 24, 5)
    expected = np.array([[model.expected_indices(c)[d] for d in DIMENSIONS] for c in names])
    truth_agree = rank_agreement(expected[None], reference)
    true_tau, true_cat = truth_agree.kendall[0], float(truth_agree.cat_score[0])
    cumulative = np.cumsum(probs, axis=-1)
    covered = {"ci_tau": 0, "ci_cat": 0, "boot_tau": 0, "boot_cat": 0, "inside": 0, "tau_cells": 0}
    width = 0.0
    for r in range(replicates):
        u = rng.random((k, seeds, 24, 1))
        answers = 1.0 + (u >= cumulative[:, None]).sum(axis=-1)  # (K, seeds, 24) in 1…5
        own = list(answers)
        point = indices_from_means(np.stack([masked_mean(x, axis=0) for x in own]))
        se = np.stack([index_standard_errors(x) for x in own])
        agree = rank_agreement(point[None], reference)
        (t_low, t_high), (c_low, c_high) = agreement_intervals(point, se, reference, agree, LEVEL, seed=(seed, r))
        boot = rank_agreement(bootstrap_indices_of(own, BOOT_RESAMPLES, (seed, r)), reference)
        b_low, b_high = np.nanquantile(boot.kendall, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
        bc_low, bc_high = np.nanquantile(boot.cat_score, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
        ok = np.isfinite(true_tau) & np.isfinite(t_low)
        covered["tau_cells"] += int(ok.sum())
        covered["ci_tau"] += int(((t_low - EPS <= true_tau) & (true_tau <= t_high + EPS))[ok].sum())
        covered["boot_tau"] += int(((b_low - EPS <= true_tau) & (true_tau <= b_high + EPS))[ok].sum())
        covered["ci_cat"] += int(c_low - EPS <= true_cat <= c_high + EPS)
        covered["boot_cat"] += int(bc_low - EPS <= true_cat <= bc_high + EPS)
        tau = agree.kendall[0]
        inside = np.all(((t_low <= tau) & (tau <= t_high))[ok]) and c_low <= agree.cat_score[0] <= c_high
        covered["inside"] += int(inside)
        width += float(np.nanmean(t_high - t_low))
    cells = max(covered["tau_cells"], 1)
    return {
        "true_tau": float(np.nanmean(true_tau)),
        "true_cat": true_cat,
        "ci_tau": covered["ci_tau"] / cells,
        "boot_tau": covered["boot_tau"] / cells,
        "ci_cat": covered["ci_cat"] / replicates,
        "boot_cat": covered["boot_cat"] / replicates,
        "inside": covered["inside"] / replicates,
        "width": width / replicates,
    }


def run(quick: bool, replicates: int, seed: int) -> list[dict]:
    """Every cell of the grid (reduced when ``quick``) → one row each."""
    grid = (
        itertools.product((5, 20), (4, 10), (2.0,), TRUTHS)
        if quick
        else itertools.product(SEEDS, COUNTRIES, SIGNALS, TRUTHS)
    )
    rows = []
    for seeds, k, signal, truth in grid:
        rows.append(
            {"seeds": seeds, "countries": k, "signal": signal, "truth": truth}
            | cell(seeds, k, signal, truth, replicates, seed)
        )
    return rows


def render(rows: list[dict]) -> str:
    """The table docs/analysis.md shows (markdown)."""
    lines = [
        (
            "| seeds | countries | signal | truth | true tau (mean) | true CAT | tau: ci | tau: boot | CAT: ci "
            "| CAT: boot | point inside ci | mean ci width |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        (
            f"| {r['seeds']} | {r['countries']} | {r['signal']:g} | {r['truth']} | {r['true_tau']:.2f} | {r['true_cat']:.2f} "
            f"| {r['ci_tau']:.3f} | {r['boot_tau']:.3f} | {r['ci_cat']:.3f} | {r['boot_cat']:.3f} | {r['inside']:.2f} "
            f"| {r['width']:.2f} |"
        )
        for r in rows
    ]
    return "\n".join(lines)


def main() -> None:
    """Print nominal vs actual coverage for the grid."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced grid and 20 replicates (seconds)")
    parser.add_argument("--replicates", type=int, default=None, help="replicates per cell (default 200, quick 20)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    replicates = args.replicates or (20 if args.quick else 200)
    start = time.perf_counter()
    rows = run(args.quick, replicates, args.seed)
    print(f"nominal coverage {LEVEL}; {replicates} replicates per cell; {time.perf_counter() - start:.0f} s")
    print(render(rows))


if __name__ == "__main__":
    main()
