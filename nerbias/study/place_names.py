"""Names that are also places, across a study's conditions (docs/ambiguity.md, issue 25).

- ``place_recall_statistic``: LOCATION recall in the probes' place contexts (``corpus=probes``), all names
  pooled, with the same two-level interval as PERSON recall.
- ``watched_name_statistics``: the accuracy of each watched name (``WATCHED_NAMES``: Sofia and Victoria,
  tagged LOC in nearly every Winogender slot by the baseline) on every names corpus, seed-only intervals.
- ``place_frame_statistics``: places that stay places (issue 45): in the probes' place frames, the share of
  each watched name's slots tagged LOCATION, and of the list's place-like names pooled.
- ``unambiguous_tables``: each condition's per-name table without the names the ambiguity rule marks
  (``name_profile.csv`` of ``python -m nerbias.bias.name_profile``): the study scores the groups again on
  the rest, so a gap that shrinks there is a place-name gap.
- ``goal_frame`` / ``goal_section``: the goal of issue 25 per condition, met or not, from the study's rows.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from nerbias.data.ambiguity import AmbiguityRule
from nerbias.errors import NerbiasError
from nerbias.reporting.ambiguity import PROFILE_COLUMNS, name_features
from nerbias.reporting.intervals import Statistic, ratio_statistic
from nerbias.reporting.runs import read_table
from nerbias.reporting.tables import markdown_table
from nerbias.reporting.uncertainty import NameTable

WATCHED_NAMES = ("Sofia", "Victoria")
WATCHED_PREFIX = "name: "
PLACE_FRAME_PREFIX = "LOCATION in place frames: "   # + a watched name, or PLACE_LIKE
PLACE_LIKE = "place-like names"
PLACE_RECALL = "place_recall"
UNAMBIGUOUS_SUFFIX = "_unambiguous"   # the label of a corpus scored again on its unambiguous names
# Issue 25's goal: the cased Winogender best - worst gap halved (ratio to the baseline <= 0.5, its interval
# below 1), CoNLL-03 F1 cost <= 0.5 points, place-probe LOCATION recall down <= 2 points, Sofia and Victoria
# recognised in >= 90 % of their person slots.
GOAL = {"deficit_share": 0.5, "f1_cost": 0.005, "place_recall_drop": 0.02, "watched_accuracy": 0.9}


def place_recall_statistic(table: NameTable, every: np.ndarray, drawn: np.ndarray, seeds: tuple[int, ...],
                           names: int) -> Statistic | None:
    """Pooled LOCATION recall in place contexts (slot-weighted), or None for a table without probes."""
    if "place_located" not in table.columns or "place_sentences" not in table.columns:
        return None
    return ratio_statistic(table.values("place_located"), table.values("place_sentences"), every, drawn, seeds, names)


def watched_name_statistics(table: NameTable, seeds: tuple[int, ...]) -> dict[str, Statistic]:
    """``name: <name>`` -> that name's accuracy, per seed (a figure of one name: these names, an interval over
    the seeds where its slots allow one, ``group_effects.seed_interval_holds``)."""
    out = {}
    for name in WATCHED_NAMES:
        if name in table.names:
            column = table.names.index(name)
            values = table.values("accuracy")[:, column]
            out[WATCHED_PREFIX + name] = Statistic(float(values.mean()), seeds, values, bounds=(0.0, 1.0),
                                                   slots=float(table.sentences[:, column].min()))
    return out


def place_frame_statistics(table: NameTable, seeds: tuple[int, ...], place_like: Sequence[str] = ()
                           ) -> dict[str, Statistic]:
    """In the probes' place frames (``corpus=probes``), the share of slots tagged LOCATION: each watched name's,
    and the ``place_like`` names' pooled (the list's names the ambiguity rule marks), per seed; figures of
    these names, an interval over the seeds only where their slots allow one (24 place frames a name: none for
    one name). Empty for a table without probes."""
    if "place_located" not in table.columns or "place_sentences" not in table.columns:
        return {}
    located, slots = table.values("place_located"), table.values("place_sentences")
    chosen = {PLACE_FRAME_PREFIX + name: [table.names.index(name)] for name in WATCHED_NAMES if name in table.names}
    pooled = [table.names.index(name) for name in place_like if name in table.names]
    if pooled:
        chosen[PLACE_FRAME_PREFIX + PLACE_LIKE] = pooled
    out = {}
    for key, idx in chosen.items():
        per_seed = located[:, idx].sum(1) / slots[:, idx].sum(1)
        out[key] = Statistic(float(per_seed.mean()), seeds, per_seed, bounds=(0.0, 1.0),
                             slots=float(slots[:, idx].sum(1).min()))
    return out


def read_profile(path: str | Path) -> pd.DataFrame:
    """A ``name_profile.csv`` (``python -m nerbias.bias.name_profile``), one row per name."""
    frame = read_table(Path(path), ("name", *PROFILE_COLUMNS))
    return frame.drop_duplicates("name").reset_index(drop=True)


def ambiguous_names(profile: pd.DataFrame, names: Sequence[str], rule: AmbiguityRule) -> list[str]:
    """The names of ``names`` that ``rule`` marks ambiguous; every one of them must be in the profile."""
    missing = sorted(set(names) - set(profile["name"]))
    if missing:
        raise NerbiasError(f"the name profile lacks {len(missing)} evaluated names (e.g. {', '.join(missing[:3])}): "
                           "build it for this name list (python -m nerbias.bias.name_profile)")
    featured = name_features(profile[profile["name"].isin(set(names))], rule)
    marked = set(featured.loc[featured["ambiguous"] > 0, "name"])
    return [name for name in names if name in marked]


def restrict(table: NameTable, keep: Sequence[str]) -> NameTable:
    """``table`` with only the names ``keep`` (order kept); the OOV name as it was."""
    kept = set(keep)
    idx = [i for i, name in enumerate(table.names) if name in kept]
    return dataclasses.replace(
        table, names=[table.names[i] for i in idx], groups=[table.groups[i] for i in idx],
        sentences=table.sentences[:, idx], recognised=table.recognised[:, idx],
        columns={key: values[:, idx] for key, values in table.columns.items()},
        gender=[table.gender[i] for i in idx] if table.gender else [],
        race=[table.race[i] for i in idx] if table.race else [])


def unambiguous_tables(tables: dict[str, NameTable], profile: pd.DataFrame, rule: AmbiguityRule
                       ) -> tuple[dict[str, NameTable], list[str]]:
    """Each condition's table without the ambiguous names, and those names. A group left with fewer
    than 2 names cannot be scored: an error naming it."""
    first = next(iter(tables.values()))
    dropped = ambiguous_names(profile, first.names, rule)
    kept = [name for name in first.names if name not in set(dropped)]
    left = pd.Series([g for n, g in zip(first.names, first.groups) if n in set(kept)]).value_counts()
    thin = sorted(set(first.groups) - set(left[left >= 2].index))
    if thin:
        raise NerbiasError(f"without its ambiguous names ({rule.describe()}), group(s) {thin} keep fewer than 2 "
                           "names: no gap without them")
    return {condition: restrict(table, kept) for condition, table in tables.items()}, dropped


def _row(frame: pd.DataFrame | None, condition: str, metric: str) -> dict[str, Any] | None:
    if frame is None:
        return None
    rows = frame[(frame["condition"] == condition) & (frame["metric"] == metric)]
    return rows.iloc[0].to_dict() if len(rows) else None


def _number(row: dict[str, Any] | None, key: str) -> float:
    value = row.get(key) if row else None
    return float(value) if value is not None and not (isinstance(value, float) and math.isnan(value)) else math.nan


def goal_frame(frames: dict[str, pd.DataFrame], baseline: str, gap_metric: str) -> pd.DataFrame:
    """Per condition: the four parts of issue 25's goal (``GOAL``) and whether each, and all, are met.
    A part whose figure is missing (e.g. no probes) is not met. The gap part is a test, not a ratio of two
    max - min (which has no interval that holds): the baseline's worst group (its accuracy minus the other
    groups') has its deficit at least halved, by the one-sided lower bound of the paired per-seed
    ``condition deficit - baseline deficit / 2`` above 0 (``groups.halving``; these names). The ratio of the
    gaps stays as a description."""
    winogender, probes = frames.get("winogender"), frames.get("probes")
    conditions = [c for c in dict.fromkeys(winogender["condition"]) if c != baseline] if winogender is not None else []
    rows = []
    for condition in conditions:
        gap = _row(winogender, condition, gap_metric)
        f1 = _row(winogender, condition, "test_f1")
        place = _row(probes, condition, PLACE_RECALL)
        watched = [_number(_row(winogender, condition, WATCHED_PREFIX + name), "value") for name in WATCHED_NAMES]
        row = {"condition": condition, "gap_ratio": _number(gap, "ratio"),
               "worst_group": (gap or {}).get("worst_group", ""), "worst_deficit": _number(gap, "worst_deficit"),
               "worst_deficit_condition": _number(gap, "worst_deficit_condition"),
               "halving_lower": _number(gap, "halving_lower"),
               "f1_diff": _number(f1, "diff"), "place_recall_diff": _number(place, "diff"),
               **{f"{WATCHED_PREFIX}{name}": value for name, value in zip(WATCHED_NAMES, watched)}}
        row["gap_met"] = bool(row["halving_lower"] > 0)
        row["f1_met"] = bool(row["f1_diff"] >= -GOAL["f1_cost"])
        row["place_met"] = bool(row["place_recall_diff"] >= -GOAL["place_recall_drop"])
        row["watched_met"] = bool(all(value >= GOAL["watched_accuracy"] for value in watched))
        row["met"] = row["gap_met"] and row["f1_met"] and row["place_met"] and row["watched_met"]
        rows.append(row)
    return pd.DataFrame(rows)


def goal_section(goal: pd.DataFrame, baseline: str) -> list[str]:
    if not len(goal):
        return []

    def mark(value: float, met: bool, text: str) -> str:
        return "–" if math.isnan(value) else f"{text} {'✓' if met else '✗'}"

    shown = pd.DataFrame({
        "condition": goal["condition"],
        "worst group's deficit, baseline -> condition [halving bound]": [
            mark(r["halving_lower"], r["gap_met"], f"{r['worst_group']}: {r['worst_deficit']:+.3f} -> "
                 f"{r['worst_deficit_condition']:+.3f} [{r['halving_lower']:+.3f}]") for r in goal.to_dict("records")],
        "gap ratio (no interval)": ["–" if math.isnan(r["gap_ratio"]) else f"{r['gap_ratio']:.2f}"
                                    for r in goal.to_dict("records")],
        "CoNLL F1 diff": [mark(r["f1_diff"], r["f1_met"], f"{r['f1_diff']:+.4f}") for r in goal.to_dict("records")],
        "place recall diff": [mark(r["place_recall_diff"], r["place_met"], f"{r['place_recall_diff']:+.3f}")
                              for r in goal.to_dict("records")],
        " / ".join(WATCHED_NAMES): [mark(r[WATCHED_PREFIX + WATCHED_NAMES[0]], r["watched_met"], " / ".join(
            f"{r[WATCHED_PREFIX + n]:.2f}" for n in WATCHED_NAMES)) for r in goal.to_dict("records")],
        "goal": ["**met**" if met else "not met" for met in goal["met"]]})
    return ["## Goal: a condition that reads context (issue 25)", "",
            f"Against `{baseline}`: on cased Winogender, the baseline's worst group (its accuracy minus the mean of "
            "the other groups') has its deficit at least halved: the one-sided 95 % lower bound of the paired "
            "per-seed `condition deficit - baseline deficit / 2` is above 0 (for these names, a t over the seeds; "
            "the bracket); CoNLL-03 test F1 down "
            f"at most {GOAL['f1_cost'] * 100:g} points; LOCATION recall in the probes' place contexts down at most "
            f"{GOAL['place_recall_drop'] * 100:g} points; {' and '.join(WATCHED_NAMES)} each recognised in at least "
            f"{GOAL['watched_accuracy']:.0%} of their Winogender person slots (mean over seeds). "
            "Point estimates except where a bound is named. The ratio of the best - worst gaps is shown without an "
            "interval: no interval of it was shown to hold (docs/group-statistics.md).", "",
            markdown_table(shown), ""]


__all__ = ["GOAL", "PLACE_FRAME_PREFIX", "PLACE_LIKE", "PLACE_RECALL", "UNAMBIGUOUS_SUFFIX", "WATCHED_NAMES", "WATCHED_PREFIX", "ambiguous_names",
           "goal_frame", "goal_section", "place_frame_statistics", "place_recall_statistic", "read_profile", "restrict", "unambiguous_tables",
           "watched_name_statistics"]
