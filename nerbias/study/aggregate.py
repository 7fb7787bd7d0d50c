"""Aggregate a sweep: every metric as mean ± std over seeds, per configuration.

A run is a Hydra run directory: ``.hydra/config.yaml``, ``.hydra/overrides.yaml`` and, once
finished, ``metrics.json`` ({"metrics": {...}, ...}), read by ``nerbias.reporting.runs``. Runs are grouped by every override
whose value differs between the runs (what the sweep varied), plus ``embeddings.kind``;
``seed`` is the replicate: each group reports n, mean and sample standard deviation
(n - 1) of every numeric metric.

An evaluation run of a checkpoint (``tagger.path=<train run>/checkpoints/best.pt``) takes
the settings and the seed of that training run, so an evaluation sweep over the models of a
training sweep groups by embeddings x casing and aggregates over the training seeds.
"""

from __future__ import annotations

import csv
import math
import os
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from nerbias.errors import NerbiasError
from nerbias.fileio import RESOLVED_CONFIG, atomic_path, atomic_write_text, remove_orphans
from nerbias.reporting.options import STUDY_CENSUS_BOOT, STUDY_N_BOOT
from nerbias.validation import POSITIVE_INTEGER
from nerbias.reporting.runs import (is_hydra_run, launch_directory, read_metrics, recorded_run_dir, saved_config,
                                    saved_overrides, select, value_text)

REPLICATE_KEY = "seed"
ALWAYS_SHOWN = ("embeddings.kind",)
# Overrides that do not change what a run computes: bookkeeping added to every sweep job, logging.
IGNORED_KEYS = {"sweep_id", "trainer.resume", "logger"}
IGNORED_PREFIXES = ("logger.", "hydra.")


class AggregateError(NerbiasError):
    """Nothing to aggregate: no runs, or no finished run."""


@dataclass
class SweepRun:
    """One run as a replicate of a configuration."""

    path: Path
    settings: dict[str, str]           # configuration that distinguishes the run, without the seed
    seed: str | None
    metrics: dict[str, float] | None   # None: no metrics.json yet (unfinished)
    problem: str | None = None         # why a run could not be read


@dataclass
class Group:
    values: tuple[str | None, ...]
    runs: list[SweepRun] = field(default_factory=list)


@dataclass
class Aggregate:
    keys: list[str]                    # the grouping keys, in order of first appearance
    groups: list[Group]
    metrics: list[str]                 # numeric metrics, in order of first appearance
    unfinished: list[SweepRun]
    unreadable: list[SweepRun]

    def rows(self) -> list[dict[str, Any]]:
        """One row per group and metric: keys..., metric, n, mean, std, seeds."""
        rows = []
        for group in self.groups:
            for metric in self.metrics:
                values = [r.metrics[metric] for r in group.runs if metric in r.metrics]
                if not values:
                    continue
                row: dict[str, Any] = dict(zip(self.keys, group.values))
                row.update(metric=metric, n=len(values), mean=statistics.fmean(values),
                           std=statistics.stdev(values) if len(values) > 1 else math.nan,
                           seeds=";".join(str(r.seed) for r in group.runs if metric in r.metrics))
                rows.append(row)
        return rows


