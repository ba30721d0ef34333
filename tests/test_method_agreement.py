"""Agreement between measurement methods: TV and Jensen–Shannon against scipy, the noise floor against exact
enumeration, the "conclusions differ" rules, the null and a planted disagreement on the simulator, the Python
API, and the report's figure at 1, ~100 and ~1,000 conditions (no overlapping labels)."""

from __future__ import annotations

import io
import itertools
import math

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from scipy.spatial.distance import jensenshannon
from scipy.stats import multinomial

from _runner_support import make_spec
from runner.analyze.methods import (
    expected_tv,
    jensen_shannon,
    method_conclusions,
    method_divergence,
    method_tables,
    total_variation,
)
from runner.analyze.run import AnalysisOptions, analyze_run
from runner.endpoints.sim.config import SimConfig
from runner.endpoints.sim.server import SimServerThread
from runner.report.methods import method_figure
from runner.sweep.session import run_sweep

# ---- the divergences ---------------------------------------------------------------------------------------


def test_tv_and_js_match_scipy_and_the_definition():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(5) * 0.7, size=400)
    q = rng.dirichlet(np.ones(5) * 0.7, size=400)
    p[:50, :2] = 0.0  # zeros: 0 log 0 = 0
    p[:50] /= p[:50].sum(axis=1, keepdims=True)
    js = jensen_shannon(p, q)
    reference = np.array([jensenshannon(a, b, base=2) ** 2 for a, b in zip(p, q, strict=True)])
    assert js == pytest.approx(reference, abs=1e-12)
    direct = np.array([sum(abs(a - b) for a, b in zip(x, y, strict=True)) / 2 for x, y in zip(p, q, strict=True)])
    assert total_variation(p, q) == pytest.approx(direct, abs=1e-15)
    assert ((js >= 0) & (js <= 1) & (js <= total_variation(p, q) + 1e-12)).all()  # JS (bits) ≤ TV
    disjoint = np.array([[1.0, 0, 0, 0, 0]]), np.array([[0, 0, 0, 0.5, 0.5]])
    assert total_variation(*disjoint)[0] == 1.0 and jensen_shannon(*disjoint)[0] == pytest.approx(1.0)
    assert total_variation(p, p).max() == 0.0 and jensen_shannon(p, p).max() == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize(
    ("n", "r"),
    [
        (1, (0.2, 0.2, 0.2, 0.2, 0.2)),
        (7, (0.1, 0.2, 0.3, 0.25, 0.15)),
        (10, (0.5, 0.5, 0.0, 0.0, 0.0)),  # n r integer, and options that cannot occur
        (12, (0.0, 0.0, 1.0, 0.0, 0.0)),  # a certain option: no noise at all
        (9, (0.01, 0.04, 0.9, 0.03, 0.02)),
    ],
)
def test_noise_floor_is_the_exact_expected_tv_of_n_draws(n, r):
    exact = 0.0
    for counts in itertools.product(range(n + 1), repeat=5):  # every outcome of n draws over five options
        if sum(counts) != n:
            continue
        tv = 0.5 * sum(abs(c / n - p) for c, p in zip(counts, r, strict=True))
        exact += multinomial.pmf(counts, n, r) * tv
    assert expected_tv(np.array([n]), np.array([r]))[0] == pytest.approx(exact, abs=1e-12)


def test_noise_floor_matches_simulated_draws_and_falls_with_n():
    rng = np.random.default_rng(11)
    r = np.array([0.05, 0.15, 0.4, 0.3, 0.1])
    floors = expected_tv(np.array([10, 100, 1000]), np.tile(r, (3, 1)))
    assert floors[0] > floors[1] > floors[2] > 0
    for n, floor in zip((10, 100, 1000), floors, strict=True):
        draws = rng.multinomial(n, r, size=20_000) / n
        assert 0.5 * np.abs(draws - r).sum(axis=1).mean() == pytest.approx(floor, rel=0.02)


def _answers(rows: list[tuple[str, str, int, int | None, list[float] | None]]) -> pl.LazyFrame:
    """(model, measurement, question, option_id, option_probs) rows of one country, all ok."""
    return pl.DataFrame(
        {
            "model": [r[0] for r in rows],
            "measurement": [r[1] for r in rows],
            "question": [r[2] for r in rows],
            "option_id": [r[3] for r in rows],
            "option_probs": [r[4] for r in rows],
            "country": ["Japan"] * len(rows),
            "status": ["ok"] * len(rows),
        },
        schema_overrides={"question": pl.Int16, "option_id": pl.Int16, "option_probs": pl.List(pl.Float64)},
    ).lazy()


