"""The U.S. Social Security baby names (1880-2018) the census benchmark places in its templates: the SSA's
``yobYYYY.txt`` files (``Name,Sex,Count`` lines, the F block before the M block), from a folder or the
official ``names.zip``, checked against ``SHA256SUMS`` and ``COUNTS.tsv`` when they are there, read into an
``SsaTable`` of compact arrays (``load_ssa``) or a frame (``read_ssa``)."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import zipfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
from tqdm.auto import tqdm

from nerbias.errors import DataFormatError, NerbiasError

YEARS = range(1880, 2019)
SEXES = ("F", "M")
SSA_COLUMNS = ["year", "name", "sex", "count", "rank_in_sex"]

# A name must be one token (it sits at token 0 of the sentences), so no commas or whitespace.
# Counts are capped at 18 digits so that they fit in int64.
_SSA_LINE = r"[^,\s]+,[FM],0*[1-9][0-9]{0,17}"
_SSA_FILE = re.compile(rf"(?:{_SSA_LINE}\n)*")



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