def _natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Hydra run directories: each path itself if it is one, else every one below it."""
    found: dict[Path, None] = {}
    for given in paths:
        root = Path(given)
        if not root.exists():
            raise AggregateError(f"{root}: no such directory")
        if is_hydra_run(root):
            found[root.resolve()] = None
            continue
        for config in root.rglob("config.yaml"):
            if config.parent.name == ".hydra":
                found[config.parent.parent.resolve()] = None
    return sorted(found, key=_natural_key)


def _ignored(key: str) -> bool:
    return key in IGNORED_KEYS or key.startswith(IGNORED_PREFIXES)


def _settings(run_dir: Path) -> tuple[dict[str, Any], dict[str, str], str | None, dict[str, str]]:
    """(config, settings without the seed, seed, overrides) of a run directory. Which keys were set comes
    from ``.hydra/overrides.yaml``; their values and the seed from the run's own record
    (``config_resolved.yaml``, written when it started), when it has one: before the task wrote ``.hydra/``
    itself (after its checks), a later command that was refused, with another seed say, rewrote it."""
    config = saved_config(run_dir, resolve=(run_dir / RESOLVED_CONFIG).is_file())
    overrides = saved_overrides(run_dir)
    settings = {}
    for key in ALWAYS_SHOWN:
        value = select(config, key)
        if value is not None:
            settings[key] = value_text(value)
    for key, value in overrides.items():
        group_choice_shown = any(shown.startswith(f"{key}.") for shown in settings)  # embeddings= vs .kind
        if key != REPLICATE_KEY and not _ignored(key) and not group_choice_shown:
            value_there = select(config, key)
            scalar = value_there is not None and not isinstance(value_there, (dict, list))
            settings[key] = value_text(value_there) if scalar else value
    seed = select(config, REPLICATE_KEY)
    return config, settings, None if seed is None else value_text(seed), overrides


def _training_run(config: dict[str, Any], run_dir: Path) -> Path | None:
    """The training run directory of an evaluated checkpoint (``<run>/checkpoints/<name>.pt``), if any."""
    if select(config, "tagger.kind") != "checkpoint" or not isinstance(select(config, "tagger.path"), str):
        return None
    checkpoint = Path(select(config, "tagger.path"))
    if not checkpoint.is_absolute():  # relative to the directory evaluate.py was started in
        checkpoint = Path(launch_directory(run_dir) or ".") / checkpoint
    train_dir = checkpoint.parent.parent
    if is_hydra_run(train_dir) and train_dir.resolve() != run_dir.resolve():
        return train_dir
    return None


def load_sweep_run(run_dir: str | Path) -> SweepRun:
    """A run's settings, seed and numeric metrics; what is unreadable becomes its ``problem``."""
    run_dir = Path(run_dir)
    try:
        config, settings, seed, overrides = _settings(run_dir)
        train_dir = _training_run(config, run_dir)
        if train_dir is not None:  # an evaluation: the model's settings, replicated over its training seed
            _, train_settings, train_seed, _ = _settings(train_dir)
            own = {key: value for key, value in settings.items() if key != "tagger.path" and key not in ALWAYS_SHOWN}
            if REPLICATE_KEY in overrides:  # the evaluation's own seed (sampling) is a setting, not the replicate
                own["evaluate.seed"] = overrides[REPLICATE_KEY]
            settings, seed = {**train_settings, **own}, train_seed
    except (OSError, yaml.YAMLError) as error:
        return SweepRun(run_dir, {}, None, None, problem=f"unreadable .hydra files ({error})")
    try:
        payload = read_metrics(run_dir)
        if payload is None:
            return SweepRun(run_dir, settings, seed, None)
        raw = payload["metrics"]
        if not isinstance(raw, dict):
            raise TypeError("'metrics' is not an object")
    except (OSError, ValueError, KeyError, TypeError) as error:
        return SweepRun(run_dir, settings, seed, None, problem=f"unreadable metrics.json ({error})")
    metrics = {key: float(value) for key, value in raw.items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)}
    return SweepRun(run_dir, settings, seed, metrics)


def aggregate(runs: Sequence[SweepRun]) -> Aggregate:
    finished = [run for run in runs if run.metrics is not None]
    unfinished = [run for run in runs if run.metrics is None and run.problem is None]
    unreadable = [run for run in runs if run.problem is not None]
    if not runs:
        raise AggregateError("no runs to aggregate")
    if not finished:
        raise AggregateError(f"none of the {len(runs)} runs has finished (no readable metrics.json)")
    candidates = list(dict.fromkeys(key for run in finished for key in run.settings))
    keys = [key for key in candidates
            if key in ALWAYS_SHOWN or len({run.settings.get(key) for run in finished}) > 1]
    groups: dict[tuple, Group] = {}
    for run in finished:
        values = tuple(run.settings.get(key) for key in keys)
        groups.setdefault(values, Group(values)).runs.append(run)
    metrics = list(dict.fromkeys(metric for run in finished for metric in run.metrics))
    return Aggregate(keys, list(groups.values()), metrics, unfinished, unreadable)


def duplicate_seeds(result: Aggregate) -> list[str]:
    """Groups holding one seed twice (the same run given twice, or two sweeps of one config), one line each."""
    warnings = []
    for group in result.groups:
        seen: dict[str | None, Path] = {}
        for run in group.runs:
            if run.seed in seen:
                warnings.append(f"{_label(result.keys, group.values)}: seed {run.seed} in {seen[run.seed]} and "
                                f"{run.path}")
            seen.setdefault(run.seed, run.path)
    return warnings


