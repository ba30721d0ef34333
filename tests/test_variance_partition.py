"""The variance partition (runner/analyze/partition.py): shares, planted effects, null rate, confounding, CLI and API.

Shares are checked against an independent computation (tests/_partition_reference.py: trace sums of squares by
numpy least squares on the standardised profiles, which PERMANOVA on Euclidean distances equals). Planted effects
come from the simulator's own respondents (tests/_planted.py draws them in-process, the same code the server
answers with); one test runs a real sweep against the server and the real CLI.
"""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from _partition_reference import shares, standardised
from _planted import simulated_answers
from runner.analyze.partition import partition_headline, variance_partition
from runner.analyze.run import AnalysisOptions, analysis_design
from runner.analyze.units import UnitArray, unit_array
from runner.endpoints.sim import SimConfig


def _units(answers: pl.DataFrame) -> UnitArray:
    lazy = answers.lazy()
    return unit_array(lazy, analysis_design(lazy, AnalysisOptions()))


def _terms(table: pl.DataFrame, scope: str = "all", profile: str = "items") -> pl.DataFrame:
    return table.filter((pl.col("scope") == scope) & (pl.col("profile") == profile) & pl.col("role").is_not_null())


def _profiles(answers: pl.DataFrame, factors: list[str]) -> pl.DataFrame:
    """Complete 24-item profiles per condition × country × seed, wide (the reference's own pivot)."""
    keys = [*factors, "country", "seed"]
    wide = answers.pivot("question", index=keys, values="option_id", aggregate_function="mean")
    return wide.drop_nulls([str(q) for q in range(1, 25)])


def test_shares_equal_least_squares_trace_sums_of_squares_on_an_unbalanced_design():
    config = SimConfig(seed=11, signal=1.0, position_bias=0.4)
    factors = {"language": ["en", "zh"], "option_order": ["given", "shuffled"], "temperature": [0.5, 1.0]}
    answers = simulated_answers(config, factors, countries=("U.S.A.", "China", "Japan", "Germany"), seeds=(1, 2, 3))
    # unbalanced: 15 answers lost, so their profiles are incomplete and left out
    answers = answers.with_row_index().with_columns(
        option_id=pl.when(pl.col("index") % 97 == 5).then(None).otherwise(pl.col("option_id"))
    )
    answers = answers.with_columns(
        status=pl.when(pl.col("option_id").is_null()).then(pl.lit("refusal")).otherwise(pl.lit("ok"))
    )
    table = variance_partition(_units(answers.drop("index")), permutations=19, seed=3)
    wide = _profiles(answers, ["language", "shuffled", "temperature"])
    assert wide.height < 2 * 2 * 2 * 4 * 3  # some profiles were dropped
    for profile in ("items",):
        terms = _terms(table, profile=profile)
        assert terms["profiles"].to_list() == [wide.height] * terms.height
        z = standardised(wide.select([str(q) for q in range(1, 25)]).to_numpy())
        column = {"option_order": "shuffled"}
        expected = shares(z, {t: wide[column.get(t, t)].to_list() for t in terms["term"]})
        for row in terms.iter_rows(named=True):
            assert row["r2"] == pytest.approx(expected[row["term"]]["margin"], rel=1e-9, abs=1e-12)
            assert row["r2_sequential"] == pytest.approx(expected[row["term"]]["sequential"], rel=1e-9, abs=1e-12)
        residual = table.filter(
            (pl.col("scope") == "all") & (pl.col("profile") == profile) & (pl.col("term") == "Residual")
        )
        assert residual["r2"][0] == pytest.approx(expected["Residual"]["margin"], rel=1e-9)


