"""The default recipe, chosen on dev data (issue 44; docs/training.md, "Choosing the default recipe").

``experiment=recipe_search`` trains a 2^4 factorial of four levers, two seeds each. Each lever's main effect
on dev F1 (points; the best checkpoint on the whole dev split) is the coefficient of an ordinary least
squares fit with each lever coded -1/2 (off) and +1/2 (on), the six two-lever interactions and the seed (with
jobs on several CPU kinds: seed and kind); its standard error comes from that fit's residuals. The rule,
declared before any run:

- a lever for quality (``locked_dropout``, ``grad_clip_1``, ``nadam``) joins the default when its effect is
  positive with a one-sided p below 0.10;
- ``patience_4`` (stopping sooner, for time) joins when the lower end of its effect's two-sided 90% interval
  is above ``-PATIENCE_MARGIN`` points (it costs at most that much dev F1).

Only dev F1 decides: every job scores test as any training does, but the search never reads it; the new
default's test F1 is read afterwards, over seeds 1-5.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nerbias.data.conll2003 import EXPECTED_SIZES
from nerbias.errors import NerbiasError
from nerbias.fileio import RESOLVED_CONFIG, RUN_DEFINING_KEYS, config_digest
from nerbias.reporting.runs import read_metrics, saved_config, select
from nerbias.study.runs import platform_kind

QUALITY_P = 0.10
PATIENCE_MARGIN = 0.15  # dev F1 points a shorter patience may cost (declared 2026-12-06, before any run)


@dataclass(frozen=True)
class Lever:
    name: str
    key: str          # the resolved config key
    on: Any           # its value when the lever is on
    off: Any          # today's value, when it is off


LEVERS = (Lever("locked_dropout", "model.locked_dropout", True, False),
          Lever("grad_clip_1", "trainer.grad_clip", 1.0, 5.0),
          Lever("nadam", "trainer.optimizer._target_", "torch.optim.NAdam", "torch.optim.Adam"),
          Lever("patience_4", "trainer.patience", 4, 8))
DECLARED_SEEDS = (1, 2)  # configs/experiment/recipe_search.yaml: every combination of the levers, each seed
# What a job trains with, from its saved config as written (a data folder's path from another machine's
# NERBIAS_DATA_DIR is the same setup): one for every job of the search but the levers and the seed.
SETUP_SECTIONS = tuple(key for key in RUN_DEFINING_KEYS if key != "seed")
NOT_SETUP = ("trainer.resume", "trainer.device",  # how a job starts, where it computes (its kind is recorded)
             "trainer.optimizer")  # the nadam lever's: its rate too; compared within each level of the lever


def _flat(node: Any, prefix: str) -> dict[str, Any]:
    if isinstance(node, dict) and node:
        return {key: value for name, child in node.items() for key, value in _flat(child, f"{prefix}.{name}").items()}
    return {prefix: node}


def _setup(config: dict) -> dict[str, Any]:
    """The job's setup sections flattened to dotted keys, without the levers and ``NOT_SETUP``."""
    flat = {key: value for section in SETUP_SECTIONS for key, value in _flat(config.get(section), section).items()}
    skip = NOT_SETUP + tuple(lever.key for lever in LEVERS)
    return {key: value for key, value in flat.items()
            if not any(key == prefix or key.startswith(prefix + ".") for prefix in skip)}


