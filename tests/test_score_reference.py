"""Reference sets and country aliases: shipped data unchanged, overlays, user CSVs, located errors."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from runner.errors import InputFileError, UnknownCountryError, UnknownReferenceError
from runner.survey.reference import (
    DIMENSIONS,
    REFERENCE_DIR,
    canonical_countries,
    load_reference,
    reference_names,
    resolve_country,
)


def test_hofstede_matrix_is_shipped_byte_for_byte():
    data = (REFERENCE_DIR / "hofstede_6d_2015.csv").read_bytes()
    provenance = (REFERENCE_DIR / "hofstede_6d_2015.provenance.md").read_text()
    assert hashlib.sha256(data).hexdigest() in provenance
    assert data.startswith(b"ctr;country;pdi;idv;mas;uai;ltowvs;ivr\r\n")


def test_hofstede_2015_values_missing_and_above_100():
    ref = load_reference("hofstede-2015")
    assert len(ref.countries) == 111
    assert ref.scores("U.S.A.") == {"pdi": 40, "idv": 91, "mas": 62, "uai": 46, "lto": 26, "ivr": 68}
    assert ref.scores("Greece")["uai"] == 112  # uncapped
    assert ref.scores("Slovak Rep")["mas"] == 110
    albania = ref.scores("Albania")
    assert all(math.isnan(albania[d]) for d in ("pdi", "idv", "mas", "uai"))
    assert (albania["lto"], albania["ivr"]) == (61, 15)
    saudi = ref.scores("Saudi Arabia")
    assert math.isnan(saudi["pdi"]) and saudi["lto"] == 36 and saudi["ivr"] == 52


def test_arab_revised_overlay_replaces_all_six_saudi_scores():
    revised = load_reference("hofstede-2015-arab-revised")
    assert revised.scores("KSA") == {"pdi": 72, "idv": 48, "mas": 43, "uai": 64, "lto": 27, "ivr": 14}
    base = load_reference("hofstede-2015")
    assert revised.countries == base.countries
    others = [c for c in base.countries if c != "Saudi Arabia"]
    np.testing.assert_array_equal(revised.matrix(others), base.matrix(others))
    assert load_reference("arab-revised").countries == ("Saudi Arabia",)


def test_nine_nations_equal_2015_matrix_except_combined_south_africa():
    human = load_reference("human-nine-nations")
    base = load_reference("hofstede-2015")
    assert human.countries == (
        "U.S.A.",
        "China",
        "France",
        "Germany",
        "Brazil",
        "India",
        "Singapore",
        "Japan",
        "South Africa",
    )
    np.testing.assert_array_equal(human.matrix(human.countries[:8]), base.matrix(human.countries[:8]))
    white, national = base.scores("South Africa white"), base.scores("South Africa")
    combined = {d: white[d] for d in ("pdi", "idv", "mas", "uai")} | {d: national[d] for d in ("lto", "ivr")}
    assert human.scores("South Africa") == combined


def test_every_named_set_has_provenance_for_each_file():
    assert set(reference_names()) == {
        "hofstede-2015",
        "hofstede-2015-arab-revised",
        "arab-revised",
        "human-nine-nations",
    }
    for name in reference_names():
        ref = load_reference(name)
        assert ref.description and ref.to_dict()["name"] == name
        for source in ref.sources:
            stem = source.rsplit("/", 1)[1].removesuffix(".csv")
            assert (REFERENCE_DIR / f"{stem}.provenance.md").is_file()


@pytest.mark.parametrize(
    "alias", ["USA", "U.S.A.", "u.s.a", "United States", "united states of america", "US", "America", "  usa ", "usa"]
)
def test_us_aliases(alias):
    assert resolve_country(alias) == "U.S.A."


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("Slovakia", "Slovak Rep"),
        ("SLK", "Slovak Rep"),
        ("south korea", "Korea South"),
        ("UK", "Great Britain"),
        ("Arab", "Arab countries"),
        ("ARAB COUNTRIES", "Arab countries"),
        ("Czech Republic", "Czech Rep"),
        ("Trinidad & Tobago", "Trinidad and Tobago"),
        ("chi", "China"),
        ("Chinese", "China"),
    ],
)
def test_other_aliases_and_codes(alias, canonical):
    assert resolve_country(alias) == canonical


def test_unknown_country_lists_close_matches():
    with pytest.raises(UnknownCountryError) as info:
        resolve_country("Germny")
    assert "Germany" in info.value.close and "Germny" in str(info.value)
    with pytest.raises(UnknownCountryError) as info:
        resolve_country("Qwxyz")
    assert info.value.close == []


def test_aliases_all_point_to_canonical_names():
    canon = set(canonical_countries())
    for line in (REFERENCE_DIR / "country_aliases.csv").read_text().splitlines()[1:]:
        alias, country = line.split(",")
        assert country in canon
        assert resolve_country(alias) == country


def test_country_outside_set_is_named_in_error():
    human = load_reference("human-nine-nations")
    with pytest.raises(UnknownCountryError, match=r"Slovak Rep.*human-nine-nations"):
        human.scores("Slovakia")


def test_user_csv_keeps_missing_values_and_unknown_names(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("country,pdi,idv,mas,uai,lto,ivr\nUSA,1,2,3,4,5,6\nAtlantis,10,,30,NA,#NULL!,60\n")
    ref = load_reference(path)
    assert ref.countries == ("U.S.A.", "Atlantis")
    scores = ref.scores("atlantis")
    assert scores["pdi"] == 10 and math.isnan(scores["idv"]) and math.isnan(scores["uai"])
    assert math.isnan(scores["lto"]) and scores["ivr"] == 60
    assert ref.scores("United States") == dict(zip(DIMENSIONS, [1.0, 2, 3, 4, 5, 6], strict=True))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("country,pdi,idv,mas,uai,lto\nUSA,1,2,3,4,5\n", r"mine.csv:1: column 'ivr'"),
        ("country,pdi,idv,mas,uai,lto,ivr\nUSA,1,2,x3,4,5,6\n", r"mine.csv:2: column 'mas': 'x3' is not a number"),
        ("country,pdi,idv,mas,uai,lto,ivr\nUSA,1,2,3,4,5,6\nus,1,2,3,4,5,6\n", r"mine.csv:3: column 'country'.*line 2"),
        ("country,pdi,idv,mas,uai,lto,ivr\n,1,2,3,4,5,6\n", r"mine.csv:2: column 'country': empty"),
        # a second PDI column used to replace the first silently
        ("country,pdi,idv,mas,uai,lto,ivr,PDI\nUSA,1,2,3,4,5,6,7\n", r"mine.csv:1: column 'pdi': column given twice"),
        ("country,pdi,idv,mas,uai,lto,ivr\nUSA,1\n", r"mine.csv:2: 2 fields \(expected 7"),  # was six NaN scores
        ("country,pdi,idv,mas,uai,lto,ivr\nUSA,1,2,3,4,5,6,7\n", r"mine.csv:2: 8 fields"),  # was a dropped 7
        ("country,pdi,idv,mas,uai,lto,ivr\nUSA," + "1" * 200_000 + ",2,3,4,5,6\n", r"mine.csv:2: not a readable CSV"),
    ],
)
def test_user_csv_errors_are_located(tmp_path, text, match):
    path = tmp_path / "mine.csv"
    path.write_text(text)
    with pytest.raises(InputFileError, match=match):
        load_reference(path)


def test_user_csv_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("country,pdi,idv,mas,uai,lto,ivr\n\nUSA,1,2,3,4,5,6\n\n")
    assert load_reference(path).countries == ("U.S.A.",)


def test_user_csv_that_is_not_utf8_is_located(tmp_path):
    """A Latin-1 reference CSV ended ``hofcat score`` in a UnicodeDecodeError traceback."""
    path = tmp_path / "mine.csv"
    path.write_bytes(b"country,pdi\nCura\xe7ao,1\n")
    with pytest.raises(InputFileError, match=r"mine.csv:2: byte 0xe7 is not UTF-8"):
        load_reference(path)


def test_unknown_reference_name():
    with pytest.raises(UnknownReferenceError, match="hofstede-2015"):
        load_reference("hofstede-2016")
