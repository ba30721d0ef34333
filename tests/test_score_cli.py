"""``hofcat score`` end to end on real CSV files: JSON/table output and every located input error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import kendalltau

from runner.cli import main
from runner.score.indices import indices_from_means
from runner.survey.reference import load_reference

COUNTRIES = ("USA", "China", "Arab countries")


def _rows(group: str = "g1", seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    means = np.round(rng.uniform(1, 5, size=(len(COUNTRIES), 24)), 2)
    return [f"{group},{c},{q + 1},{means[k, q]}" for k, c in enumerate(COUNTRIES) for q in range(24)]


def _write(tmp_path, lines: list[str], header: str = "group,country,question,mean"):
    path = tmp_path / "means.csv"
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["score", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_output_matches_independent_computation(tmp_path, capsys):
    lines = _rows("g1", 1) + _rows("g2", 2)
    path = _write(tmp_path, lines)
    code, out, _ = _run(capsys, "--means", str(path), "--reference", "hofstede-2015", "--constants", "pdi=10")
    assert code == 0
    result = json.loads(out)
    assert result["reference"]["name"] == "hofstede-2015" and result["undefined_tau"] == "nan"
    assert result["constants"]["pdi"] == 10.0
    ref = load_reference("hofstede-2015").matrix(["U.S.A.", "China", "Arab countries"])
    for group in result["groups"]:
        assert group["countries"] == ["U.S.A.", "China", "Arab countries"]
        means = np.array(
            [
                [float(row.split(",")[3]) for row in lines if row.startswith(group["group"] + f",{c},")]
                for c in COUNTRIES
            ]
        )
        idx = indices_from_means(means) + np.array([10, 0, 0, 0, 0, 0])
        for k, c in enumerate(group["countries"]):
            assert list(group["indices"][c].values()) == pytest.approx(idx[k].tolist())
        taus = []
        for j, dim in enumerate(("pdi", "idv", "mas", "uai", "lto", "ivr")):
            expected = kendalltau(idx[:, j], ref[:, j]).statistic
            if np.isnan(expected):
                assert group["kendall"][dim] is None
            else:
                assert group["kendall"][dim] == pytest.approx(expected)
                taus.append(expected)
        assert group["cat_score"] == pytest.approx(np.mean(taus))
        assert set(group["misranked"]) == set(group["countries"])


def test_table_output_and_missing_reference_note(tmp_path, capsys):
    lines = [row.replace("Arab countries", "Saudi Arabia") for row in _rows()]  # Saudi: only LTO/IVR in 2015
    path = _write(tmp_path, lines)
    code, out, _ = _run(capsys, "--means", str(path), "--reference", "hofstede-2015", "--format", "table")
    assert code == 0
    assert "reference: hofstede-2015" in out and "undefined tau: nan" in out
    assert "PDI: no reference score for Saudi Arabia (left out)" in out
    assert "CAT score:" in out


def test_minus_one_policy_is_written_and_applied(tmp_path, capsys):
    lines = []
    for k, c in enumerate(COUNTRIES):
        lines += [f"g,{c},{q},{3.0 if q in (5, 3, 8, 10) else 1 + (q * (k + 1)) % 4}" for q in range(1, 25)]
    path = _write(tmp_path, lines)
    _, out, _ = _run(capsys, "--means", str(path), "--reference", "hofstede-2015", "--undefined-tau=-1")
    group = json.loads(out)["groups"][0]
    assert json.loads(out)["undefined_tau"] == "-1"
    assert group["kendall"]["mas"] == -1.0 and group["kendall_undefined"] == ["mas"]
    _, out, _ = _run(capsys, "--means", str(path), "--reference", "hofstede-2015")
    assert json.loads(out)["groups"][0]["kendall"]["mas"] is None


def test_user_reference_csv(tmp_path, capsys):
    ref = tmp_path / "ref.csv"
    ref.write_text("country,pdi,idv,mas,uai,lto,ivr\nUSA,1,2,3,4,5,6\nChina,6,5,4,3,2,1\nArab,3,3,3,3,3,3\n")
    code, out, _ = _run(capsys, "--means", str(_write(tmp_path, _rows())), "--reference", str(ref))
    assert code == 0 and json.loads(out)["reference"]["name"] == str(ref)


BAD_INPUTS = [
    # (rows transformation, expected message fragment)
    (
        lambda rows: rows[:5] + ["g1,Atlantis,1,2.0"] + rows[5:],
        r"means.csv:7: column 'country': unknown country 'Atlantis'",
    ),
    (lambda rows: rows[:3] + ["g1,USA,25,2.0"], r"means.csv:5: column 'question': 25 is outside 1–24"),
    (lambda rows: rows[:3] + ["g1,USA,seven,2.0"], r"means.csv:5: column 'question': 'seven' is not a whole number"),
    (
        lambda rows: [r for r in rows if not r.startswith("g1,China,17,")],
        r"means.csv:26: column 'question': group 'g1', country 'China' lacks question\(s\) \[17\]",
    ),
    (
        lambda rows: [rows[0].rsplit(",", 1)[0] + ",two", *rows[1:]],
        r"means.csv:2: column 'mean': 'two' is not a number",
    ),
    (
        lambda rows: [rows[0].rsplit(",", 1)[0] + ",5.5", *rows[1:]],
        r"means.csv:2: column 'mean': 5.5 is out of range \(expected a number in \[1, 5\] or NA\)",
    ),
    (
        lambda rows: [rows[0].rsplit(",", 1)[0] + ",0.99", *rows[1:]],
        r"means.csv:2: column 'mean': 0.99 is out of range",
    ),
    (lambda rows: rows + [rows[0]], r"means.csv:74: column 'question': .* already given on line 2"),
    (lambda rows: rows[:1] + ["g1,USA,2"] + rows[1:], r"means.csv:3: 3 fields \(expected 4 fields"),
]


@pytest.mark.parametrize(("transform", "message"), BAD_INPUTS)
def test_bad_input_errors_are_located(tmp_path, capsys, transform, message):
    path = _write(tmp_path, transform(_rows()))
    code, out, err = _run(capsys, "--means", str(path), "--reference", "hofstede-2015")
    assert code == 2 and out == ""
    assert err.startswith("hofcat score: error: ")
    import re

    assert re.search(message, err), err


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("group,country,question", r"means.csv:1: column 'mean': missing column"),
        ("group,country,question,mean,sd", r"means.csv:1: column 'sd': unknown column"),
    ],
)
def test_bad_headers(tmp_path, capsys, header, message):
    import re

    path = _write(tmp_path, [",".join(r.split(",")[: header.count(",") + 1]) for r in _rows()], header=header)
    code, _, err = _run(capsys, "--means", str(path), "--reference", "hofstede-2015")
    assert code == 2 and re.search(message, err), err


def test_optional_std_and_n_are_checked(tmp_path, capsys):
    rows = [r + ",0.5,5" for r in _rows()]
    rows[3] = rows[3].rsplit(",", 1)[0] + ",2.5"
    path = _write(tmp_path, rows, header="group,country,question,mean,std,n")
    code, _, err = _run(capsys, "--means", str(path), "--reference", "hofstede-2015")
    assert code == 2 and "means.csv:5: column 'n': 2.5 is out of range (expected a whole number ≥ 1 or empty)" in err


def test_other_errors(tmp_path, capsys):
    code, _, err = _run(capsys, "--means", str(tmp_path / "nope.csv"), "--reference", "hofstede-2015")
    assert code == 2 and "nope.csv: no such file" in err
    code, _, err = _run(capsys, "--means", str(_write(tmp_path, _rows())), "--reference", "hofsted-2015")
    assert code == 2 and "neither a shipped set" in err
    code, _, err = _run(
        capsys, "--means", str(_write(tmp_path, _rows())), "--reference", "hofstede-2015", "--constants", "foo=1"
    )
    assert code == 2 and "--constants" in err


def test_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["score", "--help"])
    assert info.value.code == 0 and "--undefined-tau" in capsys.readouterr().out
