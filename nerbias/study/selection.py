"""Choosing Ghaddar et al.'s parts on dev data (issue 45; docs/context_training.md, "Choosing on dev data").

``experiment=context_selection`` trains each candidate of ``configs/selection/`` once (seed 1) and scores it on
CoNLL-03 dev F1 and the dev probe only. ``apply_rule`` is the rule declared there before any candidate ran,
against the study's baseline seeds (``BASELINE_REFERENCE``: their dev F1 and dev-probe recalls):

1. a candidate is *eligible* when its dev F1 is at least the lowest baseline seed's minus ``F1_MARGIN`` points;
2. of the adversarial candidates (λ), and (2b) of the freezing candidates, the eligible one with the highest
   dev-probe mean recall (ties: the smaller λ; ``freeze_words``) stands for its part;
3. a part *enters the combination* when it is eligible and its mean recall is above every baseline seed's;
4. two or more parts that enter are trained together once (``selection=combined``); the combination is the
   study's choice when it is eligible and its mean recall is above the best single part's, else the best single
   part is. The study runs the choice and the best single part (the eligible candidate with the highest mean
   recall; with fewer than two parts entering, it is the choice too).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from nerbias.errors import DataFormatError, NerbiasError
from nerbias.reporting.runs import read_metrics, saved_config, select

F1_MARGIN = 0.3  # dev F1 points: the goal's CoNLL margin
BASELINE_REFERENCE = Path(__file__).resolve().parents[2] / "results" / "context_selection" / "baseline_dev_probe.csv"
REFERENCE_COLUMNS = ("job", "seed", "dev_f1", "person_recall", "place_recall", "mean_recall")
COMBINED = "combined"
# Candidates that stand for one part: the part, and the tie-break order (first wins a tie).
PARTS = {"adversarial": ("adversarial_025", "adversarial_050", "adversarial_080"),
         "masking": ("mention_mask_030",), "both_roles": ("both_roles",),
         "freezing": ("freeze_words", "freeze_features")}


@dataclass(frozen=True)
class Selection:
    table: pd.DataFrame              # one row a candidate: its figures, eligible, stands_for_part, enters
    entering: tuple[str, ...]        # the candidates whose parts enter the combination
    best_single: str | None          # the eligible single part with the highest mean recall
    choice: str | None               # the study's condition: the combination or the best single part
    needs_combined: bool             # two or more parts enter and the combination has not run yet


def read_reference(path: str | Path = BASELINE_REFERENCE) -> pd.DataFrame:
    """The baseline seeds' dev F1 (points) and dev-probe recalls, one row a seed."""
    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except (OSError, pd.errors.ParserError) as error:
        raise DataFormatError(path, f"cannot be read as CSV ({error})", 1) from None
    missing = [c for c in REFERENCE_COLUMNS if c not in frame.columns]
    if missing or not len(frame):
        raise DataFormatError(path, f"missing columns {missing} or rows: not a baseline reference", 1)
    return frame


def read_candidates(sweep_dir: str | Path) -> pd.DataFrame:
    """One row per finished candidate job of the selection sweep: its condition, seed, dev F1 (points) and
    dev-probe recalls (``bias/dev_probe/metrics.json``)."""
    rows = []
    for job in sorted(Path(sweep_dir).iterdir()):
        if not (job / "metrics.json").is_file():
            continue
        probe = job / "bias" / "dev_probe" / "metrics.json"
        if not probe.is_file():
            raise NerbiasError(f"{job}: a finished candidate without its dev-probe evaluation ({probe})")
        config, metrics = saved_config(job, resolve=True), read_metrics(job)
        scores = read_metrics(probe.parent)["metrics"]
        rows.append({"candidate": select(config, "condition"), "seed": select(config, "seed"), "job": job.name,
                     "dev_f1": 100 * metrics["metrics"]["dev_f1"], "epochs": len(metrics.get("history") or []),
                     "person_recall": scores["dev_probe/person_recall"],
                     "place_recall": scores["dev_probe/place_recall"], "mean_recall": scores["dev_probe/mean_recall"],
                     "commit": (metrics.get("code") or {}).get("commit")})
    if not rows:
        raise NerbiasError(f"{sweep_dir}: no finished candidate (metrics.json) to read")
    frame = pd.DataFrame(rows)
    twice = frame[frame.duplicated("candidate", keep=False)]
    if len(twice):
        raise NerbiasError(f"{sweep_dir}: candidates run more than once: {sorted(set(twice['candidate']))}")
    return frame


def apply_rule(candidates: pd.DataFrame, reference: pd.DataFrame, declared: tuple[str, ...] | None = None
               ) -> Selection:
    """The declared rule (module docstring) on the finished ``candidates``. ``declared``: every single candidate
    the rule needs (default: all of ``PARTS``); a missing one is an error, not a smaller selection."""
    declared = declared or tuple(c for names in PARTS.values() for c in names)
    missing = sorted(set(declared) - set(candidates["candidate"]))
    if missing:
        raise NerbiasError(f"the selection lacks {len(missing)} declared candidates ({', '.join(missing)}): the rule "
                           "decides only on all of them")
    table = candidates.copy()
    table["eligible"] = table["dev_f1"] >= reference["dev_f1"].min() - F1_MARGIN
    bar = float(reference["mean_recall"].max())
    table["stands_for_part"] = False
    for part, names in PARTS.items():
        eligible = table[table["candidate"].isin(names) & table["eligible"]]
        if len(eligible):
            order = {name: i for i, name in enumerate(names)}
            best = eligible.assign(order=eligible["candidate"].map(order)).sort_values(
                ["mean_recall", "order"], ascending=[False, True]).iloc[0]["candidate"]
            table.loc[table["candidate"] == best, "stands_for_part"] = True
    table["enters"] = table["stands_for_part"] & (table["mean_recall"] > bar)
    singles = table[table["candidate"] != COMBINED]
    entering = tuple(singles.loc[singles["enters"], "candidate"])
    eligible_singles = singles[singles["eligible"]].sort_values("mean_recall", ascending=False)
    best_single = eligible_singles.iloc[0]["candidate"] if len(eligible_singles) else None
    combined = table[table["candidate"] == COMBINED]
    needs_combined = len(entering) >= 2 and not len(combined)
    choice = best_single
    if len(entering) >= 2 and len(combined):
        row = combined.iloc[0]
        best_recall = float(eligible_singles.iloc[0]["mean_recall"]) if best_single else float("-inf")
        if row["eligible"] and row["mean_recall"] > best_recall:
            choice = COMBINED
    if needs_combined:
        choice = None
    return Selection(table, entering, best_single, choice, needs_combined)


__all__ = ["BASELINE_REFERENCE", "COMBINED", "F1_MARGIN", "PARTS", "Selection", "apply_rule", "read_candidates",
           "read_reference"]
