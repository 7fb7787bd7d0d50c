"""Published census predictions in the authors' three layouts (CoreNLP, Flair, spaCy): read, mapped by
the PER-prefix rule, and scored to the census paper's error definitions computed here by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from helpers import run_script
from nerbias.bias.census import census_errors
from nerbias.bias.ssa import read_ssa
from nerbias.bias.published import PublishedPredictions, load_precomputed
from nerbias.errors import DataFormatError, NerbiasError

# Two years; in each sex block line k predicts line k of the block.
SSA = {1990: "Mary,F,50\nFlorence,F,20\nNan,F,7\nNull,F,5\nJohn,M,40\nGeorgia,M,6\n",
       1991: "Anna,F,9\nVirginia,F,3\nJohn,M,30\nLee,M,8\nIna,M,2\n"}
# What each tagger said of each (year, sex) block, as the authors publish it.
PUBLISHED = {
    "corenlp": {(1990, "F"): ["PERSON", "CITY", "", "PERSON"], (1990, "M"): ["PERSON", "STATE_OR_PROVINCE"],
                (1991, "F"): ["PERSON", ""], (1991, "M"): ["PERSON", "PERSON", "ORGANIZATION"]},
    "flair": {(1990, "F"): ['PER-span [1]: "Mary" ', 'LOC-span [1]: "Florence" ', "", 'PER-span [1]: "Null" '],
              (1990, "M"): ['PER-span [1]: "John" ', 'LOC-span [1]: "Georgia" '],
              (1991, "F"): ['PER-span [1]: "Anna" ', ""],
              (1991, "M"): ['PER-span [1]: "John" ', 'MISC-span [1]: "Lee" ORG-span [3]: "a" ', 'ORG-span [1]: "Ina" ']},
    "spacy": {(1990, "F"): ["PERSON Mary", "GPE Florence", "", "PERSON Null"], (1990, "M"): ["PERSON John", "GPE Georgia"],
              (1991, "F"): ["NORP Anna", ""], (1991, "M"): ["PERSON John", "PERSON Lee", "ORG Ina"]},
}


def write_folder(folder: Path, blocks: dict, newline: str = "\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for (year, sex), lines in blocks.items():
        name = f"{'female' if sex == 'F' else 'male'}{year}.txt"
        (folder / name).write_bytes((newline.join(lines) + newline).encode())
    return folder


def by_hand(ssa_text: dict[int, str], blocks: dict) -> dict[tuple[int, str], dict[str, float]]:
    """The census paper's definitions, as its authors' script computes them from the raw lines:
    type 1 = label not starting with PER; type 2 = that and not empty; type 3 = empty line."""
    out = {}
    for year, text in ssa_text.items():
        rows = [line.split(",") for line in text.strip().split("\n")]
        for sex in ("F", "M"):
            counts = [int(c) for _, s, c in rows if s == sex]
            labels = [line.strip() for line in blocks[(year, sex)]]
            flags = {"type1": [not x.startswith("PER") for x in labels],
                     "type2": [not x.startswith("PER") and x != "" for x in labels],
                     "type3": [x == "" for x in labels]}
            out[(year, sex)] = {}
            for kind, flag in flags.items():
                out[(year, sex)][f"{kind}_w"] = sum(c for c, f in zip(counts, flag) if f) / sum(counts)
                out[(year, sex)][f"{kind}_u"] = sum(flag) / len(flag)
    return out


@pytest.fixture
def ssa(tmp_path):
    folder = tmp_path / "ssa"
    folder.mkdir()
    for year, text in SSA.items():
        (folder / f"yob{year}.txt").write_text(text)
    return read_ssa(folder, years=sorted(SSA), progress=False)


@pytest.mark.parametrize("fmt", ["corenlp", "flair", "spacy"])
@pytest.mark.parametrize("given", ["auto", "explicit"])
def test_each_format_gives_the_papers_errors(tmp_path, ssa, fmt, given):
    folder = write_folder(tmp_path / fmt, PUBLISHED[fmt], newline="\r\n" if fmt == "spacy" else "\n")
    frame = load_precomputed(folder, ssa, template=4, progress=False, fmt="auto" if given == "auto" else fmt)
    errors = census_errors(frame)
    expected = by_hand(SSA, PUBLISHED[fmt])
    for row in errors.itertuples():
        for column, value in expected[(row.year, row.gender)].items():
            assert getattr(row, column) == pytest.approx(value, abs=1e-12), (fmt, row.year, row.gender, column)


def test_labels_are_the_first_entity_and_the_person_rule_is_the_prefix(tmp_path, ssa):
    frame = load_precomputed(write_folder(tmp_path / "flair", PUBLISHED["flair"]), ssa, progress=False)
    got = dict(zip(zip(frame["year"], frame["sex"], frame["name"]), zip(frame["published"], frame["label"])))
    assert got[(1990, "F", "Mary")] == ("PER", "PERSON")
    assert got[(1990, "F", "Florence")] == ("LOC", "LOC")
    assert got[(1990, "F", "Nan")] == ("", "")
    assert got[(1991, "M", "Lee")] == ("MISC", "MISC")  # the first of two spans


def test_a_line_of_another_format_names_file_and_line(tmp_path, ssa):
    blocks = {key: list(lines) for key, lines in PUBLISHED["flair"].items()}
    blocks[(1991, "M")][2] = "ORG Ina"  # a spaCy line in a Flair folder
    folder = write_folder(tmp_path / "mixed", blocks)
    with pytest.raises(DataFormatError, match=r"male1991\.txt:3: expected Flair spans.*\(flair format\)"):
        load_precomputed(folder, ssa, progress=False)
    with pytest.raises(DataFormatError, match=r"female1990\.txt:1: expected one entity type"):
        load_precomputed(folder, ssa, progress=False, fmt="corenlp")
    with pytest.raises(NerbiasError, match="tagger.format=xml"):
        PublishedPredictions(folder, format="xml")


@pytest.mark.slow
def test_evaluate_reads_a_flair_folder_end_to_end(tmp_path):
    data = tmp_path / "data"
    (data / "ssa_names").mkdir(parents=True)
    for year, text in SSA.items():
        (data / "ssa_names" / f"yob{year}.txt").write_text(text)
    folder = write_folder(tmp_path / "results_flair", PUBLISHED["flair"])
    out = tmp_path / "eval"
    result = run_script("evaluate.py", ["tagger=precomputed", f"tagger.path={folder}", "tagger.name=flair",
                                        "corpus=census", "corpus.template=4", "corpus.first_year=1990",
                                        "corpus.last_year=1991", f"paths.data_dir={data}", "logger=none",
                                        f"hydra.run.dir={out}"])
    assert result.returncode == 0, result.stderr[-2000:]
    errors = pd.read_csv(out / "census_errors.csv")
    expected = by_hand(SSA, PUBLISHED["flair"])
    for row in errors.itertuples():
        assert row.type1_w == pytest.approx(expected[(row.year, row.gender)]["type1_w"], abs=1e-6)
    labels = pd.read_csv(out / "census_labels.csv", keep_default_na=False)
    assert set(labels.columns) == {"name", "template", "label", "rows"}
    assert labels.loc[labels["name"] == "John", "rows"].tolist() == [2]  # PER in both years
    assert json.loads((out / "metrics.json").read_text())["tagger"] == "precomputed:flair"
