"""Restate the first sweep's claims about the rerun conditions (issue 22) from a new study's tables.

    python aggregate.py --study results/mitigation_study -o <study dir>
    python scripts/restate_claims.py <study dir>

For each claim the first sweep made about `baseline`, `debias`, `mask`, `names` or `mixed_case` (README of commit
8e55d88, with its old intervals), prints the same figure from `<study dir>/study_<corpus>.csv` (mean over the seeds
there, with the interval and what it covers) and its verdict after Holm's adjustment when the difference is in the
claims family (`claims.csv`): *holds*, *does not hold*, or *not decided by the replicates* where the p's
Monte-Carlo bounds straddle the threshold; *no claim* for a figure that is not in the family (the best - worst
gap, a level, a difference from one seed a side). Beside `debias`, the normalise-only control
`normalize` is shown for the same figure: the part of a de-biasing effect that normalising alone gives.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from nerbias.reporting.study import claim_verdict
from nerbias.reporting.study_runs import CONLL_METRICS

# (corpus label, metric, condition, column: value | diff, the first sweep's claim)
OLD_CLAIMS = [
    ("winogender", "test_f1", "debias", "diff", "CoNLL F1 -0.013 [-0.015, -0.011]"),
    ("winogender", "test_f1", "normalize", "diff", "(control: not in the first sweep)"),
    ("winogender", "ALL", "debias", "diff", "Winogender ALL -0.024 [-0.045, -0.007]"),
    ("winogender", "ALL", "normalize", "diff", "(control)"),
    ("winogender", "best_worst_gap", "debias", "diff", "Winogender best - worst +0.016 [-0.020, 0.120]"),
    ("insitu", "best_worst_gap", "debias", "diff", "In-Situ best - worst +0.008 [-0.022, 0.110]"),
    ("census", "female_male_type1_w_gap", "debias", "diff", "census female - male type-1 -0.005 [-0.053, 0.047]"),
    ("census", "female_male_type1_w_gap", "normalize", "diff", "(control)"),
    ("winogender", "OOV", "mask", "diff", "Winogender OOV (Syedtiastephen) -0.273 [-0.417, -0.129]"),
    ("winogender_oov", "ALL", "mask", "diff", "(the OOV name set: not in the first sweep)"),
    ("insitu", "OOV", "mask", "diff", "In-Situ OOV (Syedtiastephen) -0.143 [-0.184, -0.113]"),
    ("insitu_oov", "ALL", "mask", "diff", "(the OOV name set)"),
    ("census", "female_type1_w", "mask", "diff", "census female type-1 +0.027 [0.005, 0.057]"),
    ("winogender", "best_worst_gap", "mask", "diff", "Winogender best - worst +0.026 [-0.038, 0.144]"),
    ("winogender", "test_f1", "names", "diff", "CoNLL F1 +0.001 [-0.001, 0.003]"),
    ("winogender", "OOV", "names", "diff", "Winogender OOV (Syedtiastephen) +0.152 [0.033, 0.272]"),
    ("winogender_oov", "ALL", "names", "diff", "(the OOV name set)"),
    ("insitu", "ALL", "names", "diff", "In-Situ ALL +0.017 [0.004, 0.029]"),
    ("insitu", "OOV", "names", "diff", "In-Situ OOV (Syedtiastephen) +0.147 [0.105, 0.189]"),
    ("census", "female_male_type1_w_gap", "names", "diff", "census female - male type-1 -0.040 [-0.057, -0.022]"),
    ("census", "female_type1_w", "names", "diff", "census female type-1 -0.036 [-0.061, -0.008]"),
    ("winogender", "best_worst_gap", "names", "diff", "Winogender best - worst -0.003 [-0.086, 0.052]"),
    ("winogender", "test_f1", "mixed_case", "diff", "CoNLL F1 +0.003 [0.002, 0.005]"),
    ("winogender", "test_lower_f1", "mixed_case", "diff", "CoNLL F1 lower-cased +0.815 [0.753, 0.852]"),
    ("winogender_lower", "ALL", "mixed_case", "value", "lower-cased Winogender ALL 0.864 [0.811, 0.914]"),
    ("winogender", "ALL", "mixed_case", "diff", "Winogender ALL -0.022 [-0.046, -0.001]"),
    ("winogender", "OOV", "mixed_case", "diff", "Winogender OOV (Syedtiastephen) -0.173 [-0.331, -0.015]"),
    ("winogender_oov", "ALL", "mixed_case", "diff", "(the OOV name set)"),
    ("winogender", "best_worst_gap", "mixed_case", "diff", "Winogender best - worst +0.030 [-0.006, 0.109]"),
    ("census", "female_type1_w", "mixed_case", "diff", "census female type-1 -0.034 [-0.058, -0.010]"),
    ("census", "male_type1_w", "mixed_case", "diff", "census male type-1 -0.026 [-0.046, -0.010]"),
    ("census", "female_male_type1_w_gap", "mixed_case", "diff", "census female - male type-1 -0.008 [-0.027, 0.010]"),
    ("winogender", "best_worst_gap", "baseline", "value", "baseline Winogender best - worst 0.157 [0.086, 0.359]"),
    ("winogender", "Hispanic Female", "baseline", "value", "Hispanic groups 0.79-0.88 in every condition"),
]


def cell(row: pd.Series, column: str) -> str:
    value, low, high = row.get(column), row.get(f"{column}_low"), row.get(f"{column}_high")
    if column == "value":
        low, high = row.get("ci_low"), row.get("ci_high")
    covers = row.get("diff_covers" if column == "diff" else "ci_covers")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if low is None or (isinstance(low, float) and math.isnan(low)):
        return f"{value:+.3f} ({covers})" if column == "diff" else f"{value:.3f} ({covers})"
    return (f"{value:+.3f} [{low:.3f}, {high:.3f}] ({covers})" if column == "diff"
            else f"{value:.3f} [{low:.3f}, {high:.3f}] ({covers})")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[0])
    needed = [folder / "claims.csv", *sorted({folder / f"study_{corpus}.csv" for corpus, *_ in OLD_CLAIMS})]
    missing = [str(path) for path in needed if not path.is_file()]
    if missing:  # before any row is printed
        print(f"error: {', '.join(missing)}: not found (write them with aggregate.py --study <sweep> -o "
              f"{folder})", file=sys.stderr)
        return 2
    claims = pd.read_csv(folder / "claims.csv")
    print("| first sweep's claim | condition | seeds | now | verdict |")
    print("|---|---|---|---|---|")
    for corpus, metric, condition, column, old in OLD_CLAIMS:
        table = pd.read_csv(folder / f"study_{corpus}.csv")
        rows = table[(table["condition"] == condition) & (table["metric"] == metric)]
        if rows.empty:
            print(f"| {old} | {condition} | – | not in this study | – |")
            continue
        row = rows.iloc[0]
        # CoNLL F1 is one figure for every corpus: the family holds it once per condition (study.claims_family)
        same_corpus = claims["corpus"] == corpus if metric not in CONLL_METRICS else True
        claim = claims[same_corpus & (claims["condition"] == condition) & (claims["metric"] == metric)]
        verdict = "no claim"
        if len(claim) and column == "diff":
            held = claim.iloc[0]
            verdict = f"{claim_verdict(bool(held['holds']), bool(held['undecided']))} (Holm p {held['p_holm']:.2g})"
        print(f"| {old} | {condition} | {row['seeds']} | {metric}: {cell(row, column)} | {verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
