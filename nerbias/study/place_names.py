"""Names that are also places, across a study's conditions (docs/ambiguity.md, issue 25).

- ``place_recall_statistic``: LOCATION recall in the probes' place contexts (``corpus=probes``), all names
  pooled, with the same two-level interval as PERSON recall.
- ``watched_name_statistics``: the accuracy of each watched name (``WATCHED_NAMES``: Sofia and Victoria,
  tagged LOC in nearly every Winogender slot by the baseline) on every names corpus: the mean over seeds, a
  point value (no t of one name's mean held, ``group_effects``), and its median seed with a lower bound.
- ``place_frame_statistics``: places that stay places (issue 45): in the probes' place frames, the share of
  each watched name's slots tagged LOCATION, and of the list's place-like names pooled.
- ``unambiguous_tables``: each condition's per-name table without the names the ambiguity rule marks
  (``name_profile.csv`` of ``python -m nerbias.bias.name_profile``): the study scores the groups again on
  the rest, so a gap that shrinks there is a place-name gap.
- ``goal_frame`` / ``goal_section``: the goal of issue 25 per condition, met or not, from the study's rows.
- ``context_goal_columns`` / ``context_goal_frame`` / ``context_goal_section``: the goal of issue 45
  (``CONTEXT_GOAL``), its one-sided bounds over the paired seeds computed with each row.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from nerbias.data.ambiguity import AmbiguityRule
from nerbias.errors import NerbiasError
from nerbias.reporting.ambiguity import PROFILE_COLUMNS, name_features
from nerbias.reporting.group_effects import median_seed_lower_bound, seed_interval_holds
from nerbias.reporting.intervals import COVERS_SEEDS, Statistic, ratio_statistic
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
# Issue 45's goal, every bound one-sided at 95 % over the paired seeds: Sofia and Victoria tagged PERSON in at
# least 0.86 of their person slots (point) and 0.80 at the lower bound, on Winogender and on In-Situ (each name's
# accuracy at the median seed: group_effects.median_seed_lower_bound); CoNLL-03 test F1 and test LOCATION recall
# non-inferior at -0.3 and -0.5 points (the paired difference's lower bound); Sofia and Victoria LOCATION in at
# least 0.95 of the probes' place frames (point: 24 frames a name); the Winogender White - Hispanic difference
# halved (the upper bound of the paired per-seed condition - baseline / 2 below 0; these names).
CONTEXT_GOAL = {"watched_point": 0.86, "watched_lower": 0.80, "f1_margin": 0.003, "location_recall_margin": 0.005,
                "place_frames": 0.95, "halved_gap": "White - Hispanic", "gap_share": 0.5}
CONTEXT_GOAL_CORPORA = ("winogender", "insitu")
ONE_SIDED = 0.95


def place_recall_statistic(table: NameTable, every: np.ndarray, drawn: np.ndarray, seeds: tuple[int, ...],
                           names: int) -> Statistic | None:
    """Pooled LOCATION recall in place contexts (slot-weighted), or None for a table without probes."""
    if "place_located" not in table.columns or "place_sentences" not in table.columns:
        return None
    return ratio_statistic(table.values("place_located"), table.values("place_sentences"), every, drawn, seeds, names)


def watched_name_statistics(table: NameTable, seeds: tuple[int, ...]) -> dict[str, Statistic]:
    """``name: <name>`` -> that name's accuracy, per seed, and the fewest slots a seed gave it (the study prints
    the mean without an interval and ``context_goal_columns`` its median seed with a lower bound)."""
    out = {}
    for name in WATCHED_NAMES:
        if name in table.names:
            column = table.names.index(name)
            values = table.values("accuracy")[:, column]
            out[WATCHED_PREFIX + name] = Statistic(float(values.mean()), seeds, values, bounds=(0.0, 1.0),
                                                   slots=float(table.sentences[:, column].min()),
                                                   seed_slots=np.asarray(table.sentences[:, column], dtype=float))
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


def context_goal_columns(metric: str, statistic: Statistic, base: Statistic | None, confidence: float = ONE_SIDED
                         ) -> dict[str, float]:
    """The bounds issue 45's goal reads, for one row of a condition's table (``base``: the baseline's figure,
    None for the baseline itself): a watched name's accuracy at the median seed and its one-sided lower bound;
    a seed-only figure's (CoNLL-03) paired difference's one-sided lower bound; the halving of
    ``CONTEXT_GOAL["halved_gap"]``'s upper bound. Empty where the figure is none of these or the seeds differ."""
    if metric.startswith(WATCHED_PREFIX) and statistic.slots:
        slots = statistic.seed_slots if statistic.seed_slots is not None else statistic.slots
        point, lower = median_seed_lower_bound(statistic.seed_values, slots, confidence)
        return {"median_seed": point, "median_seed_lower": lower}
    if base is None or tuple(statistic.seeds) != tuple(base.seeds) or len(statistic.seeds) < 2:
        return {}
    ours, theirs = np.asarray(statistic.seed_values, float), np.asarray(base.seed_values, float)
    if metric == CONTEXT_GOAL["halved_gap"]:
        if not seed_interval_holds(len(ours), min(s for s in (statistic.slots, base.slots, np.inf) if s)):
            return {}
        return {"halving_upper": one_sided_bound(ours - CONTEXT_GOAL["gap_share"] * theirs, confidence, upper=True)}
    if statistic.covers == COVERS_SEEDS and base.covers == COVERS_SEEDS:
        return {"diff_lower_one_sided": one_sided_bound(ours - theirs, confidence, upper=False)}
    return {}


