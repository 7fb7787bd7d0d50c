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
template (``distinct_names`` + ``census_sentences``) and ``attach_labels`` spreads the labels
over the years.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import zipfile
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from nerbias.bias.names import substitution_pool
from nerbias.bias.types import NONE, PARTIAL_PREFIX, RECOGNISED, BiasSentence, NameSlot
from nerbias.errors import DataFormatError, NerbiasError

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


def read_ssa(source: str | Path, years: Iterable[int] = YEARS, progress: bool = True) -> pd.DataFrame:
    """Read SSA ``yobYYYY.txt`` files from a folder or from the official ``names.zip``.

    Returns one row per line with columns year, name, sex ("F"/"M"), count and rank_in_sex
    (0-based line index within the sex block of that year, which aligns published
    per-line predictions). Files must hold ``Name,Sex,Count`` lines, the F block before the
    M block, each name once per sex; LF and CRLF line ends are both accepted.
    Bad input raises DataFormatError naming the file (``names.zip!yobYYYY.txt`` inside a
    zip) and, for a bad line, its 1-based number.
    """
    source = Path(source)
    years = [int(year) for year in years]
    if not years:
        raise NerbiasError("read_ssa: no years requested")
    frames = []
    if source.is_dir():
        sums, counts = _read_sha256sums(source / "SHA256SUMS"), _read_counts(source / "COUNTS.tsv")
        for year in tqdm(years, desc="SSA years", disable=not progress, leave=False):
            path = source / f"yob{year}.txt"
            if not path.is_file():
                raise DataFormatError(path, f"missing year file for {year}")
            raw = path.read_bytes()
            if path.name in sums and hashlib.sha256(raw).hexdigest() != sums[path.name]:
                raise DataFormatError(path, f"sha256 differs from {source / 'SHA256SUMS'} (a changed or damaged file)")
            frame = _parse_ssa_file(raw, path, year)
            if year in counts:
                _check_year_counts(frame, counts[year], path, source / "COUNTS.tsv")
            frames.append(frame)
    elif source.is_file() and zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as archive:
            # names.zip keeps the files at its root; accept them in a subfolder too
            members = {Path(info.filename).name: info.filename for info in archive.infolist() if not info.is_dir()}
            for year in tqdm(years, desc="SSA years", disable=not progress, leave=False):
                member = members.get(f"yob{year}.txt")
                where = f"{source}!{member or f'yob{year}.txt'}"
                if member is None:
                    raise DataFormatError(where, f"missing year file for {year}")
                frames.append(_parse_ssa_file(archive.read(member), where, year))
    else:
        raise DataFormatError(source, "not a folder of yobYYYY.txt files or a names.zip")
    return pd.concat(frames, ignore_index=True)


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


def _check_year_counts(frame: pd.DataFrame, expected: dict[str, int], path: Path, counts_path: Path) -> None:
    found = {"names_F": int((frame["sex"] == "F").sum()), "names_M": int((frame["sex"] == "M").sum()),
             "births_F": int(frame.loc[frame["sex"] == "F", "count"].sum()),
             "births_M": int(frame.loc[frame["sex"] == "M", "count"].sum())}
    differing = [f"{k} {found[k]} (expected {expected[k]})" for k in _COUNT_COLUMNS if found[k] != expected[k]]
    if differing:
        raise DataFormatError(path, f"year totals disagree with {counts_path}: {', '.join(differing)}")


