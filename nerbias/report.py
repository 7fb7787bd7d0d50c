"""Results as the papers present them, with intervals: tables, ECDF figures, census curves.

Inputs are ``evaluate.py`` run directories (``per_name.csv`` ... or ``census_errors.csv``), or
offline W&B runs of evaluate.py (a folder holding ``run-*.wandb``, or a run directory whose
``wandb/`` holds one), whose logged tables are read back. Online W&B runs are not fetched: sync
or download them to a folder first.

Two users:
- ``render_report`` (``report.py``): one model on one corpus, its runs being training seeds, or
  census runs; writes ``report.md`` plus ``report_*.png`` / ``report_*.csv`` into the first run
  directory and logs the same to W&B.
- the notebooks in ``notebooks/``: several models side by side, through ``load_tables``,
  ``accuracy_table``, ``spread_table``, ``gap_table``, ``plot_ecdf_grid``, ``plot_name_tsne`` and the
  census plots; ``run_notebook`` executes them headless with parameters injected after the cell
  tagged ``parameters`` (as papermill does).

Statistics are in ``nerbias.uncertainty``; every figure is written atomically.
"""

from __future__ import annotations

import json
import logging
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from nerbias import census
from nerbias.errors import NerbiasError
from nerbias.io import atomic_path, atomic_write_text
from nerbias.loggers import NullLogger
from nerbias.names import NameList, load_names
from nerbias.uncertainty import (
    CENSUS_MEASURES, CENSUS_N_BOOT, DEFAULT_CONFIDENCE, DEFAULT_N_BOOT, DEFAULT_N_PERMUTATIONS, NameTable,
    bootstrap_census, bootstrap_ecdf, bootstrap_group_accuracy, bootstrap_spread, census_gap_summary,
    gender_permutation_test, interval_text, pairwise_permutation_tests, permutation_census,
)

log = logging.getLogger(__name__)

RUN_FILES = ("per_name", "per_group", "label_breakdown", "census_errors", "census_labels")
CORPUS_TITLES = {"winogender": "Winogender", "insitu": "In-Situ", "census": "Census"}
REPRESENTATIVE_YEARS = (1880, 1900, 1920, 1940, 1960, 1980, 2000, 2018)


# ----------------------------------------------------------------------------------------------
# Reading runs


@dataclass
class Run:
    """What one evaluate.py run left: its tables, metrics and configuration."""

    path: Path
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    tagger_name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    source: str = "directory"  # or "wandb-offline"

    @property
    def per_name(self) -> pd.DataFrame | None:
        return self.tables.get("per_name")

    @property
    def kind(self) -> str:
        if "census_errors" in self.tables:
            return "census"
        if "per_name" in self.tables:
            return "names"
        raise NerbiasError(f"{self.path}: neither per_name nor census_errors results")

    def setting(self, key: str, default: Any = None) -> Any:
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def corpus(self) -> str:
        name = self.setting("corpus.name")
        if name:
            return str(name)
        if self.kind == "census":
            return "census"
        prefixes = {key.split("/")[0] for key in self.metrics if "/" in key}
        if len(prefixes) == 1:
            return prefixes.pop().removesuffix("_lower")
        return "unknown"

    @property
    def lowercase(self) -> bool:
        value = self.setting("corpus.lowercase")
        if value is not None:
            return bool(value)
        return any(key.split("/")[0].endswith("_lower") for key in self.metrics)

    @property
    def label(self) -> str:
        tagger = str(self.tagger_name or self.setting("tagger.name") or self.setting("tagger.kind") or self.path.name)
        checkpoint = self.setting("tagger.path")
        if tagger == "checkpoint" and isinstance(checkpoint, str):
            # .../runs/<training run>/checkpoints/best.pt: the training run names the model
            path = Path(checkpoint)
            tagger = f"checkpoint:{path.parent.parent.name if path.parent.name == 'checkpoints' else path.name}"
        return tagger

    @property
    def corpus_title(self) -> str:
        title = CORPUS_TITLES.get(self.corpus, self.corpus)
        return f"{title} (lower-cased)" if self.lowercase else title


TEXT_COLUMNS = ("name", "group", "label", "gender")


