"""A mitigation study read back: one table per corpus over training conditions x seeds, with intervals.

A study is a sweep of training runs with bias evaluations (``experiment=mitigation_study``): each job
directory holds the resolved config (its ``condition`` and ``seed``), ``metrics.json`` (CoNLL-03
``test_f1`` and ``test_lower_f1``) and ``bias/<corpus>[_lower]/`` evaluations.

Every figure is the mean over a condition's seeds; its 95 % interval is a percentile bootstrap that
resamples names and seeds together, as ``reporting.uncertainty`` does for one model:

- **names corpora** (Winogender, In-Situ): a replicate draws the names of every group with replacement,
  within the group, and draws each condition's seeds with replacement; a group's accuracy is the
  slot-weighted accuracy of the drawn names, averaged over the drawn seeds. ALL, the best - worst group
  gap, the female - male gap (female names pooled against male names) and the spread of median
  confidence (the standard deviation over all names of each name's median confidence, Table 5 of
  Mishra et al.; ``ddof`` as ``metrics.std_ddof``) are computed from those, replicate by replicate.
  The OOV accuracy (one name) varies with the seeds only.
- **census** (Mehrabi et al.): the weighted type-1 error of each year and sex, averaged over the
  templates, then over the years; the replicate draws the (name, sex) units of each sex with
  replacement (each keeping all its years) and the seeds.
- **CoNLL-03 F1**: the seeds only.

**Differences from the baseline are paired:** one name draw per replicate serves every condition, so a
condition minus the baseline is taken on the same names, replicate by replicate; seeds are drawn
independently per condition (different conditions never share a trained model). With 2 or 3 seeds the
seed part of an interval is coarse; the names part is what the many names make precise.
"""

from __future__ import annotations

import logging
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from nerbias.bias import census
from nerbias.bias.names import load_names
from nerbias.bias.types import corpus_title
from nerbias.errors import NerbiasError
from nerbias.fileio import RESOLVED_CONFIG, atomic_write_text, write_csv
from nerbias.reporting.runs import Run, is_hydra_run, load_run, read_metrics, saved_config, select
from nerbias.reporting.tables import markdown_table
from nerbias.reporting.uncertainty import DEFAULT_CONFIDENCE, NameTable, percentile_interval

log = logging.getLogger(__name__)

CONLL_METRICS = {"test_f1": "CoNLL test F1", "test_lower_f1": "CoNLL test F1 (lower-cased)"}
NAME_CORPORA = ("winogender", "insitu")
CENSUS_BOOT = 500   # the census draws are (units x replicates) matrices: ~30k units a sex


@dataclass
class StudyRun:
    condition: str
    seed: int
    path: Path
    conll: dict[str, float]


@dataclass
class Study:
    runs: dict[str, list[StudyRun]]          # condition -> finished runs, seed order
    unfinished: list[Path] = field(default_factory=list)


def find_study(sweep_dir: str | Path, condition_key: str = "condition") -> Study:
    """The finished training runs under ``sweep_dir``, by condition (order of first appearance)."""
    sweep_dir = Path(sweep_dir)
    runs: dict[str, list[StudyRun]] = {}
    unfinished = []
    for path in sorted(p for p in sweep_dir.iterdir() if p.is_dir()):
        if not ((path / RESOLVED_CONFIG).is_file() or is_hydra_run(path)):
            continue  # not a run directory (e.g. the study's own output)
        config = saved_config(path, resolve=True)
        condition = select(config, condition_key)
        if condition is None:
            continue
        metrics = read_metrics(path)
        if metrics is None or "test_f1" not in metrics.get("metrics", {}):
            unfinished.append(path)
            continue
        conll = {key: float(metrics["metrics"][key]) for key in CONLL_METRICS if key in metrics["metrics"]}
        runs.setdefault(str(condition), []).append(StudyRun(str(condition), int(select(config, "seed")), path, conll))
    if not runs:
        raise NerbiasError(f"{sweep_dir}: no finished run with a '{condition_key}' in its config")
    for members in runs.values():
        members.sort(key=lambda run: run.seed)
    return Study(runs, unfinished)