def test_a_planted_position_effect_is_significant_and_ranked_first():
    factors = {"option_order": ["given", "reversed"], "language": ["en", "zh"]}
    planted = simulated_answers(SimConfig(seed=2, signal=0.3, position_bias=1.0), factors)
    table = variance_partition(_units(planted), permutations=199, seed=1)
    terms = _terms(table).sort("rank")
    assert terms["term"][0] == "option_order" and terms["p"][0] <= 0.01, terms
    # a recency bias moves every item the same way; the indices, differences of items, mostly cancel it
    indices = _terms(table, profile="indices")
    assert indices.filter(pl.col("term") == "option_order")["r2"][0] < terms["r2"][0] / 4
    # nothing planted: the option order explains less than the country does
    null = simulated_answers(SimConfig(seed=2, signal=0.3), factors)
    terms = _terms(variance_partition(_units(null), permutations=199, seed=1))
    by = dict(zip(terms["term"], terms["r2"], strict=True))
    assert by["option_order"] < by["country"]


def test_a_planted_language_effect_is_the_largest_prompt_design_share_and_the_headline_says_so():
    factors = {"language": ["en", "zh", "ar"], "reply_format": ["number", "json"]}
    answers = simulated_answers(SimConfig(seed=4, signal=0.2, effects={"language": 0.6}), factors)
    table = variance_partition(_units(answers), permutations=199, seed=1)
    headline = partition_headline(table).filter(pl.col("profile") == "items").row(0, named=True)
    assert headline["top_design_term"] == "language" and headline["top_design_p"] <= 0.01
    assert headline["verdict"] == "prompt design"  # a weak country signal, a strong planted language effect
    assert set(headline["design_terms"]) == {"language", "reply_format"}


def test_the_headline_crowns_no_factor_when_none_is_significant():
    """Nothing planted, no country signal: chance shares grow with df (language 2, country 1), so comparing
    them would say "the prompt design explains more" every time; the headline must say neither is significant."""
    from runner.analyze.partition import headline_sentence

    for seed in (1, 2):
        null = simulated_answers(
            SimConfig(seed=seed, signal=0.0), {"language": ["en", "zh", "ar"]}, countries=("U.S.A.", "China")
        )
        headline = partition_headline(variance_partition(_units(null), permutations=99, seed=1))
        row = headline.filter(pl.col("profile") == "items").row(0, named=True)
        assert row["cultural_p"] > 0.05 and row["top_design_p"] > 0.05
        assert row["design_r2"] > row["cultural_r2"]  # the chance shares would have crowned the language
        assert row["verdict"] == "neither significant"
        assert "neither the country nor any prompt-design factor is significant" in headline_sentence(row)


@pytest.mark.slow
def test_a_factor_with_no_planted_effect_is_significant_at_the_nominal_rate():
    """Over replicate sweeps (a planted position effect and the country signal, nothing planted on the
    language), the language's permutation p falls below 0.05 in about 5 % of them."""
    from scipy.stats import binom

    replicates, alpha = 200, 0.05
    factors = {"option_order": ["given", "reversed"], "language": ["en", "zh"]}
    hits = {"items": 0, "indices": 0}
    for r in range(replicates):
        answers = simulated_answers(
            SimConfig(seed=100 + r, position_bias=0.3), factors, countries=("U.S.A.", "China", "Japan", "Brazil")
        )
        table = variance_partition(_units(answers), permutations=199, seed=r)
        for profile in hits:
            p = _terms(table, profile=profile).filter(pl.col("term") == "language")["p"][0]
            hits[profile] += p <= alpha
    low, high = binom.ppf(0.0005, replicates, alpha), binom.ppf(0.9995, replicates, alpha)
    for profile, count in hits.items():
        assert low <= count <= high, (profile, count / replicates)


def test_aliased_factors_are_merged_and_determined_ones_refused_with_notes():
    factors = {"language": ["en", "zh", "ar"], "model": ["m1", "m2"]}
    answers = simulated_answers(SimConfig(seed=6), factors, seeds=(1, 2))
    answers = answers.with_columns(
        endpoint=pl.col("model").replace({"m1": "e1", "m2": "e2"}),  # aliased with the model
        option_labels=pl.when(pl.col("language") == "ar").then(pl.lit("letters")).otherwise(pl.lit("digits")),
    )
    table = variance_partition(_units(answers), permutations=19, seed=1)
    everything = table.filter((pl.col("scope") == "all") & (pl.col("profile") == "items"))
    merged = everything.filter(pl.col("term") == "model/endpoint")
    assert merged.height == 1 and "aliased with endpoint" in merged["note"][0]
    assert merged["p"][0] is None and "leave it fixed" in merged["note"][0]  # blocked within the model
    refused = everything.filter(pl.col("term") == "option_labels")
    assert refused["r2"][0] is None and refused["note"][0].startswith("confounded: determined by language")
    assert {"model=m1", "model=m2"} <= set(table["scope"])


