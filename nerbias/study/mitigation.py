"""A mitigation study read back: one table per corpus over training conditions x seeds, with intervals.

A study is a sweep of training runs with bias evaluations (``experiment=mitigation_study``): each job
directory holds the resolved config (its ``condition`` and ``seed``), ``metrics.json`` (CoNLL-03
``test_f1`` and ``test_lower_f1``) and ``bias/<corpus>[_lower]/`` evaluations.

Every figure is the mean over a condition's seeds, with a 95 % interval from ``reporting.intervals``: a
name bootstrap (names drawn within groups, one draw for every condition, so differences from the baseline are
paired on the names) plus a t-based seed part (paired on seed numbers); each row says what its interval
covers (names, seeds, both), and a figure that varies only with the seed gets none from one seed.

- **names corpora** (Winogender, In-Situ, the OOV set, the probes): group accuracies (slot-weighted), ALL,
  the best - worst gap (bias-corrected, with its noise floor), female - male, White - each other race (both
  genders pooled, for the papers' claims: ``study.paper_claims``), the spread of median
  confidence (Table 5 of Mishra et al.), calibration per group; the probes add LOCATION recall in place
  contexts, Winogender the watched names (``study.place_names``). With a name profile, each names
  corpus is scored again without its ambiguous names.
- **census** (Mehrabi et al.): the weighted type-1 error of each year and sex, averaged over the templates,
  then over the years; the names part draws (name, sex) units, each keeping all its years.
- **CoNLL-03 F1**: the seeds only.

``claims.csv`` is the Holm-adjusted family ``HEADLINE``; ``paper_claims.csv`` the two papers' claims, each holds,
does not hold or is not decided; ``goal.csv`` the goal of issue 25 per condition, ``context_goal.csv`` that of
issue 45.
"""

from __future__ import annotations

import logging
import math
import re
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from nerbias.bias.types import corpus_label, corpus_title, parse_corpus_label
from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_write_text, remove_orphans, write_csv
from nerbias.data.ambiguity import AmbiguityRule
from nerbias.study.archive import is_archive, unpack
from nerbias.study.claims import (HEADLINE, UNDECIDED_BY_REPLICATES, claim_verdict, claims_family,
                                   replicate_resolution)
from nerbias.study.paper_claims import declared_margins, paper_claims, paper_claims_section
from nerbias.study.debias_table import diagnostics_section
from nerbias.study.place_names import (PLACE_FRAME_PREFIX, PLACE_LIKE, PLACE_RECALL, UNAMBIGUOUS_SUFFIX, WATCHED_NAMES,
                                       WATCHED_PREFIX, ambiguous_names, context_goal_columns, context_goal_frame,
                                       context_goal_section, goal_frame, goal_section,
                                       place_frame_statistics, read_profile, restrict, unambiguous_tables)
from nerbias.reporting.runs import load_run
from nerbias.study.groups import (CALIBRATION_PREFIX, CONTRAST_PREFIX, GAP, contrast_rows, group_effect_section,
                                  group_level_interval, group_level_metrics, halving)
from nerbias.study.names import names_corpus_figures
from nerbias.study.runs import (CONLL_METRICS, NAME_CORPORA, RACE_GAP_PREFIX, REFERENCE_RACE, Figures, Study,
                                StudyRun, census_figures, drawable_names, evaluation_labels, find_study,
                                platforms_note, seed_ids)
from nerbias.reporting.tables import markdown_table
from nerbias.reporting.group_effects import MIN_GROUP_SLOTS, MIN_NAMES
from nerbias.reporting.intervals import (COVERS_BOTH, COVERS_NAMES, COVERS_SEEDS, COVERS_THESE_NAMES,
                                         MONTE_CARLO_LEVEL, NO_INTERVAL, ONE_SEED, Interval,
                                         SeedNoise, difference_covers, difference_replicates, gap_interval,
                                         replicates, seed_only_interval)
from nerbias.reporting.options import STUDY_CENSUS_BOOT, STUDY_N_BOOT
from nerbias.reporting.uncertainty import DEFAULT_CONFIDENCE, NameTable
from nerbias.study.workers import map_in_processes

log = logging.getLogger(__name__)




# ----------------------------------------------------------------------------------------------
# Tables




