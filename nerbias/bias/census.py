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
template (``census_sentences``). The benchmark counts with arrays: ``load_ssa`` reads the SSA
files into an ``SsaTable`` (names as integer codes), ``CensusOutcomes`` spreads the per-name
labels over the years as one outcome code per row and template, and ``error_rates`` sums them per
(year, sex) with ``np.bincount``. ``attach_labels`` + ``census_errors`` do the same on a frame,
for small inputs.
"""

from __future__ import annotations

import csv
import gc
import hashlib
import io
import re
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

from nerbias.bias.names import substitution_pool
from nerbias.bias.types import NONE, PARTIAL_PREFIX, RECOGNISED, BiasSentence, NameSlot
from nerbias.errors import DataFormatError, NerbiasError
from nerbias.validation import one_of

YEARS = range(1880, 2019)
SEXES = ("F", "M")
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

SSA_COLUMNS = ["year", "name", "sex", "count", "rank_in_sex"]
ERROR_COLUMNS = ["type1_w", "type1_u", "type2_w", "type2_u", "type3_w", "type3_u"]

# A name must be one token (it sits at token 0 of the sentences), so no commas or whitespace.
# Counts are capped at 18 digits so that they fit in int64.
_SSA_LINE = r"[^,\s]+,[FM],0*[1-9][0-9]{0,17}"
_SSA_FILE = re.compile(rf"(?:{_SSA_LINE}\n)*")


# ----------------------------------------------------------------------------------------------
# SSA names


@dataclass(frozen=True)
class SsaTable:
    """SSA rows as compact arrays, in file order: years ascending, in each year the F block, then
    the M block (so the rows of one (year, sex) are contiguous, in rank order).

    ``names`` are the distinct names, sorted; ``name`` codes each row into them (a categorical).
    ``sex`` is 0 for F and 1 for M (an index into SEXES); ``rank`` is the 0-based line index
    within the sex block of the year, which aligns published per-line predictions.
    """

    years: tuple[int, ...]
    names: np.ndarray  # object array of str, sorted
    year: np.ndarray  # int16 per row
    sex: np.ndarray  # int8 per row
    name: np.ndarray  # int32 per row
    count: np.ndarray  # int64 per row
    rank: np.ndarray  # int32 per row

    def __len__(self) -> int:
        return len(self.count)

    def cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(cell of each row, year of each cell, sex of each cell): cell = 2 * (index of the year) + sex,
        so cells are ordered by year, then sex, like the rows."""
        years = np.asarray(self.years, dtype=np.int64)
        cell = np.searchsorted(years, self.year).astype(np.int64) * 2 + self.sex
        return cell, np.repeat(years, 2), np.tile(np.arange(2, dtype=np.int8), len(years))

    def frame(self) -> pd.DataFrame:
        """The rows as a frame: year, name, sex ("F"/"M"), count, rank_in_sex (read_ssa's layout)."""
        return pd.DataFrame({"year": self.year.astype(np.int64), "name": self.names[self.name],
                             "sex": np.asarray(SEXES, dtype=object)[self.sex], "count": self.count,
                             "rank_in_sex": self.rank.astype(np.int64)})[SSA_COLUMNS]

    def subset(self, keep: np.ndarray) -> SsaTable:
        """The rows where ``keep`` holds, the names re-coded to those left."""
        used, name = np.unique(self.name[keep], return_inverse=True)
        return SsaTable(self.years, self.names[used], self.year[keep], self.sex[keep], name.astype(np.int32),
                        self.count[keep], self.rank[keep])

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> SsaTable:
        """A frame in read_ssa's layout (rows in its order) as a table."""
        names, name = np.unique(frame["name"].to_numpy(dtype=object), return_inverse=True)
        sex = frame["sex"].to_numpy()
        if not np.isin(sex, SEXES).all():
            raise NerbiasError(f"sex must be one of {SEXES}")
        return cls(tuple(sorted(int(y) for y in frame["year"].unique())), names,
                   frame["year"].to_numpy(np.int16), (sex == "M").astype(np.int8), name.astype(np.int32),
                   frame["count"].to_numpy(np.int64), frame["rank_in_sex"].to_numpy(np.int32))


