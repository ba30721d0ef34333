"""``analyze_run``: every analysis of a run directory, written as Parquet tables + ``summary.json``.

Writes under ``RUN_DIR/analysis/``: ``questions``, ``indices``, ``kendall``, ``cat``, ``misranked``,
``error_percentage``, ``status_rates``, ``respondents``, ``centroid_correlations``, ``disparity``, ``set_separation``,
``factor_tests``, ``identity_correlations``, ``warnings``, ``reliability``, ``kendall_differences``,
``cat_differences``, ``method_divergence``, ``method_conclusions``, ``method_agreement``, ``variance_partition``,
``variance_headline``
(``.parquet`` each) and ``summary.json`` (provenance, design, policies,
seeds, headline numbers).
"""

from __future__ import annotations

import json
import math
import numbers
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from runner.analyze.agreement import agreement_tables
from runner.analyze.baselines import ORDER_CODE, baseline_tables
from runner.analyze.comparisons import comparison_tables
from runner.analyze.coverage import completeness, completeness_caveat, data_caveats, served_caveat, served_models
from runner.analyze.design import Design, infer_design, varying
from runner.analyze.load import load_answers, system_errors
from runner.analyze.measurement import measurement_table
from runner.analyze.methods import method_summary, method_tables
from runner.analyze.multiplicity import adjust_families
from runner.analyze.partition import partition_headline, partition_summary, variance_partition
from runner.analyze.reliability import reliability_table
from runner.analyze.sets import (
    centroid_correlations,
    disparity,
    factor_tests,
    identity_correlations,
    respondent_table,
    set_separation,
)
from runner.analyze.tables import question_table, status_rates, temperature_zero_disagreement
from runner.analyze.units import UnitArray, unit_array
from runner.errors import InputError
from runner.parse.policy import DEFAULT_POLICY, VALUE_DIFFERENCES_POLICY, Policy
from runner.parse.stage import update_answers
from runner.rundir import RunWriter
from runner.survey.reference import ReferenceSet, load_reference

__all__ = [
    "AnalysisOptions",
    "analysis_design",
    "analyze_answers",
    "analyze_run",
    "use_extractions",
    "write_analysis",
]

STATUS_GROUPS = ("endpoint", "model", "language")
EMBEDDINGS = ("vsm", "items")  # t-SNE input: the six VSM scores of each point (the paper's Figure 1) or its 24 items


@dataclass(frozen=True)
class AnalysisOptions:
    """Choices recorded with every analysis."""

    reference: str | None = None  # None: the run manifest's reference, else hofstede-2015
    human_reference: str = "human-nine-nations"
    undefined_tau: str = "nan"
    n_resamples: int = 1000
    confidence_level: float = 0.95
    permutations: int = 999
    baseline_replicates: int = 200  # draws of each baseline respondent (runner/analyze/baselines.py)
    permutation_blocks: str | None = "country"  # PERMANOVA/PERMDISP permute within country (None: freely)
    # Set measures' data points (value-differences study): "identity" = one point per country × identity, its
    # seeds averaged; "seed" = one per seed. The t-SNE embeds the six VSM scores ("vsm") or the 24 items.
    points: str = "identity"
    embedding: str = "vsm"
    seed: int = 0
    max_points: int = 1000  # respondents per set in distance-based measures (seeded subsample beyond)
    factors: tuple[str, ...] | None = None
    units: tuple[str, ...] | None = None
    constants: Mapping[str, float] | None = None
    policy: Policy = DEFAULT_POLICY  # parse policy: which answers are scored, and as what (runner/parse/policy.py)
    # score the answers an extractor model restated (``hofcat extract``; status "extracted", scored like ok)
    extracted: bool = False

    @classmethod
    def value_differences(cls, **changes: Any) -> AnalysisOptions:
        """The value-differences study's choices — its answer policy (Q15, Q18 and unrecognised answers scored 3),
        one point per identity, t-SNE of the six VSM scores, the nine-nation human reference — with ``changes``."""
        paper = {
            "policy": VALUE_DIFFERENCES_POLICY,
            "points": "identity",
            "embedding": "vsm",
            "human_reference": "human-nine-nations",
        }
        return cls(**{**paper, **changes})

    def __post_init__(self) -> None:
        # The Python API builds options from keywords the CLI's argparse types never saw: a located InputError
        # here, not a TypeError or numpy's ValueError deep inside an analysis.
        for name, least in (("n_resamples", 1), ("permutations", 0), ("baseline_replicates", 0), ("seed", 0),
                            ("max_points", 2)):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
                raise InputError(f"{name}: expected an integer >= {least}, got {value!r}")
        level = self.confidence_level
        if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0.0 < level < 1.0:
            raise InputError(f"confidence_level: expected a number in (0, 1), got {level!r}")