def _interval_row(prefix: str, interval: Interval) -> dict[str, Any]:
    return {prefix: interval.value, f"{prefix}_low": interval.low, f"{prefix}_high": interval.high,
            f"{prefix}_covers": interval.covers}


def summary_frame(figures: dict[str, Figures], runs: dict[str, list[StudyRun]], baseline: str | None,
                  confidence: float = DEFAULT_CONFIDENCE, seed: int = 0, n_boot: int = 2000) -> pd.DataFrame:
    """Long format: condition, metric, seeds, value, ci_low, ci_high, ci_covers, ci_p (two-sided p of "the figure
    is 0": meaningful for the differences within a condition, female - male and White - race) and (against the
    baseline) diff, diff_low, diff_high, diff_covers, p_value; each p with its Monte-Carlo bounds (``_low``,
    ``_high``: ``monte_carlo_p_bounds``). The best - worst gap's value is bias-corrected (``raw``:
    max - min), beside its noise floor (floor_mean, floor_p95, floor_p, below_floor) and the ratio
    condition / baseline (ratio, ratio_low, ratio_high)."""
    lengths = {len(s.name_replicates) for f in figures.values() for s in f.statistics.values()
               if s.name_replicates is not None}
    noise = SeedNoise(lengths.pop() if lengths else n_boot, seed)
    # seed-only figures get their exact t interval (seed_only_interval): no replicates to draw for them
    reps = {c: {k: replicates(noise, s) for k, s in f.statistics.items() if s.covers != COVERS_SEEDS}
            for c, f in figures.items()}
    gaps: dict[str, tuple[float, np.ndarray, str]] = {}
    for condition, fig in figures.items():
        if len(fig.groups) > 1:
            points = np.array([fig.statistics[g].point for g in fig.groups])
            group_reps = np.column_stack([reps[condition][g] for g in fig.groups])
            gaps[condition] = (points, group_reps, fig.statistics[fig.groups[0]].covers)
    base = figures.get(baseline) if baseline else None
    rows = []
    for condition, fig in figures.items():
        seeds = ";".join(str(r.seed) for r in runs[condition])
        group_level = group_level_metrics(fig)
        metrics = list(fig.statistics)
        if condition in gaps:
            metrics.insert(len(fig.groups), GAP)
        for metric in metrics:
            row: dict[str, Any] = {"condition": condition, "metric": metric, "seeds": seeds}
            if metric == GAP:  # no interval: a max - min, whose bootstrap is not consistent (group_effects)
                points, group_reps, covers = gaps[condition]
                interval, raw, _ = gap_interval(points, group_reps, covers, confidence)
                interval = Interval(interval.value, float("nan"), float("nan"), NO_INTERVAL)
                row.update(raw=raw, **fig.floor)
                row["below_floor"] = bool(raw < fig.floor["floor_p95"])
            elif metric.startswith(WATCHED_PREFIX):  # one name's mean over seeds: no t of it holds (group_effects)
                interval = Interval(fig.statistics[metric].point, float("nan"), float("nan"), NO_INTERVAL)
            elif metric in group_level:
                interval = group_level_interval(fig.statistics[metric], confidence, accuracy=metric in fig.groups)
            else:
                statistic = fig.statistics[metric]
                interval = (seed_only_interval(statistic, confidence) if statistic.covers == COVERS_SEEDS else
                            Interval.from_replicates(statistic.point, reps[condition][metric], statistic.covers,
                                                     confidence))
            row.update(value=interval.value, ci_low=interval.low, ci_high=interval.high, ci_covers=interval.covers)
            if metric != GAP:  # H0: the figure is 0 (meaningful for differences)
                row.update(ci_p=interval.p_value, ci_p_low=interval.p_low, ci_p_high=interval.p_high)
            if base is not None and condition != baseline:
                row.update(_difference(metric, condition, baseline, figures, gaps, noise, confidence, group_level))
            if metric != GAP:
                row.update(context_goal_columns(metric, fig.statistics[metric],
                                                base.statistics.get(metric) if base is not None and
                                                condition != baseline else None))
            rows.append(row)
        rows += [{"condition": condition, "seeds": seeds, **row} for row in contrast_rows(fig, confidence)]
    return pd.DataFrame(rows)


