"""Restate the old study's seed-only claims (issue 22) from the seed values its own tables imply.

The study tables printed before the two-level intervals (README of commit 8e55d88) gave, for a figure that
varies only with the training seed, the percentile bootstrap interval over 2-3 seeds, which is exactly
[min, max] of the seed values. So those tables give the seed values back: two seeds are the interval's
ends; with three, the third is 3 x mean - min - max (to the tables' 3 decimals). This script takes those
values as its input, recomputes each claimed difference from the baseline with Welch's t interval (the seed
part of nerbias/reporting/intervals.py when the seed sets differ, as they do here: the baseline has seeds
1-3, the conditions 1-2; which value is which seed is not in the tables, so no pairing), and adjusts the
family of these claims with Holm. Name-level figures (gaps, ALL) cannot be restated this way: they need
the per-name results of the runs.

    python scripts/restate_seed_only_claims.py
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from nerbias.reporting.uncertainty import holm

# (figure, condition): (mean, min, max, seeds) as printed in the old tables
OLD_TABLES = {
    ("CoNLL test F1", "baseline"): (0.904, 0.903, 0.905, 3),
    ("CoNLL test F1", "mixed_case"): (0.907, 0.906, 0.908, 2),
    ("CoNLL test F1", "debias"): (0.890, 0.889, 0.892, 2),
    ("CoNLL test F1", "combined"): (0.888, 0.881, 0.892, 3),
    ("Winogender OOV", "baseline"): (0.686, 0.664, 0.725, 3),
    ("Winogender OOV", "names"): (0.839, 0.739, 0.938, 2),
    ("Winogender OOV", "mixed_case"): (0.513, 0.375, 0.651, 2),
    ("Winogender OOV", "mask"): (0.413, 0.290, 0.537, 2),
    ("In-Situ OOV", "baseline"): (0.734, 0.699, 0.775, 3),
    ("In-Situ OOV", "names"): (0.881, 0.864, 0.897, 2),
    ("In-Situ OOV", "mask"): (0.591, 0.586, 0.596, 2),
}
# the old claims, as "What the study shows" stated them
CLAIMS = [("CoNLL test F1", "mixed_case", "+0.003 [0.002, 0.005]"), ("CoNLL test F1", "debias", "-0.013 [-0.015, -0.011]"),
          ("CoNLL test F1", "combined", "-0.016 [-0.022, -0.012]"), ("Winogender OOV", "names", "+0.152 [0.033, 0.272]"),
          ("Winogender OOV", "mixed_case", "-0.173 [-0.331, -0.015]"), ("Winogender OOV", "mask", "-0.273 [-0.417, -0.129]"),
          ("In-Situ OOV", "names", "+0.147 [0.105, 0.189]"), ("In-Situ OOV", "mask", "-0.143 [-0.184, -0.113]")]


def seed_values(mean: float, low: float, high: float, seeds: int) -> np.ndarray:
    return np.array([low, high] if seeds == 2 else [low, high, seeds * mean - low - high])


def welch(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float, float]:
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    difference, se = a.mean() - b.mean(), np.sqrt(va + vb)
    half = stats.t.ppf(0.5 + confidence / 2, df) * se
    return difference, difference - half, difference + half, 2 * stats.t.sf(abs(difference) / se, df)


def main() -> None:
    rows = []
    for figure, condition, old in CLAIMS:
        ours = seed_values(*OLD_TABLES[(figure, condition)])
        base = seed_values(*OLD_TABLES[(figure, "baseline")])
        rows.append((figure, condition, old, *welch(ours, base)))
    adjusted = holm([row[-1] for row in rows])
    print("| figure | condition | old claim (seed bootstrap) | restated: Welch 95 % interval (seeds) | p | p (Holm) | verdict |")
    print("|---|---|---|---|---|---|---|")
    for (figure, condition, old, difference, low, high, p), p_holm in zip(rows, adjusted):
        verdict = "holds" if p_holm < 0.05 else "does not hold"
        print(f"| {figure} | {condition} | {old} | {difference:+.3f} [{low:.3f}, {high:.3f}] | {p:.2g} | {p_holm:.2g} | "
              f"{verdict} |")


if __name__ == "__main__":
    main()
