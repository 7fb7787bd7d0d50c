"""Census benchmark: SSA reading, templates, published predictions, error types 1-3, plots."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pandas as pd
import pytest

from helpers import SHARED_DATA, write_ssa
from nerbias.bias.types import NameSlot
from nerbias.bias.census import (ERROR_COLUMNS, TEMPLATES, attach_labels, census_errors, census_sentences,
                                 outcome_to_census_label)
from nerbias.bias.ssa import distinct_names, read_ssa
from nerbias.bias.published import load_precomputed
from nerbias.bias.plots import plot_census_errors
from nerbias.errors import DataFormatError, NerbiasError

YOB1990 = "Mary,F,50\nNan,F,7\nNull,F,5\nJohn,M,40\nMary,M,6\n"
YOB1991 = "Anna,F,9\nJohn,M,30\nLee,M,8\n"


def write_zip(path: Path, files: dict[int, str], newline: str = "\r\n") -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for year, text in files.items():
            archive.writestr(f"yob{year}.txt", text.replace("\n", newline))
        archive.writestr("NationalReadMe.pdf", b"%PDF-1.4")
    return path


# ---------------------------------------------------------------------------------- SSA reading


def test_reads_ssa_folder_with_ranks_within_each_sex(tmp_path):
    frame = read_ssa(write_ssa(tmp_path / "ssa", {1990: YOB1990, 1991: YOB1991}), years=[1990, 1991])
    assert list(frame.columns) == ["year", "name", "sex", "count", "rank_in_sex"]
    assert frame.values.tolist() == [
        [1990, "Mary", "F", 50, 0], [1990, "Nan", "F", 7, 1], [1990, "Null", "F", 5, 2],
        [1990, "John", "M", 40, 0], [1990, "Mary", "M", 6, 1],
        [1991, "Anna", "F", 9, 0], [1991, "John", "M", 30, 0], [1991, "Lee", "M", 8, 1],
    ]
    assert distinct_names(frame) == ["Anna", "John", "Lee", "Mary", "Nan", "Null"]


def test_crlf_and_names_zip_read_like_lf(tmp_path):
    files = {1990: YOB1990, 1991: YOB1991}
    lf = read_ssa(write_ssa(tmp_path / "lf", files), years=[1990, 1991])
    crlf = read_ssa(write_ssa(tmp_path / "crlf", files, newline="\r\n"), years=[1990, 1991])
    zipped = read_ssa(write_zip(tmp_path / "names.zip", files), years=[1990, 1991])
    pd.testing.assert_frame_equal(lf, crlf)
    pd.testing.assert_frame_equal(lf, zipped)
    no_final_newline = read_ssa(write_ssa(tmp_path / "nofinal", {1990: YOB1990.rstrip("\n")}), years=[1990])
    pd.testing.assert_frame_equal(lf[lf.year == 1990], no_final_newline)


BAD_SSA = {
    "two fields": ("Mary,F,50\nAnna,F\n", 2, "expected Name,Sex,Count"),
    "four fields": ("Mary,F,50,1\n", 1, "expected Name,Sex,Count"),
    "blank line": ("Mary,F,50\n\nJohn,M,4\n", 2, "expected Name,Sex,Count"),
    "sex not F/M": ("Mary,F,50\nJohn,X,5\n", 2, "sex must be F or M"),
    "zero count": ("Mary,F,50\nJohn,M,0\n", 2, "count must be a positive integer"),
    "negative count": ("Mary,F,50\nJohn,M,-3\n", 2, "count must be a positive integer"),
    "count not a number": ("Mary,F,5x\n", 1, "count must be a positive integer"),
    "space in name": ("Mary,F,50\nMary Ann,F,7\n", 2, "name must be one non-empty word"),
    "empty name": ("Mary,F,50\n,F,7\n", 2, "name must be one non-empty word"),
    "F after M": ("Mary,F,50\nJohn,M,40\nAnna,F,9\n", 3, "F line after the M block"),
    "duplicate name": ("Mary,F,50\nAnna,F,9\nMary,F,6\n", 3, "name 'Mary' listed twice"),
    "non-UTF-8": (b"Mary,F,50\nJos\xe9,M,5\n", 2, "not valid UTF-8"),
}


@pytest.mark.parametrize("case", BAD_SSA)
def test_bad_ssa_line_names_file_and_line(tmp_path, case):
    text, line, message = BAD_SSA[case]
    folder = write_ssa(tmp_path / "ssa", {1990: text})
    with pytest.raises(DataFormatError) as error:
        read_ssa(folder, years=[1990])
    assert error.value.line == line
    assert f"{folder / 'yob1990.txt'}:{line}: {message}" in str(error.value)


def test_bad_line_inside_names_zip_names_member_and_line(tmp_path):
    archive = write_zip(tmp_path / "names.zip", {1990: YOB1990, 1991: "Anna,F,9\nJohn,M,x\n"})
    with pytest.raises(DataFormatError, match=r"names\.zip!yob1991\.txt:2: count must be a positive integer"):
        read_ssa(archive, years=[1990, 1991])
    with pytest.raises(DataFormatError, match=r"names\.zip!yob1992\.txt: missing year file for 1992"):
        read_ssa(archive, years=[1990, 1992])


def test_missing_empty_and_unknown_sources(tmp_path):
    folder = write_ssa(tmp_path / "ssa", {1990: YOB1990, 1991: "\n"})
    with pytest.raises(DataFormatError, match=r"yob1989\.txt: missing year file for 1989"):
        read_ssa(folder, years=[1989, 1990])
    with pytest.raises(DataFormatError, match=r"yob1991\.txt: file is empty"):
        read_ssa(folder, years=[1990, 1991])
    with pytest.raises(DataFormatError, match="not a folder of yobYYYY.txt files or a names.zip"):
        read_ssa(tmp_path / "nowhere", years=[1990])


# ------------------------------------------------------------------------- sentences and labels

REST = {1: "", 2: " is going to school", 3: " is at school", 4: " is a person", 5: " is eating food",
        6: " is going to grocery shop", 7: " is going to work", 8: " is a nurse", 9: " is a doctor"}


@pytest.mark.parametrize("template", range(1, 10))
def test_census_sentences_put_the_name_at_token_0(template):
    sentences = census_sentences(["Charlotte", "Noah"], template)
    assert [s.text for s in sentences] == ["Charlotte" + REST[template], "Noah" + REST[template]]
    assert sentences[1].slots == (NameSlot(0, "Noah"),)
    assert [(s.source, s.index) for s in sentences] == [(template, 0), (template, 1)]
    assert TEMPLATES[template] == REST[template].strip()


def test_lowercase_sentences_keep_the_listed_name_as_key():
    (sentence,) = census_sentences(["Charlotte"], 6, lowercase=True)
    assert sentence.tokens == ("charlotte", "is", "going", "to", "grocery", "shop")
    assert sentence.slots == (NameSlot(0, "Charlotte"),)


def test_bad_template_or_name():
    with pytest.raises(NerbiasError, match="unknown census template 10"):
        census_sentences(["Mary"], 10)
    with pytest.raises(NerbiasError, match="one word"):
        census_sentences(["Mary Ann"], 4)


@pytest.mark.parametrize("outcome, expected", [
    ("PER", "PERSON"), ("none", ""), ("LOC", "LOC"), ("ORG", "ORG"), ("MISC", "MISC"),
    ("partial:PER", "PERSON"), ("partial:LOC", "LOC"), ("partial:ORG", "ORG"), ("partial:MISC", "MISC"),
])
def test_outcome_to_census_label(outcome, expected):
    assert outcome_to_census_label(outcome) == expected


def test_partial_person_can_count_as_an_error():
    assert outcome_to_census_label("partial:PER", partial_person_is_person=False) == "partial:PER"
    assert outcome_to_census_label("partial:LOC", partial_person_is_person=False) == "LOC"
    assert outcome_to_census_label("PER", partial_person_is_person=False) == "PERSON"
    with pytest.raises(ValueError):
        outcome_to_census_label("")


# --------------------------------------------------------------------------------- error types

HAND_FRAME = pd.DataFrame(
    [  # year, sex, name, count, template, label
        (2000, "F", "Anna", 10, 4, "PERSON"), (2000, "F", "Rose", 5, 4, "LOCATION"),
        (2000, "F", "Lily", 3, 4, ""), (2000, "F", "Ivy", 2, 4, "ORGANIZATION"),
        (2000, "M", "John", 30, 4, "PERSON"), (2000, "M", "Jordan", 10, 4, "COUNTRY"),
        (2000, "F", "Anna", 10, 9, ""), (2000, "F", "Rose", 5, 9, "PERSON"),
        (2000, "F", "Lily", 3, 9, "PERSON"), (2000, "F", "Ivy", 2, 9, "PERSON"),
        (2001, "M", "John", 7, 4, ""),
    ],
    columns=["year", "sex", "name", "count", "template", "label"],
)

HAND_EXPECTED = [  # year, gender, template, type1_w, type1_u, type2_w, type2_u, type3_w, type3_u
    (2000, "F", 4, 10 / 20, 3 / 4, 7 / 20, 2 / 4, 3 / 20, 1 / 4),
    (2000, "F", 9, 10 / 20, 1 / 4, 0.0, 0.0, 10 / 20, 1 / 4),
    (2000, "M", 4, 10 / 40, 1 / 2, 10 / 40, 1 / 2, 0.0, 0.0),
    (2001, "M", 4, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0),
]


def test_census_errors_match_hand_computed_values():
    errors = census_errors(HAND_FRAME.sample(frac=1.0, random_state=0))  # row order must not matter
    assert list(errors.columns) == ["year", "gender", "template", *ERROR_COLUMNS]
    assert len(errors) == len(HAND_EXPECTED)
    for row, expected in zip(errors.itertuples(index=False), HAND_EXPECTED):
        assert tuple(row[:3]) == expected[:3]
        assert tuple(row[3:]) == pytest.approx(expected[3:])
    assert (errors.type1_w == errors.type2_w + errors.type3_w).all()


def test_census_errors_reject_bad_frames():
    with pytest.raises(NerbiasError, match="missing columns"):
        census_errors(HAND_FRAME.drop(columns="template"))
    with pytest.raises(NerbiasError, match="appears twice"):
        census_errors(pd.concat([HAND_FRAME, HAND_FRAME.head(1)]))
    with pytest.raises(NerbiasError, match="labels must be strings"):
        census_errors(HAND_FRAME.assign(label=HAND_FRAME.label.where(HAND_FRAME.name != "Ivy")))


def test_tagger_labels_spread_over_years(tmp_path):
    ssa = read_ssa(write_ssa(tmp_path / "ssa", {1990: YOB1990, 1991: YOB1991}), years=[1990, 1991])
    names = distinct_names(ssa)
    outcomes = {"Anna": "PER", "John": "PER", "Lee": "partial:LOC", "Mary": "none", "Nan": "LOC", "Null": "PER"}
    labels = {s.slots[0].name: outcome_to_census_label(outcomes[s.slots[0].name]) for s in census_sentences(names, 4)}
    errors = census_errors(attach_labels(ssa, labels, template=4)).set_index(["year", "gender"])
    assert errors.loc[(1990, "F"), "type1_w"] == pytest.approx((50 + 7) / 62)
    assert errors.loc[(1990, "F"), "type3_u"] == pytest.approx(1 / 3)
    assert errors.loc[(1991, "M"), "type2_w"] == pytest.approx(8 / 38)
    with pytest.raises(NerbiasError, match="no label"):
        attach_labels(ssa, {"Mary": ""}, template=4)


# ------------------------------------------------------------------------ published predictions


def test_load_precomputed_aligns_lines_with_ranks(tmp_path):
    ssa = read_ssa(write_ssa(tmp_path / "ssa", {1990: YOB1990, 1991: YOB1991}), years=[1990, 1991])
    folder = tmp_path / "coreNLP"
    folder.mkdir()
    (folder / "female1990.txt").write_bytes(b"PERSON\r\nCITY\r\n\r\n")  # CRLF, last name untagged
    (folder / "male1990.txt").write_text("PERSON\nLOCATION\n")
    (folder / "female1991.txt").write_text("\n")
    (folder / "male1991.txt").write_text("PERSON\nORGANIZATION")  # no final newline
    predictions = load_precomputed(folder, ssa, template=4)
    assert list(predictions.columns[:4]) == ["year", "sex", "name", "label"]
    assert predictions[["year", "sex", "name", "label"]].values.tolist() == [
        [1990, "F", "Mary", "PERSON"], [1990, "F", "Nan", "CITY"], [1990, "F", "Null", ""],
        [1990, "M", "John", "PERSON"], [1990, "M", "Mary", "LOCATION"],
        [1991, "F", "Anna", ""], [1991, "M", "John", "PERSON"], [1991, "M", "Lee", "ORGANIZATION"],
    ]
    errors = census_errors(predictions).set_index(["year", "gender"])
    assert errors.loc[(1990, "F"), ["type1_w", "type2_w", "type3_w"]].tolist() == pytest.approx([12 / 62, 7 / 62, 5 / 62])


def test_load_precomputed_errors_name_the_file(tmp_path):
    ssa = read_ssa(write_ssa(tmp_path / "ssa", {1990: YOB1990}), years=[1990])
    folder = tmp_path / "coreNLP"
    folder.mkdir()
    (folder / "female1990.txt").write_text("PERSON\nCITY\n")
    with pytest.raises(DataFormatError, match=r"female1990\.txt: 2 lines but the F block of 1990 has 3 names"):
        load_precomputed(folder, ssa)
    (folder / "female1990.txt").write_text("PERSON\nCITY\nPERSON\n")
    with pytest.raises(DataFormatError, match=r"male1990\.txt: missing prediction file"):
        load_precomputed(folder, ssa)
    (folder / "male1990.txt").write_text("PERSON\nNEW YORK\n")
    with pytest.raises(DataFormatError, match=r"male1990\.txt:2: expected one entity type"):
        load_precomputed(folder, ssa)


# ----------------------------------------------------------------------------------------- plot


def test_plot_writes_a_png_atomically(tmp_path):
    errors = census_errors(HAND_FRAME)
    with pytest.raises(NerbiasError, match="pass template="):
        plot_census_errors(errors, tmp_path / "all.png")
    path = plot_census_errors(errors, tmp_path / "plots" / "census_t4.png", template=4)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["census_t4.png"]  # no temporary left behind


# ------------------------------------------------------------------------------------ real data

SSA_DIR = SHARED_DATA / "ssa_names"
CORENLP_DIR = SHARED_DATA / "peer_results" / "census_template4" / "coreNLP"


@pytest.fixture(scope="module")
def real_ssa() -> pd.DataFrame:
    if not (SSA_DIR / "yob1880.txt").is_file():
        pytest.skip(f"SSA names not found under {SSA_DIR}")
    return read_ssa(SSA_DIR, progress=False)


@pytest.fixture(scope="module")
def corenlp_errors(real_ssa) -> pd.DataFrame:
    if not (CORENLP_DIR / "female1880.txt").is_file():
        pytest.skip(f"CoreNLP census predictions not found under {CORENLP_DIR}")
    return census_errors(load_precomputed(CORENLP_DIR, real_ssa, template=4, progress=False))


@pytest.mark.integration
def test_real_ssa_matches_published_counts(real_ssa):
    assert len(real_ssa) == 1_957_046
    assert len(distinct_names(real_ssa)) == 98_400
    counts = pd.read_csv(SSA_DIR / "COUNTS.tsv", sep="\t").set_index("year")
    names = real_ssa.groupby(["year", "sex"]).size().unstack()
    births = real_ssa.groupby(["year", "sex"])["count"].sum().unstack()
    assert names["F"].tolist() == counts["names_F"].tolist()
    assert names["M"].tolist() == counts["names_M"].tolist()
    assert births["F"].tolist() == counts["births_F"].tolist()
    assert births["M"].tolist() == counts["births_M"].tolist()


@pytest.mark.integration
def test_corenlp_errs_more_on_female_names_every_year(corenlp_errors):
    type1 = corenlp_errors.pivot(index="year", columns="gender", values="type1_w")
    assert type1.index.tolist() == list(range(1880, 2019))
    assert (type1["F"] > type1["M"]).all(), type1[type1["F"] <= type1["M"]]


@pytest.mark.integration
@pytest.mark.parametrize("year", [1880, 1990, 2018])
def test_corenlp_errors_recomputed_by_hand_from_raw_files(corenlp_errors, year):
    ssa_lines = (SSA_DIR / f"yob{year}.txt").read_text().splitlines()
    for sex, prefix in (("F", "female"), ("M", "male")):
        block = [line.split(",") for line in ssa_lines if line.split(",")[1] == sex]
        labels = (CORENLP_DIR / f"{prefix}{year}.txt").read_text().split("\n")[:-1]
        assert len(labels) == len(block)
        total = sum(int(count) for _, _, count in block)
        wrong = sum(int(count) for (_, _, count), label in zip(block, labels) if label != "PERSON")
        other_type = sum(int(count) for (_, _, count), label in zip(block, labels) if label not in ("", "PERSON"))
        untagged = sum(int(count) for (_, _, count), label in zip(block, labels) if label == "")
        expected = {
            "type1_w": wrong / total, "type2_w": other_type / total, "type3_w": untagged / total,
            "type1_u": sum(label != "PERSON" for label in labels) / len(labels),
            "type2_u": sum(label not in ("", "PERSON") for label in labels) / len(labels),
            "type3_u": sum(label == "" for label in labels) / len(labels),
        }
        row = corenlp_errors[(corenlp_errors.year == year) & (corenlp_errors.gender == sex)].iloc[0]
        assert {key: row[key] for key in expected} == pytest.approx(expected, rel=1e-12)