def _difference(metric: str, condition: str, baseline: str, figures: dict[str, Figures],
                gaps: dict[str, tuple[float, np.ndarray, str]], noise: SeedNoise, confidence: float,
                group_level: set[str] = frozenset()) -> dict[str, Any]:
    ours, theirs = figures[condition], figures[baseline]
    if metric == GAP:  # values only: neither a difference of two max - min nor their ratio has an interval shown
        if condition not in gaps or baseline not in gaps:  # to hold (docs/group-statistics.md)
            return {}
        (points_c, reps_c, covers), (points_b, reps_b, _) = gaps[condition], gaps[baseline]
        own, _, _ = gap_interval(points_c, reps_c, covers, confidence)
        theirs_gap, _, _ = gap_interval(points_b, reps_b, covers, confidence)
        out = _difference_row(Interval(own.value - theirs_gap.value, float("nan"), float("nan"), NO_INTERVAL))
        if own.value > 0 and theirs_gap.value > 0:
            out.update(ratio=own.value / theirs_gap.value, ratio_low=float("nan"), ratio_high=float("nan"))
        out.update(halving(ours, theirs, confidence))
        return out
    if metric not in theirs.statistics:
        return {}
    first, second = ours.statistics[metric], theirs.statistics[metric]
    if metric.startswith(WATCHED_PREFIX):  # as the name's own figure: a value, no interval
        return _difference_row(Interval(first.point - second.point, float("nan"), float("nan"), NO_INTERVAL))
    if metric in group_level:
        return _difference_row(group_level_interval(first, confidence, base=second))
    covers = difference_covers(first, second)
    interval = (seed_only_interval(first, confidence, base=second) if covers == COVERS_SEEDS else
                Interval.from_replicates(first.point - second.point, difference_replicates(noise, first, second),
                                         covers, confidence))
    out = _difference_row(interval)
    if covers == COVERS_BOTH:  # the same difference for these names: a t over the seeds (paired when they match)
        these = seed_only_interval(first, confidence, base=second)
        out.update(diff_these_names_low=these.low, diff_these_names_high=these.high)
    return out


def _difference_row(interval: Interval) -> dict[str, Any]:
    return {**_interval_row("diff", interval), "p_value": interval.p_value, "p_value_low": interval.p_low,
            "p_value_high": interval.p_high}


def _cell(row: dict, value: str, digits: int) -> str:
    number = row.get(value)
    if number is None or (isinstance(number, float) and math.isnan(number)):
        return "–"
    covers = row.get(f"{value}_covers", row.get("ci_covers")) if value != "ratio" else row.get("diff_covers")
    low, high = row.get(f"{value}_low"), row.get(f"{value}_high")
    if covers == NO_INTERVAL:
        text = f"{number:.{digits}f} (no interval)"
    elif covers == ONE_SEED or low is None or (isinstance(low, float) and math.isnan(low)):
        text = f"{number:.{digits}f} (1 seed)"
    elif low == high:  # every seed and name draw gave the same value (a name never recognised): no interval to show
        text = f"{number:.{digits}f} (no spread)"
    else:
        text = f"{number:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"
        text += " (names)" if covers == COVERS_NAMES else " (these names)" if covers == COVERS_THESE_NAMES else ""
    if value == "value" and row.get("metric") == GAP and "floor_p95" in row:
        text += f"; floor {row['floor_mean']:.{digits}f} / {row['floor_p95']:.{digits}f}"
        text += " **below floor**" if row.get("below_floor") else ""
        if "group_effect_p" in row and not pd.isna(row["group_effect_p"]):
            text += f"; group effect p {row['group_effect_p']:.2g}"
    if value == "diff" and row.get("holds") is True:
        text += " ✓"
    return text


SUMMARY_COLUMNS = {"test_f1": "CoNLL F1", "test_lower_f1": "CoNLL F1 lower-cased", "test_span_ece": "CoNLL span ECE",
                   "test_recall_LOC": "CoNLL LOC recall",
                   "ALL": "ALL", "OOV": "OOV",
                   GAP: "best - worst group (bias-corrected)", "female_male_gap": "female - male",
                   "median_confidence_std": "std of median confidence",
                   "female_type1_w": "female type-1 (w)", "male_type1_w": "male type-1 (w)",
                   "female_male_type1_w_gap": "female - male type-1 (w)",
                   PLACE_RECALL: "LOCATION recall (place contexts)", **{WATCHED_PREFIX + n: n for n in WATCHED_NAMES},
                   **{PLACE_FRAME_PREFIX + n: f"{n}: LOCATION in place frames" for n in (*WATCHED_NAMES, PLACE_LIKE)}}
