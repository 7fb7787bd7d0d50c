"""Apply the declared rule of the recipe search to its finished jobs (nerbias/study/recipe.py; dev F1 only).

    python train.py -m experiment=recipe_search                # 2^4 levers x seeds 1-2: 32 jobs
    python scripts/recipe_search.py logs/recipe_search [--csv effects.csv] [--partial]

The rule decides only on the declared search: every combination of each declared seed, once, at one commit
(jobs on several CPU kinds: blocked on seed and kind). ``--partial`` prints the effects of an unfinished
search, marked provisional, and decides nothing (exit 3).
"""

from __future__ import annotations

import argparse
import sys

from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_path
from nerbias.study.recipe import LEVERS, PATIENCE_MARGIN, QUALITY_P, design_problems, lever_effects, read_search

PROVISIONAL = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweep_dir")
    parser.add_argument("--csv", help="also write the effects table here (the declared search only)")
    parser.add_argument("--partial", action="store_true", help="print an unfinished search's effects, deciding nothing")
    args = parser.parse_args(argv)
    try:
        runs = read_search(args.sweep_dir)
        problems = design_problems(runs)
        if problems and not args.partial:
            raise NerbiasError(f"{args.sweep_dir} is not the declared search, so the rule does not apply: "
                               + "; ".join(problems) + " (--partial prints its effects, provisional)")
        effects = lever_effects(runs)
    except NerbiasError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    commits = sorted(set().union(*runs["commits"]))
    print(f"{len(runs)} finished jobs, seeds {sorted(runs['seed'].unique())}; dev F1 (points) "
          f"{runs['dev_f1'].min():.2f}-{runs['dev_f1'].max():.2f}; commit {', '.join(commits)}; "
          f"{', '.join(runs['cpu'].unique())}")
    shown = effects.drop(columns="kept") if problems else effects  # a provisional table decides nothing
    # 4 decimals, so a p or bound near its threshold rarely prints as the threshold; the kept column decides
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"rule: a quality lever joins when its effect > 0 with one-sided p < {QUALITY_P}; patience_4 when its "
          f"90% interval's low end > -{PATIENCE_MARGIN}")
    if problems:
        print("PROVISIONAL, no decision: " + "; ".join(problems))
        return PROVISIONAL
    kept = set(effects.loc[effects["kept"], "lever"])
    print("the new default: " + (", ".join(sorted(kept)) or "none of the levers (today's recipe stays)"))
    # the chosen cell beside today's, over the seeds: an interaction the main effects miss shows here
    for label, chosen in (("today's recipe", set()), ("the new default", kept)):
        cell = runs[(runs[[lever.name for lever in LEVERS]] == [int(lever.name in chosen) for lever in LEVERS]).all(axis=1)]
        print(f"{label}: dev F1 {', '.join(f'{v:.2f}' for v in cell['dev_f1'])} (seeds {', '.join(map(str, cell['seed']))}), "
              f"epochs {', '.join(map(str, cell['epochs']))}")
    if args.csv:
        with atomic_path(args.csv) as tmp:
            effects.to_csv(tmp, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