def test_divergence_compares_frequencies_with_mean_stated_distributions():
    stated = [0.1, 0.2, 0.4, 0.2, 0.1]
    rows = [("m", "sample", 1, k, None) for k in (3, 3, 3, 2)]  # frequencies (0, .25, .75, 0, 0)
    rows += [("m", "verbalized", 1, 3, stated), ("m", "verbalized", 1, 3, [0.3, 0.2, 0.2, 0.2, 0.1])]
    rows += [("m", "distribution", 1, 3, stated)]
    table = method_divergence(_answers(rows), ["model"])
    got = {(r["method_a"], r["method_b"]): r for r in table.iter_rows(named=True)}
    assert set(got) == {("sample", "distribution"), ("sample", "verbalized"), ("distribution", "verbalized")}
    freq = np.array([[0, 0.25, 0.75, 0, 0]])
    mean_stated = np.array([[0.2, 0.2, 0.3, 0.2, 0.1]])
    row = got["sample", "verbalized"]
    assert row["n_a"] == 4 and row["n_b"] == 2 and row["empirical_a"] and not row["empirical_b"]
    assert row["tv"] == pytest.approx(0.5 * np.abs(freq - mean_stated).sum())
    assert row["js"] == pytest.approx(jensenshannon(freq[0], mean_stated[0], base=2) ** 2)
    assert row["tv_floor"] == pytest.approx(expected_tv(np.array([4]), mean_stated)[0])
    assert got["distribution", "verbalized"]["tv_floor"] == 0.0  # two stated distributions: no sampling noise