def analysis_design(answers: pl.LazyFrame, options: AnalysisOptions) -> Design:
    """The factors and units the analysis uses: ``options``' or, where None, those the answers actually vary."""
    design = infer_design(answers.collect_schema().names(), options.factors, options.units)
    if options.factors is None:  # inferred factors: keep those the run actually varied
        design = Design(varying(answers, design.factors), design.units)
    if options.units is None:  # identity columns are units only where the design varied them (not null)
        design = Design(design.factors, ("seed", *varying(answers, [u for u in design.units if u != "seed"])))
    return design


def condition_agreement(units: UnitArray, reference: ReferenceSet, options: AnalysisOptions) -> dict[str, pl.DataFrame]:
    """The per-condition agreement tables (indices, tau, CAT, ...) of ``units`` with ``reference`` under ``options``."""
    return agreement_tables(
        units,
        reference,
        undefined_tau=options.undefined_tau,
        constants=options.constants,
        n_resamples=options.n_resamples,
        confidence_level=options.confidence_level,
        seed=options.seed,
        permutations=options.permutations,
    )


def analyze_answers(answers: pl.LazyFrame, options: AnalysisOptions) -> tuple[dict[str, pl.DataFrame], dict]:
    """All tables for a parsed-answers LazyFrame, and the JSON summary."""
    if options.embedding not in EMBEDDINGS:
        raise InputError(f"embedding: expected one of {EMBEDDINGS}, got {options.embedding!r}")
    design = analysis_design(answers, options)
    reference = load_reference(options.reference or "hofstede-2015")
    human = load_reference(options.human_reference)
    units = unit_array(answers, design, options.policy)
    tables = condition_agreement(units, reference, options)
    tables.update(
        comparison_tables(
            units,
            reference,
            undefined_tau=options.undefined_tau,
            constants=options.constants,
            confidence_level=options.confidence_level,
            seed=options.seed,
            permutations=options.permutations,
        )
    )
    if ORDER_CODE in answers.collect_schema().names():  # content-free respondents and position bias
        tables.update(
            baseline_tables(
                answers,
                units,
                design,
                reference,
                tables,
                replicates=options.baseline_replicates,
                seed=options.seed,
                undefined_tau=options.undefined_tau,
            )
        )
    tables["measurement"] = measurement_table(answers)
    tables["questions"] = question_table(answers, design.factors, options.policy).collect(engine="streaming")
    tables["status_rates"] = status_rates(answers, [c for c in STATUS_GROUPS if c in design.factors])
    cap = {"max_points": options.max_points, "seed": options.seed, "points": options.points}
    tables["respondents"] = respondent_table(units, **cap)
    tables["identity_correlations"] = identity_correlations(units, points=options.points)
    tables["centroid_correlations"] = centroid_correlations(units)
    tables["disparity"] = disparity(units, human)
    tables["set_separation"] = set_separation(units, human, permutations=options.permutations, **cap)
    tables["factor_tests"] = factor_tests(
        units, permutations=options.permutations, blocks=options.permutation_blocks, **cap
    )
    tables["reliability"] = reliability_table(units)
    # where the sweep crosses measurements: divergence per cell, tau / CAT per method (runner/analyze/methods.py)
    tables.update(
        method_tables(answers, design.factors, tables["kendall"], tables["cat"], level=options.confidence_level)
    )
    tables["variance_partition"] = variance_partition(units, permutations=options.permutations, seed=options.seed)
    tables["variance_headline"] = partition_headline(tables["variance_partition"])
    # the scores tau was computed against, kept with the analysis: the report reads them from the run directory,
    # never from a path the run directory names (a user CSV may be gone, or a directory from elsewhere may name
    # any file of the machine showing it)
    tables["reference_scores"] = reference.table()
    families = adjust_families(tables)  # last: every family's table exists by now
    summary = {
        "reference": reference.to_dict(),
        "human_reference": human.to_dict(),
        "undefined_tau": options.undefined_tau,
        "policy": options.policy.to_dict(),
        "constants": dict(options.constants or {}),
        "bootstrap": {
            "n_resamples": options.n_resamples,
            "confidence_level": options.confidence_level,
            "method": "percentile",
            "unit": list(design.units),
            "seed": options.seed,
            "stream": "stats_core.bootstrap_indices(units per country, n_resamples, (seed, condition))",
        },
        "intervals": {
            "estimand": (
                "tau / CAT between the population index scores (infinitely many seeds) of the compared countries "
                "and the reference"
            ),
            "method": (
                "sign bounds: range of tau over the pair orders a Welch t test at the level cannot fix (SEs with "
                "a rule-of-three floor), containing the estimate, and 0 where the exact p exceeds 1 - level "
                "(runner/score/intervals.py)"
            ),
            "columns": "ci_low/ci_high (estimand), boot_low/boot_high (percentile bootstrap of the estimator)",
            "coverage": "measured by benches/coverage.py (docs/analysis.md)",
        },
        "comparisons": {
            "pairs": "conditions differing in one factor, over the countries both answered (paired)",
            "statistic": "tau_A - tau_B per dimension and CAT_A - CAT_B",
            "p_values": "exact paired swap test (2^K swaps up to 12 countries, else Monte Carlo from (seed, a, b))",
            "interval": "each condition's sign bounds at 1 - alpha/2, containing the estimate, and 0 where p > alpha",
        },
        "p_values": {
            "definition": "two-sided permutation p of |tau| (|CAT|) over country relabellings against the reference",
            "exact_up_to_countries": 9,
            "monte_carlo_relabellings": options.permutations,
            "seed": "(seed, condition)",
        },
        "multiple_comparisons": families,
        "warnings": tables["warnings"].to_dicts(),
        "baselines": {
            "replicates": options.baseline_replicates,
            "seed": options.seed,
            "respondents": ["uniform", "position"],
        },
        "permutations": {"count": options.permutations, "seed": options.seed, "blocks": options.permutation_blocks},
        "variance_partition": partition_summary(tables["variance_headline"], options.seed),
        "max_points_per_set": options.max_points,
        "points": options.points,
        "embedding": options.embedding,
        "design": design.to_dict(),
        "conditions": units.conditions.height,
        "countries": list(units.countries),
        "answers": int(tables["status_rates"]["count"].sum()),
        # what thin data could not support, said once (the warnings table holds the per-condition details)
        "caveats": data_caveats(units, _status_counts(tables["status_rates"])),
        "temperature_zero": temperature_zero_disagreement(answers, design.factors),
        "methods": method_summary(tables["method_agreement"], options.confidence_level),
        "cat": _clean(tables["cat"].drop("countries", strict=False).to_dicts()),
        "error_percentage": _clean(tables["error_percentage"].to_dicts()),
    }
    return tables, summary


