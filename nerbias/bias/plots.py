"""The figures an evaluation run writes, and the look every figure of the project shares.

- ``facet_style``: one fixed colour and marker per demographic group (and per gender and race),
  the same in every figure whatever the other groups are; ``OOV_STYLE`` for the OOV reference
  name, black and dashed, distinct from every group colour.
- ``plot_ecdf``: ECDF of a per-name column (name accuracy, a confidence percentile) by group;
  a group without values stays in the legend, marked.
- ``plot_census_errors``: census error types 1-3 per year, female vs male, with what each type means.

Figures are drawn on a ``Figure`` with the Agg canvas (no pyplot global state) and written atomically.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from nerbias.bias.census import TEMPLATES
from nerbias.bias.names import NameList
from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_path

# Colour-blind-safe hues, one per race, light (female, circle) and dark (male, square) shades.
_FACETS = {
    "Black Female": ("#E69F00", "o"), "Black Male": ("#8C510A", "s"),
    "Hispanic Female": ("#35B779", "o"), "Hispanic Male": ("#00441B", "s"),
    "Muslim Female": ("#CC79A7", "o"), "Muslim Male": ("#762A83", "s"),
    "White Female": ("#56B4E9", "o"), "White Male": ("#0033A0", "s"),
    "Female": ("#D55E00", "o"), "Male": ("#332288", "s"),
    "Black": ("#A6761D", "D"), "Hispanic": ("#1B7837", "D"), "Muslim": ("#9E0142", "D"), "White": ("#2166AC", "D"),
    "ALL": ("#555555", "^"),
}
_FALLBACK = ("#E41A1C", "#4DAF4A", "#984EA3", "#FF7F00", "#A65628", "#F781BF", "#999999", "#66C2A5")
OOV_STYLE = {"color": "black", "linestyle": (0, (4, 2)), "linewidth": 1.3}

# Axes in words.
COLUMN_LABELS = {
    "accuracy": "name accuracy (share of its slots tagged as a one-token PERSON)",
    "conf_p25": "25th percentile of a name's PERSON confidence",
    "conf_median": "median of a name's PERSON confidence",
}
CENSUS_ERROR_TITLES = {
    "type1": "type 1: not tagged PERSON (types 2 + 3)",
    "type2": "type 2: tagged, but not as PERSON",
    "type3": "type 3: not tagged at all",
}
CENSUS_WEIGHTINGS = {"w": "weighted by name frequency", "u": "unweighted (every name once)"}
GENDER_STYLES = {"F": ("female names", _FACETS["Female"][0]), "M": ("male names", _FACETS["Male"][0])}


def facet_style(label: str) -> dict[str, str]:
    """``{"color", "marker"}`` of a group, gender or race: fixed for the known ones, and for any other
    label derived from the label alone (never from its position among the others)."""
    if label in _FACETS:
        color, marker = _FACETS[label]
    else:
        color, marker = _FALLBACK[zlib.crc32(str(label).encode()) % len(_FALLBACK)], "v"
    return {"color": color, "marker": marker}


def column_label(column: str) -> str:
    return COLUMN_LABELS.get(column, column.replace("_", " "))


def census_sentence(template: int) -> str:
    return " ".join(["<Name>", TEMPLATES.get(template, "")]).strip()


def facets_of(names: NameList, by: str) -> tuple[list[str], dict[str, str]]:
    """Every facet the name list defines (in list order) and each non-OOV name's facet."""
    if by == "group":
        lookup = {n: names.group_of[n] for n in names.names if n != names.oov}
        return names.groups(), lookup
    lookup = names.gender_of if by == "gender" else names.race_of
    if not lookup:
        raise ValueError(f"the name list has no {by} column")
    lookup = {n: lookup[n] for n in names.names if n != names.oov and n in lookup}
    return list(dict.fromkeys(lookup.values())), lookup


def plot_ecdf(per_name: pd.DataFrame, names: NameList, column: str, path: str | Path, by: str = "group",
              title: str | None = None) -> Path:
    """ECDF of a per-name column for each group (or gender / race), the OOV name as a dashed line."""
    from matplotlib.figure import Figure

    facets, facet_of = facets_of(names, by)
    frame = per_name[per_name["name"].isin(facet_of)].copy()
    frame["facet"] = frame["name"].map(facet_of)
    figure = Figure(figsize=(8, 5))
    axes = figure.subplots()
    for facet in facets:
        style = facet_style(facet)
        values = np.sort(frame.loc[frame["facet"] == facet, column].dropna().to_numpy())
        if not len(values):  # kept in the legend, so a missing group is seen, not silently dropped
            axes.plot([], [], color=style["color"], marker=style["marker"], linestyle=":",
                      label=f"{facet} (no values: no name recognised)")
            continue
        shares = np.arange(1, len(values) + 1) / len(values)
        axes.step(values, shares, where="post", color=style["color"], linewidth=1.4, label=f"{facet} ({len(values)})")
        axes.plot(values, shares, linestyle="none", marker=style["marker"], color=style["color"], markersize=3.5)
    oov = per_name.loc[per_name["name"] == names.oov, column]
    if len(oov) and not np.isnan(oov.iloc[0]):
        axes.axvline(float(oov.iloc[0]), label=f"OOV reference name ({names.oov})", **OOV_STYLE)
    axes.set_xlabel(column_label(column))
    axes.set_ylabel("share of the group's names at or below")
    axes.set_xlim(-0.02, 1.02)
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    axes.set_title(title or f"ECDF of {column_label(column)} by {by}", fontsize=10)
    axes.legend(fontsize=7, loc="upper left", title=f"{by} (names)", title_fontsize=7)
    figure.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    return path


