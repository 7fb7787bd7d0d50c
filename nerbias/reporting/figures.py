"""Figures of the papers, with bootstrap bands, as PNG files written atomically.

Name corpora: ECDFs of a per-name column by facet, one panel per model (``plot_ecdf_grid``,
Figures 1, 2, 4-8), group accuracy with intervals (``plot_group_accuracy``) and the t-SNE of
the names' word vectors in a checkpoint (``checkpoint_name_vectors`` + ``plot_name_tsne``,
Figure 3). Census: per-year error rates of female and male names (``plot_census_bands``) and
their gap (``plot_census_gap``, ``plot_census_gap_by_template``).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from nerbias.bias.plots import (
    CENSUS_ERROR_TITLES, CENSUS_WEIGHTINGS, GENDER_STYLES, OOV_STYLE, census_panel_figure, census_sentence,
    column_label, facet_style,
)
from nerbias.errors import CheckpointError, NerbiasError
from nerbias.fileio import atomic_path
from nerbias.models.checkpoint import WORD_VECTORS_KEY, load_checkpoint
from nerbias.reporting.uncertainty import (
    DEFAULT_CONFIDENCE, DEFAULT_N_BOOT, NameTable, bootstrap_ecdf, bootstrap_group_accuracy,
)

log = logging.getLogger(__name__)


def _figure(rows: int, columns: int, width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # Figure + Agg canvas: no pyplot state, so this runs headless and inside notebooks alike.
    figure = Figure(figsize=(width * columns, height * rows), constrained_layout=True)
    FigureCanvasAgg(figure)
    return figure, figure.subplots(rows, columns, squeeze=False)


def _save(figure, path: str | Path, dpi: int = 110) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=dpi)
    return path


def _model_colors(models: Iterable[str]) -> dict[str, Any]:
    """Models compared in one figure: a colour each, from a palette apart from the group colours."""
    from matplotlib import colormaps

    cmap = colormaps["Dark2"]
    return {model: cmap(i % 8) for i, model in enumerate(models)}


def plot_ecdf_grid(tables: Mapping[str, NameTable], path: str | Path, column: str = "accuracy", by: str = "group",
                   title: str | None = None, n_boot: int = DEFAULT_N_BOOT, confidence: float = DEFAULT_CONFIDENCE,
                   seed: int = 0, columns: int = 4) -> Path | None:
    """Small multiples, one panel per group (or gender / race): the ECDF of a per-name column with its
    bootstrap band, one line per model, and the OOV name's value as a dashed line (Figures 1, 2, 4-8).
    A group without values keeps its panel, marked. None when no model has the values."""
    usable = {m: t for m, t in tables.items()
              if column in t.columns and not np.all(np.isnan(t.values(column))) and t.has_facet(by)}
    if not usable:
        return None
    facets = list(dict.fromkeys(label for table in usable.values() for label in table.facet_labels(by)))
    bands = {model: bootstrap_ecdf(table, column, by, n_boot=n_boot, confidence=confidence, seed=seed)
             for model, table in usable.items()}
    model_colors = _model_colors(usable) if len(usable) > 1 else None
    columns = min(columns, len(facets))
    rows = math.ceil(len(facets) / columns)
    figure, axes = _figure(rows, columns, max(3.3, 9.0 / columns), 2.7)  # room for the title with few panels
    for axis in axes.flat[len(facets):]:
        axis.set_visible(False)
    for axis, facet in zip(axes.flat, facets):
        style = facet_style(facet)
        drawn = False
        for model, table in usable.items():
            color = style["color"] if model_colors is None else model_colors[model]
            values = table.name_values(column)
            points = np.sort(values[(table.facet(by) == facet) & ~np.isnan(values)])
            band = bands[model].get(facet)
            if band is not None:
                axis.fill_between(band["x"], band["low"], band["high"], step="post", color=color, alpha=0.2,
                                  linewidth=0)
            if len(points):
                xs = np.concatenate([[0.0], points, [1.0]])
                ys = np.concatenate([[0.0], np.arange(1, len(points) + 1) / len(points), [1.0]])
                axis.step(xs, ys, where="post", color=color, linewidth=1.3, label=model if model_colors else None)
                axis.plot(points, ys[1:-1], linestyle="none", marker=style["marker"], color=color, markersize=3)
                drawn = True
            oov = table.oov_value(column)
            if oov is not None:
                axis.axvline(oov, **OOV_STYLE)
        if not drawn:
            axis.text(0.5, 0.5, "no values\n(no name recognised)", ha="center", va="center", fontsize=8,
                      transform=axis.transAxes)
        axis.set_title(str(facet), fontsize=9, color=style["color"])
        axis.set_xlim(-0.02, 1.02)
        axis.set_ylim(0, 1.02)
        axis.grid(alpha=0.3)
    figure.supxlabel(column_label(column), fontsize=9)
    figure.supylabel("share of the group's names at or below", fontsize=9)
    first = next(iter(usable.values()))
    if model_colors:
        figure.legend(handles=[Line2D([], [], color=c, label=m) for m, c in model_colors.items()],
                      loc="outside right upper", fontsize=8)
    oov = f"; dashed: the OOV reference name ({first.oov_name})" if first.oov_name else ""
    figure.suptitle(f"{title or f'ECDF of {column_label(column)} by {by}'}\nshaded: {confidence:.0%} bootstrap "
                    f"band over names{oov}", fontsize=10, wrap=True)
    return _save(figure, path)


def plot_group_accuracy(tables: Mapping[str, NameTable], path: str | Path, by: str = "group",
                        n_boot: int = DEFAULT_N_BOOT, confidence: float = DEFAULT_CONFIDENCE, seed: int = 0,
                        title: str | None = None) -> Path:
    """Group accuracy with its interval, one row of markers per group, one colour per model."""
    boots = {model: bootstrap_group_accuracy(table, by, n_boot=n_boot, confidence=confidence, seed=seed)
             for model, table in tables.items()}
    labels = list(dict.fromkeys(label for boot in boots.values() for label in boot.labels))
    figure, axes = _figure(1, 1, 7.5, 0.45 * len(labels) + 1.6)
    axis = axes[0][0]
    colors = _model_colors(boots)
    offsets = np.linspace(-0.25, 0.25, len(boots)) if len(boots) > 1 else [0.0]
    for offset, (model, boot) in zip(offsets, boots.items()):
        for row in boot.table().itertuples(index=False):
            label = getattr(row, by)
            # one model: each group in its own colour and marker; several: a colour per model
            style = facet_style(label) if len(boots) == 1 else {"color": colors[model], "marker": "o"}
            y = labels.index(label) + offset
            # no interval (one name; too few names from one seed): said beside the marker, not drawn as a bar
            missing = "1 name" if row.names < 2 else "no interval" if np.isnan(row.ci_low) else None
            axis.errorbar([row.accuracy], [y], xerr=None if missing else
                          [[row.accuracy - row.ci_low], [row.ci_high - row.accuracy]], fmt=style["marker"],
                          color=style["color"], capsize=3, markersize=5)
            if missing:
                axis.annotate(missing, (row.accuracy, y), xytext=(6, 0), textcoords="offset points",
                              va="center", fontsize=7, color=style["color"])
    if len(boots) > 1:
        axis.legend(handles=[Line2D([], [], color=colors[m], marker="o", label=m) for m in boots], fontsize=7)
    axis.set_yticks(range(len(labels)), labels)
    for tick, label in zip(axis.get_yticklabels(), labels):
        tick.set_color(facet_style(label)["color"])
    axis.invert_yaxis()
    axis.set_xlabel(f"group accuracy p_c (share of the group's name slots tagged as a one-token PERSON), "
                    f"{confidence:.0%} interval", fontsize=8)
    axis.grid(alpha=0.3, axis="x")
    axis.set_title(title or f"Accuracy by {by}" + (f", {next(iter(boots))}" if len(boots) == 1 else ""))
    return _save(figure, path)



def checkpoint_name_vectors(checkpoint: str | Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The word vector of each name in a nerbias checkpoint (lower-cased when the model lower-cases
    words); names outside its vocabulary are left out (they would all share the <unk> vector)."""
    payload = load_checkpoint(checkpoint)
    try:
        state, words, lowercase = payload["model_state"], payload["vocab"]["words"], payload["lowercase_words"]
    except (KeyError, TypeError) as error:
        raise CheckpointError(f"{checkpoint}: incomplete or incompatible checkpoint ({error})") from None
    if WORD_VECTORS_KEY not in state:
        raise NerbiasError(f"{checkpoint}: the model has no word-embedding table (ELMo-style), so there are "
                           "no name vectors to project")
    weight = state[WORD_VECTORS_KEY].detach().cpu().numpy()
    index = {word: i for i, word in enumerate(words)}
    vectors = {}
    for name in names:
        key = name.lower() if lowercase else name
        if key in index:
            vectors[name] = weight[index[key]]
    return vectors


