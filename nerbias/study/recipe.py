"""The default recipe, chosen on dev data (issue 44; docs/training.md, "Choosing the default recipe").

``experiment=recipe_search`` trains a 2^4 factorial of four levers, two seeds each. Each lever's main effect
on dev F1 (points; the best checkpoint on the whole dev split) is the coefficient of an ordinary least
squares fit with each lever coded -1/2 (off) and +1/2 (on), the six two-lever interactions and the seed; its
standard error comes from that fit's residuals. The rule, declared before any run:

- a lever for quality (``locked_dropout``, ``grad_clip_1``, ``nadam``) joins the default when its effect is
  positive with a one-sided p below 0.10;
- ``patience_4`` (stopping sooner, for time) joins when the lower end of its effect's two-sided 90% interval
  is above ``-PATIENCE_MARGIN`` points (it costs at most that much dev F1).

Only dev F1 decides; the test split is read once, by the new default's five-seed run afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from nerbias.errors import NerbiasError
from nerbias.reporting.runs import read_metrics, saved_config, select

QUALITY_P = 0.10
PATIENCE_MARGIN = 0.15  # dev F1 points a shorter patience may cost (declared 2026-12-06, before any run)


@dataclass(frozen=True)
class Lever:
    name: str
    key: str          # the resolved config key
    on: Any           # its value when the lever is on (anything else: off)


LEVERS = (Lever("locked_dropout", "model.locked_dropout", True), Lever("grad_clip_1", "trainer.grad_clip", 1.0),
          Lever("nadam", "trainer.optimizer._target_", "torch.optim.NAdam"), Lever("patience_4", "trainer.patience", 4))


def read_search(sweep_dir: str | Path) -> pd.DataFrame:
    """One row per finished job of the search: its levers (0/1), seed, dev F1 (points), epochs and
    training seconds (the epochs' sentences over their measured speed)."""
    rows = []
    for job in sorted(Path(sweep_dir).iterdir()):
        if not (job / "metrics.json").is_file():
            continue
        config, metrics = saved_config(job, resolve=True), read_metrics(job)
        history = metrics.get("history") or []
        sentences = select(config, "data.max_train_sentences") or 14041
        rows.append({"job": job.name, "seed": select(config, "seed"),
                     **{lever.name: int(select(config, lever.key) == lever.on) for lever in LEVERS},
                     "dev_f1": 100 * metrics["metrics"]["dev_f1"], "epochs": len(history),
                     "train_seconds": sum(sentences / h["train_sentences_per_second"] for h in history
                                          if h.get("train_sentences_per_second"))})
    if not rows:
        raise NerbiasError(f"{sweep_dir}: no finished job (metrics.json) to read")
    return pd.DataFrame(rows)


def lever_effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Each lever's main effect on dev F1 with its standard error, one-sided p, 90% interval and the
    declared decision; the same fit on training seconds and epochs beside it."""
    import statsmodels.formula.api as smf

    names = [lever.name for lever in LEVERS]
    missing = [name for name in names if runs[name].nunique() < 2]
    if missing:
        raise NerbiasError(f"the search holds only one level of {', '.join(missing)}: no effect to estimate")
    coded = runs.assign(**{name: runs[name] - 0.5 for name in names})
    formula = " + ".join(names) + " + " + " + ".join(f"{a}:{b}" for i, a in enumerate(names) for b in names[i + 1:])
    formula += " + C(seed)" if runs["seed"].nunique() > 1 else ""
    fits = {column: smf.ols(f"{column} ~ {formula}", data=coded).fit() for column in ("dev_f1", "train_seconds", "epochs")}
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
                     "epochs_effect": fits["epochs"].params[name]})
    return pd.DataFrame(rows)


__all__ = ["LEVERS", "PATIENCE_MARGIN", "QUALITY_P", "lever_effects", "read_search"]
