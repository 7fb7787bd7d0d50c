"""Figures of one group, and whether there is a group effect at all (docs/group-statistics.md).

A group's accuracy varies with two things: which names stand for the group and which training seed made
the model. Two estimands, printed apart:

- **these names** (``COVERS_SEEDS``): the group's accuracy on exactly the listed names, expected over seeds:
  a t interval over the seeds' values (needs 2 seeds).
- **names like these** (``COVERS_BOTH``, or ``COVERS_NAMES`` from one seed): the population of names the
  list stands for. The variance of the mean is a names part (the name means' variance over n) plus a seeds
  part (the seed means' variance over S), Welch-Satterthwaite degrees of freedom, and the t interval is
  taken for log(1 - accuracy) (the error rate's log, by the delta method) and mapped back: a group's names
  sit near 1 with a tail of low names, so the mean's sampling distribution is skewed towards low accuracy
  and a symmetric interval misses on that side. It is printed only for a group of at least ``MIN_NAMES``
  names whose accuracy is at least ``MIN_ACCURACY`` (the region simulated): with 15 names a group whose
  accuracy hangs on one or two rare low names (names that are also places) is covered far below 95 % by
  this and by every other interval tried (``reporting.group_coverage``), because a draw of 15 names often
  holds none of them and nothing in such a draw shows the tail it missed.

A difference of one group (condition - baseline on the same names, seed i against seed i; one group against
the others) is printed for these names only (a t over the seeds' differences): no names-like-these interval
of a difference held in every simulated shape.

**Enough seeds and slots** (``seed_interval_holds``): a t over the seeds needs the group's values to be near
normal across seeds. With 2 seeds near the ceiling they are not: the names-like-these interval covers 0.87-0.89
for 250-1,000 near-ceiling names, so it is printed from 1 seed or from 3 and more, never from 2. With few slots
a group (few names, few slots a name, as the census-scale list's small groups have: 6 names x 30 In-Situ slots)
a seed's value is lumpy, and the seeds t covers 0.52-0.89: it is printed only from ``MIN_GROUP_SLOTS`` slots a
seed (10,000 with 2 seeds, 2,000 with 3 or more; docs/group-statistics.md, "Few slots").

**One name's accuracy** (Sofia's in her person slots) spreads over seeds on the logit scale, so near the
ceiling its per-seed values are skewed and no t of their mean holds (a one-sided 95 % lower bound covers
0.77-0.95 at accuracies of 0.8-0.95 with the seeds' logit sd 0.2-1.2). ``median_seed_lower_bound`` takes the
name's accuracy *at the median seed* (the mean of the per-seed logits, mapped back) and a t over those logits:
its lower bound covers 0.932-0.975 for accuracies of 0.5-0.95 (the region a test against a margin of 0.8
needs), 302 or 2,459 slots a seed and 3-10 seeds (``reporting.group_coverage.median_seed_coverage``). With few
expected errors or hits a seed (under about 5) the 0.5 added to the counts biases it: it is a test at a
margin in the middle of the scale, not an interval for every name.

**Is there a group effect?** ``group_effect_test``: names permuted across groups (sizes kept; each name
carries all its seeds), statistic the between-group sum of squares of the name accuracies; H0 says the
group labels are exchangeable among the names, so the p is exact whatever the shape of the groups. Where
it rejects, ``group_contrasts`` gives each group minus the mean of the others with **simultaneous**
intervals (Bonferroni over the groups, these names), in place of a best - worst gap, whose bootstrap is not
consistent (a max - min of group means).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import special, stats

from nerbias.errors import NerbiasError
from nerbias.reporting.intervals import COVERS_BOTH, COVERS_NAMES, COVERS_SEEDS

# The fewest names a group needs for a "names like these" interval: the smallest simulated group size at which
# it covered 0.93-0.97 in every shape and seed count (docs/group-statistics.md, python -m
# nerbias.reporting.group_coverage; at 120 and 250 names 5 of 48 cells fell just outside, 0.926-0.972); and
# the lowest accuracy simulated (the real groups' means are 0.78-1.0).
MIN_NAMES = 60
MIN_ACCURACY = 0.5
NONE = "none"  # no interval: too few names for names-like-these and one seed for these-names
ESTIMANDS = {COVERS_SEEDS: "these names", COVERS_BOTH: "names like these", COVERS_NAMES: "names like these (1 seed)",
             NONE: "none"}


@dataclass(frozen=True)
class GroupInterval:
    """A figure, its interval (NaN where none), its standard error and degrees of freedom, and what it covers."""

    value: float
    low: float
    high: float
    covers: str
    se: float = float("nan")
    df: float = float("nan")

    @property
    def estimand(self) -> str:
        return ESTIMANDS[self.covers]


# seeds -> the slots a group needs in every seed for a t over the seeds to hold (3: three seeds or more)
MIN_GROUP_SLOTS = {2: 10_000, 3: 2_000}


def seed_interval_holds(seeds: int, slots: float | None) -> bool:
    """Whether a t over ``seeds`` seeds of a group figure resting on ``slots`` slots a seed (the fewest any seed
    gave; None: not known, as for a figure that is no count) is one the simulation shows to hold."""
    if seeds < 2:
        return False
    return slots is None or slots >= MIN_GROUP_SLOTS[min(seeds, 3)]


def _t_interval(value: float, variance: float, df: float, confidence: float, covers: str) -> GroupInterval:
    if not np.isfinite(variance) or variance < 0:
        return GroupInterval(value, float("nan"), float("nan"), NONE)
    se = float(np.sqrt(variance))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se if np.isfinite(df) and df > 0 else float("nan")
    return GroupInterval(float(value), float(value - half), float(value + half), covers, se, float(df))


def median_seed_lower_bound(accuracy: np.ndarray, slots: float | np.ndarray, confidence: float
                            ) -> tuple[float, float]:
    """One name's accuracy at the median seed and its one-sided lower bound at ``confidence``, from its
    per-seed ``accuracy`` on ``slots`` slots a seed (one count, or one a seed; module docstring): a t over the
    seeds of log((hits + 0.5) / (misses + 0.5)), mapped back. The bound is NaN from fewer than 2 seeds."""
    accuracy = np.asarray(accuracy, dtype=np.float64)
    slots = np.asarray(slots, dtype=np.float64)
    hits = accuracy * slots
    logits = np.log((hits + 0.5) / (slots - hits + 0.5))
    point = float(special.expit(logits.mean()))
    if len(logits) < 2:
        return point, float("nan")
    se = float(logits.std(ddof=1) / np.sqrt(len(logits)))
    return point, float(special.expit(logits.mean() - stats.t.ppf(confidence, len(logits) - 1) * se))


def satterthwaite(terms: Sequence[tuple[float, float]]) -> float:
    """Degrees of freedom of ``sum c_k MS_k`` from (c_k MS_k, df_k) pairs."""
    total = sum(term for term, _ in terms)
    denominator = sum(term ** 2 / df for term, df in terms if df > 0)
    return float(total ** 2 / denominator) if denominator > 0 else float("inf")


def crossed_variance(values: np.ndarray) -> tuple[float, float]:
    """Variance of the grand mean of a (seeds x names) table whose names and seeds are both random draws,
    and its Satterthwaite degrees of freedom (method of moments, balanced two-way layout; one seed: the
    names' variance over n, df n - 1). The mixed model the coverage simulation compares against."""
    values = np.asarray(values, dtype=np.float64)
    seeds, names = values.shape
    if names < 2:
        return float("nan"), float("nan")
    name_means = values.mean(0)
    if seeds == 1:
        return float(name_means.var(ddof=1) / names), float(names - 1)
    seed_means = values.mean(1)
    ms_names = seeds * name_means.var(ddof=1)
    ms_seeds = names * seed_means.var(ddof=1)
    residual = values - name_means[None, :] - seed_means[:, None] + values.mean()
    df_resid = (names - 1) * (seeds - 1)
    ms_resid = float((residual ** 2).sum() / df_resid)
    terms = [(ms_names, names - 1)]
    if ms_seeds > ms_resid:  # a seed variance component above 0
        terms += [(ms_seeds, seeds - 1), (-ms_resid, df_resid)]
    total = sum(term for term, _ in terms)
    return float(total / (names * seeds)), satterthwaite(terms)


def names_seeds_variance(values: np.ndarray) -> tuple[float, float]:
    """Variance of the mean of a (seeds x names) table as a names part (the name means' variance / n) plus a
    seeds part (the seed means' variance / S; none from one seed), and its Welch-Satterthwaite df."""
    values = np.asarray(values, dtype=np.float64)
    seeds, names = values.shape
    if names < 2:
        return float("nan"), float("nan")
    terms = [(float(values.mean(0).var(ddof=1) / names), names - 1)]
    if seeds > 1:
        terms.append((float(values.mean(1).var(ddof=1) / seeds), seeds - 1))
    return sum(term for term, _ in terms), satterthwaite(terms)


def these_names_interval(per_seed: np.ndarray, confidence: float, value: float | None = None,
                         slots: float | None = None) -> GroupInterval:
    """t interval over the seeds of a figure computed on fixed names (``value``: the point, default the mean);
    none from one seed, or where ``slots`` (the fewest a seed gave the names) are too few (``seed_interval_holds``)."""
    per_seed = np.asarray(per_seed, dtype=np.float64)
    point = float(per_seed.mean()) if value is None else float(value)
    if not seed_interval_holds(len(per_seed), slots):
        return GroupInterval(point, float("nan"), float("nan"), NONE)
    return _t_interval(point, float(per_seed.var(ddof=1) / len(per_seed)), len(per_seed) - 1, confidence,
                       COVERS_SEEDS)


def names_like_these_interval(values: np.ndarray, confidence: float, value: float | None = None) -> GroupInterval:
    """The names-like-these interval of a (seeds x names) table of accuracies (module docstring): a t on
    log(1 - accuracy) with the names + seeds variance, mapped back to the accuracy."""
    values = np.asarray(values, dtype=np.float64)
    point = float(values.mean()) if value is None else float(value)
    variance, df = names_seeds_variance(values)
    covers = COVERS_BOTH if values.shape[0] > 1 else COVERS_NAMES
    error = 1.0 - point
    if not np.isfinite(variance) or error <= 0:  # every slot recognised: no spread to show
        return GroupInterval(point, float("nan"), float("nan"), NONE)
    se = float(np.sqrt(variance))
    spread = float(stats.t.ppf(0.5 + confidence / 2, df)) * se / error
    return GroupInterval(point, float(max(0.0, 1 - error * np.exp(spread))), float(1 - error * np.exp(-spread)),
                         covers, se, df)


def group_interval(values: np.ndarray, confidence: float, value: float | None = None,
                   min_names: int = MIN_NAMES, slots: float | None = None) -> GroupInterval:
    """The interval a report prints for one group's accuracy from its (seeds x names) table: names like these
    for a group of ``min_names`` names or more whose accuracy is at least ``MIN_ACCURACY``, from 1 seed or 3 and
    more; these names (seeds only) otherwise, where ``slots`` (the fewest a seed gave the group) are enough
    (``seed_interval_holds``); else none."""
    values = np.asarray(values, dtype=np.float64)
    values = values[:, np.isfinite(values).all(0)]  # a name with no slots in some seed has no accuracy there
    point = float(values.mean()) if value is None else float(value)
    if values.shape[1] >= min_names and point >= MIN_ACCURACY and values.shape[0] != 2:
        interval = names_like_these_interval(values, confidence, point)
        if interval.covers != NONE:
            return interval
    interval = these_names_interval(values.mean(1), confidence, point, slots)
    return dataclasses.replace(interval, low=max(interval.low, 0.0), high=min(interval.high, 1.0))  # an accuracy


def accuracy_table(recognised: np.ndarray, sentences: np.ndarray) -> np.ndarray:
    """(seeds x names) accuracy; names never placed (0 slots) are NaN."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(recognised, dtype=np.float64) / np.asarray(sentences, dtype=np.float64)


def group_effect_test(name_values: np.ndarray, groups: Sequence[str], n_permutations: int = 10000,
                      seed: int = 0) -> dict[str, float]:
    """Permutation test of no group effect over names: statistic ``sum_g n_g (mean_g - mean)^2`` of the name
    values (mean over seeds), p = (1 + #permuted >= observed) / (1 + permutations)."""
    values = np.asarray(name_values, dtype=np.float64)
    labels = np.asarray(groups, dtype=object)
    if len(values) != len(labels):
        raise NerbiasError(f"group_effect_test: {len(values)} values for {len(labels)} group labels")
    keep = np.isfinite(values)
    values, labels = values[keep], labels[keep]
    codes = np.unique(labels, return_inverse=True)[1]
    sizes = np.bincount(codes)
    if len(sizes) < 2 or len(values) <= len(sizes):  # every group of one name: any permutation is the same split
        raise NerbiasError("a group-effect test needs at least two groups and a group of two names or more")

    def between(code_rows: np.ndarray) -> np.ndarray:
        sums = np.stack([np.bincount(row, weights=values, minlength=len(sizes)) for row in np.atleast_2d(code_rows)])
        return ((sums ** 2) / sizes).sum(1) - values.sum() ** 2 / len(values)

    observed = float(between(codes)[0])
    rng = np.random.default_rng([seed, 15485863])
    permuted = np.argsort(rng.random((n_permutations, len(values))), axis=1)
    null = between(codes[permuted])
    p_value = float((1 + np.sum(null >= observed * (1 - 1e-12))) / (1 + n_permutations))
    return {"statistic": observed, "p_value": p_value, "permutations": n_permutations, "groups": len(sizes),
            "names": len(values)}


def minus_others(per_seed: np.ndarray) -> np.ndarray:
    """(seeds, groups) -> (seeds, groups): each group's value minus the mean of the other groups' (each group
    weighted equally), per seed."""
    per_seed = np.asarray(per_seed, dtype=np.float64)
    count = per_seed.shape[1]
    return per_seed * count / (count - 1) - per_seed.sum(1, keepdims=True) / (count - 1)


def contrast_slots(slots: Sequence[float | None]) -> list[float | None]:
    """The slots a seed that each group-minus-the-others contrast rests on, for ``seed_interval_holds``: the
    fewer of its own group's and the other groups' mean's (whose binomial noise, a mean of k - 1 groups, is that
    of a group with (k - 1)^2 / sum(1 / slots) slots). None where a group's slots are not known."""
    if any(s is None for s in slots):
        return [None] * len(slots)
    values = np.asarray(slots, dtype=np.float64)
    count = len(values)
    others = (count - 1) ** 2 / ((1.0 / values).sum() - 1.0 / values)
    return [float(min(own, rest)) for own, rest in zip(values, others)]


def simultaneous_contrasts(per_seed: np.ndarray, confidence: float, slots: Sequence[float | None] | None = None
                           ) -> tuple[list[GroupInterval], float]:
    """Each group minus the others (``minus_others``) from a (seeds, groups) table of the groups' figures, each
    with a t interval over the seeds at the Bonferroni level over the intervals printed (returned beside them),
    so that all hold together at ``confidence``: for these names. None from one seed, nor where the contrast rests on
    too few ``slots`` a seed (one value a group, None: not known; ``contrast_slots``, ``seed_interval_holds``)."""
    per_seed = np.asarray(per_seed, dtype=np.float64)
    if per_seed.shape[1] < 2:
        raise NerbiasError("group contrasts need at least two groups")
    slots = contrast_slots(list(slots)) if slots is not None else [None] * per_seed.shape[1]
    printed = sum(seed_interval_holds(per_seed.shape[0], s) for s in slots)  # the family is what is printed
    level = 1 - (1 - confidence) / max(printed, 1)
    return [these_names_interval(column, level, slots=group_slots)
            for column, group_slots in zip(minus_others(per_seed).T, slots, strict=True)], level


def group_contrasts(values: np.ndarray, members: Mapping[str, np.ndarray], confidence: float,
                    slots: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Each group's accuracy (the mean of its names') minus the mean of the other groups', with intervals
    simultaneous over the groups (``simultaneous_contrasts``; ``slots``: the fewest a seed gave each group) for
    these names. No names-like-these interval of a difference held in every simulated shape."""
    values = np.asarray(values, dtype=np.float64)                       # (seeds, names)
    labels = list(members)
    if len(labels) < 2:
        raise NerbiasError("group contrasts need at least two groups")
    per_seed = np.column_stack([np.nanmean(values[:, members[g]], axis=1) for g in labels])  # (seeds, groups)
    intervals, level = simultaneous_contrasts(per_seed, confidence, [(slots or {}).get(g) for g in labels])
    return pd.DataFrame([{"group": group, "names": len(members[group]), "seeds": values.shape[0],
                          "minus_others": interval.value, "ci_low": interval.low, "ci_high": interval.high,
                          "estimand": interval.estimand,
                          "simultaneous_level": level if interval.covers != NONE else float("nan")}
                         for group, interval in zip(labels, intervals)])


__all__ = ["ESTIMANDS", "GroupInterval", "MIN_ACCURACY", "MIN_GROUP_SLOTS", "MIN_NAMES", "NONE", "accuracy_table",
           "contrast_slots", "crossed_variance", "median_seed_lower_bound",
           "group_contrasts", "group_effect_test", "group_interval", "minus_others", "names_like_these_interval",
           "names_seeds_variance", "satterthwaite", "seed_interval_holds", "simultaneous_contrasts",
           "these_names_interval"]
