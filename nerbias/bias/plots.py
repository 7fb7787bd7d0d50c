"""The figures an evaluation run writes: name-accuracy ECDFs by group and census error curves.

Figures are drawn on a ``Figure`` with the Agg canvas (no pyplot global state) and written
atomically.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from nerbias.bias.census import TEMPLATES
from nerbias.bias.names import NameList
from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_path


def plot_ecdf(per_name: pd.DataFrame, names: NameList, column: str, path: str | Path, by: str = "group",
              title: str | None = None) -> Path:
    """ECDF of a per-name column for each group (or gender / race), OOV name as a vertical line."""
    from matplotlib.figure import Figure

    frame = per_name[per_name["name"] != names.oov].copy()
    if by == "group":
        frame["facet"] = frame["group"]
    else:
        lookup = names.gender_of if by == "gender" else names.race_of
        if not lookup:
            raise ValueError(f"the name list has no {by} column")
        frame["facet"] = frame["name"].map(lookup)
    figure = Figure(figsize=(7, 4.5))
    axes = figure.subplots()
    for facet, part in frame.groupby("facet", sort=False):
        values = np.sort(part[column].dropna().to_numpy())
        if len(values):
            axes.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=str(facet))
    oov = per_name.loc[per_name["name"] == names.oov, column]
    if len(oov) and not np.isnan(oov.iloc[0]):
        axes.axvline(float(oov.iloc[0]), color="grey", linestyle="--", label=f"OOV ({names.oov})")
    axes.set_xlabel(column)
    axes.set_ylabel("share of names at or below")
    axes.set_title(title or f"ECDF of {column} by {by}")
    axes.legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    return path


def plot_census_errors(errors: pd.DataFrame, path: str | Path, template: int | None = None) -> Path:
    """Write a PNG: columns = error types 1-3, rows = weighted / unweighted, female vs male per year.

    ``template`` picks one template of ``errors``; it may be None only if there is just one.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    templates = sorted(errors["template"].unique().tolist())
    if template is None:
        if len(templates) != 1:
            raise NerbiasError(f"errors hold templates {templates}; pass template= to pick one")
        template = templates[0]
    errors = errors[errors["template"] == template]
    if errors.empty:
        raise NerbiasError(f"no errors for template {template}; have {templates}")

    # Figure + Agg canvas directly: no pyplot global state, no backend switch for the caller.
    figure = Figure(figsize=(15, 8), constrained_layout=True)
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, 3, sharex=True)
    styles = {"F": ("female", "tab:red"), "M": ("male", "tab:blue")}
    for row, (suffix, weighting) in enumerate((("w", "weighted"), ("u", "unweighted"))):
        for column, kind in enumerate(("type1", "type2", "type3")):
            axis = axes[row][column]
            for gender, (label, color) in styles.items():
                series = errors[errors["gender"] == gender].sort_values("year")
                if not series.empty:
                    axis.plot(series["year"], series[f"{kind}_{suffix}"], label=label, color=color, linewidth=1.2)
            axis.set_title(f"error type {kind[-1]}, {weighting}")
            axis.set_ylabel("error rate")
            axis.grid(alpha=0.3)
            if row == 1:
                axis.set_xlabel("year")
    axes[0][0].legend()
    sentence = " ".join(["<Name>", TEMPLATES.get(template, "")]).strip()
    figure.suptitle(f"Census benchmark, template {template}: \"{sentence}\"")
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    return Path(path)