def load_ssa(source: str | Path, years: Iterable[int] = YEARS, progress: bool = True) -> SsaTable:
    """Read SSA ``yobYYYY.txt`` files from a folder or from the official ``names.zip`` into an SsaTable,
    one year file at a time (``read_year_file``), so memory holds the compact arrays and one year.

    Files must hold ``Name,Sex,Count`` lines, the F block before the M block, each name once per sex;
    LF and CRLF line ends are both accepted. Bad input raises DataFormatError naming the file
    (``names.zip!yobYYYY.txt`` inside a zip) and, for a bad line, its 1-based number.
    """
    years = sorted({int(year) for year in years})
    if not years:
        raise NerbiasError("load_ssa: no years requested")
    parts: dict[str, list[np.ndarray]] = {key: [] for key in ("year", "sex", "name", "count", "rank")}
    for year, block in _year_blocks(Path(source), years, progress):
        sex = (block["sex"] == "M").to_numpy()
        females = int((~sex).sum())
        rank = np.arange(len(block), dtype=np.int32)
        rank[females:] -= females
        parts["year"].append(np.full(len(block), year, dtype=np.int16))
        parts["sex"].append(sex.astype(np.int8))
        parts["name"].append(pa.array(block["name"].array, type=pa.string()))  # compact: no str object a row
        parts["count"].append(block["count"].to_numpy(np.int64))
        parts["rank"].append(rank)
    # One hash pass over all rows in Arrow (a per-row lookup in Python took as long as reading the files),
    # then the distinct names sorted as Python sorts them, and the codes renumbered in that order.
    encoded = pa.concat_arrays(parts.pop("name")).dictionary_encode()
    distinct = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
    order = np.argsort(distinct, kind="stable")
    sorted_code = np.empty(len(order), dtype=np.int32)
    sorted_code[order] = np.arange(len(order), dtype=np.int32)
    arrays = {key: np.concatenate(value) for key, value in parts.items()}
    return SsaTable(tuple(years), distinct[order], arrays["year"], arrays["sex"],
                    sorted_code[encoded.indices.to_numpy()], arrays["count"], arrays["rank"])


def read_ssa(source: str | Path, years: Iterable[int] = YEARS, progress: bool = True) -> pd.DataFrame:
    """``load_ssa`` as a frame: one row per line with columns year, name, sex ("F"/"M"), count and
    rank_in_sex (0-based line index within the sex block of that year)."""
    return load_ssa(source, years, progress).frame()


def _year_blocks(source: Path, years: Sequence[int], progress: bool) -> Iterator[tuple[int, pd.DataFrame]]:
    """(year, that year's checked lines) for each year, from a folder or a names.zip."""
    bar = partial(tqdm, desc="SSA years", disable=not progress, leave=False)
    if source.is_dir():
        sums, counts = _read_sha256sums(source / "SHA256SUMS"), _read_counts(source / "COUNTS.tsv")
        for year in bar(years):
            path = source / f"yob{year}.txt"
            if not path.is_file():
                raise DataFormatError(path, f"missing year file for {year}")
            raw = path.read_bytes()
            if path.name in sums and hashlib.sha256(raw).hexdigest() != sums[path.name]:
                raise DataFormatError(path, f"sha256 differs from {source / 'SHA256SUMS'} (a changed or damaged file)")
            yield year, read_year_file(raw, path, counts.get(year), source / "COUNTS.tsv")
    elif source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            # names.zip keeps the files at its root; accept them in a subfolder too
            members = {Path(info.filename).name: info.filename for info in archive.infolist() if not info.is_dir()}
            for year in bar(years):
                member = members.get(f"yob{year}.txt")
                where = f"{source}!{member or f'yob{year}.txt'}"
                if member is None:
                    raise DataFormatError(where, f"missing year file for {year}")
                yield year, read_year_file(archive.read(member), where)
    else:
        raise DataFormatError(source, "not a folder of yobYYYY.txt files or a names.zip")


def _read_sha256sums(path: Path) -> dict[str, str]:
    """``<hex>  <file>`` lines (sha256sum's output) -> {file: hex}; {} when there is no such file."""
    if not path.is_file():
        return {}
    sums = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            parts = line.split()
            if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[0]):
                raise DataFormatError(path, f"expected '<sha256>  <file>', found {line!r}", number)
            sums[parts[1].lstrip("*")] = parts[0]
    return sums


_COUNT_COLUMNS = ("names_F", "names_M", "births_F", "births_M")


def _read_counts(path: Path) -> dict[int, dict[str, int]]:
    """COUNTS.tsv (year, names_F, names_M, names_total, births_F, births_M) -> per year; {} when absent."""
    if not path.is_file():
        return {}
    frame = pd.read_csv(path, sep="\t")
    missing = [c for c in ("year", *_COUNT_COLUMNS) if c not in frame.columns]
    if missing:
        raise DataFormatError(path, f"missing columns {missing}", 1)
    return {int(row["year"]): {c: int(row[c]) for c in _COUNT_COLUMNS} for _, row in frame.iterrows()}