def _stats(rows: list[tuple[str, float, float, float, float]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """CAT rows (measurement, value, ci_low, ci_high, p) and an empty tau table, for one model."""
    cat = pl.DataFrame(
        {
            "model": ["m"] * len(rows),
            "measurement": [r[0] for r in rows],
            "cat_score": [r[1] for r in rows],
            "ci_low": [r[2] for r in rows],
            "ci_high": [r[3] for r in rows],
            "cat_p": [r[4] for r in rows],
        }
    )
    kendall = pl.DataFrame(
        schema={"model": pl.String, "measurement": pl.String, "dimension": pl.String}
        | dict.fromkeys(("tau", "ci_low", "ci_high", "kendall_p"), pl.Float64)
    )
    return kendall, cat


@pytest.mark.parametrize(
    ("a", "b", "flags"),
    [
        ((0.6, 0.2, 0.9, 0.01), (0.5, 0.1, 0.8, 0.02), (False, False, False)),  # same conclusion
        ((0.6, 0.2, 0.9, 0.01), (0.2, -0.1, 0.5, 0.30), (True, False, False)),  # one significant
        ((0.6, 0.4, 0.9, 0.01), (-0.6, -0.9, -0.4, 0.01), (False, True, True)),  # opposite, both significant
        ((0.1, -0.3, 0.5, 0.60), (-0.1, -0.5, 0.3, 0.70), (False, False, False)),  # a sign flip in the noise
        ((0.9, 0.8, 1.0, 0.20), (0.3, 0.1, 0.5, 0.40), (False, False, True)),  # disjoint intervals
        ((math.nan, math.nan, math.nan, math.nan), (0.3, 0.1, 0.5, 0.01), (True, False, False)),  # undefined
    ],
)
def test_conclusions_differ_by_significance_sign_or_intervals(a, b, flags):
    kendall, cat = _stats([("sample", *a), ("verbalized", *b)])
    row = method_conclusions(kendall, cat, ["model"], alpha=0.05).row(0, named=True)
    assert (row["significance_differs"], row["sign_differs"], row["intervals_disjoint"]) == flags
    assert row["conclusions_differ"] == (flags[1] or flags[2])  # a difference in significance alone is not one
    assert (row["method_a"], row["method_b"], row["statistic"]) == ("sample", "verbalized", "cat")


def test_one_measurement_gives_empty_tables_with_their_columns():
    answers = _answers([("m", "sample", 1, 3, None)]).drop("measurement")
    kendall, cat = _stats([("sample", 0.5, 0.1, 0.9, 0.01)])
    tables = method_tables(answers, ["model"], kendall.drop("measurement"), cat.drop("measurement"))
    assert all(t.height == 0 for t in tables.values())
    assert {"tv", "js", "tv_floor"} <= set(tables["method_divergence"].columns)
    assert {"cat_a", "cat_b", "statistics_differing"} <= set(tables["method_agreement"].columns)


# ---- the simulator: null and planted disagreement ------------------------------------------------------------

PERSONAS = ["United States", "China", "Japan", "Germany", "Brazil", "India"]


def _sim_run(tmp_path, config: SimConfig, seeds: int):
    with SimServerThread(config) as sim:
        spec = make_spec(
            sim.base_url,
            design={
                "personas": PERSONAS,
                "questions": list(range(1, 25)),
                "seeds": list(range(1, seeds + 1)),
                "temperature": [1.0],  # the simulator's log-probabilities and statements are its T = 1 truth
                "option_order": ["given", "reversed"],
                "measurement": ["sample", "distribution", "verbalized"],
            },
        )
        result = run_sweep(spec, tmp_path / "run", stream=io.StringIO())
    assert result.failed == 0
    options = AnalysisOptions(n_resamples=50, permutations=199, baseline_replicates=10)
    return analyze_run(tmp_path / "run", options), options


@pytest.mark.slow
def test_null_same_distribution_for_every_method_sits_at_the_noise_floor(tmp_path):
    analysis, options = _sim_run(tmp_path, SimConfig(seed=2), seeds=12)
    divergence = pl.read_parquet(analysis / "method_divergence.parquet")
    by_pair = {
        (a, b): (tv, floor, n)
        for a, b, tv, floor, n in divergence.group_by("method_a", "method_b")
        .agg(pl.col("tv").mean(), pl.col("tv_floor").mean(), pl.len())
        .iter_rows()
    }
    assert len(by_pair) == 3 and all(n == 2 * len(PERSONAS) * 24 for *_, n in by_pair.values())
    for pair in (("sample", "distribution"), ("sample", "verbalized")):
        tv, floor, n = by_pair[pair]
        # the mean of n cells' TV: the floor is its expectation; each cell's TV has sd < 0.15 at 12 draws
        assert abs(tv - floor) < 4 * 0.15 / math.sqrt(n), (pair, tv, floor)
    assert by_pair["distribution", "verbalized"][0] < 1e-3  # both state the truth (four decimals)
    conclusions = pl.read_parquet(analysis / "method_conclusions.parquet")
    assert conclusions.height == 3 * 2 * 7  # pairs × conditions × (CAT + six dimensions)
    assert conclusions["conclusions_differ"].mean() <= 0.1
    # the exact methods agree with each other on significance too; the sample's 12 draws may lack their power
    exact = conclusions.filter(pl.col("method_a") == "distribution")
    assert not exact["significance_differs"].any()
    # the Python API gives the tables the analysis wrote
    import hofcat

    again = hofcat.method_agreement(tmp_path / "run", options)
    written = pl.read_parquet(analysis / "method_agreement.parquet")
    # equal up to the summation order of a parallel mean
    assert_frame_equal(again["method_agreement"].sort(written.columns[:3]), written.sort(written.columns[:3]))


@pytest.mark.slow
def test_planted_overconfidence_shows_as_divergence_far_above_the_floor(tmp_path):
    analysis, _ = _sim_run(tmp_path, SimConfig(seed=2, verbalized_temperature=0.3), seeds=4)
    divergence = pl.read_parquet(analysis / "method_divergence.parquet")
    means = {
        (a, b): (tv, floor)
        for a, b, tv, floor in divergence.group_by("method_a", "method_b")
        .agg(pl.col("tv").mean(), pl.col("tv_floor").mean())
        .iter_rows()
    }
    tv, floor = means["distribution", "verbalized"]
    assert floor == 0.0 and tv > 0.2
    tv_sample, floor_sample = means["sample", "distribution"]
    assert abs(tv_sample - floor_sample) < 0.05  # sampling still agrees with the log-probabilities
    # the report's section draws it
    import hofcat

    page = (hofcat.render_report(tmp_path / "run")).read_text(encoding="utf-8")
    assert "Agreement between measurement methods" in page and 'id="fig-method_agreement"' in page
    assert (tmp_path / "run" / "report" / "figures" / "method_agreement.svg").is_file()


# ---- the report figure -------------------------------------------------------------------------------------


def _tables(conditions: int, name: str = "verbalized") -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(conditions)
    pairs = [("sample", "distribution"), ("sample", name), ("distribution", name)]
    cells = conditions * 24
    divergence = pl.concat(
        pl.DataFrame(
            {
                "condition": np.repeat(np.arange(conditions), 24),
                "method_a": [a] * cells,
                "method_b": [b] * cells,
                "tv": rng.beta(2, 8, cells),
                "tv_floor": np.full(cells, 0.2 if a == "sample" else 0.0),
            }
        )
        for a, b in pairs
    )
    agreement = pl.concat(
        pl.DataFrame(
            {
                "condition": np.arange(conditions),
                "method_a": [a] * conditions,
                "method_b": [b] * conditions,
                "cat_a": rng.uniform(-1, 1, conditions),
                "cat_b": rng.uniform(-1, 1, conditions),
                "cat_conclusions_differ": rng.random(conditions) < 0.2,
            }
        )
        for a, b in pairs
    )
    return divergence, agreement


def _overlapping_labels(fig) -> list[tuple[str, str]]:
    """Pairs of the figure's text labels whose drawn extents overlap (1 px wide, a quarter of the height)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [
        (t.get_text(), t.get_window_extent(renderer))
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_window_extent(renderer).width > 0
    ]
    found = []
    for (a, r1), (b, r2) in itertools.combinations(boxes, 2):
        wide = min(r1.x1, r2.x1) - max(r1.x0, r2.x0)
        high = min(r1.y1, r2.y1) - max(r1.y0, r2.y0)
        if wide > 1 and high > 0.25 * min(r1.height, r2.height):
            found.append((a, b))
    return found


@pytest.mark.parametrize("conditions", [1, 100, pytest.param(1000, marks=pytest.mark.slow)])
def test_the_figure_reads_the_same_at_every_design_size(conditions):
    import matplotlib.pyplot as plt

    plot = method_figure(*_tables(conditions))
    try:
        assert plot is not None and len(plot.shows) == 3 and not plot.note
        assert _overlapping_labels(plot.fig) == []
        texts = [t.get_text() for t in plot.fig.findobj(lambda a: hasattr(a, "get_text"))]
        assert f"{3 * conditions} condition × method-pair comparisons" in texts
    finally:
        plt.close(plot.fig)


def test_the_overlap_check_can_fail():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "one label")
    ax.text(0.5, 0.5, "another label")
    try:
        assert _overlapping_labels(fig)
    finally:
        plt.close(fig)


@pytest.mark.slow
def test_method_names_from_a_stored_run_are_figure_text_not_mathtext():
    import matplotlib.pyplot as plt

    plot = method_figure(*_tables(3, name="$\\alpha$<b>x</b>"))
    try:
        legend = [t.get_text() for t in plot.fig.findobj(lambda a: hasattr(a, "get_text"))]
        assert any("\\$\\alpha\\$<b>x</b>" in t for t in legend)  # escaped: drawn as written
        plot.fig.canvas.draw()
    finally:
        plt.close(plot.fig)


@pytest.mark.slow
def test_the_figures_labels_do_not_overlap_as_chromium_lays_out_their_svg(tmp_path):
    """The same check tests/test_report_scale.py makes of every report figure: text extents measured in the
    browser from the SVG (text stays text), at 1, ~100 and ~1,000 conditions, beside a control that overlaps."""
    import matplotlib.pyplot as plt

    from runner.report.figures import RC
    from test_report_scale import _label_boxes, _overlaps

    svgs = {}
    for conditions in (1, 100, 1000):
        plot = method_figure(*_tables(conditions))
        svgs[f"methods-{conditions}"] = tmp_path / f"methods-{conditions}.svg"
        with plt.rc_context(RC):
            plot.fig.savefig(svgs[f"methods-{conditions}"], format="svg", bbox_inches="tight")
        plt.close(plot.fig)
    with plt.rc_context({"svg.fonttype": "none"}):
        fig, ax = plt.subplots()
        ax.text(0.5, 0.5, "total variation between methods")
        ax.text(0.52, 0.5, "labels on top of each other")
        svgs["control"] = tmp_path / "control.svg"
        fig.savefig(svgs["control"])
        plt.close(fig)
    boxes = _label_boxes(svgs, tmp_path)
    assert _overlaps(boxes["control"]), "the control's overlapping labels were not found"
    for name in svgs.keys() - {"control"}:
        assert len(boxes[name]) > 10 and not _overlaps(boxes[name]), (name, _overlaps(boxes[name])[:5])