def _label(keys: Sequence[str], values: Sequence[str | None]) -> str:
    return ", ".join(f"{key}={value}" for key, value in zip(keys, values)) or "all runs"


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return ""
    if math.isnan(row["std"]):
        return f"{row['mean']:.4f}" if row["n"] == 1 else "nan"
    return f"{row['mean']:.4f} ± {row['std']:.4f}"


def to_markdown(result: Aggregate) -> str:
    """A metrics x groups table of mean ± std, then the runs left out."""
    rows = result.rows()
    by_cell = {(tuple(row[k] for k in result.keys), row["metric"]): row for row in rows}
    n_runs = sum(len(group.runs) for group in result.groups)
    grouped_by = ", ".join(f"`{key}`" for key in result.keys) or "nothing (one configuration)"
    lines = ["# Sweep aggregate", "",
             (f"Finished runs: {n_runs}, in {len(result.groups)} group(s) by {grouped_by}; "
              f"mean ± sample std (n - 1) over `{REPLICATE_KEY}`."), ""]
    headers = ["metric"] + [f"{_label(result.keys, g.values)} (n={len(g.runs)}; {REPLICATE_KEY} "
                            f"{','.join(str(r.seed) for r in g.runs)})" for g in result.groups]
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "---|" * len(headers))
    for metric in result.metrics:
        cells = []
        for group in result.groups:
            row = by_cell.get((group.values, metric))
            cells.append(_cell(row) + (f" (n={row['n']})" if row and row["n"] != len(group.runs) else ""))
        lines.append("| " + " | ".join([metric] + cells) + " |")
    if result.unfinished:
        lines += ["", f"Unfinished (no metrics.json yet): {len(result.unfinished)}", ""]
        lines += [f"- `{run.path}`" for run in result.unfinished]
    if result.unreadable:
        lines += ["", f"Unreadable: {len(result.unreadable)}", ""]
        lines += [f"- `{run.path}`: {run.problem}" for run in result.unreadable]
    return "\n".join(lines) + "\n"


def write_aggregate_csv(path: Path, result: Aggregate) -> None:
    """``rows()`` as CSV in this file's own format, which ``fileio.write_csv`` would change: floats
    with every digit (repr) and the csv module's CRLF line ends."""
    columns = [*result.keys, "metric", "n", "mean", "std", "seeds"]
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in result.rows():
            writer.writerow({**row, "std": "" if math.isnan(row["std"]) else repr(row["std"]),
                             "mean": repr(row["mean"])})


def default_output_dir(paths: Sequence[str | Path]) -> Path:
    """The one directory given, else the deepest directory above all of them."""
    resolved = [str(Path(p).resolve()) for p in paths]
    return Path(resolved[0] if len(resolved) == 1 else os.path.commonpath(resolved))