def plot_name_tsne(vectors: Mapping[str, np.ndarray], group_of: Mapping[str, str], path: str | Path,
                   seed: int = 0, perplexity: float | None = None, title: str | None = None) -> Path | None:
    """Figure 3: t-SNE projection of the names' embeddings, coloured by group. None with < 4 names."""
    from sklearn.manifold import TSNE

    names = [name for name in vectors if name in group_of]
    if len(names) < 4:
        log.warning("t-SNE needs at least 4 names with vectors, have %d; figure skipped", len(names))
        return None
    matrix = np.vstack([np.asarray(vectors[name], dtype=np.float64) for name in names])
    # perplexity must stay below the number of points; 30 (sklearn's default) for the full list
    perplexity = perplexity or float(min(30.0, max(2.0, (len(names) - 1) / 3)))
    # Exact gradients: a name list has ~100 points, where Barnes-Hut saves nothing and its OpenMP
    # threads can stall for seconds on a busy machine.
    method = "exact" if len(names) <= 1000 else "barnes_hut"
    points = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca",
                  method=method).fit_transform(matrix)
    groups = list(dict.fromkeys(group_of[name] for name in names))
    figure, axes = _figure(1, 1, 7.5, 6)
    axis = axes[0][0]
    for group in groups:
        rows = [i for i, name in enumerate(names) if group_of[name] == group]
        style = facet_style(group)
        axis.scatter(points[rows, 0], points[rows, 1], color=style["color"], marker=style["marker"], label=group, s=22)
        for i in rows:
            axis.annotate(names[i], points[i], fontsize=5, alpha=0.7, xytext=(2, 2), textcoords="offset points")
    axis.legend(fontsize=7)
    axis.set_xticks([])
    axis.set_yticks([])
    axis.set_title(title or f"t-SNE of first-name embeddings ({len(names)} names, perplexity {perplexity:.3g})")
    return _save(figure, path)