def one_sided_bound(paired: np.ndarray, confidence: float, upper: bool) -> float:
    """The one-sided bound at ``confidence`` of the mean of per-seed ``paired`` values: a t over the seeds."""
    se = paired.std(ddof=1) / np.sqrt(len(paired))
    half = float(stats.t.ppf(confidence, len(paired) - 1) * se)
    return float(paired.mean() + (half if upper else -half))


def context_goal_frame(frames: dict[str, pd.DataFrame], baseline: str) -> pd.DataFrame:
    """Per condition: each part of issue 45's goal (``CONTEXT_GOAL``), its figures and whether it, and all, are
    met. A part whose figure is missing (no In-Situ, no probes, too few seeds) is not met."""
    winogender, probes = frames.get("winogender"), frames.get("probes")
    if winogender is None:
        return pd.DataFrame()
    rows = []
    for condition in [c for c in dict.fromkeys(winogender["condition"]) if c != baseline]:
        row: dict[str, Any] = {"condition": condition}
        watched_met = []
        for corpus in CONTEXT_GOAL_CORPORA:
            for name in WATCHED_NAMES:
                figure = _row(frames.get(corpus), condition, WATCHED_PREFIX + name)
                point, lower = _number(figure, "median_seed"), _number(figure, "median_seed_lower")
                row[f"{corpus}: {name}"], row[f"{corpus}: {name} lower"] = point, lower
                watched_met.append(point >= CONTEXT_GOAL["watched_point"] and lower >= CONTEXT_GOAL["watched_lower"])
        row["watched_met"] = bool(all(watched_met))
        for key, metric, margin in (("f1", "test_f1", "f1_margin"),
                                    ("location_recall", "test_recall_LOC", "location_recall_margin")):
            figure = _row(winogender, condition, metric)
            row[f"{key}_diff"], row[f"{key}_lower"] = _number(figure, "diff"), _number(figure, "diff_lower_one_sided")
            row[f"{key}_met"] = bool(row[f"{key}_lower"] > -CONTEXT_GOAL[margin])
        frames_located = [_number(_row(probes, condition, PLACE_FRAME_PREFIX + name), "value") for name in WATCHED_NAMES]
        for name, value in zip(WATCHED_NAMES, frames_located):
            row[f"place frames: {name}"] = value
        row["place_frames_met"] = bool(all(value >= CONTEXT_GOAL["place_frames"] for value in frames_located))
        gap = _row(winogender, condition, CONTEXT_GOAL["halved_gap"])
        baseline_gap = _row(winogender, baseline, CONTEXT_GOAL["halved_gap"])
        row.update(gap_baseline=_number(baseline_gap, "value"), gap_condition=_number(gap, "value"),
                   halving_upper=_number(gap, "halving_upper"))
        row["gap_met"] = bool(row["halving_upper"] < 0)
        row["met"] = all(row[f"{part}_met"] for part in ("watched", "f1", "location_recall", "place_frames", "gap"))
        rows.append(row)
    return pd.DataFrame(rows)


