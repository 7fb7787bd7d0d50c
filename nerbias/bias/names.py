"""Name lists: which first names to place in the bias corpora, and the demographic group of each.

A name list is a UTF-8 CSV file with a header row. Columns ``name`` and ``group`` are required,
``race`` and ``gender`` optional; other columns are ignored. Every listed field must be non-empty.
The reference name with no informative embedding (the paper's "OOV Name") is the row whose group
is ``OOV``; at most one such row.

The packaged default, ``resources/names_mishra2020.csv``, is Table 1 of Mishra et al. (2020),
"Assessing Demographic Bias in Named Entity Recognition": 121 names in 8 groups (Black Female has
16 names, the other groups 15) plus the OOV name ``Syedtiastephen``. The paper's text says "123
names", but its Table 1 and its own "15 names (and one with 16)" both give 121; we ship the table.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from nerbias.errors import DataFormatError, NerbiasError
from nerbias.fileio import read_utf8_text

OOV_GROUP = "OOV"
REQUIRED_COLUMNS = ("name", "group")
OPTIONAL_COLUMNS = ("race", "gender")
DEFAULT_NAMES_PATH = Path(__file__).resolve().parent / "resources" / "names_mishra2020.csv"
# The OOV name set: 24 name-shaped strings no tagger here has seen (scripts/make_oov_names.py says how they
# were drawn; Syedtiastephen first), one group "OOV set", scored as a separate evaluation so that the
# paper's 121-name corpora stay as defined and the OOV figure gets a name-level interval.
OOV_NAMES_PATH = Path(__file__).resolve().parent / "resources" / "names_oov.csv"
PACKAGED_NAME_LISTS = {"mishra2020": DEFAULT_NAMES_PATH, "oov_set": OOV_NAMES_PATH}


@dataclass(frozen=True)
class NameList:
    """Names in file order (OOV name included) with their group and, when listed, race and gender."""

    names: list[str]
    group_of: dict[str, str]
    oov: str | None = None
    race_of: dict[str, str] = field(default_factory=dict)  # empty when the file has no race column
    gender_of: dict[str, str] = field(default_factory=dict)  # empty when the file has no gender column

    def groups(self) -> list[str]:
        """Group names in order of first appearance, without the OOV group."""
        return [group for group in dict.fromkeys(self.group_of[name] for name in self.names) if group != OOV_GROUP]

    def in_group(self, group: str) -> list[str]:
        """The names of ``group`` in file order; an unknown group is an error (it is usually a typo)."""
        members = [name for name in self.names if self.group_of[name] == group]
        if not members:
            raise NerbiasError(f"no names in group {group!r}; groups are {self.groups()}")
        return members


_NAME_BREAKERS = re.compile(r"['\u2019\"`,;:!?()\[\]{}<>/\\]")


def load_names(path: str | Path | None = None) -> NameList:
    """Read a name list: a CSV path, or a packaged list by key (``mishra2020``, the default for ``None``:
    Table 1 of Mishra et al. 2020; ``oov_set``: the OOV name set). A file of that name wins over a key."""
    if path is None:
        path = DEFAULT_NAMES_PATH
    elif str(path) in PACKAGED_NAME_LISTS and not Path(path).is_file():
        path = PACKAGED_NAME_LISTS[str(path)]
    path = Path(path)
    text = read_utf8_text(path, "names file")
    if not text.strip():
        raise DataFormatError(path, "file is empty")

    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    for row in reader:
        if any(cell.strip() for cell in row):
            header = [cell.strip().lower() for cell in row]
            break
    assert header is not None  # the text is not blank, so some row has content
    header_line = reader.line_num
    missing = [column for column in REQUIRED_COLUMNS if column not in header]
    if missing:
        raise DataFormatError(path, f"missing columns {missing} in header {header} (need name,group)", header_line)
    duplicated = sorted({column for column in header if column and header.count(column) > 1})
    if duplicated:
        raise DataFormatError(path, f"duplicate columns {duplicated} in header", header_line)
    used = {column: header.index(column) for column in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if column in header}

    names: list[str] = []
    group_of: dict[str, str] = {}
    race_of: dict[str, str] = {}
    gender_of: dict[str, str] = {}
    first_line_of: dict[str, int] = {}  # lower-cased name -> line, for duplicate reports
    oov: str | None = None
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise DataFormatError(path, f"expected {len(header)} fields, found {len(row)}: {row}", line)
        values = {column: row[position].strip() for column, position in used.items()}
        empty = [column for column, value in values.items() if not value]
        if empty:
            raise DataFormatError(path, f"empty field(s) {empty}", line)
        name, group = values["name"], values["group"]
        if len(name.split()) != 1:
            raise DataFormatError(path, f"name {name!r} must be a single word (corpora place it as one token)", line)
        if _NAME_BREAKERS.search(name):  # "Jo's" would be two tokens ("Jo", "'s") in the tokenised templates
            raise DataFormatError(path, f"name {name!r} holds {_NAME_BREAKERS.search(name).group()!r}, which "
                                        "tokenisation splits off; a name must stay one token", line)
        # Case-insensitive: lower-cased corpora would otherwise contain two identical names.
        if name.lower() in first_line_of:
            raise DataFormatError(path, f"duplicate name {name!r} (first listed on line {first_line_of[name.lower()]})",
                                  line)
        if group == OOV_GROUP:
            if oov is not None:
                raise DataFormatError(path, f"second {OOV_GROUP} name {name!r} (already have {oov!r})", line)
            oov = name
        first_line_of[name.lower()] = line
        names.append(name)
        group_of[name] = group
        if "race" in values:
            race_of[name] = values["race"]
        if "gender" in values:
            gender_of[name] = values["gender"]
    if not names:
        raise DataFormatError(path, "no names listed")
    return NameList(names=names, group_of=group_of, oov=oov, race_of=race_of, gender_of=gender_of)


POOL_HALVES = ("train", "heldout")


def substitution_pool(candidates: Sequence[str], exclude: Sequence[str], half: str | None = "train") -> list[str]:
    """Distinct first names for name substitution in training, disjoint from every name in
    ``exclude`` (the evaluation lists, compared case-insensitively), split in two halves by a
    hash of the lower-cased name: ``train`` for substitution, ``heldout`` for evaluating on names
    training never saw (the census benchmark, which uses every SSA name); ``None``: no split.
    Deterministic, sorted."""
    if half is not None and half not in POOL_HALVES:
        raise ValueError(f"half must be one of {POOL_HALVES} or None")
    excluded = {name.lower() for name in exclude}
    pool = sorted({name for name in candidates if name.lower() not in excluded and name.isalpha()})
    if half is None:
        return pool
    return [name for name in pool if pool_half(name) == half]


def ambiguous_part(name: str) -> str:
    """``dev`` for one name in four (the second byte of the hash that splits the halves), ``train`` for the
    rest: the ambiguous names of the training half are split so that a dev probe can use place-like names
    that training never substitutes (``augment/name_pool=ambiguous_train``; issue 45)."""
    return "dev" if hashlib.sha256(name.lower().encode()).digest()[1] % 4 == 0 else "train"


def pool_half(name: str) -> str:
    """``train`` or ``heldout``: the half of ``substitution_pool`` a name falls in (a hash of its lower case)."""
    return POOL_HALVES[hashlib.sha256(name.lower().encode()).digest()[0] % 2]