def _census_panels(boot: pd.DataFrame, template: int, axes):
    """(row, axis, error type, weighting, that measure's rows by year) for the 2 x 3 census panels."""
    part = boot[boot["template"] == template].sort_values("year")
    for row, (suffix, weighting) in enumerate(CENSUS_WEIGHTINGS.items()):
        for column, kind in enumerate(("type1", "type2", "type3")):
            yield row, axes[row][column], kind, weighting, part[part["measure"] == f"{kind}_{suffix}"]


def plot_census_bands(boot: pd.DataFrame, path: str | Path, template: int, title: str | None = None) -> Path:
    """Per-year error rates of female and male names, 2 x 3 panels (weighted / unweighted x
    types 1-3), each with its bootstrap band: the census paper's figure with intervals."""
    figure, axes = census_panel_figure(15, 6.8)
    for row, axis, kind, weighting, series in _census_panels(boot, template, axes):
        for sex, (label, color) in GENDER_STYLES.items():
            axis.fill_between(series["year"], series[f"{sex}_low"], series[f"{sex}_high"], color=color, alpha=0.2,
                              linewidth=0)
            axis.plot(series["year"], series[sex], color=color, label=label, linewidth=1.1)
        _label_census_panel(axis, row, kind, weighting, "share of the year's names (error rate)")
    axes[0][0].legend(fontsize=8)
    figure.suptitle(title or f"Census template {template} (\"{census_sentence(template)}\"): errors by year, "
                    "95% bootstrap bands over names")
    return _save(figure, path, dpi=100)