def analyze_run(run_dir: str | Path, options: AnalysisOptions) -> Path:
    """Analyse ``run_dir``'s parsed answers; returns the ``analysis`` folder written.

    Holds the run directory's lock throughout: responses parts a crash left unparsed are parsed first, and
    every table is written atomically, so a concurrent sweep or report never sees half an analysis. The joined
    answers are spooled to a temporary folder (removed at the end) and every step streams them from there.
    """
    root = Path(run_dir)
    with RunWriter.attach(root) as writer, system_errors(f"{root}: cannot analyse the run"):
        manifest = writer.manifest
        if manifest is not None:
            update_answers(writer)
        if options.reference is None:  # the reference the run was planned against, else Hofstede 2015
            options = replace(options, reference=(manifest or {}).get("reference") or "hofstede-2015")
        # the joined answers go to a scratch folder part by part, so memory follows a part, not the run
        with tempfile.TemporaryDirectory(prefix="hofcat-analyze-") as spool:
            answers, extraction = use_extractions(
                load_answers(root, spool=spool, keep_keys=options.extracted), root, options
            )
            tables, summary = analyze_answers(answers, options)
        if extraction is not None:  # used, or stored and left unused: the summary and the report say which
            summary["extractions"] = extraction
        summary["run_dir"] = str(root)
        summary["completeness"] = done = completeness(root, manifest)
        summary["served_models"] = served = served_models(root)  # the models that answered, per endpoint
        summary["caveats"] = completeness_caveat(done, root) + served_caveat(served) + summary["caveats"]
        if manifest is not None:
            summary["run_manifest"] = manifest
        return write_analysis(writer, tables, summary)


def use_extractions(
    answers: pl.LazyFrame, root: Path, options: AnalysisOptions
) -> tuple[pl.LazyFrame, dict[str, Any] | None]:
    """``answers`` (with ``cell_key`` when ``options.extracted``) with the run's extracted answers laid over the
    parsed ones if asked (runner/extract/overlay.py), without ``cell_key``; and what was used (or stored and not
    used; None when the run has no extractions)."""
    from runner.extract.overlay import extraction_note, with_extractions

    if not options.extracted:
        return answers, extraction_note(root)
    answers, info = with_extractions(answers, root)
    return answers.drop("cell_key"), info


def write_analysis(writer: RunWriter, tables: Mapping[str, pl.DataFrame], summary: dict) -> Path:
    """Write the tables (Parquet) and ``summary.json`` atomically into the writer's ``analysis``; its path."""
    for name, table in tables.items():
        with writer.output_file("analysis", f"{name}.parquet") as tmp:
            table.write_parquet(tmp)
    with writer.output_file("analysis", "summary.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2, default=str))
    return writer.layout.output("analysis")


def _status_counts(rates: pl.DataFrame) -> dict[str, int]:
    """Answers per parse status, from the ``status_rates`` table."""
    totals = rates.group_by("status").agg(pl.col("count").sum())
    return {str(status): int(n) for status, n in totals.iter_rows()}


def _clean(rows: Sequence[dict]) -> list[dict]:
    """NaN → None so that the JSON is valid."""
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()} for row in rows]
