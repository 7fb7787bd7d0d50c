"""The de-biasing diagnostics of a study's runs, one row a run: what normalising or de-biasing did to the
evaluation names' vectors before training and what training left of it (``debias_diagnostics.json``,
``nerbias.data.debias_diagnostics``). Runs that wrote none (they neither normalise nor de-bias) are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Protocol

import pandas as pd

from nerbias.data.debias_diagnostics import STAGES, summary_row
from nerbias.reporting.runs import read_debias_diagnostics
from nerbias.reporting.tables import markdown_table


class _Run(Protocol):  # a study run (``study.mitigation.StudyRun``)
    condition: str
    seed: int
    path: Path


def diagnostics_frame(runs: Mapping[str, Iterable[_Run]]) -> pd.DataFrame:
    """condition, seed, method, ``projection_<stage>``, ``<target>_accuracy_<stage>``, ``<target>_chance``."""
    rows = []
    for condition, condition_runs in runs.items():
        for run in condition_runs:
            diagnostics = read_debias_diagnostics(run.path)
            if diagnostics is not None:
                rows.append({"condition": condition, "seed": run.seed, **summary_row(diagnostics)})
    return pd.DataFrame(rows)


def diagnostics_section(runs: Mapping[str, Iterable[_Run]]) -> list[str]:
    """The Markdown of ``study.md``'s de-biasing section (empty when no run wrote diagnostics)."""
    frame = diagnostics_frame(runs)
    if frame.empty:
        return []
    stages = " / ".join(STAGES)
    titles = {"projection": f"projection on B ({stages})"}
    targets = [c[:-len("_chance")] for c in frame.columns if c.endswith("_chance")]
    table = frame[["condition", "seed", "method"]].copy()
    for measure in ["projection", *(f"{t}_accuracy" for t in targets)]:
        columns = [f"{measure}_{stage}" for stage in STAGES]
        title = titles.get(measure, f"{measure.replace('_', ' ')} ({stages})")
        table[title] = frame[columns].apply(
            lambda row: " / ".join("–" if pd.isna(v) else f"{v:.3f}" for v in row), axis=1)
    for target in targets:
        table[f"{target} chance"] = frame[f"{target}_chance"]
    return ["## De-biasing diagnostics", "",
            "The evaluation names' vectors before de-biasing (or normalising), in the table training starts "
            "from, and in the best checkpoint's table: mean norm of their unit vectors' projection on the bias "
            "subspace B, and leave-one-out accuracy of a linear classifier predicting each name's group from "
            "its vector (Gonen & Goldberg 2019; chance = the majority class's share; "
            "nerbias/data/debias_diagnostics.py).", "", markdown_table(table), ""]


__all__ = ["diagnostics_frame", "diagnostics_section"]