def _label_census_panel(axis, row: int, kind: str, weighting: str, ylabel: str) -> None:
    axis.set_title(f"{CENSUS_ERROR_TITLES[kind]}\n{weighting}", fontsize=9)
    axis.set_ylabel(ylabel, fontsize=8)
    axis.grid(alpha=0.3)
    if row == 1:
        axis.set_xlabel("birth year (SSA baby names)")


def plot_census_gap(boot: pd.DataFrame, path: str | Path, template: int, title: str | None = None) -> Path:
    """Female - male gap of each error measure per year with its bootstrap band; above 0 means
    female names are mis-tagged more often."""
    figure, axes = census_panel_figure(15, 6.8)
    for row, axis, kind, weighting, series in _census_panels(boot, template, axes):
        axis.fill_between(series["year"], series["gap_low"], series["gap_high"], color="tab:purple", alpha=0.25,
                          linewidth=0, label="95% interval")
        axis.plot(series["year"], series["gap"], color="tab:purple", linewidth=1.1, label="female - male")
        axis.axhline(0, color="black", linewidth=0.8)
        _label_census_panel(axis, row, kind, weighting, "female - male error rate")
    axes[0][0].legend(fontsize=8)
    figure.suptitle(title or f"Census template {template}: female - male gap by year, 95% bootstrap interval")
    return _save(figure, path, dpi=100)


def plot_census_gap_by_template(boot: pd.DataFrame, path: str | Path, measure: str = "type1_w",
                                title: str | None = None) -> Path:
    """The female - male gap of one measure per year, one line and band per template."""
    part = boot[boot["measure"] == measure]
    templates = sorted(part["template"].unique().tolist())
    colors = _model_colors(templates)
    figure, axes = _figure(1, 1, 9, 4.2)
    axis = axes[0][0]
    for template in templates:
        series = part[part["template"] == template].sort_values("year")
        axis.fill_between(series["year"], series["gap_low"], series["gap_high"], color=colors[template], alpha=0.15,
                          linewidth=0)
        axis.plot(series["year"], series["gap"], color=colors[template], linewidth=1, label=f"template {template}")
    axis.axhline(0, color="black", linewidth=0.8)
    kind, weighting = measure.split("_")
    axis.set_xlabel("birth year (SSA baby names)")
    axis.set_ylabel(f"female - male error rate\n{CENSUS_ERROR_TITLES[kind]}, {CENSUS_WEIGHTINGS[weighting]}", fontsize=8)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, ncol=3)
    axis.set_title(title or f"Female - male gap of {measure} by template, 95% bootstrap bands")
    return _save(figure, path, dpi=100)



def plot_reliability(table: pd.DataFrame, path: str | Path, ece: float, title: str) -> Path:
    """Reliability diagram of span confidences: each equal-mass bin's share correct against its mean
    confidence, the diagonal for perfect calibration (``scoring.calibration_table``'s columns)."""
    figure, axes = _figure(1, 1, 4.6, 4.2)
    axis = axes[0, 0]
    axis.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="perfectly calibrated")
    axis.plot(table["confidence"], table["accuracy"], marker="o", color="#1f77b4", label="equal-mass bins")
    axis.set_xlim(0, 1.01)
    axis.set_ylim(0, 1.01)
    axis.set_xlabel("mean confidence P(span | sentence) in the bin")
    axis.set_ylabel("share of the bin's spans that are gold entities")
    axis.set_title(f"{title}\nexpected calibration error {ece:.4f}", fontsize=9)
    axis.legend(loc="upper left", fontsize=8)
    return _save(figure, path)
