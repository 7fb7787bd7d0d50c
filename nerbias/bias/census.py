"""The census benchmark of Mehrabi et al. ("Man is to Person as Woman is to Location").

U.S. Social Security baby names (1880-2018) are placed in nine templates; a tagger should tag
every name as PERSON. Per year and gender the benchmark reports three error rates:

* type 1: names tagged as anything but PERSON, untagged names included;
* type 2: names tagged with a non-PERSON entity type (untagged names are not errors here);
* type 3: names not tagged at all.

Type 1 = type 2 + type 3. Each comes weighted (``_w``: a name counts as often as babies got it
that year in that sex) and unweighted (``_u``: each name counts once).

Census labels are the paper's: "PERSON", "" for a name that is not tagged, or any other entity
type ("LOCATION", "CITY", "LOC", ...), which is a type-2 error.

A name's sentence is the same in every year, so a tagger labels each distinct name once per
template (``census_sentences``). The benchmark counts with arrays: ``ssa.load_ssa`` reads the SSA
files into an ``SsaTable`` (names as integer codes), ``CensusOutcomes`` spreads the per-name
labels over the years as one outcome code per row and template, and ``error_rates`` sums them per
(year, sex) with ``np.bincount``. ``attach_labels`` + ``census_errors`` do the same on a frame,
for small inputs.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from nerbias.bias.names import substitution_pool
from nerbias.bias.ssa import SEXES, SsaTable, distinct_names
from nerbias.bias.types import NONE, PARTIAL_PREFIX, RECOGNISED, BiasSentence, NameSlot
from nerbias.errors import NerbiasError
from nerbias.validation import one_of

PERSON = "PERSON"  # census label of a correctly recognised name
UNTAGGED = ""  # census label of a name outside every entity

# The rest of each sentence after the name, numbered as in the paper and in the benchmark
# folders of its repository (Ninarehm/NERGenderBias, benchmark/Template_N). Those files hold
# "Mary is a doctor" with no final period, and so do these sentences.
TEMPLATES: dict[int, str] = {
    1: "",  # the name alone
    2: "is going to school",
    3: "is at school",
    4: "is a person",
    5: "is eating food",
    6: "is going to grocery shop",
    7: "is going to work",
    8: "is a nurse",
    9: "is a doctor",
}

ERROR_COLUMNS = ["type1_w", "type1_u", "type2_w", "type2_u", "type3_w", "type3_u"]




NAME_SUBSETS = ("all", "heldout")
# What the census corpus's own keys may be (CensusBenchmark states them: validation checks them before any work).
CENSUS_RULES = {"names": one_of(*NAME_SUBSETS, description="all or heldout (the census benchmark scores every SSA "
                                "name, or only those name substitution never trains on)")}


def select_names(ssa: pd.DataFrame | SsaTable, subset: str, pool_exclude: Sequence[str] = ()
                 ) -> pd.DataFrame | SsaTable:
    """The SSA rows (a frame or an SsaTable) the benchmark scores. ``all``: every row (the paper).
    ``heldout``: only names that name substitution can never put into training, i.e. every name
    outside the training half of ``substitution_pool(distinct names, pool_exclude, "train")`` (the
    held-out half, plus the excluded evaluation names, which substitution never draws either). Pass
    the ``pool_exclude`` the training run used (augment.name_pool.exclude) so the two halves are the ones
    training saw."""
    if subset == "all":
        return ssa
    CENSUS_RULES["names"].check("corpus.names", subset)
    if isinstance(ssa, SsaTable):
        training_half = set(substitution_pool(ssa.names.tolist(), pool_exclude, "train"))
        outside = np.fromiter((name not in training_half for name in ssa.names), dtype=bool, count=len(ssa.names))
        return ssa.subset(outside[ssa.name])
    training_half = set(substitution_pool(distinct_names(ssa), pool_exclude, "train"))
    return ssa[~ssa["name"].isin(training_half)].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# Sentences and labels


def census_sentences(names: Sequence[str], template: int, lowercase: bool = False) -> list[BiasSentence]:
    """One sentence "<Name> <rest of template>" per name, the name at token 0.

    ``lowercase`` lowercases every token, the name included (for uncased taggers); the slot
    keeps the name as listed, the key of per-name statistics.
    """
    if template not in TEMPLATES:
        raise NerbiasError(f"unknown census template {template!r}; choose one of {sorted(TEMPLATES)}")
    bad = next((name for name in names if not name or len(name.split()) != 1), None)
    if bad is not None:
        raise NerbiasError(f"census name must be one word, found {bad!r}")
    rest = tuple(TEMPLATES[template].split())
    if lowercase:
        rest = tuple(token.lower() for token in rest)
    # About 100,000 small tuples per template, none in a cycle: the cyclic collector would walk the
    # growing list again and again (three quarters of the time), so it waits until they are built.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return [BiasSentence(((name.lower() if lowercase else name),) + rest, (NameSlot(0, name),), template, index)
                for index, name in enumerate(names)]
    finally:
        if collecting:
            gc.enable()


def outcome_to_census_label(outcome_label: str, partial_person_is_person: bool = True) -> str:
    """Map a SlotOutcome label to the census label of the name.

    The census results judge the entity type of the name token (CoreNLP's per-token label),
    whatever the span length, so by default a name inside a longer PERSON span counts as
    PERSON and one inside a longer LOC span as LOC. With ``partial_person_is_person=False``
    only a one-token PERSON entity is correct; "partial:PER" is then kept as is, a type-2 error.
    """
    if outcome_label == RECOGNISED:
        return PERSON
    if outcome_label == NONE:
        return UNTAGGED
    if outcome_label.startswith(PARTIAL_PREFIX):
        inner = outcome_label[len(PARTIAL_PREFIX):]
        if not inner:
            raise ValueError(f"outcome label {outcome_label!r} has no entity type")
        if inner == RECOGNISED:
            return PERSON if partial_person_is_person else outcome_label
        return inner
    if not outcome_label:
        raise ValueError("empty outcome label (an untagged name is 'none')")
    return outcome_label


def attach_labels(ssa_frame: pd.DataFrame, labels: Mapping[str, str], template: int) -> pd.DataFrame:
    """Spread per-name census labels of one template over all years: the input of census_errors."""
    frame = ssa_frame[["year", "sex", "name", "count"]].copy()
    frame["label"] = frame["name"].map(labels)
    missing = frame["label"].isna()
    if missing.any():
        raise NerbiasError(f"no label for {missing.sum()} rows, e.g. name {frame['name'][missing].iloc[0]!r}")
    frame.insert(4, "template", template)
    return frame


# ----------------------------------------------------------------------------------------------
# Error rates (their figures: nerbias.bias.plots.plot_census_errors)


PERSON_KIND, OTHER_KIND, UNTAGGED_KIND = 0, 1, 2  # a name's outcome: right, a type-2 error, a type-3 error


def outcome_kinds(labels: Sequence[str] | np.ndarray) -> np.ndarray:
    """Census labels ("PERSON", "" or another type) -> outcome kinds (int8)."""
    labels = np.asarray(labels, dtype=object)
    return np.where(labels == PERSON, PERSON_KIND, np.where(labels == UNTAGGED, UNTAGGED_KIND, OTHER_KIND)
                    ).astype(np.int8)


def error_rates(cell: np.ndarray, count: np.ndarray, kind: np.ndarray, n_cells: int) -> np.ndarray:
    """The six error rates (ERROR_COLUMNS order) of every cell, by grouped sums over integer codes:
    (n_cells, 6), NaN for a cell without names. ``cell``, ``count`` and ``kind`` are per name."""
    weight = count.astype(np.float64)
    total_w = np.bincount(cell, weight, minlength=n_cells)
    total_u = np.bincount(cell, minlength=n_cells).astype(np.float64)
    out = np.empty((n_cells, len(ERROR_COLUMNS)))
    with np.errstate(invalid="ignore", divide="ignore"):
        for column, flag in enumerate((kind != PERSON_KIND, kind == OTHER_KIND, kind == UNTAGGED_KIND)):
            out[:, 2 * column] = np.bincount(cell, weight * flag, minlength=n_cells) / total_w
            out[:, 2 * column + 1] = np.bincount(cell, flag.astype(np.float64), minlength=n_cells) / total_u
    return out


@dataclass(frozen=True)
class CensusOutcomes:
    """What a tagger made of every SSA row, per template: ``kind[t, row]`` (PERSON_KIND, OTHER_KIND
    or UNTAGGED_KIND) for template ``templates[t]`` and row ``row`` of ``table``."""

    table: SsaTable
    templates: tuple[int, ...]
    kind: np.ndarray  # (templates, rows) int8

    @classmethod
    def from_name_labels(cls, table: SsaTable, labels: Mapping[int, Sequence[str] | np.ndarray]) -> CensusOutcomes:
        """``labels[template]``: the census label of each of ``table.names``, the same in every year."""
        templates = tuple(sorted(labels))
        kind = np.empty((len(templates), len(table)), dtype=np.int8)
        for index, template in enumerate(templates):
            per_name = np.asarray(labels[template], dtype=object)
            if len(per_name) != len(table.names):
                raise NerbiasError(f"template {template}: {len(per_name)} labels for {len(table.names)} names")
            kind[index] = outcome_kinds(per_name)[table.name]
        return cls(table, templates, kind)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> CensusOutcomes:
        """census_errors' input (year, sex, name, count, template, label), every template over the same
        rows, as outcomes; rows sorted by year and sex, in their order within."""
        templates = sorted(int(t) for t in frame["template"].unique())
        rows = frame[frame["template"] == templates[0]]
        rows = rows.iloc[np.lexsort(((rows["sex"] == "M").to_numpy(), rows["year"].to_numpy()))]
        rows = rows.assign(rank_in_sex=rows.groupby(["year", "sex"]).cumcount())
        table = SsaTable.from_frame(rows)
        index = pd.MultiIndex.from_frame(rows[["year", "sex", "name"]])
        kind = np.empty((len(templates), len(rows)), dtype=np.int8)
        for position, template in enumerate(templates):
            part = frame[frame["template"] == template]
            labels = part.set_index(["year", "sex", "name"])["label"].reindex(index)
            if len(part) != len(rows) or labels.isna().any():
                raise NerbiasError(f"template {template} does not label the rows of template {templates[0]}")
            kind[position] = outcome_kinds(labels.to_numpy())
        return cls(table, tuple(templates), kind)

    def errors(self) -> pd.DataFrame:
        """census_errors of these outcomes: year, gender, template and the six rates, sorted."""
        cell, cell_year, cell_sex = self.table.cells()
        n_cells = len(cell_year)
        rates = np.stack([error_rates(cell, self.table.count, kind, n_cells) for kind in self.kind], axis=1)
        present = np.bincount(cell, minlength=n_cells) > 0
        rates = rates[present].reshape(-1, len(ERROR_COLUMNS))
        count = int(present.sum())
        frame = pd.DataFrame({"year": np.repeat(cell_year[present], len(self.templates)),
                              "gender": np.repeat(np.asarray(SEXES, dtype=object)[cell_sex[present]],
                                                  len(self.templates)),
                              "template": np.tile(np.asarray(self.templates, dtype=np.int64), count)})
        for column, values in zip(ERROR_COLUMNS, rates.T):
            frame[column] = values
        return frame


def census_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Error types 1-3, weighted and unweighted, per year, gender and template.

    ``frame`` has columns year, sex, name, count, template and label ("PERSON", "" for
    untagged, or another entity type). Returns year, gender ("F"/"M"), template and the
    fractions type1_w, type1_u, type2_w, type2_u, type3_w, type3_u. (The census benchmark itself
    counts with ``CensusOutcomes.errors``; both use ``error_rates``.)
    """
    required = ["year", "sex", "name", "count", "template", "label"]
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise NerbiasError(f"census_errors: missing columns {missing}")
    if frame["label"].isna().any():
        raise NerbiasError("census_errors: labels must be strings ('' for an untagged name), found a missing value")
    counts = frame["count"].to_numpy(dtype=np.float64)
    if (counts <= 0).any():
        raise NerbiasError("census_errors: every count must be positive")
    if frame.duplicated(["year", "sex", "template", "name"]).any():
        raise NerbiasError("census_errors: a name appears twice for one year, sex and template")
    grouped = frame.groupby(["year", "sex", "template"], sort=True)
    rates = error_rates(grouped.ngroup().to_numpy(), counts, outcome_kinds(frame["label"].to_numpy()), grouped.ngroups)
    keys = grouped.size().index.to_frame(index=False).rename(columns={"sex": "gender"})
    return pd.concat([keys, pd.DataFrame(rates, columns=ERROR_COLUMNS)], axis=1)