def _parse_ssa_file(raw: bytes, where: str | Path, year: int) -> pd.DataFrame:
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
        dtype={"name": str, "sex": str, "count": "int64"},
        na_filter=False,  # real names such as "Nan" or "Null" must stay names
        quoting=csv.QUOTE_NONE, engine="c",
    )
    is_male = (frame["sex"] == "M").to_numpy()
    female_after_male = ~is_male & np.maximum.accumulate(is_male)
    if female_after_male.any():
        line = int(np.argmax(female_after_male)) + 1
        raise DataFormatError(where, "F line after the M block (SSA files list all F names first)", line)
    duplicated = frame.duplicated(["sex", "name"]).to_numpy()
    if duplicated.any():
        line = int(np.argmax(duplicated)) + 1
        raise DataFormatError(where, f"name {frame['name'].iat[line - 1]!r} listed twice for one sex", line)
    rank = np.arange(len(frame))
    females = int((~is_male).sum())
    if females in (0, len(frame)):  # every year of the SSA data lists both sexes
        absent = "F" if females == 0 else "M"
        raise DataFormatError(where, f"no {absent} names: every SSA year lists both sexes (a file cut short?)")
    rank[females:] -= females
    frame.insert(0, "year", year)
    frame["rank_in_sex"] = rank
    return frame[SSA_COLUMNS]


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


def select_names(ssa_frame: pd.DataFrame, subset: str, pool_exclude: Sequence[str] = ()) -> pd.DataFrame:
    """The SSA rows the benchmark scores. ``all``: every row (the paper). ``heldout``: only names that
    name substitution can never put into training, i.e. every name outside the training half of
    ``substitution_pool(distinct names, pool_exclude, "train")`` (the held-out half, plus the
    excluded evaluation names, which substitution never draws either). Pass the ``pool_exclude``
    the training run used (augment.pool_exclude) so the two halves are the ones training saw."""
    if subset == "all":
        return ssa_frame
    if subset != "heldout":
        raise NerbiasError(f"corpus.names={subset!r}: must be one of {NAME_SUBSETS}")
    training_half = set(substitution_pool(distinct_names(ssa_frame), pool_exclude, "train"))
    return ssa_frame[~ssa_frame["name"].isin(training_half)].reset_index(drop=True)


# ----------------------------------------------------------------------------------------------
# Sentences and labels


def census_sentences(names: Sequence[str], template: int, lowercase: bool = False) -> list[BiasSentence]:
    """One sentence "<Name> <rest of template>" per name, the name at token 0.

    ``lowercase`` lowercases every token, the name included (for uncased taggers); the slot
    keeps the name as listed, the key of per-name statistics.
    """
    if template not in TEMPLATES:
        raise NerbiasError(f"unknown census template {template!r}; choose one of {sorted(TEMPLATES)}")
    rest = tuple(TEMPLATES[template].split())
    sentences = []
    for index, name in enumerate(names):
        if not name or len(name.split()) != 1:
            raise NerbiasError(f"census name must be one word, found {name!r}")
        tokens = (name,) + rest
        if lowercase:
            tokens = tuple(token.lower() for token in tokens)
        sentences.append(BiasSentence(tokens=tokens, slots=(NameSlot(0, name),), source=template, index=index))
    return sentences


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
# Error rates and plots


def census_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Error types 1-3, weighted and unweighted, per year, gender and template.

    ``frame`` has columns year, sex, name, count, template and label ("PERSON", "" for
    untagged, or another entity type). Returns year, gender ("F"/"M"), template and the
    fractions type1_w, type1_u, type2_w, type2_u, type3_w, type3_u.
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
    label = frame["label"]
    untagged = (label == UNTAGGED).to_numpy()
    type1 = (label != PERSON).to_numpy()
    flags = {"type1": type1, "type2": type1 & ~untagged, "type3": untagged}
    parts = {"total_w": counts}
    for kind, flag in flags.items():
        parts[f"{kind}_w"] = counts * flag
        parts[f"{kind}_u"] = flag.astype(np.float64)
    keys = {"year": frame["year"].to_numpy(), "gender": frame["sex"].to_numpy(),
            "template": frame["template"].to_numpy()}
    grouped = pd.DataFrame({**keys, **parts}).groupby(["year", "gender", "template"], sort=True)
    sums = grouped.sum()
    names = grouped.size()
    result = pd.DataFrame(index=sums.index)
    for kind in flags:
        result[f"{kind}_w"] = sums[f"{kind}_w"] / sums["total_w"]
        result[f"{kind}_u"] = sums[f"{kind}_u"] / names
    return result.reset_index()[["year", "gender", "template", *ERROR_COLUMNS]]
