"""Apply the declared rule of the recipe search to its finished jobs (nerbias/study/recipe.py; dev F1 only).

    python train.py -m experiment=recipe_search                # 2^4 levers x seeds 1-2: 32 jobs
    python scripts/recipe_search.py logs/recipe_search [--csv effects.csv]
"""

from __future__ import annotations

import argparse
import sys

from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_path
from nerbias.study.recipe import PATIENCE_MARGIN, QUALITY_P, lever_effects, read_search


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweep_dir")
    parser.add_argument("--csv", help="also write the effects table here")
    args = parser.parse_args(argv)
    try:
        runs = read_search(args.sweep_dir)
        effects = lever_effects(runs)
    except NerbiasError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{len(runs)} finished jobs, seeds {sorted(runs['seed'].unique())}; dev F1 (points) "
          f"{runs['dev_f1'].min():.2f}-{runs['dev_f1'].max():.2f}")
    print(effects.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    kept = effects.loc[effects["kept"], "lever"].tolist()
    print(f"rule: a quality lever joins when its effect > 0 with one-sided p < {QUALITY_P}; patience_4 when its "
          f"90% interval's low end > -{PATIENCE_MARGIN}")
    print(f"the new default: {', '.join(kept) or 'none of the levers (today recipe stays)'}")
    if args.csv:
        with atomic_path(args.csv) as tmp:
            effects.to_csv(tmp, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
