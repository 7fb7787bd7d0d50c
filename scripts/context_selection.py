"""Apply the declared selection rule of issue 45 to the finished candidates (nerbias/study/selection.py; dev data only).

    python train.py -m experiment=context_selection              # every candidate, seed 1
    python scripts/context_selection.py logs/context_selection [--reference results/context_selection/baseline_dev_probe.csv]

Prints the selection table (markdown, for docs/context_training.md) and the decision. Exit 0: decided; 3: two
or more parts enter and the combination (``selection=combined``, their options together) must be trained first;
2: an error (a declared candidate missing, a candidate without its dev probe).
"""

from __future__ import annotations

import argparse
import sys

from nerbias.errors import NerbiasError
from nerbias.reporting.tables import markdown_table
from nerbias.study.selection import BASELINE_REFERENCE, F1_MARGIN, apply_rule, read_candidates, read_reference

NEEDS_COMBINED = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweep_dir")
    parser.add_argument("--reference", default=str(BASELINE_REFERENCE), help="the baseline seeds' dev F1 and dev probe")
    args = parser.parse_args(argv)
    try:
        reference = read_reference(args.reference)
        selection = apply_rule(read_candidates(args.sweep_dir), reference)
    except NerbiasError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    columns = ["candidate", "dev_f1", "epochs", "person_recall", "place_recall", "mean_recall", "eligible",
               "stands_for_part", "enters"]
    print(markdown_table(selection.table[columns], digits=3))
    print(f"\nbaseline seeds {', '.join(map(str, reference['seed']))}: eligible at dev F1 >= "
          f"{reference['dev_f1'].min() - F1_MARGIN:.2f}; a part enters above mean recall {reference['mean_recall'].max():.3f}")
    print(f"parts that enter: {', '.join(selection.entering) or 'none'}; best single part: {selection.best_single}")
    if selection.needs_combined:
        print(f"train the combination first: selection=combined with the options of {', '.join(selection.entering)}")
        return NEEDS_COMBINED
    print(f"the study's condition: {selection.choice}; and the best single part: {selection.best_single}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
