"""The study's figures of one group: which intervals they get, the group-effect section, the goal's halving test.

A group's accuracy, its calibration and a race's pool against another (White - race) are read with the
intervals of ``reporting.group_effects`` (docs/group-statistics.md): names like these from ``MIN_NAMES`` names
a group, these names (a t over the seeds) below that, none from one seed. The best - worst gap gets no interval
(a max - min, whose bootstrap is not consistent); in its place the study opens with the permutation test of
no group effect, and the goal's "gap halved" is a paired test on the baseline's worst group.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from nerbias.reporting.group_effects import (MIN_ACCURACY, MIN_NAMES, NONE, contrast_slots, minus_others,
                                             names_like_these_interval, seed_interval_holds, simultaneous_contrasts)
from nerbias.reporting.intervals import (COVERS_BOTH, COVERS_NAMES, COVERS_THESE_NAMES, NO_INTERVAL, ONE_SEED, Interval,
                                         Statistic, seed_only_interval)
from nerbias.study.place_names import GOAL, PLACE_FRAME_PREFIX, one_sided_bound
from nerbias.study.runs import RACE_GAP_PREFIX, Figures
from nerbias.reporting.tables import markdown_table

GAP = "best_worst_gap"
CALIBRATION_PREFIX = "calibration: "
CONTRAST_PREFIX = "minus the others: "
GROUP_EFFECT_PERMUTATIONS = 10000


def group_level_metrics(figures: Figures) -> set[str]:
    """The figures of one group (or of one race's pool against another): their intervals come from
    ``reporting.group_effects`` (docs/group-statistics.md), not from the name bootstrap, which undercovers them."""
    return ({*figures.groups, *(CALIBRATION_PREFIX + g for g in figures.groups)}
            | {m for m in figures.statistics if m.startswith((RACE_GAP_PREFIX, PLACE_FRAME_PREFIX))})


def group_level_interval(first: Statistic, confidence: float, base: Statistic | None = None,
                         accuracy: bool = False) -> Interval:
    """A group's ``accuracy`` for names like these when it rests on at least ``MIN_NAMES`` names and is at least
    ``MIN_ACCURACY``, from 1 seed or 3 and more (``group_effects.names_like_these_interval``); every other figure
    of one group, and every difference (``first - base``), for these names: a t over the seeds, paired when the
    seeds match, where the group has the slots a seed that it needs (``group_effects.seed_interval_holds``).
    None from one seed where names like these do not apply; none where the slots are too few."""
    value = first.point - (base.point if base is not None else 0.0)
    if accuracy and base is None and first.name_values is not None and first.names >= MIN_NAMES \
            and first.point >= MIN_ACCURACY and len(first.seeds) != 2:
        named = first.name_values[:, np.isfinite(first.name_values).all(0)]  # names with slots in every seed
        interval = names_like_these_interval(named, confidence, value)
        if named.shape[1] >= MIN_NAMES and interval.covers != NONE:
            return Interval(value, interval.low, interval.high, COVERS_BOTH if len(first.seeds) > 1 else COVERS_NAMES)
    if len(first.seeds) < 2 or (base is not None and len(base.seeds) < 2):
        return Interval(value, float("nan"), float("nan"), ONE_SEED)
    slots = [s.slots for s in (first, base) if s is not None and s.slots is not None]
    if not seed_interval_holds(min(len(first.seeds), len(base.seeds) if base is not None else len(first.seeds)),
                               min(slots) if slots else None):
        return Interval(value, float("nan"), float("nan"), NO_INTERVAL)
    return dataclasses.replace(seed_only_interval(first, confidence, base=base), covers=COVERS_THESE_NAMES)


def _contrasts(figures: Figures) -> np.ndarray:
    """(seeds, groups): each group's accuracy minus the mean of the other groups', per seed."""
    return minus_others(np.column_stack([figures.statistics[g].seed_values for g in figures.groups]))


def contrast_rows(figures: Figures, confidence: float) -> list[dict[str, Any]]:
    """The summary rows ``minus the others: <group>`` of one condition: each group minus the mean of the other
    groups, intervals simultaneous over the groups (Bonferroni; these names, a t over the seeds; none from one
    seed): the inference on group differences that replaces the best - worst gap's."""
    if len(figures.groups) < 2:
        return []
    intervals, level = simultaneous_contrasts(
        np.column_stack([figures.statistics[g].seed_values for g in figures.groups]), confidence,
        [figures.statistics[g].slots for g in figures.groups])
    return [{"metric": CONTRAST_PREFIX + group, "value": interval.value, "ci_low": interval.low,
             "ci_high": interval.high, "ci_covers": (COVERS_THESE_NAMES if interval.covers != NONE else
                                                     ONE_SEED if len(figures.statistics[group].seeds) < 2 else
                                                     NO_INTERVAL),
             "simultaneous_level": level if interval.covers != NONE else float("nan")}
            for group, interval in zip(figures.groups, intervals)]


def halving(ours: Figures, theirs: Figures, confidence: float) -> dict[str, Any]:
    """Does the condition halve the baseline's largest group deficit? The baseline's worst group (lowest
    accuracy minus the others'), and the one-sided lower bound (level ``confidence``) of its paired per-seed
    ``condition deficit - deficit / 2`` (for these names; > 0: halved). Needs the same 2+ seeds on both sides,
    and the slots a seed a t over them needs (``seed_interval_holds``, the contrasts' rule; else no bound)."""
    if ours.groups != theirs.groups or tuple(ours.statistics[ours.groups[0]].seeds) != tuple(
            theirs.statistics[theirs.groups[0]].seeds) or len(theirs.statistics[theirs.groups[0]].seeds) < 2:
        return {}
    base, condition = _contrasts(theirs), _contrasts(ours)
    worst = int(np.argmin(base.mean(0)))
    rests_on = [contrast_slots([f.statistics[g].slots for g in f.groups])[worst] for f in (ours, theirs)]
    if not seed_interval_holds(base.shape[0], None if None in rests_on else min(rests_on)):
        return {"worst_group": theirs.groups[worst], "worst_deficit": float(base[:, worst].mean()),
                "worst_deficit_condition": float(condition[:, worst].mean()), "halving_lower": float("nan")}
    lower = one_sided_bound(condition[:, worst] - GOAL["deficit_share"] * base[:, worst], confidence, upper=False)
    return {"worst_group": theirs.groups[worst], "worst_deficit": float(base[:, worst].mean()),
            "worst_deficit_condition": float(condition[:, worst].mean()), "halving_lower": lower}


def group_effect_section(frames: dict[str, pd.DataFrame]) -> list[str]:
    """The study's opening: per names corpus and condition, the permutation test of no group effect over
    names (``group_effects.group_effect_test`` on the names' accuracy, mean over seeds)."""
    rows = {}
    for label, frame in frames.items():
        gap = frame[frame["metric"] == GAP] if "metric" in frame else frame.iloc[0:0]
        if not len(gap) or "group_effect_p" not in gap:
            continue
        rows[label] = {row["condition"]: "–" if pd.isna(row["group_effect_p"]) else f"{row['group_effect_p']:.2g}"
                       for row in gap.to_dict("records")}
    if not rows:
        return []
    table = pd.DataFrame(rows).rename_axis("condition").reset_index().fillna("–")
    return ["## Is there a group effect?", "",
            "p of the permutation test of no group effect over names (names permuted across groups, sizes kept, "
            f"each name with all its seeds; statistic the between-group sum of squares of the names' accuracy; "
            f"{GROUP_EFFECT_PERMUTATIONS} permutations; reporting/group_effects.py); columns are the corpus labels "
            "of the sections below (`_unambiguous`: without the ambiguous names). Where it is not small, the group "
            "figures below describe these names and no group difference is evidence of bias. Unadjusted: one test "
            "per corpus and condition, read as description; no claim rests on them.", "",
            markdown_table(table), ""]


__all__ = ["CALIBRATION_PREFIX", "CONTRAST_PREFIX", "GAP", "GROUP_EFFECT_PERMUTATIONS", "contrast_rows",
           "group_effect_section", "group_level_interval", "group_level_metrics", "halving"]