def context_goal_section(goal: pd.DataFrame, baseline: str) -> list[str]:
    if not len(goal):
        return []

    def mark(value: float, met: bool, text: str) -> str:
        return "–" if math.isnan(value) else f"{text} {'✓' if met else '✗'}"

    records = goal.to_dict("records")
    columns: dict[str, list[str]] = {"condition": list(goal["condition"])}
    for corpus in CONTEXT_GOAL_CORPORA:
        columns[f"{corpus}: " + " / ".join(WATCHED_NAMES) + " [lower bounds]"] = [
            " / ".join(f"{r[f'{corpus}: {n}']:.2f} [{r[f'{corpus}: {n} lower']:.2f}]" for n in WATCHED_NAMES)
            for r in records]
    columns["CoNLL F1 diff [bound]"] = [mark(r["f1_lower"], r["f1_met"], f"{r['f1_diff'] * 100:+.2f} "
                                             f"[{r['f1_lower'] * 100:+.2f}]") for r in records]
    columns["LOC recall diff [bound]"] = [mark(r["location_recall_lower"], r["location_recall_met"],
                                               f"{r['location_recall_diff'] * 100:+.2f} [{r['location_recall_lower'] * 100:+.2f}]")
                                          for r in records]
    columns["place frames: " + " / ".join(WATCHED_NAMES)] = [
        mark(r[f"place frames: {WATCHED_NAMES[0]}"], r["place_frames_met"],
             " / ".join(f"{r[f'place frames: {n}']:.2f}" for n in WATCHED_NAMES)) for r in records]
    columns[f"{CONTEXT_GOAL['halved_gap']}: baseline -> condition [halving bound]"] = [
        mark(r["halving_upper"], r["gap_met"], f"{r['gap_baseline']:+.3f} -> {r['gap_condition']:+.3f} "
             f"[{r['halving_upper']:+.3f}]") for r in records]
    columns["goal"] = ["**met**" if met else "not met" for met in goal["met"]]
    g = CONTEXT_GOAL
    return ["## Goal: Sofia in a person's slot (issue 45)", "",
            f"Against `{baseline}`, every bound one-sided at {ONE_SIDED:.0%} over the paired seeds: "
            f"{' and '.join(WATCHED_NAMES)} each tagged PERSON in at least {g['watched_point']:.2f} of their person "
            f"slots, {g['watched_lower']:.2f} at the lower bound, on Winogender and In-Situ (the name's accuracy at "
            "the median seed, a t over the seeds' logits: no bound of the mean over seeds held near the ceiling, "
            "docs/group-statistics.md); CoNLL-03 test F1 and test LOCATION recall non-inferior at "
            f"-{g['f1_margin'] * 100:g} and -{g['location_recall_margin'] * 100:g} points (points, the paired "
            f"difference's lower bound); {' and '.join(WATCHED_NAMES)} LOCATION in at least {g['place_frames']:.0%} "
            f"of the probes' place frames (point values: 24 frames a name); the Winogender {g['halved_gap']} "
            f"difference halved (the upper bound of the paired per-seed condition - {g['gap_share']:g} x baseline "
            "below 0; these names).", "", markdown_table(pd.DataFrame(columns)), ""]


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


__all__ = ["CONTEXT_GOAL", "CONTEXT_GOAL_CORPORA", "GOAL", "ONE_SIDED", "context_goal_columns", "context_goal_frame",
           "context_goal_section", "one_sided_bound", "PLACE_FRAME_PREFIX", "PLACE_LIKE", "PLACE_RECALL", "UNAMBIGUOUS_SUFFIX", "WATCHED_NAMES", "WATCHED_PREFIX", "ambiguous_names",
           "goal_frame", "goal_section", "place_frame_statistics", "place_recall_statistic", "read_profile", "restrict", "unambiguous_tables",
           "watched_name_statistics"]
