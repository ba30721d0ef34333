"""The parse policy in the analysis: hand-worked means per policy, the CLI flags, and the summary record."""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl
import pytest

from runner.analyze.design import infer_design
from runner.analyze.run import AnalysisOptions, analyze_answers
from runner.analyze.tables import question_table
from runner.analyze.units import unit_array
from runner.parse.policy import Policy

# Two countries answer identically, two units (seeds) each. Per country:
#   Q1:  seed 1 ok 2,  seed 2 refusal          Q2:  both ambiguous
#   Q15: seed 1 ok 5,  seed 2 no_answer        Q18: both ok 1            Q21, Q24: both ok 3
ROWS = [
    (1, 1, "ok", 2),
    (1, 2, "refusal", None),
    (2, 1, "ambiguous", None),
    (2, 2, "ambiguous", None),
    (15, 1, "ok", 5),
    (15, 2, "no_answer", None),
    (18, 1, "ok", 1),
    (18, 2, "ok", 1),
    (21, 1, "ok", 3),
    (21, 2, "ok", 3),
    (24, 1, "ok", 3),
    (24, 2, "ok", 3),
]

# policy → question → (mean, n) over both seeds, worked by hand from ROWS (None: nothing scored)
EXPECTED = {
    Policy("drop", "answered"): {1: (2.0, 1), 2: (None, 0), 15: (5.0, 1), 18: (1.0, 2)},
    Policy("neutral", "answered"): {1: (2.5, 2), 2: (3.0, 2), 15: (4.0, 2), 18: (1.0, 2)},
    Policy("drop", "neutral"): {1: (2.0, 1), 2: (None, 0), 15: (3.0, 2), 18: (3.0, 2)},
    Policy("neutral", "neutral"): {1: (2.5, 2), 2: (3.0, 2), 15: (3.0, 2), 18: (3.0, 2)},
}
# policy → question → the two units' (seed 1, seed 2) scored answers (NaN: dropped)
NAN = np.nan
UNITS = {
    Policy("drop", "answered"): {1: [2, NAN], 2: [NAN, NAN], 15: [5, NAN], 18: [1, 1]},
    Policy("neutral", "answered"): {1: [2, 3], 2: [3, 3], 15: [5, 3], 18: [1, 1]},
    Policy("drop", "neutral"): {1: [2, NAN], 2: [NAN, NAN], 15: [3, 3], 18: [3, 3]},
    Policy("neutral", "neutral"): {1: [2, 3], 2: [3, 3], 15: [3, 3], 18: [3, 3]},
}
# UAI = 40(m18 − m15) + 25(m21 − m24), with m21 = m24 = 3
EXPECTED_UAI = {
    Policy("drop", "answered"): -160.0,
    Policy("neutral", "answered"): -120.0,
    Policy("drop", "neutral"): 0.0,
    Policy("neutral", "neutral"): 0.0,
}


def answers() -> pl.DataFrame:
    return pl.DataFrame(
        [
            {"model": "m", "country": country, "seed": seed, "question": q, "status": status, "option_id": option}
            for country in ("China", "Japan")
            for q, seed, status, option in ROWS
        ],
        schema={
            "model": pl.String,
            "country": pl.String,
            "seed": pl.Int64,
            "question": pl.Int64,
            "status": pl.String,
            "option_id": pl.Int16,
        },
    )


@pytest.mark.parametrize("policy", list(EXPECTED), ids=lambda p: f"{p.unparseable}-{p.health_items}")
def test_question_means_and_units_follow_the_policy(policy):
    frame = answers()
    table = question_table(frame.lazy(), ["model"], policy).collect().filter(pl.col("country") == "China")
    for q, (mean, n) in EXPECTED[policy].items():
        row = table.filter(pl.col("question") == q).row(0, named=True)
        assert (row["mean"], row["n"]) == (mean, n), (q, row)
    # status counts stay what the parser said, whatever the policy
    q15 = table.filter(pl.col("question") == 15).row(0, named=True)
    assert (q15["status_ok"], q15["status_no_answer"]) == (1, 1)
    ua = unit_array(frame.lazy(), infer_design(frame.columns), policy)
    china = ua.values[0, ua.countries.index("China")]  # (units, 24): seed 1, seed 2
    for q, per_unit in UNITS[policy].items():
        np.testing.assert_array_equal(china[:, q - 1], per_unit)


@pytest.mark.parametrize("policy", list(EXPECTED), ids=lambda p: f"{p.unparseable}-{p.health_items}")
def test_analysis_scores_indices_by_the_policy_and_records_it(policy):
    tables, summary = analyze_answers(answers().lazy(), AnalysisOptions(n_resamples=20, permutations=9, policy=policy))
    assert summary["policy"] == policy.to_dict()
    uai = tables["indices"].filter(pl.col("country") == "China")["uai"][0]
    assert uai == pytest.approx(EXPECTED_UAI[policy])
    assert (
        tables["questions"].filter((pl.col("country") == "China") & (pl.col("question") == 15))["mean"][0]
        == EXPECTED[policy][15][0]
    )


def test_default_policy_is_todays_behaviour():
    assert AnalysisOptions().policy == Policy("drop", "answered")
    _, summary = analyze_answers(answers().lazy(), AnalysisOptions(n_resamples=5, permutations=0))
    assert summary["policy"] == {"unparseable": "drop", "health_items": "answered", "partial": "sample"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], Policy("drop", "answered")),
        (["--unparseable", "neutral"], Policy("neutral", "answered")),
        (["--health-items", "neutral"], Policy("drop", "neutral")),
        (["--unparseable", "neutral", "--health-items", "neutral"], Policy("neutral", "neutral")),
        (["--partial", "drop"], Policy("drop", "answered", "drop")),
    ],
)
def test_analyze_command_passes_the_policy(monkeypatch, tmp_path, capsys, argv, expected):
    import runner.analyze.run as run_module
    from runner.commands import analyze

    seen = []
    monkeypatch.setattr(run_module, "analyze_run", lambda run_dir, options: seen.append(options) or tmp_path)
    monkeypatch.setattr(analyze, "headline", lambda out: [])  # nothing was analysed: no headline to read
    parser = argparse.ArgumentParser()
    analyze.add_arguments(parser)
    assert analyze.main(parser.parse_args([str(tmp_path), *argv])) == 0
    assert seen[0].policy == expected


def test_analyze_command_rejects_unknown_policy_values(capsys):
    from runner.commands import analyze

    parser = argparse.ArgumentParser()
    analyze.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["RUN", "--unparseable", "zero"])
    assert "--unparseable" in capsys.readouterr().err