def read_table(path: Path) -> pd.DataFrame:
    """A run's CSV. Names such as "Nan" or "Null" and the untagged census label "" stay strings;
    only the numeric columns turn empty cells into NaN."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for column in frame.columns:
        if column not in TEXT_COLUMNS:
            frame[column] = pd.to_numeric(frame[column].replace("", np.nan))
    return frame


def _resolved_hydra_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return {}
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(path)
    if OmegaConf.select(cfg, "paths") is not None:
        cfg.paths.output_dir = str(run_dir)  # ${hydra:...} resolves only inside a Hydra app
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except Exception as error:  # an interpolation this process cannot resolve: keep what resolves
        log.warning("%s: config not fully resolved (%s)", path, error)
        plain = OmegaConf.to_container(cfg, resolve=False)
        for key in ("corpus.ssa", "tagger.path", "corpus.names"):
            value = OmegaConf.select(cfg, key, throw_on_resolution_failure=False)
            if value is not None:
                section, name = key.split(".")
                plain.setdefault(section, {})[name] = value
        return plain


def _offline_run_folder(path: Path) -> Path | None:
    if any(path.glob("run-*.wandb")):
        return path
    candidates = sorted((path / "wandb").glob("offline-run-*")) if (path / "wandb").is_dir() else []
    candidates = [c for c in candidates if any(c.glob("run-*.wandb"))]
    return candidates[-1] if candidates else None


_WANDB_TABLES = {"per_name": "per_name", "per_group": "per_group", "label_breakdown": "label_breakdown",
                 "errors": "census_errors"}
_WANDB_TABLE_FILE = re.compile(r"^(per_name|per_group|label_breakdown|errors)_(\d+)_[0-9a-f]+\.table\.json$")


def _read_wandb_table(file: Path) -> pd.DataFrame:
    payload = json.loads(file.read_text(encoding="utf-8"))
    return pd.DataFrame(payload["data"], columns=payload["columns"])


def _load_wandb_run(folder: Path, run_dir: Path) -> Run:
    from nerbias.loggers import read_offline_run

    logged = read_offline_run(folder)
    summary = logged["summary"]
    tables: dict[str, pd.DataFrame] = {}
    for key, value in summary.items():
        if not key.endswith("/_type") or value != "table-file":
            continue
        base = key[: -len("/_type")]
        file = folder / "files" / str(summary.get(f"{base}/path", ""))
        target = _WANDB_TABLES.get(base.rsplit("/", 1)[-1])
        if target is not None and file.is_file():
            tables[target] = _read_wandb_table(file)
    if not tables:
        # The transaction log can lag behind the table files (W&B flushes it after finish()
        # returns) or be cut short by a killed job: take the latest file of each table instead.
        latest: dict[str, tuple[int, Path]] = {}
        for file in (folder / "files" / "media" / "table").rglob("*.table.json"):
            match = _WANDB_TABLE_FILE.match(file.name)
            if match and int(match.group(2)) >= latest.get(match.group(1), (-1, file))[0]:
                latest[match.group(1)] = (int(match.group(2)), file)
        tables = {_WANDB_TABLES[name]: _read_wandb_table(file) for name, (_, file) in latest.items()}
    if not tables:
        raise NerbiasError(f"{folder}: the W&B run logged no per_name or census/errors table")
    metrics = {k: v for k, v in summary.items() if isinstance(v, (int, float)) and not k.startswith("_")}
    config = logged["config"]
    tagger = config.get("tagger", {}) if isinstance(config.get("tagger"), Mapping) else {}
    return Run(run_dir, tables, metrics, tagger.get("name") or tagger.get("kind"), config, "wandb-offline")


def load_run(path: str | Path) -> Run:
    """An evaluate.py run directory, or an offline W&B run of one (read back from its log)."""
    path = Path(path)
    if not path.is_dir():
        raise NerbiasError(f"{path}: run directory not found")
    tables = {name: read_table(path / f"{name}.csv") for name in RUN_FILES if (path / f"{name}.csv").is_file()}
    if "per_name" in tables or "census_errors" in tables:
        metrics_file = path / "metrics.json"
        saved = json.loads(metrics_file.read_text(encoding="utf-8")) if metrics_file.is_file() else {}
        return Run(path, tables, saved.get("metrics", {}), saved.get("tagger"), _resolved_hydra_config(path))
    folder = _offline_run_folder(path)
    if folder is None:
        raise NerbiasError(f"{path}: no per_name.csv, census_errors.csv or offline W&B run")
    return _load_wandb_run(folder, path)


def names_for(runs: Sequence[Run], names_path: str | Path | None = None) -> NameList:
    """The name list: the one given, else the one the first run used, else the packaged list."""
    path = names_path or (runs[0].setting("corpus.names") if runs else None)
    if path and not Path(str(path)).is_file():
        log.warning("name list %s not found; using the packaged list", path)
        path = None
    return load_names(path)


def name_table(runs: Sequence[Run | str | Path], names: NameList | None = None) -> NameTable:
    """The seeds x names table of runs of one model on one corpus."""
    runs = [run if isinstance(run, Run) else load_run(run) for run in runs]
    if any(run.per_name is None for run in runs):
        raise NerbiasError("every run needs per-name results (per_name.csv)")
    settings = {(run.corpus, run.lowercase) for run in runs}
    if len(settings) > 1:
        warnings.warn(f"runs pooled as seeds differ in corpus/casing: {sorted(settings)}", stacklevel=2)
    return NameTable.from_frames([run.per_name for run in runs], names)


def load_tables(models: Mapping[str, Sequence[str | Path] | str | Path],
                names: NameList | None = None) -> dict[str, NameTable]:
    """``{model label: [run dirs, one per seed]}`` -> ``{model label: NameTable}`` (empty lists skipped)."""
    tables = {}
    for label, dirs in models.items():
        dirs = [dirs] if isinstance(dirs, (str, Path)) else list(dirs)
        if dirs:
            tables[label] = name_table(dirs, names)
    return tables


# ----------------------------------------------------------------------------------------------
# Tables


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub Markdown table; floats to ``digits`` places, p-values (columns p_*) to 4."""
    def cell(column: str, value: Any) -> str:
        if isinstance(value, (float, np.floating)):
            if math.isnan(value):
                return "–"
            return f"{value:.4f}" if column.startswith("p_") else f"{value:.{digits}f}"
        return str(value).replace("|", "\\|")

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(str(c), v) for c, v in zip(frame.columns, row)) + " |"
            for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def accuracy_table(tables: Mapping[str, NameTable], by: str = "group", n_boot: int = DEFAULT_N_BOOT,
                   confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables 3 and 7 with intervals: rows = groups, the OOV name and the best-worst gap,
    columns = models. Returns (display frame of "value [low, high]" strings, long numeric frame)."""
    cells: dict[str, dict[str, str]] = {}
    long_rows = []
    for model, table in tables.items():
        boot = bootstrap_group_accuracy(table, by=by, n_boot=n_boot, confidence=confidence, seed=seed)
        frame = boot.table()
        column = cells.setdefault(model, {})
        for row in frame.itertuples(index=False):
            label = getattr(row, by)
            column[label] = interval_text(row.accuracy, row.ci_low, row.ci_high, 4)
            long_rows.append({"model": model, by: label, "accuracy": row.accuracy, "ci_low": row.ci_low,
                              "ci_high": row.ci_high, "names": row.names, "seeds": row.seeds})
        oov = table.oov_value("accuracy")
        if oov is not None:
            column["OOV Name"] = f"{oov:.4f}"
            long_rows.append({"model": model, by: "OOV Name", "accuracy": oov, "ci_low": np.nan, "ci_high": np.nan,
                              "names": 1, "seeds": table.n_seeds})
        gap = boot.gap()
        column["gap (best - worst)"] = interval_text(gap["gap"], gap["ci_low"], gap["ci_high"], 4)
        long_rows.append({"model": model, by: "gap (best - worst)", "accuracy": gap["gap"], "ci_low": gap["ci_low"],
                          "ci_high": gap["ci_high"], "names": np.nan, "seeds": table.n_seeds})
    display = pd.DataFrame(cells)
    display.index.name = by
    return display.fillna("–").reset_index(), pd.DataFrame(long_rows)


def spread_table(tables: Mapping[str, NameTable], column: str = "accuracy", n_boot: int = DEFAULT_N_BOOT,
                 confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables 4 (column="accuracy") and 5 (column="conf_median"): min, mean, std, median of the
    per-name column over all names of each model, intervals for all but min. Models without the
    column's values (no confidences) are left out."""
    display_rows, long_rows = [], []
    for model, table in tables.items():
        if column not in table.columns or np.all(np.isnan(table.values(column))):
            continue
        row = bootstrap_spread(table, column, n_boot=n_boot, confidence=confidence, seed=seed).iloc[-1]  # ALL
        display_rows.append({"model": model, **{stat: interval_text(row[stat], row[f"{stat}_low"], row[f"{stat}_high"])
                                                for stat in ("min", "mean", "std", "median")}})
        long_rows.append({"model": model, **row.drop("group").to_dict()})
    return pd.DataFrame(display_rows, columns=["model", "min", "mean", "std", "median"]), pd.DataFrame(long_rows)


def gap_table(tables: Mapping[str, NameTable], n_boot: int = DEFAULT_N_BOOT,
              n_permutations: int = DEFAULT_N_PERMUTATIONS,
              confidence: float = DEFAULT_CONFIDENCE, seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """Per model: best and worst group, their gap with interval, female - male difference with
    its permutation p-value, and how many group pairs differ after Holm's adjustment."""
    rows = []
    for model, table in tables.items():
        gap = bootstrap_group_accuracy(table, "group", n_boot=n_boot, confidence=confidence, seed=seed).gap()
        row = {"model": model, "seeds": table.n_seeds, "best": gap["best"], "worst": gap["worst"],
               "gap": interval_text(gap["gap"], gap["ci_low"], gap["ci_high"])}
        if table.has_facet("gender"):
            gender = gender_permutation_test(table, n_resamples=n_permutations, seed=seed).iloc[0]
            gender_boot = bootstrap_group_accuracy(table, "gender", n_boot=n_boot, confidence=confidence, seed=seed)
            female, male = (gender_boot.labels.index(g) for g in ("Female", "Male"))
            diff = gender_boot.replicates[:, female] - gender_boot.replicates[:, male]
            low, high = np.nanpercentile(diff, [50 * (1 - confidence), 100 - 50 * (1 - confidence)])
            row["female - male"] = interval_text(gender["difference"], low, high)
            row["p_female_male"] = gender["p_value"]
        pairs = pairwise_permutation_tests(table, "group", n_resamples=n_permutations, seed=seed)
        row["pairs"] = len(pairs)
        row[f"pairs_holm_below_{alpha:g}"] = int((pairs["p_holm"] < alpha).sum())
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# Figures


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


def _colors(labels: Iterable[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {label: cmap(i % 10) for i, label in enumerate(labels)}


def plot_ecdf_grid(tables: Mapping[str, NameTable], path: str | Path, column: str = "accuracy", by: str = "group",
                   title: str | None = None, n_boot: int = DEFAULT_N_BOOT, confidence: float = DEFAULT_CONFIDENCE,
                   seed: int = 0, columns: int = 3) -> Path | None:
    """One panel per model: ECDF of a per-name column by facet, bootstrap band shaded, the OOV
    name's value as a grey dashed line (Figures 1, 2, 4-8). None when no model has the values."""
    usable = {m: t for m, t in tables.items()
              if column in t.columns and not np.all(np.isnan(t.values(column))) and t.has_facet(by)}
    if not usable:
        return None
    columns = min(columns, len(usable))
    rows = math.ceil(len(usable) / columns)
    figure, axes = _figure(rows, columns, 4.6, 3.4)
    for axis in axes.flat[len(usable):]:
        axis.set_visible(False)
    for axis, (model, table) in zip(axes.flat, usable.items()):
        bands = bootstrap_ecdf(table, column, by, n_boot=n_boot, confidence=confidence, seed=seed)
        colors = _colors(bands)
        facets, values = table.facet(by), table.name_values(column)
        for label, band in bands.items():
            points = np.sort(values[(facets == label) & ~np.isnan(values)])
            axis.fill_between(band["x"], band["low"], band["high"], step="post", color=colors[label], alpha=0.18,
                              linewidth=0)
            if len(points):
                xs = np.concatenate([[0.0], points, [1.0]])
                ys = np.concatenate([[0.0], np.arange(1, len(points) + 1) / len(points), [1.0]])
                axis.step(xs, ys, where="post", color=colors[label], label=str(label), linewidth=1.3)
        oov = table.oov_value(column)
        if oov is not None:
            axis.axvline(oov, color="grey", linestyle="--", linewidth=1, label=f"OOV ({table.oov_name})")
        axis.set_title(f"{model} ({table.n_seeds} seed{'s' if table.n_seeds > 1 else ''})", fontsize=9)
        axis.set_xlabel(column)
        axis.set_ylabel("share of names at or below")
        axis.set_xlim(-0.02, 1.02)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6, loc="upper left")
    figure.suptitle(title or f"ECDF of {column} by {by}; shaded: {confidence:.0%} bootstrap band over names",
                    fontsize=9, wrap=True)  # long titles otherwise overflow a one-panel figure
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
    colors = _colors(boots)
    offsets = np.linspace(-0.25, 0.25, len(boots)) if len(boots) > 1 else [0.0]
    for offset, (model, boot) in zip(offsets, boots.items()):
        frame = boot.table()
        positions = [labels.index(label) + offset for label in frame[by]]
        axis.errorbar(frame["accuracy"], positions, xerr=[frame["accuracy"] - frame["ci_low"],
                                                          frame["ci_high"] - frame["accuracy"]],
                      fmt="o", color=colors[model], capsize=3, label=model, markersize=4)
    axis.set_yticks(range(len(labels)), labels)
    axis.invert_yaxis()
    axis.set_xlabel(f"accuracy p_c ({confidence:.0%} bootstrap interval)")
    axis.grid(alpha=0.3, axis="x")
    axis.legend(fontsize=7)
    axis.set_title(title or f"Accuracy by {by}")
    return _save(figure, path)


def checkpoint_name_vectors(checkpoint: str | Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The word vector of each name in a nerbias checkpoint (lower-cased when the model lower-cases
    words); names outside its vocabulary are left out (they would all share the <unk> vector)."""
    from nerbias.tagger import NerTagger

    tagger = NerTagger.load(checkpoint)
    if tagger.model.words is None:
        raise NerbiasError(f"{checkpoint}: the model has no word-embedding table (ELMo-style), so there are "
                           "no name vectors to project")
    weight = tagger.model.words.weight.detach().cpu().numpy()
    vectors = {}
    for name in names:
        key = name.lower() if tagger.lowercase_words else name
        if key in tagger.words:
            vectors[name] = weight[tagger.words.index[key]]
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
    colors = _colors(groups)
    figure, axes = _figure(1, 1, 7.5, 6)
    axis = axes[0][0]
    for group in groups:
        rows = [i for i, name in enumerate(names) if group_of[name] == group]
        axis.scatter(points[rows, 0], points[rows, 1], color=colors[group], label=group, s=22)
        for i in rows:
            axis.annotate(names[i], points[i], fontsize=5, alpha=0.7, xytext=(2, 2), textcoords="offset points")
    axis.legend(fontsize=7)
    axis.set_xticks([])
    axis.set_yticks([])
    axis.set_title(title or f"t-SNE of first-name embeddings ({len(names)} names, perplexity {perplexity:.3g})")
    return _save(figure, path)


_MEASURE_TITLES = {"type1": "type 1 (not PERSON)", "type2": "type 2 (other type)", "type3": "type 3 (untagged)"}


def _census_panels(boot: pd.DataFrame, template: int, axes):
    """(row, axis, error type, weighting, that measure's rows by year) for the 2 x 3 census panels."""
    part = boot[boot["template"] == template].sort_values("year")
    for row, (suffix, weighting) in enumerate((("w", "weighted"), ("u", "unweighted"))):
        for column, kind in enumerate(("type1", "type2", "type3")):
            yield row, axes[row][column], kind, weighting, part[part["measure"] == f"{kind}_{suffix}"]


def plot_census_bands(boot: pd.DataFrame, path: str | Path, template: int, title: str | None = None) -> Path:
    """Per-year error rates of female and male names, 2 x 3 panels (weighted / unweighted x
    types 1-3), each with its bootstrap band: the census paper's figure with intervals."""
    figure, axes = _figure(2, 3, 5, 3.4)
    for row, axis, kind, weighting, series in _census_panels(boot, template, axes):
        for sex, label, color in (("F", "female", "tab:red"), ("M", "male", "tab:blue")):
            axis.fill_between(series["year"], series[f"{sex}_low"], series[f"{sex}_high"], color=color, alpha=0.2,
                              linewidth=0)
            axis.plot(series["year"], series[sex], color=color, label=label, linewidth=1.1)
        _label_census_panel(axis, row, kind, weighting, "error rate")
    axes[0][0].legend(fontsize=8)
    sentence = " ".join(["<Name>", census.TEMPLATES.get(template, "")]).strip()
    figure.suptitle(title or f"Census template {template} (\"{sentence}\"): errors by year, 95% bands over names")
    return _save(figure, path, dpi=100)


def _label_census_panel(axis, row: int, kind: str, weighting: str, ylabel: str) -> None:
    axis.set_title(f"{_MEASURE_TITLES[kind]}, {weighting}", fontsize=9)
    axis.set_ylabel(ylabel)
    axis.grid(alpha=0.3)
    if row == 1:
        axis.set_xlabel("year")


def plot_census_gap(boot: pd.DataFrame, path: str | Path, template: int, title: str | None = None) -> Path:
    """Female - male gap of each error measure per year with its bootstrap band; above 0 means
    female names are mis-tagged more often."""
    figure, axes = _figure(2, 3, 5, 3.4)
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
    colors = _colors(templates)
    figure, axes = _figure(1, 1, 9, 4.2)
    axis = axes[0][0]
    for template in templates:
        series = part[part["template"] == template].sort_values("year")
        axis.fill_between(series["year"], series["gap_low"], series["gap_high"], color=colors[template], alpha=0.15,
                          linewidth=0)
        axis.plot(series["year"], series["gap"], color=colors[template], linewidth=1, label=f"template {template}")
    axis.axhline(0, color="black", linewidth=0.8)
    axis.set_xlabel("year")
    axis.set_ylabel(f"female - male {measure}")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, ncol=3)
    axis.set_title(title or f"Female - male gap of {measure} by template, 95% bootstrap bands")
    return _save(figure, path, dpi=100)


def plot_census_errors_plain(errors: pd.DataFrame, path: str | Path, template: int) -> Path:
    """The curves without bands, when the per-name labels needed for them are not available."""
    return census.plot_census_errors(errors, path, template=template)


# ----------------------------------------------------------------------------------------------
# Census: per-name labels back from a run


def census_name_frame(run: Run, ssa: str | Path | None = None, predictions: str | Path | None = None) -> pd.DataFrame:
    """The per-name census frame of a run (year, sex, name, label, count, template), the input of
    census.census_errors: rebuilt from ``census_labels.csv`` for a tagger, or from the published
    predictions for ``tagger=precomputed``, over the years of the run's ``census_errors.csv``.

    ``ssa`` / ``predictions`` override the paths in the run's config. The rebuilt errors are
    checked against ``census_errors.csv`` so that intervals never describe other data.
    """
    errors = run.tables.get("census_errors")
    if errors is None:
        raise NerbiasError(f"{run.path}: not a census run")
    ssa = ssa or run.setting("corpus.ssa")
    if not ssa:
        raise NerbiasError(f"{run.path}: where are the SSA names? (no corpus.ssa in the run's config; pass ssa=)")
    years = sorted(int(y) for y in errors["year"].unique())
    frame_ssa = census.read_ssa(ssa, years=years, progress=False)
    labels = run.tables.get("census_labels")
    if labels is not None:
        frames = [census.attach_labels(frame_ssa, dict(zip(part["name"], part["label"])), int(template))
                  for template, part in labels.groupby("template")]
    elif run.setting("tagger.kind") == "precomputed" or predictions:
        folder = predictions or run.setting("tagger.path")
        templates = sorted(int(t) for t in errors["template"].unique())
        frames = [census.load_precomputed(folder, frame_ssa, template=t, progress=False) for t in templates]
    else:
        raise NerbiasError(f"{run.path}: no census_labels.csv and not a precomputed run: per-name labels unknown")
    frame = pd.concat(frames, ignore_index=True)
    rebuilt = census.census_errors(frame).merge(errors, on=["year", "gender", "template"], suffixes=("", "_saved"))
    if len(rebuilt) != len(errors):
        raise NerbiasError(f"{run.path}: rebuilt census errors cover {len(rebuilt)} of {len(errors)} rows")
    worst = max(float((rebuilt[c] - rebuilt[f"{c}_saved"]).abs().max()) for c in census.ERROR_COLUMNS)
    if worst > 1e-4:  # the saved CSV keeps 6 significant digits
        raise NerbiasError(f"{run.path}: per-name labels do not reproduce census_errors.csv (max difference "
                           f"{worst:.2g}); SSA or prediction files differ from the run's")
    return frame


def census_year_table(boot: pd.DataFrame, measure: str = "type1_w",
                      years: Sequence[int] = REPRESENTATIVE_YEARS) -> pd.DataFrame:
    """Female, male and gap with intervals for a few representative years (those present)."""
    part = boot[(boot["measure"] == measure) & boot["year"].isin(list(years))].sort_values(["template", "year"])
    if part.empty:  # few years in the run: show them all
        part = boot[boot["measure"] == measure].sort_values(["template", "year"])
    return pd.DataFrame({
        "template": part["template"], "year": part["year"],
        "female": [interval_text(*v) for v in part[["F", "F_low", "F_high"]].to_numpy()],
        "male": [interval_text(*v) for v in part[["M", "M_low", "M_high"]].to_numpy()],
        "female - male": [interval_text(*v) for v in part[["gap", "gap_low", "gap_high"]].to_numpy()],
    })


# ----------------------------------------------------------------------------------------------
# The static report


@dataclass
class ReportOptions:
    n_boot: int = DEFAULT_N_BOOT
    n_permutations: int = DEFAULT_N_PERMUTATIONS
    confidence: float = DEFAULT_CONFIDENCE
    seed: int = 0
    census_boot: int = CENSUS_N_BOOT
    census_permutations: int = 0  # per-year tests are slow and weak after Holm over 139 years: opt in
    census_years: Sequence[int] | None = None
    ssa: str | Path | None = None
    predictions: str | Path | None = None
    checkpoint: str | Path | None = None


@dataclass
class Section:
    lines: list[str] = field(default_factory=list)
    images: dict[str, Path] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    scalars: dict[str, float] = field(default_factory=dict)

    def add_table(self, key: str, frame: pd.DataFrame, out_dir: Path, display: pd.DataFrame | None = None) -> None:
        self.tables[key] = frame
        with atomic_path(out_dir / f"report_{key}.csv") as tmp:
            frame.to_csv(tmp, index=False, float_format="%.6g")
        self.lines += [markdown_table(frame if display is None else display), ""]

    def add_image(self, key: str, path: Path | None, caption: str) -> None:
        if path is None:
            return
        self.images[key] = path
        self.lines += [f"![{caption}]({path.name})", "", f"*{caption}*", ""]


def names_section(runs: Sequence[Run], names: NameList, out_dir: Path, options: ReportOptions) -> Section:
    table = name_table(runs, names)
    model = runs[0].label if len({r.label for r in runs}) == 1 else " + ".join(dict.fromkeys(r.label for r in runs))
    tables = {model: table}
    section = Section()
    kw = dict(n_boot=options.n_boot, confidence=options.confidence, seed=options.seed)
    level = "names and training seeds (crossed)" if table.n_seeds > 1 else "names within each group"
    section.lines += [
        f"# Bias report: {model} on {runs[0].corpus_title}", "",
        f"- runs: {len(runs)} ({', '.join(str(r.path) for r in runs)})",
        f"- names: {len(table.names)} in {len(table.facet_labels('group'))} groups"
        + (f", OOV name {table.oov_name}" if table.oov_name else ""),
        f"- intervals: {options.confidence:.0%} percentile bootstrap, B = {options.n_boot}, resampling {level}",
        f"- tests: permutation of group labels among names (scipy.stats.permutation_test, "
        f"{options.n_permutations} resamples, two-sided); pairwise p-values Holm-adjusted over all pairs", "",
    ]

    boot = bootstrap_group_accuracy(table, "group", **kw)
    groups = boot.table(with_all=True)
    shares = [r.tables["per_group"] for r in runs if "share_below_oov_accuracy" in r.tables.get("per_group", {})]
    if shares:  # per_group's share of names below the OOV name, mean over runs (no interval)
        below = pd.concat(shares).groupby("group")["share_below_oov_accuracy"].mean()
        groups["share_below_oov_accuracy"] = groups["group"].map(below)
    display = groups.assign(accuracy=[interval_text(a, lo, hi, 4) for a, lo, hi in
                                      groups[["accuracy", "ci_low", "ci_high"]].to_numpy()]).drop(
        columns=["ci_low", "ci_high", "se", "seeds"])
    section.lines += ["## Accuracy by group (Tables 3 / 7)", ""]
    oov = table.oov_value("accuracy")
    if oov is not None:
        section.lines += [f"OOV name ({table.oov_name}) accuracy: {oov:.4f}", ""]
    section.add_table("group_accuracy", groups, out_dir, display)
    gap = boot.gap()
    section.lines += [f"**Gap, best ({gap['best']}) minus worst ({gap['worst']}) group: "
                      f"{interval_text(gap['gap'], gap['ci_low'], gap['ci_high'], 4)}** "
                      "(interval of the range max - min, recomputed in each replicate).", ""]
    section.scalars.update({"report/gap": gap["gap"], "report/gap_ci_low": gap["ci_low"],
                            "report/gap_ci_high": gap["ci_high"]})
    for row in groups.itertuples(index=False):
        section.scalars.update({f"report/{row.group}/accuracy": row.accuracy,
                                f"report/{row.group}/ci_low": row.ci_low, f"report/{row.group}/ci_high": row.ci_high})
    section.add_image("group_accuracy", plot_group_accuracy(tables, out_dir / "report_group_accuracy.png", **kw),
                      "Accuracy by group with 95% bootstrap intervals")

    for by in ("gender", "race"):
        if not table.has_facet(by):
            continue
        facet = bootstrap_group_accuracy(table, by, **kw)
        frame = facet.table()
        section.lines += [f"## Accuracy by {by}", ""]
        section.add_table(f"{by}_accuracy", frame, out_dir, frame.assign(
            accuracy=[interval_text(a, lo, hi, 4) for a, lo, hi in frame[["accuracy", "ci_low", "ci_high"]].to_numpy()])
            .drop(columns=["ci_low", "ci_high", "se", "seeds"]))
        facet_gap = facet.gap()
        section.lines += [f"Gap, best ({facet_gap['best']}) minus worst ({facet_gap['worst']}): "
                          f"{interval_text(facet_gap['gap'], facet_gap['ci_low'], facet_gap['ci_high'], 4)}", ""]
        section.scalars[f"report/{by}_gap"] = facet_gap["gap"]

    section.lines += ["## Permutation tests", ""]
    if table.has_facet("gender"):
        gender = gender_permutation_test(table, n_resamples=options.n_permutations, seed=options.seed)
        section.lines += ["Female vs male names (difference = female - male weighted accuracy):", ""]
        section.add_table("permutation_gender", gender, out_dir)
        section.scalars["report/female_minus_male"] = float(gender["difference"].iloc[0])
        section.scalars["report/female_minus_male_p"] = float(gender["p_value"].iloc[0])
    pairs = pairwise_permutation_tests(table, "group", n_resamples=options.n_permutations, seed=options.seed)
    section.lines += [f"Every pair of groups ({len(pairs)} tests; `p_holm` controls the family-wise error "
                      "over all of them):", ""]
    section.add_table("permutation_pairs", pairs, out_dir)

    section.lines += ["## Spread of name accuracy (Table 4)", ""]
    spread = bootstrap_spread(table, "accuracy", **kw)
    section.add_table("spread_accuracy", spread, out_dir, _spread_display(spread))
    if "conf_median" in table.columns and not np.all(np.isnan(table.values("conf_median"))):
        section.lines += ["## Spread of median PERSON confidence (Table 5)", ""]
        confidence_spread = bootstrap_spread(table, "conf_median", **kw)
        section.add_table("spread_conf_median", confidence_spread, out_dir, _spread_display(confidence_spread))

    breakdown = _label_breakdown(runs)
    if breakdown is not None:
        section.lines += ["## What unrecognised names got instead (share of slots, mean over runs)", ""]
        section.add_table("label_breakdown", breakdown, out_dir)

    section.lines += ["## Distributions (Figures 1, 2, 4-8)", ""]
    for by in ("group", "gender", "race"):
        if table.has_facet(by):
            path = plot_ecdf_grid(tables, out_dir / f"report_ecdf_accuracy_by_{by}.png", "accuracy", by,
                                  title=f"{runs[0].corpus_title}: name accuracy by {by}, 95% bootstrap bands", **kw)
            section.add_image(f"ecdf_accuracy_by_{by}", path, f"ECDF of name accuracy by {by}")
    path = plot_ecdf_grid(tables, out_dir / "report_ecdf_conf_p25_by_group.png", "conf_p25", "group",
                          title=f"{runs[0].corpus_title}: 25th-percentile PERSON confidence, 95% bootstrap bands", **kw)
    section.add_image("ecdf_conf_p25_by_group", path, "ECDF of the 25th-percentile PERSON confidence by group")
    if options.checkpoint:
        vectors = checkpoint_name_vectors(options.checkpoint, table.names)
        path = plot_name_tsne(vectors, dict(zip(table.names, table.groups)), out_dir / "report_tsne_names.png",
                              seed=options.seed)
        section.add_image("tsne_names", path, f"t-SNE of the names' word vectors in {options.checkpoint} (Figure 3)")
    return section


def _spread_display(spread: pd.DataFrame) -> pd.DataFrame:
    out = spread[["group", "names"]].copy()
    for stat in ("min", "mean", "std", "median"):
        out[stat] = [interval_text(v, lo, hi) for v, lo, hi in spread[[stat, f"{stat}_low", f"{stat}_high"]].to_numpy()]
    return out


def _label_breakdown(runs: Sequence[Run]) -> pd.DataFrame | None:
    frames = [r.tables["label_breakdown"] for r in runs if "label_breakdown" in r.tables]
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    names_per_group = runs[0].per_name.groupby("group")["name"].nunique()
    shares = pd.concat(frames).groupby(["group", "label"])["share"].sum() / len(runs)
    # share of the group's slots: names weigh equally (as they nearly do in balanced corpora)
    shares = (shares / shares.index.get_level_values("group").map(names_per_group).to_numpy()).rename("share")
    wide = shares.reset_index().pivot(index="group", columns="label", values="share").fillna(0.0)
    order = [g for g in runs[0].per_name["group"].drop_duplicates() if g in wide.index]
    return wide.loc[order].reset_index()


def census_section(run: Run, out_dir: Path, options: ReportOptions) -> Section:
    section = Section()
    errors = run.tables["census_errors"]
    templates = sorted(int(t) for t in errors["template"].unique())
    years = sorted(int(y) for y in errors["year"].unique())
    section.lines += [f"# Census benchmark report: {run.label}", "",
                      f"- run: {run.path}", f"- templates: {templates}; years {years[0]}-{years[-1]} ({len(years)})"]
    try:
        frame = census_name_frame(run, options.ssa, options.predictions)
    except Exception as error:  # no SSA files or labels here: curves without bands, said so
        log.warning("census intervals skipped: %s", error)
        section.lines += [f"- intervals: not computed ({error})", ""]
        for template in templates:
            path = plot_census_errors_plain(errors, out_dir / f"report_census_errors_template{template}.png", template)
            section.add_image(f"census_errors_template{template}", path, f"Template {template}: errors by year")
        return section
    section.lines += [
        f"- intervals: {options.confidence:.0%} percentile bootstrap, B = {options.census_boot}, resampling each "
        "year's names of each sex with replacement (exact, via multinomial draws over (count, outcome) classes); "
        "female and male drawn independently, gap = female - male in each replicate; years are not pooled", ""]
    boot = bootstrap_census(frame, n_boot=options.census_boot, confidence=options.confidence, seed=options.seed,
                            years=options.census_years)
    section.tables["census_bootstrap"] = boot
    with atomic_path(out_dir / "report_census_bootstrap.csv") as tmp:
        boot.to_csv(tmp, index=False, float_format="%.6g")
    section.lines += [f"## Female - male gap: years whose {options.confidence:.0%} interval lies above or below 0", ""]
    summary = pd.concat([census_gap_summary(boot, measure) for measure in CENSUS_MEASURES], ignore_index=True)
    section.add_table("census_gap_summary", summary, out_dir)
    for row in summary.itertuples(index=False):
        prefix = f"report/census/template{row.template}/{row.measure}"
        section.scalars.update({f"{prefix}/years_female_worse": row.years_female_worse,
                                f"{prefix}/years_male_worse": row.years_male_worse})
    for measure in ("type1_w", "type1_u"):
        section.lines += [f"## {measure}: representative years", ""]
        section.add_table(f"census_years_{measure}", census_year_table(boot, measure), out_dir)
    for row in boot[boot["measure"] == "type1_w"].itertuples(index=False):
        if row.year in REPRESENTATIVE_YEARS:
            section.scalars[f"report/census/template{row.template}/{row.year}/type1_w_gap"] = row.gap
    if options.census_permutations:
        tests = permutation_census(frame, "type1_w", n_resamples=options.census_permutations, seed=options.seed,
                                   years=options.census_years)
        section.lines += [f"## Permutation test per year (type1_w, {options.census_permutations} shuffles of the "
                          "sex labels; `p_holm` over the years of a template)", "",
                          f"Years with p_holm < 0.05: {int((tests['p_holm'] < 0.05).sum())} of {len(tests)}", ""]
        section.tables["census_permutation"] = tests
        with atomic_path(out_dir / "report_census_permutation.csv") as tmp:
            tests.to_csv(tmp, index=False, float_format="%.6g")
    section.lines += ["## Figures", ""]
    for template in templates:
        section.add_image(f"census_errors_template{template}",
                          plot_census_bands(boot, out_dir / f"report_census_errors_template{template}.png", template),
                          f"Template {template}: error rates by year, female vs male, 95% bands")
        section.add_image(f"census_gap_template{template}",
                          plot_census_gap(boot, out_dir / f"report_census_gap_template{template}.png", template),
                          f"Template {template}: female - male gap by year with its 95% interval")
    return section


def render_report(run_dirs: Sequence[str | Path], names_path: str | Path | None = None,
                  output_dir: str | Path | None = None, options: ReportOptions | None = None,
                  logger: NullLogger | None = None) -> Path:
    """Write ``report.md`` (+ PNG and CSV files) into ``output_dir`` (default: the first run
    directory) and log tables, figures and scalars to ``logger``. Returns the report's path.

    Name-corpus runs are taken as training seeds of one model on one corpus; census runs are
    reported one after another.
    """
    options = options or ReportOptions()
    logger = logger or NullLogger()
    runs = [load_run(path) for path in run_dirs]
    if not runs:
        raise NerbiasError("no run directory given")
    kinds = {run.kind for run in runs}
    if len(kinds) > 1:
        raise NerbiasError("mix of census and name-corpus runs: report them separately")
    out_dir = Path(output_dir or runs[0].path)
    out_dir.mkdir(parents=True, exist_ok=True)
    if kinds == {"names"}:
        sections = [names_section(runs, names_for(runs, names_path), out_dir, options)]
    else:
        sections = [census_section(run, out_dir, options) for run in runs]
    text = "\n".join(line for section in sections for line in section.lines).rstrip() + "\n"
    report = out_dir / "report.md"
    atomic_write_text(report, text)
    try:  # W&B is a copy of what is on disk: a failure there is a warning, never a lost report
        for section in sections:
            logger.summary(section.scalars)
            for key, frame in section.tables.items():
                logger.table(f"report/{key}", frame)
            for key, path in section.images.items():
                logger.image(f"report/{key}", path)
        logger.artifact("bias-report", "report", report)
    except Exception as error:
        log.warning("W&B logging of the report failed (%s); the report is on disk", error)
    return report


# ----------------------------------------------------------------------------------------------
# Notebooks


def run_notebook(path: str | Path, parameters: Mapping[str, Any] | None = None, output_path: str | Path | None = None,
                 cwd: str | Path | None = None, timeout: int = 600, kernel_name: str = "python3"):
    """Execute a notebook headless with nbclient; ``parameters`` go into a cell inserted after the
    one tagged ``parameters`` (papermill's convention, so papermill runs the same notebooks).
    Returns the executed notebook; ``output_path`` also saves it."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(str(path), as_version=4)
    if parameters:
        source = "# Parameters\n" + "\n".join(f"{key} = {value!r}" for key, value in parameters.items())
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
        tagged = [i for i, c in enumerate(notebook.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
        notebook.cells.insert(tagged[0] + 1 if tagged else 0, cell)
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parents[1]
    NotebookClient(notebook, timeout=timeout, kernel_name=kernel_name,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    if output_path:
        with atomic_path(output_path) as tmp:
            nbformat.write(notebook, str(tmp))
    return notebook


__all__ = [
    "ReportOptions", "Run", "accuracy_table", "census_name_frame", "census_year_table", "checkpoint_name_vectors",
    "gap_table", "load_run", "load_tables", "markdown_table", "name_table", "names_for", "plot_census_bands",
    "plot_census_gap", "plot_census_gap_by_template", "plot_ecdf_grid", "plot_group_accuracy", "plot_name_tsne",
    "render_report", "run_notebook", "spread_table",
]