def census_panel_figure(width: float, height: float):
    """The 2 x 3 census panels (weighted / unweighted x error types 1-3) with a suptitle, on fixed
    margins: a constrained layout measured every tick label again and cost as much as the drawing
    (the evaluation and the report draw 27 of these)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, 3, sharex=True)
    # Margins in inches (suptitle and two-line panel titles above, axis labels left and below).
    figure.subplots_adjust(left=0.85 / width, right=1 - 0.2 / width, bottom=0.6 / height, top=1 - 0.95 / height,
                           wspace=0.25, hspace=0.32)
    return figure, axes


def plot_census_errors(errors: pd.DataFrame, path: str | Path, template: int | None = None,
                       tagger: str | None = None) -> Path:
    """Write a PNG: columns = error types 1-3, rows = weighted / unweighted, female vs male per year.

    ``template`` picks one template of ``errors``; it may be None only if there is just one.
    """
    templates = sorted(errors["template"].unique().tolist())
    if template is None:
        if len(templates) != 1:
            raise NerbiasError(f"errors hold templates {templates}; pass template= to pick one")
        template = templates[0]
    errors = errors[errors["template"] == template]
    if errors.empty:
        raise NerbiasError(f"no errors for template {template}; have {templates}")

    figure, axes = census_panel_figure(15, 8)
    for row, suffix in enumerate(("w", "u")):
        for column, kind in enumerate(("type1", "type2", "type3")):
            axis = axes[row][column]
            for gender, (label, color) in GENDER_STYLES.items():
                series = errors[errors["gender"] == gender].sort_values("year")
                if not series.empty:
                    axis.plot(series["year"], series[f"{kind}_{suffix}"], label=label, color=color, linewidth=1.2)
            axis.set_title(f"{CENSUS_ERROR_TITLES[kind]}\n{CENSUS_WEIGHTINGS[suffix]}", fontsize=10)
            axis.set_ylabel("share of the year's names (error rate)")
            axis.grid(alpha=0.3)
            if row == 1:
                axis.set_xlabel("birth year (SSA baby names)")
    axes[0][0].legend()
    who = f"{tagger}: " if tagger else ""
    figure.suptitle(f"{who}census benchmark, template {template} \"{census_sentence(template)}\", error rates "
                    "by year, female vs male names")
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    return Path(path)


def plot_probe_recall(per_name: pd.DataFrame, names: NameList, path: str | Path, title: str | None = None) -> Path:
    """Paired probes: PERSON recall in person contexts (x) against LOCATION recall in place contexts (y),
    one point per name in its group's colour and marker; the OOV name black. A tagger that reads context
    puts every name at the top right; one that memorises a token's usual type, on an axis."""
    from matplotlib.figure import Figure

    facets, facet_of = facets_of(names, "group")
    figure = Figure(figsize=(10, 6))
    axes = figure.subplots()
    for facet in facets:
        style = facet_style(facet)
        part = per_name[per_name["name"].map(facet_of) == facet]
        axes.scatter(part["accuracy"], part["place_recall"], color=style["color"], marker=style["marker"], s=22,
                     alpha=0.8, label=f"{facet} ({len(part)})")
    oov = per_name[per_name["name"] == names.oov]
    if len(oov):
        axes.scatter(oov["accuracy"], oov["place_recall"], color=OOV_STYLE["color"], marker="x", s=40,
                     label=f"OOV reference name ({names.oov})")
    axes.set_xlabel("PERSON recall in person contexts (share of slots tagged a one-token PERSON)")
    axes.set_ylabel("LOCATION recall in place contexts (share tagged a one-token place)")
    axes.set_xlim(-0.03, 1.03)
    axes.set_ylim(-0.03, 1.03)
    axes.grid(alpha=0.3)
    axes.set_title(title or "Paired probes: person vs place contexts, one point per name", fontsize=10)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), title="group (names)", title_fontsize=7)
    figure.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    return path