def display_table(frame: pd.DataFrame, metrics: Sequence[str], value: str = "value", digits: int = 3,
                  titles: dict[str, str] | None = None) -> pd.DataFrame:
    """Conditions x ``metrics`` as "value [low, high]" (``value``: value, diff or ratio), with the seeds.
    A names-only interval is marked "(names)", a figure without one "(1 seed)"."""
    titles = titles or {}
    frame = frame[frame[value].notna()] if value in frame else frame.iloc[0:0]
    conditions = list(dict.fromkeys(frame["condition"]))
    present = [m for m in metrics if m in set(frame["metric"])]
    cells = {(row["condition"], row["metric"]): _cell(row, value, digits) for row in frame.to_dict("records")}
    seeds = frame.drop_duplicates("condition").set_index("condition")["seeds"] if len(frame) else {}
    rows = [{"condition": c, "seeds": seeds[c], **{titles.get(m, m): cells.get((c, m), "–") for m in present}}
            for c in conditions]
    return pd.DataFrame(rows, columns=["condition", "seeds", *[titles.get(m, m) for m in present]])


def _value_column(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.rename(columns={"ci_low": "value_low", "ci_high": "value_high", "ci_covers": "value_covers"})


def corpus_section(frame: pd.DataFrame, title: str, baseline: str | None) -> list[str]:
    """The Markdown of one corpus: summary, per-group accuracy, differences from the baseline."""
    frame = _value_column(frame)
    summary = [m for m in SUMMARY_COLUMNS if m in set(frame["metric"])]
    calibration = [m for m in dict.fromkeys(frame["metric"]) if m.startswith(CALIBRATION_PREFIX)]
    race_gaps = [m for m in dict.fromkeys(frame["metric"]) if m.startswith(RACE_GAP_PREFIX)]
    contrasts = [m for m in dict.fromkeys(frame["metric"]) if m.startswith(CONTRAST_PREFIX)]
    groups = [m for m in dict.fromkeys(frame["metric"]) if m not in SUMMARY_COLUMNS and m not in ("Female", "Male")
              and m not in calibration and m not in race_gaps and m not in contrasts]
    lines = [f"## {title}", "", markdown_table(display_table(frame, summary, titles=SUMMARY_COLUMNS)), ""]
    if groups and len(groups) > 1:
        lines += ["Accuracy per group:", "", markdown_table(display_table(frame, groups)), ""]
    if contrasts:
        titles = {m: m[len(CONTRAST_PREFIX):] for m in contrasts}
        lines += ["Each group minus the mean of the other groups (intervals simultaneous over the groups, "
                  "Bonferroni: for these names, a t over the seeds; an interval clear of 0 is a group difference "
                  "of these names, not of names like these):", "",
                  markdown_table(display_table(frame, contrasts, titles=titles)), ""]
    if race_gaps:
        lines += [f"{REFERENCE_RACE} names' accuracy minus each race's (both genders pooled; the papers' claims below):",
                  "", markdown_table(display_table(frame, race_gaps)), ""]
    if calibration:
        titles = {m: m[len(CALIBRATION_PREFIX):] for m in calibration}
        lines += ["Calibration per group: mean P(PER) over the group's slots minus its accuracy (every slot is a "
                  "person; > 0: over-confident):", "", markdown_table(display_table(frame, calibration, titles=titles)),
                  ""]
    if baseline is not None and "diff" in frame and frame["diff"].notna().any():
        diffs = display_table(frame, summary, value="diff", titles=SUMMARY_COLUMNS)
        if "ratio" in frame and frame["ratio"].notna().any():
            ratio = display_table(frame, [GAP], value="ratio")
            diffs["best - worst, ratio to baseline"] = ratio.set_index("condition").reindex(
                diffs["condition"])[GAP].fillna("–").to_list()
        lines += [f"Difference from `{baseline}` (paired on the names, and on the seeds where the seeds match; "
                  "✓: holds after Holm's adjustment over the claims family):", "", markdown_table(diffs), ""]
    return lines


def claims_section(family: pd.DataFrame, alpha: float) -> list[str]:
    if not len(family):
        return ["## Claims", "", "None: a claim needs at least 2 seeds in the condition and in the baseline (from "
                "one seed a difference's interval covers the names only).", ""]
    shown = family.copy()
    shown["difference"] = [_cell(r, "diff", 3) for r in shown.to_dict("records")]
    shown["these names"] = [f"[{r['these_names_low']:.3f}, {r['these_names_high']:.3f}]"
                            if not pd.isna(r["these_names_low"]) else "–" for r in shown.to_dict("records")]
    shown["p"] = shown["p_value"].map(lambda p: f"{p:.2g}")
    shown["p (Holm)"] = shown["p_holm"].map(lambda p: f"{p:.2g}")
    shown["verdict"] = [claim_verdict(h, u) for h, u in zip(shown["holds"], shown["undecided"])]
    shown["metric"] = shown["metric"].map(lambda m: SUMMARY_COLUMNS.get(m, m))
    return ["## Claims", "",
            "The family: each condition's difference from the baseline in "
            f"{', '.join(sorted({m for v in HEADLINE.values() for m in v}))} "
            f"on the cased corpora, with at least 2 seeds on each side ({len(family)} comparisons). Two-sided "
            "p-values invert the intervals above; "
            f"Holm's step-down adjustment keeps the family-wise error at {alpha:g}. A p read off B replicates is "
            f"known to within its Monte-Carlo interval ({MONTE_CARLO_LEVEL:.0%}): a row holds when it holds at the "
            f"upper ends of every p's interval, and is *{UNDECIDED_BY_REPLICATES}* when it holds at the lower ends "
            "only (more replicates, `--n-boot`, may decide it). Only the rows marked *holds* are claims. Two "
            "estimands: `difference` is for *names like these* (names and seeds: the claim), `these names` the "
            "same difference for the listed names only (a t over the seeds, unadjusted; description).", "",
            markdown_table(shown[["condition", "corpus", "metric", "difference", "these names", "p", "p (Holm)",
                                  "verdict"]]), ""]


def corpus_frames(label: str, complete: dict[str, list[StudyRun]], baseline: str, n_boot: int, census_boot: int,
                  seed: int, ddof: int, confidence: float, floor_permutations: int, profile: pd.DataFrame | None,
                  ambiguity: AmbiguityRule) -> dict[str, tuple[pd.DataFrame, str | None, bool]]:
    """One evaluation's summary table (and, with a name ``profile``, the same corpus without its ambiguous
    names): label -> (frame, title or None, whether the baseline is in it). Runs in a worker process."""
    reference = baseline if baseline in complete else None
    corpus, lower = parse_corpus_label(label)
    title = None
    if label.startswith("census"):
        figures = census_figures(Study(complete), label, census_boot, seed)
    else:
        tables = {c: NameTable.from_frames([load_run(r.path / "bias" / label).per_name for r in rs])
                  for c, rs in complete.items()}
        first = next(iter(tables.values()))
        drawable = drawable_names(first.names, complete)
        if drawable:  # a list beside the training pool (the census-scale one): only names no run can have seen
            kept = [n for n in first.names if n not in drawable]
            left = pd.Series([g for n, g in zip(first.names, first.groups) if n not in drawable]).value_counts()
            thin = sorted(set(first.groups) - set(left[left >= 2].index))
            if thin:
                raise NerbiasError(f"{label}: without the names a run's substitution could draw, group(s) {thin} keep "
                                   "fewer than 2 names; score the conditions on a list their pools avoid "
                                   "(augment.name_pool.exclude)")
            tables = {c: restrict(table, kept) for c, table in tables.items()}
            title = (f"{corpus_title(corpus, lower)}, on the {len(first.names) - len(drawable)} names no run's name "
                     f"substitution could draw (the other {len(drawable)} of the list's {len(first.names)} are left out)")
        figures = names_corpus_figures(tables, n_boot, seed, ddof, complete, floor_permutations)
        probes = "place_located" in first.columns
        place_like = ambiguous_names(profile, first.names, ambiguity) if probes and profile is not None else []
        for condition, table in tables.items():
            for key, statistic in place_frame_statistics(table, seed_ids(complete[condition]), place_like).items():
                figures[condition].add(key, statistic)
    out = {label: (summary_frame(figures, complete, reference, confidence, seed), title, reference is not None)}
    if profile is not None and corpus in NAME_CORPORA:  # the same corpus without its ambiguous names
        kept, dropped = unambiguous_tables(tables, profile, ambiguity)
        title = (f"{corpus_title(corpus, lower)}, without its {len(dropped)} ambiguous names "
                 f"({ambiguity.describe()}: {', '.join(dropped)})")
        kept_figures = names_corpus_figures(kept, n_boot, seed, ddof, complete, floor_permutations)
        out[corpus_label(corpus + UNAMBIGUOUS_SUFFIX, lower)] = (
            summary_frame(kept_figures, complete, reference, confidence, seed), title, reference is not None)
    return out


def run_study(sweep_dir: str | Path, output_dir: str | Path | None = None, baseline: str = "baseline",
              n_boot: int = STUDY_N_BOOT, census_boot: int = STUDY_CENSUS_BOOT, seed: int = 0, ddof: int = 0,
              condition_key: str = "condition", confidence: float = DEFAULT_CONFIDENCE,
              floor_permutations: int = 1000, name_profile: str | Path | None = None,
              ambiguity: AmbiguityRule = AmbiguityRule(), sweep_name: str | None = None,
              conditions: Sequence[str] | None = None) -> Path:
    """Write ``study.md``, ``study_<corpus>.csv`` for every corpus the runs were evaluated on, ``claims.csv``
    (the Holm-adjusted family), ``paper_claims.csv`` (the papers' claims, study/paper_claims.py) and
    ``goal.csv``. ``name_profile`` (default: ``<sweep dir>/name_profile.csv``
    when there is one) adds each names corpus scored without the names ``ambiguity`` marks; ``conditions``
    (default: all) keeps only those, so their family is the one a sweep of them alone gives. A study archive
    (``study.archive``) is read from a temporary copy restored from it."""
    sweep_dir = Path(sweep_dir)
    out = Path(output_dir) if output_dir else sweep_dir / "study"
    if name_profile is None and (sweep_dir / "name_profile.csv").is_file():
        name_profile = sweep_dir / "name_profile.csv"
    if is_archive(sweep_dir):
        with tempfile.TemporaryDirectory(prefix="study-") as restored:
            unpack(sweep_dir, restored, check_origin=False)  # read only: no rerun will look for them
            return run_study(restored, out, baseline, n_boot, census_boot, seed, ddof, condition_key, confidence,
                             floor_permutations, name_profile, ambiguity, sweep_name or sweep_dir.name, conditions)
    study = find_study(sweep_dir, condition_key)
    study = study.only(conditions, baseline, condition_key) if conditions is not None else study
    profile = read_profile(name_profile) if name_profile else None
    titles: dict[str, str] = {}
    if baseline not in study.runs:
        log.warning("no finished %s run: no differences", baseline)
    labels, not_evaluated = evaluation_labels(study.runs)
    commits = sorted({r.commit for rs in study.runs.values() for r in rs if r.commit})
    lines = ["# Mitigation study", "",
             f"Sweep: `{sweep_name or sweep_dir.name}`" + (f", code at commit {', '.join(commits)}" if commits else "")
             + platforms_note(study.runs) + ". Finished runs: " + ", ".join(
                 f"{c} (seeds {','.join(str(r.seed) for r in rs)}; best epochs "
                 f"{','.join(str(r.best_epoch) if r.best_epoch is not None else '?' for r in rs)})"
                 for c, rs in study.runs.items()) + ".", "",
             f"Means over seeds with {confidence:.0%} intervals. Pooled figures (ALL, female - male, the census "
             "gap, their differences from the baseline; nerbias/reporting/intervals.py): a name bootstrap "
             f"({n_boot} replicates; census {census_boot}; names drawn within groups, one draw for every condition) "
             "plus a t-based seed part (paired on seed numbers), so an interval covers names and seeds (*names like "
             "these*); with one seed it covers the names only, marked (names), and a figure that varies only with "
             "the seed has none (1 seed). Figures of one group (a group's accuracy and calibration, White - each "
             "race, their differences from the baseline; nerbias/reporting/group_effects.py): a group's accuracy "
             f"for *names like these* (a t on log(1 - accuracy), names + seeds) only from {MIN_NAMES} names a "
             "group and 1 or 3+ seeds, every other such figure for *these names* (a t over the seeds, marked (these "
             f"names)) where the group has the slots a seed the t needs ({MIN_GROUP_SLOTS[2]:,} with 2 seeds, "
             f"{MIN_GROUP_SLOTS[3]:,} with 3 or more; else no interval): with 15 names a group an accuracy that hangs "
             "on one or two rare low names (names that are also places) is covered far below 95 % by every interval "
             "tried, no names-like-these interval of a difference held in every shape, and few slots make a seed's "
             "value too lumpy for a t (docs/group-statistics.md). Each group minus the others carries intervals "
             "simultaneous over the groups (Bonferroni). The best - worst gap, its difference and its ratio to the baseline "
             "have no interval (a max - min, whose bootstrap is not consistent); the gap is bias-corrected (2 x gap "
             f"- bootstrap mean) and shown with its noise floor (mean / 95th percentile of the gap with names "
             f"permuted across groups, {floor_permutations} permutations) and the group-effect p below.", ""]
    effect_at = len(lines)
    if study.unfinished:
        lines += ["Unfinished (left out): " + ", ".join(f"`{p.name}`" for p in study.unfinished), ""]
    if not_evaluated:
        lines += ["Not evaluated (no run of the condition has the evaluation): " + "; ".join(
            f"{label}: {', '.join(conditions)}" for label, conditions in not_evaluated.items()), ""]
    frames: dict[str, pd.DataFrame] = {}
    has_baseline: dict[str, bool] = {}
    ordered = sorted(labels, key=lambda name: (re.sub("_lower$", "", name), name))
    pieces = [(label, {c: rs for c, rs in study.runs.items()
                       if all((r.path / "bias" / label / "metrics.json").is_file() for r in rs)})
              for label in ordered]
    # one corpus a process, the census's (the longest) first
    order = sorted(range(len(pieces)), key=lambda i: not pieces[i][0].startswith("census"))
    results = map_in_processes(corpus_frames, [(*pieces[i], baseline, n_boot, census_boot, seed, ddof, confidence,
                                                floor_permutations, profile, ambiguity) for i in order])
    for _, result in sorted(zip(order, results)):
        for label, (frame, title, with_baseline) in result.items():
            frames[label], has_baseline[label] = frame, with_baseline
            if title:
                titles[label] = title
    if not frames:
        raise NerbiasError(f"{sweep_dir}: the runs hold no finished bias evaluation")
    family = claims_family(frames, baseline, 1 - confidence)
    lines[effect_at:effect_at] = group_effect_section(frames)
    for label, frame in frames.items():
        corpus, lower = parse_corpus_label(label)
        lines += corpus_section(frame, titles.get(label) or corpus_title(corpus, lower),
                                baseline if has_baseline[label] else None)
    lines += claims_section(family, 1 - confidence)
    lines += replicate_resolution(family, {"names": n_boot, "census": census_boot}, 1 - confidence)
    margins = declared_margins()
    papers = paper_claims(frames, family, baseline, 1 - confidence, margins=margins)
    lines += paper_claims_section(papers, 1 - confidence, margins=margins)
    goal = goal_frame(frames, baseline, GAP)
    lines += goal_section(goal, baseline)
    context_goal = context_goal_frame(frames, baseline)
    lines += context_goal_section(context_goal, baseline)
    lines += diagnostics_section(study.runs)
    # Everything computed, then written, study.md last and an earlier one removed first: tables left by
    # a failed write never sit beside a study.md that looks final.
    path = out / "study.md"
    path.unlink(missing_ok=True)
    if out.is_dir():
        remove_orphans(out)  # a killed earlier write's temporary files
    tables = {f"study_{label}.csv": frame for label, frame in frames.items()}
    for name, table in {**tables, "claims.csv": family, "paper_claims.csv": papers, "goal.csv": goal,
                        "context_goal.csv": context_goal}.items():
        write_csv(out / name, table, float_format="%.17g")  # every digit: the figures are exact
    atomic_write_text(path, "\n".join(lines))
    return path


__all__ = ["CONLL_METRICS", "Figures", "Study", "StudyRun", "census_figures", "claims_section", "corpus_section",
           "display_table", "find_study", "names_corpus_figures", "run_study", "summary_frame"]
