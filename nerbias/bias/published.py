"""Published per-name census predictions (``tagger=precomputed``), in every layout the census
paper's authors publish (Ninarehm/NERGenderBias, ``results/Template_N/results_<tagger>/``).

A folder holds ``femaleYYYY.txt`` and ``maleYYYY.txt``; line k is the prediction for line k of
that sex's block of ``yobYYYY.txt``, i.e. for the sentence "<Name> <template>". Line formats
(``tagger.format``; ``auto`` detects it from the first non-empty line):

- ``corenlp``: the entity type alone, ``PERSON``, ``CITY``, ``LOCATION``, ...;
- ``flair``: ``PER-span [1]: "Mary"`` (also ``LOC-span``, ``ORG-span``, ``MISC-span``), several
  spans separated by whitespace;
- ``spacy``: ``PERSON Mary`` (also ``ORG Anna``, ``GPE ...``, ``NORP ...``): the label, then the text;

and in every format an empty line means no entity at all. The first entity on a line is the
name's label (the name is token 1 of every census sentence). **Person rule**, the authors' own
(their ``code.py`` tests ``label[0:3] == 'PER'``): a name counts as a PERSON when its label starts
with ``PER`` (``PERSON``, ``PER``); any other label is a type-2 error, an empty line a type-3
error. Labels are kept as published in ``census_labels.csv``.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from nerbias.bias.census import PERSON, UNTAGGED, CensusOutcomes, outcome_kinds
from nerbias.bias.ssa import SEXES, SsaTable
from nerbias.bias.tagging import CensusLabeller, CensusOptions, Tagger
from nerbias.errors import DataFormatError, NerbiasError

FORMATS = ("auto", "corenlp", "flair", "spacy")
PERSON_PREFIX = "PER"
_FLAIR_SPAN = r'([A-Za-z][\w-]*)-span \[\d+(?:, ?\d+)*\]: ".*?"'
_LINE = {
    "corenlp": re.compile(r"(\S+)"),
    "flair": re.compile(rf"{_FLAIR_SPAN}(?:\s+{_FLAIR_SPAN})*"),
    "spacy": re.compile(r"([A-Za-z][\w-]*) \S.*"),
}
_FORMAT_HINTS = {
    "corenlp": "one entity type per line, e.g. PERSON",
    "flair": 'Flair spans, e.g. PER-span [1]: "Mary"',
    "spacy": "a spaCy label and the entity text, e.g. PERSON Mary",
}


def census_label(label: str) -> str:
    """The census label of a published label: PERSON when it starts with ``PER``, "" when untagged."""
    return PERSON if label.startswith(PERSON_PREFIX) else label


def detect_format(line: str, path: Path, number: int) -> str:
    """The format of a non-empty prediction line (Flair and spaCy lines are told apart by shape)."""
    stripped = line.strip()
    for name in ("flair", "spacy", "corenlp"):
        if _LINE[name].fullmatch(stripped):
            return name
    raise DataFormatError(path, f"cannot tell the prediction format from {line!r} (set tagger.format to one of "
                                f"{list(FORMATS[1:])})", number)


def read_label_lines(path: Path, fmt: str) -> tuple[list[str], str]:
    """The first entity label of every line ("" for an empty line) and the format used."""
    if not path.is_file():
        raise DataFormatError(path, "missing prediction file")
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the final newline ends the last line; it does not start another
    labels = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            labels.append(UNTAGGED)
            continue
        if fmt == "auto":
            fmt = detect_format(line, path, number)
        match = _LINE[fmt].fullmatch(stripped)
        if match is None:
            expected = "one entity type or an empty line" if fmt == "corenlp" else \
                f"{_FORMAT_HINTS[fmt]}, or an empty line"
            raise DataFormatError(path, f"expected {expected} ({fmt} format), found {line!r}", number)
        labels.append(match.group(1))
    return labels, fmt


def read_published(folder: str | Path, table: SsaTable, fmt: str = "auto", progress: bool = True
                   ) -> tuple[np.ndarray, list[str]]:
    """The published label of every row of ``table`` (complete years, as load_ssa returns them): codes
    (int32, one per row) into a vocabulary of labels as published ("" for an empty line)."""
    if fmt not in FORMATS:
        raise NerbiasError(f"tagger.format={fmt} is not one of {list(FORMATS)}")
    folder = Path(folder)
    cell, cell_year, cell_sex = table.cells()
    order = np.argsort(cell, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(cell, minlength=len(cell_year)))])
    codes = np.empty(len(table), dtype=np.int32)
    vocabulary: dict[str, int] = {}
    for c in tqdm(range(len(cell_year)), desc="predictions", disable=not progress, leave=False):
        rows = order[bounds[c]:bounds[c + 1]]
        if not len(rows):
            continue
        year, sex = int(cell_year[c]), SEXES[cell_sex[c]]
        path = folder / f"{'female' if sex == 'F' else 'male'}{year}.txt"
        labels, fmt = read_label_lines(path, fmt)  # a folder is one format: the first file fixes it
        if len(labels) != len(rows):
            raise DataFormatError(path, f"{len(labels)} lines but the {sex} block of {year} has {len(rows)} names")
        line_codes = np.fromiter((vocabulary.setdefault(label, len(vocabulary)) for label in labels),
                                 dtype=np.int32, count=len(labels))
        codes[rows] = line_codes[table.rank[rows]]
    return codes, list(vocabulary)


def published_kinds(codes: np.ndarray, vocabulary: Sequence[str]) -> np.ndarray:
    """Outcome kinds (census.outcome_kinds) of coded published labels, by the person rule."""
    return outcome_kinds([census_label(label) for label in vocabulary])[codes]


def load_precomputed(folder: str | Path, ssa_frame: pd.DataFrame, template: int = 4, progress: bool = True,
                     fmt: str = "auto") -> pd.DataFrame:
    """Published per-name predictions aligned with ``ssa_frame`` (complete years, as read_ssa returns them).

    Returns year, sex, name, label (the census label: PERSON, "" or the published type), count,
    template and ``published`` (the label as published), ready for census_errors.
    """
    codes, vocabulary = read_published(folder, SsaTable.from_frame(ssa_frame), fmt, progress)
    published = np.asarray(vocabulary, dtype=object)[codes]
    result = ssa_frame[["year", "sex", "name", "count"]].copy()
    result["template"] = template
    result["label"] = np.asarray([census_label(label) for label in vocabulary], dtype=object)[codes]
    result["published"] = published
    return result[["year", "sex", "name", "label", "count", "template", "published"]]


def label_table(table: SsaTable, codes: np.ndarray, vocabulary: Sequence[str], template: int) -> pd.DataFrame:
    """``census_labels.csv`` of published predictions: each name's published label, with the number of
    (year, sex) rows that carry it (a name can be labelled differently across years), in order of
    first appearance."""
    key = table.name.astype(np.int64) * max(len(vocabulary), 1) + codes
    unique, first, rows = np.unique(key, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    unique, rows = unique[order], rows[order]
    return pd.DataFrame({"name": table.names[unique // max(len(vocabulary), 1)],
                         "template": np.full(len(unique), template, dtype=np.int64),
                         "label": np.asarray(vocabulary, dtype=object)[unique % max(len(vocabulary), 1)],
                         "rows": rows.astype(np.int64)})


class PublishedPredictions(Tagger, CensusLabeller):
    """``tagger=precomputed``: a folder of published per-name census predictions of one template.

    Not a sentence tagger: a census labeller, it labels the census benchmark's names only (any other
    corpus stops at ``Tagger.slot_tagger`` with one line saying so).
    """

    def __init__(self, path: str | Path, template: int = 4, name: str | None = None, format: str = "auto",
                 kind: str = "precomputed"):
        self.kind = kind  # the label run names and tables use (the config's ``kind``)
        if format not in FORMATS:
            raise NerbiasError(f"tagger.format={format} is not one of {list(FORMATS)}")
        self.path = Path(path)
        self.template = int(template)
        self.format = format
        self.name = f"precomputed:{name or self.path.name}"

    def read(self, table: SsaTable, template: int) -> tuple[np.ndarray, list[str]]:
        """The predictions aligned with ``table`` (``read_published``), for ``template`` only."""
        if template != self.template:
            raise NerbiasError(f"precomputed predictions {self.path} are for template {self.template}, "
                               f"not {template} (set corpus.template)")
        return read_published(self.path, table, self.format)

    def census_labeller(self, options: CensusOptions) -> CensusLabeller:
        return self  # labels as published: the census sentences' casing and batches do not apply

    def label(self, table: SsaTable, templates: Sequence[int]) -> tuple[CensusOutcomes, pd.DataFrame, float]:
        """The census outcomes of these predictions, their ``census_labels.csv`` rows and the seconds
        spent reading them (the "tagger" time of a published labeller)."""
        started = time.perf_counter()
        coded = {template: self.read(table, template) for template in templates}
        seconds = time.perf_counter() - started
        outcomes = CensusOutcomes(table, tuple(sorted(coded)),
                                  np.stack([published_kinds(*coded[template]) for template in sorted(coded)]))
        labels = pd.concat([label_table(table, *coded[template], template) for template in coded], ignore_index=True)
        return outcomes, labels, seconds