def test_a_factor_nested_within_the_country_is_refused_and_the_country_still_tested():
    answers = simulated_answers(SimConfig(seed=7), {"language": ["en", "zh"]}, seeds=(1, 2, 3, 4))
    # two simulated respondents per country (seeds 1-2 and 3-4): nested within the country
    answers = answers.with_columns(
        respondent=pl.col("country") + pl.when(pl.col("seed") <= 2).then(pl.lit("-a")).otherwise(pl.lit("-b"))
    )
    table = variance_partition(_units(answers), permutations=19, seed=1)
    items = table.filter(pl.col("profile") == "items")
    nested = items.filter(pl.col("term") == "respondent")
    assert nested["r2"][0] is None and "nested within country" in nested["note"][0]
    assert items.filter(pl.col("term") == "country")["r2"][0] > 0


def test_one_factor_designs_partition_or_say_why_not():
    answers = simulated_answers(SimConfig(seed=8), {}, seeds=(1, 2, 3))
    table = variance_partition(_units(answers), permutations=19, seed=1)
    assert set(_terms(table)["term"]) == {"country", "seed"}
    headline = partition_headline(table).row(0, named=True)
    assert headline["verdict"] == "not comparable" and headline["design_r2"] is None
    one_seed = variance_partition(_units(simulated_answers(SimConfig(seed=8), {}, seeds=(1,))), permutations=19)
    note = one_seed.filter(pl.col("term") == "(all)")["note"][0]
    assert "no residual degrees of freedom" in note
    tiny = variance_partition(
        _units(simulated_answers(SimConfig(seed=8), {}, countries=("China", "Japan"), seeds=(1, 2)))
    )
    row = _terms(tiny).filter(pl.col("term") == "country").row(0, named=True)
    assert row["p_min"] == pytest.approx(1 / 6) and "cannot reach p < 0.05" in row["note"]  # 4!/(2!2!) relabellings
    # 4 profiles in 4 cells: all 4! relabellings are visited once, so p is exact and never below p_min
    assert row["permutations"] == 23 and row["p"] >= row["p_min"]


@pytest.mark.slow
def test_cli_analyze_writes_the_partition_and_the_api_returns_it_equal(tmp_path):
    from _runner_support import make_spec
    from runner.api import variance_partition as api_partition
    from runner.cli import main
    from runner.endpoints.sim import SimServerThread
    from runner.sweep.session import run_sweep

    run = tmp_path / "run"
    with SimServerThread(SimConfig(seed=3, signal=0.5, position_bias=1.2)) as sim:
        design = {
            "personas": ["United States", "China", "Japan"],
            "questions": list(range(1, 25)),
            "seeds": [1, 2, 3],
            "temperature": [1.0],
            "option_order": ["given", "reversed"],
        }
        run_sweep(make_spec(sim.base_url, design=design), run, live=False)
    assert main(["analyze", str(run), "--permutations", "99", "--resamples", "50"]) == 0
    written = pl.read_parquet(run / "analysis" / "variance_partition.parquet")
    assert_frame_equal(written, api_partition(run, permutations=99))
    terms = _terms(written).sort("rank")
    assert terms["term"][0] == "option_order" and terms["p"][0] <= 0.02
    assert (run / "analysis" / "variance_headline.parquet").exists()
    assert main(["report", str(run)]) == 0
    page = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert "<h2>Variance partition</h2>" in page and "country explains" in page
    assert (run / "report" / "figures" / "variance_partition.svg").exists()