def read_search(sweep_dir: str | Path) -> pd.DataFrame:
    """One row per finished job of the search: its levers (0/1), seed, dev F1 (points), epochs, training
    seconds (the epochs' sentences over their measured speed), the epochs' seconds (their wall times of
    training and dev scoring, where the run recorded them; checkpoint writes, start-up and the final scoring
    are not in it: benchmarks/bench_recipe_time.py times a whole run), and the commit and CPU it ran on."""
    rows = []
    for job in sorted(Path(sweep_dir).iterdir()):
        if not (job / "metrics.json").is_file():
            continue
        if not (job / RESOLVED_CONFIG).is_file() and not (job / ".hydra" / "config.yaml").is_file():
            raise NerbiasError(f"{job}: a finished job without its saved config ({RESOLVED_CONFIG} or "
                               ".hydra/config.yaml): its levers are unknown")
        config, metrics = saved_config(job, resolve=True), read_metrics(job)
        levels = {}
        for lever in LEVERS:
            value = select(config, lever.key)
            if value not in (lever.on, lever.off):
                raise NerbiasError(f"{job}: {lever.key} is {value!r}, neither of the search's values "
                                   f"({lever.off!r}, {lever.on!r})")
            levels[lever.name] = int(value == lever.on)
        if not isinstance(select(config, "seed"), int):
            raise NerbiasError(f"{job}: its saved config has no integer seed ({select(config, 'seed')!r})")
        history = metrics.get("history") or []
        recorded = metrics.get("config_sha256")  # absent from runs older than it: not checked
        codes = metrics.get("codes") or [metrics.get("code") or {}]  # each attempt's code, when it changed
        sentences = select(config, "data.max_train_sentences") or EXPECTED_SIZES["train"][0]
        epoch_seconds = [h.get("epoch_seconds") for h in history]
        rows.append({"job": job.name, "seed": select(config, "seed"), **levels,
                     "dev_f1": 100 * metrics["metrics"]["dev_f1"], "epochs": len(history),
                     "train_seconds": sum(sentences / h["train_sentences_per_second"] for h in history
                                          if h.get("train_sentences_per_second")),
                     "epochs_seconds": sum(epoch_seconds) if history and None not in epoch_seconds else float("nan"),
                     "commits": tuple(sorted({str(code.get("commit")) for code in codes})),
                     "dirty": any(code.get("dirty") for code in codes),
                     "setup": _setup(saved_config(job) if (job / ".hydra" / "config.yaml").is_file() else config),
                     "optimizer": json.dumps(select(config, "trainer.optimizer"), sort_keys=True, default=str),
                     "config_matches": recorded is None or not (job / RESOLVED_CONFIG).is_file()
                     or recorded == config_digest(config),
                     # a job resumed on another kind is a block of its own (lever_effects)
                     "cpu": platform_kind(metrics.get("platforms") or [metrics.get("platform") or {}])})
    if not rows:
        raise NerbiasError(f"{sweep_dir}: no finished job (metrics.json) to read")
    return pd.DataFrame(rows)


def design_problems(runs: pd.DataFrame, seeds: tuple[int, ...] = DECLARED_SEEDS) -> list[str]:
    """What keeps ``runs`` from being the declared search: combinations missing or run twice, seeds outside
    the declaration, more than one commit or a job of uncommitted code or none recorded (any would mix into the
    levers' effects), jobs whose setup differs beyond the levers, results that do not belong to the config
    saved beside them. More than one CPU kind is allowed: the fit blocks on it (``lever_effects``)."""
    names = [lever.name for lever in LEVERS]
    problems = []
    counts = runs.groupby(["seed", *names]).size()
    twice = counts[counts > 1]
    if len(twice):
        problems.append(f"{len(twice)} combinations run more than once: "
                        + "; ".join(str(dict(zip(["seed", *names], key))) for key in twice.index))
    extra = sorted(set(runs["seed"]) - set(seeds))
    if extra:
        problems.append(f"seeds {extra} are not the declared {list(seeds)}")
    done = set(map(tuple, runs[["seed", *names]].itertuples(index=False)))
    missing = [(seed, *levels) for seed in seeds for levels in itertools.product((0, 1), repeat=len(names))
               if (seed, *levels) not in done]
    if missing:
        problems.append(f"{len(missing)} of the declared {len(seeds) * 2 ** len(names)} jobs have not finished")
    commits = sorted(set().union(*runs["commits"]) - {"None"})  # a job with none recorded: the next problem
    if len(commits) > 1:
        problems.append(f"the jobs ran at {len(commits)} commits: " + ", ".join(commits))
    unknown = runs.loc[runs["commits"].map(lambda c: "None" in c) | runs["dirty"], "job"].tolist()
    if unknown:
        problems.append(f"{len(unknown)} jobs ran code with no commit recorded or uncommitted changes: "
                        + ", ".join(unknown))
    if "setup" in runs:
        keys = sorted(set().union(*runs["setup"]))
        differing = [key for key in keys if len({repr(setup.get(key)) for setup in runs["setup"]}) > 1]
        differing += [f"trainer.optimizer (within nadam={level})" for level, group in runs.groupby("nadam")
                      if group["optimizer"].nunique() > 1]
        if differing:
            problems.append("the jobs differ beyond the levers in " + ", ".join(differing))
        stale = runs.loc[~runs["config_matches"], "job"].tolist()
        if stale:
            problems.append(f"{len(stale)} jobs' metrics.json belong to another config than the one saved beside "
                            "them (a rerun that has not finished?): " + ", ".join(stale))
    return problems