def run(paths: Sequence[str | Path], output_dir: str | Path | None = None) -> tuple[Aggregate, Path, Path]:
    """Aggregate the runs under ``paths``; write aggregate.csv and aggregate.md into ``output_dir``."""
    run_dirs = find_run_dirs(paths)
    if not run_dirs:
        raise AggregateError(f"no Hydra run directories (with .hydra/config.yaml) under {', '.join(map(str, paths))}")
    for path in run_dirs:
        ran_in = recorded_run_dir(saved_config(path, resolve=True))
        if ran_in is not None and ran_in.name != path.name:
            raise AggregateError(f"{path}: its config says it ran in {ran_in}; a run copied or renamed would count "
                                 f"twice: move it back to {ran_in.name}/ or out of the sweep")
    result = aggregate([load_sweep_run(path) for path in run_dirs])
    twice = duplicate_seeds(result)
    if twice:
        raise AggregateError("one configuration's seed in two runs (each run counts once; keep one): " + "; ".join(twice))
    out = Path(output_dir) if output_dir is not None else default_output_dir(paths)
    csv_path, md_path = out / "aggregate.csv", out / "aggregate.md"
    md_path.unlink(missing_ok=True)  # written last: a killed rerun never leaves it beside a newer CSV
    remove_orphans(out, csv_path.name)
    remove_orphans(out, md_path.name)
    write_aggregate_csv(csv_path, result)
    atomic_write_text(md_path, to_markdown(result))
    return result, csv_path, md_path


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="aggregate.py", description=__doc__.split("\n\n")[0],
        epilog="Example: python aggregate.py logs/train/multiruns/2025-01-31_12-00-00")
    parser.add_argument("paths", nargs="+", help="a sweep directory, or run directories (searched recursively)")
    parser.add_argument("-o", "--output-dir", help="where aggregate.csv and aggregate.md go (default: the one "
                                                   "directory given, else the common parent of all)")
    study = parser.add_argument_group("mitigation study (experiment=mitigation_study; nerbias/study/mitigation.py)")
    study.add_argument("--study", action="store_true",
                       help="one table per corpus with 95%% intervals (names and seeds resampled) and paired "
                            "differences from the baseline condition: study.md and study_<corpus>.csv "
                            "(default output: <sweep dir>/study)")
    study.add_argument("--baseline", default="baseline", help="the condition differences are taken from")
    study.add_argument("--condition-key", default="condition", help="config key naming each run's condition")
    study.add_argument("--conditions", help="comma-separated conditions the study keeps, the baseline among them "
                            "(default: every condition in the sweep); the claims family is theirs alone")
    study.add_argument("--n-boot", type=int, default=STUDY_N_BOOT, help="bootstrap replicates (names corpora)")
    study.add_argument("--census-boot", type=int, default=STUDY_CENSUS_BOOT, help="bootstrap replicates (census)")
    study.add_argument("--std-ddof", type=int, default=0, choices=(0, 1),
                       help="ddof of the median-confidence spread: 0 (population) or 1 (sample)")
    study.add_argument("--name-profile", help="name_profile.csv (python -m nerbias.bias.name_profile; default: "
                                              "<sweep dir>/name_profile.csv if there): each names corpus is also "
                                              "scored without its ambiguous names")
    study.add_argument("--ambiguity-min-typed", type=int, default=1,
                       help="ambiguous: typed LOC/ORG/MISC at least this often in CoNLL-03 train (default: 1) ...")
    study.add_argument("--ambiguity-casing", choices=("exact", "lower"), default="exact",
                       help="... counting tokens in exact case or lower-cased")
    study.add_argument("--no-gazetteer", action="store_true", help="... (default: or a gazetteer place)")
    args = parser.parse_args(argv)
    if args.study:
        from nerbias.study.mitigation import run_study  # only the study needs scipy.sparse and the census reader
        if len(args.paths) != 1:
            parser.error("--study takes one sweep directory")
        if args.conditions is not None and not args.conditions.strip(", "):
            parser.error("--conditions names no condition")
        for option in ("n_boot", "census_boot"):  # before any file is read
            if not POSITIVE_INTEGER.allowed(getattr(args, option)):
                parser.error(f"--{option.replace('_', '-')} {getattr(args, option)}: must be "
                             f"{POSITIVE_INTEGER.description}")
        from nerbias.data.ambiguity import AmbiguityRule
        try:
            rule = AmbiguityRule(min_typed=args.ambiguity_min_typed, casing=args.ambiguity_casing,
                                 gazetteer=not args.no_gazetteer)
            path = run_study(args.paths[0], args.output_dir, baseline=args.baseline, n_boot=args.n_boot,
                             census_boot=args.census_boot, ddof=args.std_ddof, condition_key=args.condition_key,
                             name_profile=args.name_profile, ambiguity=rule,
                             conditions=None if args.conditions is None else
                             [c.strip() for c in args.conditions.split(",") if c.strip()])
        except NerbiasError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(path.read_text(encoding="utf-8"), end="")
        print(f"wrote {path} and its study_<corpus>.csv", file=sys.stderr)
        return 0
    try:
        result, csv_path, md_path = run(args.paths, args.output_dir)
    except AggregateError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for run_ in result.unfinished:
        print(f"unfinished (no metrics.json): {run_.path}", file=sys.stderr)
    for run_ in result.unreadable:
        print(f"skipped: {run_.path}: {run_.problem}", file=sys.stderr)
    print(md_path.read_text(encoding="utf-8"), end="")
    print(f"wrote {csv_path} and {md_path}", file=sys.stderr)
    return 0


def study_main(argv: Sequence[str] | None = None) -> int:
    """``python study.py <sweep dir> [options]``: the mitigation study, the same as ``aggregate.py --study``."""
    return main(["--study", *(sys.argv[1:] if argv is None else argv)])