def test_no_permutations_asked_for_gives_no_p():
    answers = simulated_answers(SimConfig(seed=8, position_bias=1.0), {"option_order": ["given", "reversed"]})
    terms = _terms(variance_partition(_units(answers), permutations=0, seed=1))
    assert terms["permutations"].to_list() == [0] * terms.height
    assert terms["p"].is_null().all() and (terms["r2"] > 0).all()  # shares still, no test


@pytest.mark.parametrize(
    ("choice", "where"),
    [({"permutations": "9"}, "permutations"), ({"permutations": -1}, "permutations"), ({"seed": -1}, "seed"),
     ({"seed": 1.5}, "seed"), ({"n_resamples": 0}, "n_resamples"), ({"confidence_level": 1.0}, "confidence_level")],
)  # fmt: skip
def test_the_python_api_refuses_bad_options_with_a_located_error(choice, where):
    from runner.api import variance_partition as api_partition
    from runner.errors import InputError

    with pytest.raises(InputError, match=rf"^{where}: expected"):
        api_partition("/nonexistent-run", **choice)  # refused before the run directory is read


def test_no_complete_profile_is_a_note_not_a_traceback():
    import numpy as np

    empty = UnitArray(
        pl.DataFrame({"language": ["en", "zh"]}),
        ("China",),
        pl.DataFrame({"seed": [1]}),
        np.full((2, 1, 1, 24), np.nan),
    )
    table = variance_partition(empty)
    assert (
        table.filter(pl.col("term") == "(all)")["note"].to_list()
        == ["no factor varies among the profiles: nothing to partition"] * 2
    )
    assert partition_headline(table)["verdict"].to_list() == ["not comparable", "not comparable"]


def test_a_partly_confounded_factor_is_kept_with_a_note_and_its_share_is_still_exact():
    config = SimConfig(seed=9, effects={"language": 0.3})
    crossed = simulated_answers(
        config, {"language": ["en", "zh"], "option_labels": ["digits", "letters"]}, seeds=(1, 2)
    )
    # Arabic was asked with word labels only, and only Arabic was: the two share that column
    arabic = simulated_answers(config, {"language": ["ar"], "option_labels": ["words"]}, seeds=(1, 2))
    answers = pl.concat([crossed, arabic])
    table = variance_partition(_units(answers), permutations=19, seed=1)
    terms = _terms(table)
    kept = terms.filter(pl.col("term") == "option_labels").row(0, named=True)
    assert kept["df"] == 1 and "partly confounded: 1 of 2 df its own" in kept["note"]
    wide = _profiles(answers, ["language", "option_labels"])
    z = standardised(wide.select([str(q) for q in range(1, 25)]).to_numpy())
    expected = shares(z, {t: wide[t].to_list() for t in terms["term"]})
    for row in terms.iter_rows(named=True):
        assert row["r2"] == pytest.approx(expected[row["term"]]["margin"], rel=1e-9, abs=1e-12)
        assert row["r2_sequential"] == pytest.approx(expected[row["term"]]["sequential"], rel=1e-9, abs=1e-12)


@pytest.mark.slow  # matplotlib's first figure: ~2 s
def test_model_names_from_a_spec_are_figure_text_in_the_partition_figure():
    import io

    from runner.report.figures import RC, pyplot
    from runner.report.partition import partition_figure

    hostile = ["<b>m1</b>", "$\\frac{1}{2}$"]
    answers = simulated_answers(SimConfig(seed=10), {"model": hostile, "language": ["en", "zh"]}, seeds=(1, 2))
    table = variance_partition(_units(answers), permutations=19, seed=1)
    plt = pyplot()
    with plt.rc_context(RC):
        plot = partition_figure(table)
        assert plot is not None and set(plot.shows) == {"all", *(f"model={m}" for m in hostile)}
        buffer = io.BytesIO()
        plot.fig.savefig(buffer, format="svg")  # mathtext would fail on (or render) the dollars
        plt.close(plot.fig)
    svg = buffer.getvalue().decode()
    assert "model=&lt;b&gt;m1&lt;/b&gt;" in svg and "$\\frac{1}{2}$" in svg