def _mean_over_drawn_seeds(per_seed: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """(S, B) statistic of each seed in each replicate -> (B,): its mean over the replicate's seeds."""
    return np.take_along_axis(per_seed.T, seeds, axis=1).mean(1)


def _seed_draws(rng: np.random.Generator, n_seeds: int, n_boot: int) -> np.ndarray:
    return rng.integers(0, n_seeds, size=(n_boot, n_seeds))


@dataclass
class Estimates:
    """Point estimates and bootstrap replicates of named statistics for one condition."""

    point: dict[str, float] = field(default_factory=dict)
    replicates: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, key: str, point: float, replicates: np.ndarray) -> None:
        self.point[key], self.replicates[key] = float(point), np.asarray(replicates, dtype=np.float64)


def _conll(estimates: Estimates, runs: Sequence[StudyRun], seeds: np.ndarray) -> None:
    for key in CONLL_METRICS:
        values = np.array([run.conll.get(key, np.nan) for run in runs])
        estimates.add(key, values.mean(), values[seeds].mean(1))


def _name_statistics(table: NameTable, members: dict[str, np.ndarray], draws: dict[str, np.ndarray],
                     seeds: np.ndarray, ddof: int) -> Estimates:
    """Group accuracies, ALL, gaps, OOV and the median-confidence spread of one condition."""
    out = Estimates()
    rec, sen = table.recognised, table.sentences                       # (S, N)
    pooled: dict[str, list[np.ndarray]] = {"ALL": [], "Female": [], "Male": []}  # per-seed (rec, sen) sums
    accuracy_point, accuracy_boot = {}, {}
    for group, idx in members.items():
        drawn = draws[group]                                          # (B, n)
        r, s = rec[:, drawn].sum(-1), sen[:, drawn].sum(-1)            # (S, B)
        accuracy_point[group] = float((rec[:, idx].sum(1) / sen[:, idx].sum(1)).mean())
        accuracy_boot[group] = _mean_over_drawn_seeds(r / s, seeds)
        out.add(group, accuracy_point[group], accuracy_boot[group])
        gender = "Female" if group.endswith("Female") else "Male" if group.endswith("Male") else None
        for key in ("ALL", gender):
            if key:
                pooled[key].append((idx, r, s))
    for key, parts in pooled.items():
        if parts:
            idx = np.concatenate([p[0] for p in parts])
            r, s = sum(p[1] for p in parts), sum(p[2] for p in parts)
            out.add(key, (rec[:, idx].sum(1) / sen[:, idx].sum(1)).mean(), _mean_over_drawn_seeds(r / s, seeds))
    boot = np.column_stack([accuracy_boot[g] for g in members])
    point = np.array([accuracy_point[g] for g in members])
    out.add("best_worst_gap", point.max() - point.min(), boot.max(1) - boot.min(1))
    if "Female" in out.point and "Male" in out.point:
        out.add("female_male_gap", out.point["Female"] - out.point["Male"],
                out.replicates["Female"] - out.replicates["Male"])
    if "accuracy" in table.oov:
        oov = table.oov["accuracy"]
        out.add("OOV", oov.mean(), oov[seeds].mean(1))
    if "conf_median" in table.columns:
        medians = table.values("conf_median")                          # (S, N), NaN: never recognised
        every = np.concatenate(list(members.values()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # names never recognised have no confidence
            by_name = np.nanmean(medians, axis=0)[every]
            drawn_medians = np.nanmean(medians[seeds], axis=1)         # (B, N): each name over the drawn seeds
            all_draws = np.concatenate([draws[g] for g in members], axis=1)
            spread = np.nanstd(np.take_along_axis(drawn_medians, all_draws, axis=1), axis=1, ddof=ddof)
            out.add("median_confidence_std", np.nanstd(by_name, ddof=ddof), spread)
    return out


def names_corpus_estimates(tables: dict[str, NameTable], n_boot: int, seed: int, ddof: int,
                           runs: dict[str, list[StudyRun]]) -> dict[str, Estimates]:
    first = next(iter(tables.values()))
    for condition, table in tables.items():
        if table.names != first.names:
            raise NerbiasError(f"condition {condition} was scored on other names than {next(iter(tables))}")
    groups = list(dict.fromkeys(first.groups))
    members = {g: np.flatnonzero(np.asarray(first.groups, dtype=object) == g) for g in groups}
    rng = np.random.default_rng(seed)
    draws = {g: idx[rng.integers(0, len(idx), size=(n_boot, len(idx)))] for g, idx in members.items()}
    out = {}
    for condition, table in tables.items():
        seeds = _seed_draws(rng, table.n_seeds, n_boot)
        out[condition] = _name_statistics(table, members, draws, seeds, ddof)
        _conll(out[condition], runs[condition], seeds)
    return out


# ----------------------------------------------------------------------------------------------
# Census


def _census_units(run: Run) -> tuple[pd.DataFrame, dict[str, sparse.csr_matrix], dict[str, list[str]]]:
    """The SSA rows the run scored, as one (years x units) count matrix per sex; units = names."""
    ssa_path, config = run.setting("corpus.ssa"), run.config
    errors = run.tables["census_errors"]
    years = sorted(int(y) for y in errors["year"].unique())
    table = census.load_ssa(ssa_path, years=years, progress=False)
    subset = str(select(config, "corpus.names", "all") or "all")
    if subset != "all":
        excluded = [n for path in (select(config, "corpus.pool_exclude") or [None]) for n in load_names(path).names]
        table = census.select_names(table, subset, excluded)
    row_of_year = np.searchsorted(np.asarray(years), table.year)
    matrices, unit_names = {}, {}
    for code, sex in enumerate(census.SEXES):
        rows = table.sex == code
        used, column = np.unique(table.name[rows], return_inverse=True)
        matrices[sex] = sparse.csr_matrix((table.count[rows].astype(np.float64), (row_of_year[rows], column)),
                                          shape=(len(years), len(used)))
        unit_names[sex] = table.names[used].tolist()
    return errors, matrices, unit_names


def _type1_by_year(run: Run, matrices, unit_names, errors: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each unit's type-1 error averaged over the run's templates, per sex; checked against the run's
    own census_errors.csv (mean over templates of type1_w, every year and sex)."""
    labels = run.tables.get("census_labels")
    if labels is None:
        raise NerbiasError(f"{run.path}: no census_labels.csv (per-name labels)")
    wrong = (labels["label"].fillna("") != census.PERSON).astype(np.float64)
    mean_wrong = wrong.groupby(labels["name"]).mean()
    out = {}
    for sex, matrix in matrices.items():
        error = mean_wrong.reindex(unit_names[sex]).to_numpy()
        if np.isnan(error).any():
            raise NerbiasError(f"{run.path}: census_labels.csv lacks {int(np.isnan(error).sum())} scored names")
        out[sex] = error
        rate = (matrix @ error) / np.asarray(matrix.sum(1)).ravel()
        saved = errors[errors["gender"] == sex].groupby("year")["type1_w"].mean().to_numpy()
        if np.abs(rate - saved).max() > 1e-4:  # the CSV keeps 6 significant digits
            raise NerbiasError(f"{run.path}: labels do not reproduce census_errors.csv (type1_w)")
    return out


def census_estimates(study: Study, label: str, n_boot: int, seed: int) -> dict[str, Estimates]:
    rng = np.random.default_rng(seed)
    units = None
    weights: dict[str, np.ndarray] = {}
    out = {}
    for condition, runs in study.runs.items():
        per_seed: dict[str, list[np.ndarray]] = {"F": [], "M": []}
        point: dict[str, list[float]] = {"F": [], "M": []}
        for member in runs:
            run = load_run(member.path / "bias" / label)
            if units is None:
                errors, matrices, names = _census_units(run)
                units = (matrices, names)
                for sex, matrix in matrices.items():  # one draw of units for every condition: paired
                    n = matrix.shape[1]
                    weights[sex] = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).T.astype(np.float64)
            matrices, names = units
            errors = run.tables["census_errors"]
            wrong = _type1_by_year(run, matrices, names, errors)
            for sex, matrix in matrices.items():
                with np.errstate(invalid="ignore", divide="ignore"):
                    numerator = matrix.multiply(wrong[sex][None, :]).tocsr() @ weights[sex]
                    rates = numerator / (matrix @ weights[sex])      # (years, B); NaN: no unit drawn that year
                per_seed[sex].append(np.nanmean(rates, axis=0))
                point[sex].append(float(np.mean((matrix @ wrong[sex]) / np.asarray(matrix.sum(1)).ravel())))
        seeds = _seed_draws(rng, len(runs), n_boot)
        estimates = Estimates()
        female, male = (_mean_over_drawn_seeds(np.vstack(per_seed[s]), seeds) for s in ("F", "M"))
        estimates.add("female_type1_w", np.mean(point["F"]), female)
        estimates.add("male_type1_w", np.mean(point["M"]), male)
        estimates.add("female_male_type1_w_gap", np.mean(point["F"]) - np.mean(point["M"]), female - male)
        _conll(estimates, runs, seeds)
        out[condition] = estimates
    return out


# ----------------------------------------------------------------------------------------------
# Tables


def summary_frame(estimates: dict[str, Estimates], runs: dict[str, list[StudyRun]], baseline: str | None,
                  confidence: float = DEFAULT_CONFIDENCE) -> pd.DataFrame:
    """Long format: condition, metric, seeds, value, ci_low, ci_high and (against the baseline)
    diff, diff_low, diff_high; for the best - worst gap also ratio (condition / baseline) and its interval."""
    rows = []
    base = estimates.get(baseline) if baseline else None
    for condition, est in estimates.items():
        for metric, value in est.point.items():
            low, high = percentile_interval(est.replicates[metric], confidence)
            row = {"condition": condition, "metric": metric, "seeds": ";".join(str(r.seed) for r in runs[condition]),
                   "value": value, "ci_low": float(low), "ci_high": float(high)}
            if base is not None and metric in base.point and condition != baseline:
                diff = est.replicates[metric] - base.replicates[metric]
                d_low, d_high = percentile_interval(diff, confidence)
                row.update(diff=value - base.point[metric], diff_low=float(d_low), diff_high=float(d_high))
                if metric == "best_worst_gap" and base.point[metric] > 0:
                    with np.errstate(all="ignore"):
                        r_low, r_high = percentile_interval(est.replicates[metric] / base.replicates[metric],
                                                            confidence)
                    row.update(ratio=value / base.point[metric], ratio_low=float(r_low), ratio_high=float(r_high))
            rows.append(row)
    return pd.DataFrame(rows)


def _cell(value: float, low: float, high: float, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


SUMMARY_COLUMNS = {"test_f1": "CoNLL F1", "test_lower_f1": "CoNLL F1 lower-cased", "ALL": "ALL", "OOV": "OOV",
                   "best_worst_gap": "best - worst group", "female_male_gap": "female - male",
                   "median_confidence_std": "std of median confidence",
                   "female_type1_w": "female type-1 (w)", "male_type1_w": "male type-1 (w)",
                   "female_male_type1_w_gap": "female - male type-1 (w)"}


def display_table(frame: pd.DataFrame, metrics: Sequence[str], value: str = "value", digits: int = 3,
                  titles: dict[str, str] | None = None) -> pd.DataFrame:
    """Conditions x ``metrics`` as "value [low, high]" (``value``: value, diff or ratio), with the seeds."""
    titles = titles or {}
    frame = frame[frame[value].notna()] if value in frame else frame.iloc[0:0]
    conditions = list(dict.fromkeys(frame["condition"]))
    present = [m for m in metrics if m in set(frame["metric"])]
    cells = {(row["condition"], row["metric"]): _cell(row[value], row[f"{value}_low"], row[f"{value}_high"], digits)
             for row in frame.to_dict("records")}
    seeds = frame.drop_duplicates("condition").set_index("condition")["seeds"] if len(frame) else {}
    rows = [{"condition": c, "seeds": seeds[c], **{titles.get(m, m): cells.get((c, m), "–") for m in present}}
            for c in conditions]
    return pd.DataFrame(rows, columns=["condition", "seeds", *[titles.get(m, m) for m in present]])


def _value_column(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.rename(columns={"ci_low": "value_low", "ci_high": "value_high"})


def corpus_section(frame: pd.DataFrame, title: str, baseline: str | None) -> list[str]:
    """The Markdown of one corpus: summary, per-group accuracy, differences from the baseline."""
    frame = _value_column(frame)
    summary = [m for m in SUMMARY_COLUMNS if m in set(frame["metric"])]
    groups = [m for m in dict.fromkeys(frame["metric"]) if m not in SUMMARY_COLUMNS and m not in ("Female", "Male")]
    lines = [f"## {title}", "", markdown_table(display_table(frame, summary, titles=SUMMARY_COLUMNS)), ""]
    if groups:
        lines += ["Accuracy per group:", "", markdown_table(display_table(frame, groups)), ""]
    if baseline is not None and "diff" in frame and frame["diff"].notna().any():
        diffs = display_table(frame, summary, value="diff", titles=SUMMARY_COLUMNS)
        if "ratio" in frame and frame["ratio"].notna().any():
            ratio = display_table(frame, ["best_worst_gap"], value="ratio")
            diffs["best - worst, ratio to baseline"] = ratio.set_index("condition").reindex(
                diffs["condition"])["best_worst_gap"].fillna("–").to_list()
        lines += [f"Difference from `{baseline}` (paired on the names):", "", markdown_table(diffs), ""]
    return lines


def run_study(sweep_dir: str | Path, output_dir: str | Path | None = None, baseline: str = "baseline",
              n_boot: int = 2000, census_boot: int = CENSUS_BOOT, seed: int = 0, ddof: int = 0,
              condition_key: str = "condition") -> Path:
    """Write ``study.md`` and ``study_<corpus>.csv`` for every corpus the runs were evaluated on."""
    study = find_study(sweep_dir, condition_key)
    out = Path(output_dir) if output_dir else Path(sweep_dir) / "study"
    if baseline not in study.runs:
        log.warning("no finished %s run: no differences", baseline)
    first = study.runs[next(iter(study.runs))][0]
    labels = sorted(p.name for p in (first.path / "bias").iterdir() if (p / "metrics.json").is_file()) \
        if (first.path / "bias").is_dir() else []
    lines = ["# Mitigation study", "",
             f"Sweep: `{sweep_dir}`. Finished runs: " + ", ".join(
                 f"{c} (seeds {','.join(str(r.seed) for r in rs)})" for c, rs in study.runs.items()) + ".",
             f"Means over seeds; 95 % percentile bootstrap intervals, names and seeds resampled ({n_boot} "
             f"replicates; census {census_boot}); differences from `{baseline}` paired on the names "
             "(nerbias/reporting/study.py).", ""]
    if study.unfinished:
        lines += ["Unfinished (left out): " + ", ".join(f"`{p.name}`" for p in study.unfinished), ""]
    written = []
    for label in sorted(labels, key=lambda name: (re.sub("_lower$", "", name), name)):
        complete = {c: rs for c, rs in study.runs.items()
                    if all((r.path / "bias" / label / "metrics.json").is_file() for r in rs)}
        if label.startswith("census"):
            estimates = census_estimates(Study(complete), label, census_boot, seed)
        else:
            tables = {c: NameTable.from_frames([load_run(r.path / "bias" / label).per_name for r in rs])
                      for c, rs in complete.items()}
            estimates = names_corpus_estimates(tables, n_boot, seed, ddof, complete)
        frame = summary_frame(estimates, complete, baseline if baseline in complete else None)
        write_csv(out / f"study_{label}.csv", frame, float_format="%.17g")  # every digit: the figures are exact
        written.append(label)
        corpus, lower = (label[:-6], True) if label.endswith("_lower") else (label, False)
        lines += corpus_section(frame, corpus_title(corpus, lower), baseline if baseline in complete else None)
    if not written:
        raise NerbiasError(f"{sweep_dir}: the runs hold no finished bias evaluation")
    path = out / "study.md"
    atomic_write_text(path, "\n".join(lines))
    return path


__all__ = ["CONLL_METRICS", "Estimates", "Study", "StudyRun", "census_estimates", "corpus_section", "display_table", "find_study",
           "names_corpus_estimates", "run_study", "summary_frame"]