def _check_year_counts(frame: pd.DataFrame, is_male: np.ndarray, expected: dict[str, int], path: str | Path,
                       counts_path: Path | None) -> None:
    count = frame["count"].to_numpy()
    found = {"names_F": int((~is_male).sum()), "names_M": int(is_male.sum()),
             "births_F": int(count[~is_male].sum()), "births_M": int(count[is_male].sum())}
    differing = [f"{k} {found[k]} (expected {expected[k]})" for k in _COUNT_COLUMNS if found[k] != expected[k]]
    if differing:
        raise DataFormatError(path, f"year totals disagree with {counts_path}: {', '.join(differing)}")


def read_year_file(raw: bytes, where: str | Path, expected: dict[str, int] | None = None,
                   counts_path: Path | None = None) -> pd.DataFrame:
    """One ``yobYYYY.txt`` (its bytes), read and checked: name, sex, count per line, in file order.

    Every check of a year file lives here: line format, UTF-8, F block before M block, a name once
    per sex, and (``expected``, a row of ``counts_path``) the year's totals.
    """
    if not raw.strip():
        raise DataFormatError(where, "file is empty")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise DataFormatError(where, f"not valid UTF-8 ({error.reason})", line) from None
    text = text.replace("\r\n", "\n")
    if not text.endswith("\n"):
        text += "\n"
    # One C-speed match over the whole file; the line-by-line diagnosis runs only on failure.
    if _SSA_FILE.fullmatch(text) is None:
        _raise_first_bad_ssa_line(text, where)
    frame = pd.read_csv(
        io.StringIO(text), header=None, names=["name", "sex", "count"],
        dtype={"name": str, "sex": object, "count": "int64"},
        na_filter=False,  # real names such as "Nan" or "Null" must stay names
        quoting=csv.QUOTE_NONE, engine="c",
    )
    is_male = (frame["sex"] == "M").to_numpy()
    female_after_male = ~is_male & np.maximum.accumulate(is_male)
    if female_after_male.any():
        line = int(np.argmax(female_after_male)) + 1
        raise DataFormatError(where, "F line after the M block (SSA files list all F names first)", line)
    codes, _ = frame["name"].factorize()
    duplicated = pd.Series(codes.astype(np.int64) * 2 + is_male).duplicated().to_numpy()  # a (sex, name) pair again
    if duplicated.any():
        line = int(np.argmax(duplicated)) + 1
        raise DataFormatError(where, f"name {frame['name'].iat[line - 1]!r} listed twice for one sex", line)
    females = int((~is_male).sum())
    if females in (0, len(frame)):  # every year of the SSA data lists both sexes
        absent = "F" if females == 0 else "M"
        raise DataFormatError(where, f"no {absent} names: every SSA year lists both sexes (a file cut short?)")
    if expected is not None:
        _check_year_counts(frame, is_male, expected, where, counts_path)
    return frame


def _raise_first_bad_ssa_line(text: str, where: str | Path) -> None:
    for number, line in enumerate(text[:-1].split("\n"), start=1):
        fields = line.split(",")
        if len(fields) != 3:
            raise DataFormatError(where, f"expected Name,Sex,Count, found {line!r}", number)
        name, sex, count = fields
        if not name or any(char.isspace() for char in name):
            raise DataFormatError(where, f"name must be one non-empty word, found {name!r}", number)
        if sex not in SEXES:
            raise DataFormatError(where, f"sex must be F or M, found {sex!r}", number)
        if re.fullmatch(r"0*[1-9][0-9]{0,17}", count) is None:
            if re.fullmatch(r"0*[1-9][0-9]*", count):
                raise DataFormatError(where, f"count {count} is too large (at most 18 digits)", number)
            raise DataFormatError(where, f"count must be a positive integer, found {count!r}", number)
    raise DataFormatError(where, "malformed file")  # unreachable while the two checks agree


def distinct_names(ssa_frame: pd.DataFrame) -> list[str]:
    """The names of the frame, each once (either sex, any year), sorted: what a tagger must label."""
    return sorted(ssa_frame["name"].unique().tolist())


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
    the ``pool_exclude`` the training run used (augment.pool_exclude) so the two halves are the ones
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