def lever_effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Each lever's main effect on dev F1 with its standard error, one-sided p, 90% interval and the
    declared decision; the same fit on training seconds, epochs and (where the runs recorded them) the epochs'
    seconds beside it. Jobs on more than one CPU kind (lent machines change between sessions) are blocked on
    (seed, kind) in place of the seed, so a kind's shift cannot pass as a lever; a kind aliased with a lever is
    an error (added 2026-12-07, before any effect of the search was read)."""
    import statsmodels.formula.api as smf

    names = [lever.name for lever in LEVERS]
    missing = [name for name in names if runs[name].nunique() < 2]
    if missing:
        raise NerbiasError(f"the search holds only one level of {', '.join(missing)}: no effect to estimate")
    coded = runs.assign(**{name: runs[name] - 0.5 for name in names})
    formula = " + ".join(names) + " + " + " + ".join(f"{a}:{b}" for i, a in enumerate(names) for b in names[i + 1:])
    kinds = "cpu" in runs and runs["cpu"].nunique() > 1
    coded["block"] = coded["seed"].astype(str) + (" | " + coded["cpu"] if kinds else "")
    formula += " + C(block)" if coded["block"].nunique() > 1 else ""
    timed = ["epochs_seconds"] if "epochs_seconds" in runs and runs["epochs_seconds"].notna().all() else []
    models = {column: smf.ols(f"{column} ~ {formula}", data=coded)
              for column in ("dev_f1", "train_seconds", "epochs", *timed)}
    exog = models["dev_f1"].exog
    if np.linalg.matrix_rank(exog) < exog.shape[1]:
        raise NerbiasError(f"the {len(runs)} runs do not separate every lever and pairwise interaction "
                           + ("from the CPU kinds they ran on (a kind aliased with a lever)" if kinds else
                              "(a combination is missing)") + ": no effect to estimate")
    fits = {column: model.fit() for column, model in models.items()}
    dev = fits["dev_f1"]
    if dev.df_resid < 1:
        raise NerbiasError(f"{len(runs)} runs leave no residual degrees of freedom for the effects' errors")
    low, high = dev.conf_int(alpha=0.10).loc[names].T.values
    rows = []
    for name, lo, hi in zip(names, low, high):
        effect, t = dev.params[name], dev.tvalues[name]
        one_sided = dev.pvalues[name] / 2 if t > 0 else 1 - dev.pvalues[name] / 2
        kept = lo > -PATIENCE_MARGIN if name == "patience_4" else (effect > 0 and one_sided < QUALITY_P)
        rows.append({"lever": name, "dev_f1_effect": effect, "se": dev.bse[name], "p_one_sided": one_sided,
                     "ci90_low": lo, "ci90_high": hi, "kept": kept,
                     "train_seconds_effect": fits["train_seconds"].params[name],
                     "epochs_effect": fits["epochs"].params[name],
                     **{f"{column}_effect": fits[column].params[name] for column in timed}})
    return pd.DataFrame(rows)


__all__ = ["DECLARED_SEEDS", "LEVERS", "PATIENCE_MARGIN", "QUALITY_P", "design_problems", "lever_effects", "read_search"]
