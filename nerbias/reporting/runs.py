"""Reading runs back: what a Hydra run directory saved, and an evaluate.py run's results.

The one reader of a run directory's saved files, for the report and for the study of many runs (``nerbias.study``):
its Hydra config (``.hydra/config.yaml``, ``overrides.yaml``, ``hydra.yaml``), dotted-key lookup
in that config, and ``metrics.json``.

On top of it, ``Run``: what one evaluate.py run left (``per_name.csv`` ... or
``census_errors.csv``), read from its directory or from an offline W&B run of it (a folder
holding ``run-*.wandb``, or a run directory whose ``wandb/`` holds one), whose logged tables are
read back. Online W&B runs are not fetched: sync or download them to a folder first. Then the
seeds x names table of a model (``name_table``, ``load_tables``) and a census run's per-name
labels (``census_outcomes``).
"""

from __future__ import annotations

import csv
import json
import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml
from omegaconf import OmegaConf

from nerbias.bias import census, published
from nerbias.bias.names import NameList, load_names
from nerbias.bias.types import corpus_title, parse_corpus_label, partial_note, result_file_name
from nerbias.bias.ssa import load_ssa
from nerbias.data.debias_diagnostics import DIAGNOSTICS_FILE
from nerbias.errors import DataFormatError, NerbiasError
from nerbias.fileio import FILE_RECORD, RESOLVED_CONFIG, check_recorded_files
from nerbias.loggers import read_offline_run
from nerbias.reporting.uncertainty import NameTable

log = logging.getLogger(__name__)

RUN_FILES = ("per_name", "per_group", "label_breakdown", "census_errors", "census_labels")
TEXT_COLUMNS = ("name", "group", "label", "gender", "place_kinds", "list")
# The columns the report reads from each result file of evaluate.py.
REQUIRED_COLUMNS = {"per_name": ("name", "group", "sentences", "recognised"), "per_group": ("group",),
                    "label_breakdown": ("group", "label", "share"),
                    "census_errors": ("year", "gender", "template", *census.ERROR_COLUMNS),
                    "census_labels": ("name", "template", "label")}


# ----------------------------------------------------------------------------------------------
# A run directory's saved files


def is_hydra_run(path: Path) -> bool:
    return (path / ".hydra" / "config.yaml").is_file()


def _read_saved_yaml(path: Path) -> Any:
    # Hydra writes through OmegaConf, which quotes whatever plain YAML would read as another type.
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def saved_config(run_dir: Path, resolve: bool = False) -> Any:
    """``.hydra/config.yaml`` as plain dicts and lists, interpolations as written. With ``resolve``,
    resolved as far as this process can: ``${hydra:...}`` resolves only inside a Hydra app, so
    ``paths.output_dir`` becomes the run directory, and when anything else fails the paths the
    report reads are kept resolved where they resolve."""
    resolved_file = run_dir / RESOLVED_CONFIG  # written by the run itself: no resolving here
    if resolve and resolved_file.is_file():
        return _read_saved_yaml(resolved_file) or {}
    path = run_dir / ".hydra" / "config.yaml"
    config = _read_saved_yaml(path) or {}
    if not resolve:
        return config
    cfg = OmegaConf.create(config)
    if OmegaConf.select(cfg, "paths") is not None:
        cfg.paths.output_dir = str(run_dir)
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


def value_text(value: Any) -> str:
    """A config value as an override writes it: ``null``, ``true``/``false``, else ``str``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_overrides(lines: Sequence[str]) -> dict[str, str]:
    """``key=value`` overrides (as in .hydra/overrides.yaml) as {key: value text}; later ones win."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed: dict[str, str] = {}
    for line in lines:
        try:
            override = parser.parse_override(str(line))
            key = override.key_or_group + (f"@{override.package}" if override.package else "")
            if override.is_delete():
                parsed[key] = "~"
            elif override.is_sweep_override():
                parsed[key] = override.get_value_element_as_str()
            else:
                parsed[key] = value_text(override.value())
        except HydraException:  # not Hydra's grammar (hand-edited file): the plain key=value split
            key, _, value = str(line).lstrip("+~").partition("=")
            parsed[key] = value
    return parsed


def saved_overrides(run_dir: Path) -> dict[str, str]:
    """The command-line overrides of the run (``.hydra/overrides.yaml``); {} when it has none."""
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return {}
    return parse_overrides(_read_saved_yaml(path) or [])


def launch_directory(run_dir: Path) -> str | None:
    """The directory the run was started in (``hydra.runtime.cwd``): relative paths of its config start there."""
    path = run_dir / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return None
    return select(_read_saved_yaml(path), "hydra.runtime.cwd")


def recorded_run_dir(config: Any) -> Path | None:
    """The directory a run was launched to write (``paths.output_dir`` of its resolved config), when the
    config records one: a run copied or renamed since no longer sits there."""
    folder = select(config, "paths.output_dir")
    return Path(folder) if isinstance(folder, str) and folder and "${" not in folder else None


def select(config: Any, key: str, default: Any = None) -> Any:
    """``config["a"]["b"]`` for ``key="a.b"``; ``default`` where a part is missing."""
    node = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def read_metrics(run_dir: Path) -> Any:
    """The run's ``metrics.json`` ({"metrics": {...}, ...}); None before the run has finished."""
    path = run_dir / "metrics.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def read_debias_diagnostics(run_dir: Path) -> Any:
    """The run's ``debias_diagnostics.json`` (``nerbias.data.debias_diagnostics``); None when the run wrote
    none (it neither normalised nor de-biased, or predates the file)."""
    path = Path(run_dir) / DIAGNOSTICS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# ----------------------------------------------------------------------------------------------
# evaluate.py runs


@dataclass
class Run:
    """What one evaluate.py run left: its tables, metrics and configuration."""

    path: Path
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    tagger_name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    source: str = "directory"  # or "wandb-offline"
    partial: str | None = None  # a merge that lacks shards: what it lacks (runner.partial_note)

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
        return select(self.config, key, default)

    @property
    def corpus(self) -> str:
        name = self.setting("corpus.name")
        if name:
            return str(name)
        if self.kind == "census":
            return "census"
        labels = {key.split("/")[0] for key in self.metrics if "/" in key}  # <corpus label>/<metric>
        if len(labels) == 1:
            return parse_corpus_label(labels.pop())[0]
        return "unknown"

    @property
    def lowercase(self) -> bool:
        value = self.setting("corpus.lowercase")
        if value is not None:
            return bool(value)
        return any(parse_corpus_label(key.split("/")[0])[1] for key in self.metrics)

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
        return corpus_title(self.corpus, self.lowercase)


def read_table(path: Path, required: Sequence[str] = ()) -> pd.DataFrame:
    """A run's CSV. Names such as "Nan" or "Null" and the untagged census label "" stay strings;
    only the numeric columns turn empty cells into NaN. ``required`` columns must be there."""
    try:
        with open(path, encoding="utf-8-sig") as file:  # as pandas reads it: a byte-order mark is not a name
            header = next(csv.reader(file), [])
        numeric = [column for column in header if column not in TEXT_COLUMNS]
        # the parser types the numeric columns itself (a tenth of the time of strings then to_numeric)
        frame = pd.read_csv(path, dtype={column: str for column in header if column in TEXT_COLUMNS},
                            keep_default_na=False, na_values={column: [""] for column in numeric})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, csv.Error) as error:
        raise DataFormatError(path, f"not a readable CSV table ({' '.join(str(error).split())})") from None
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise DataFormatError(path, f"missing columns {missing} (has {list(frame.columns)}): not the file "
                                    "evaluate.py wrote", 1)
    for column in frame.columns:
        if column not in TEXT_COLUMNS and not pd.api.types.is_numeric_dtype(frame[column]):
            try:
                frame[column] = pd.to_numeric(frame[column])
            except (ValueError, TypeError) as error:  # names the first cell that is not a number
                raise DataFormatError(path, f"column {column!r} is not numeric ({error})") from None
    return frame


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
    saved = read_metrics(path) if (path / "metrics.json").is_file() else None
    partial = partial_note(saved or {})  # a partial merge's files are per_name.partial.csv ...
    files = {name: path / result_file_name(name, ".csv", bool(partial)) for name in RUN_FILES}
    files = {name: file for name, file in files.items() if file.is_file()}
    if "per_name" in files or "census_errors" in files:
        if saved is not None and FILE_RECORD in saved:  # what the run says it wrote (older runs lack it)
            check_recorded_files(path, saved[FILE_RECORD])
        tables = {name: read_table(file, REQUIRED_COLUMNS[name]) for name, file in files.items()}
        saved = saved or {}
        config = saved_config(path, resolve=True) if is_hydra_run(path) or (path / RESOLVED_CONFIG).is_file() else {}
        return Run(path, tables, saved.get("metrics", {}), saved.get("tagger"), config, partial=partial)
    folder = _offline_run_folder(path)
    if folder is None:
        if (path / "checkpoints" / "best.pt").is_file():
            bias = sorted(p.name for p in (path / "bias").iterdir() if p.is_dir()) if (path / "bias").is_dir() else []
            hint = (f"pass its bias evaluations instead ({', '.join(f'{path}/bias/{b}' for b in bias)})" if bias else
                    f"evaluate it first: python evaluate.py tagger.path={path}/checkpoints/best.pt "
                    "corpus=winogender|insitu|census, then pass that run directory")
            raise NerbiasError(f"{path} is a training run, not an evaluation: {hint}")
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


def census_outcomes(run: Run, ssa: str | Path | None = None, predictions: str | Path | None = None
                    ) -> census.CensusOutcomes:
    """A run's per-name census outcomes (census.CensusOutcomes: the SSA rows as arrays, each row's
    outcome per template), the input of the census intervals: rebuilt from ``census_labels.csv`` for a
    tagger, or from the published predictions for ``tagger=precomputed``, over the years (and the
    ``corpus.names`` subset) of the run's ``census_errors.csv``.

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
    table = load_ssa(ssa, years=years, progress=False)
    subset = str(run.setting("corpus.names") or "all")
    if subset != "all":
        excluded = [n for path in (run.setting("corpus.pool_exclude") or [None]) for n in load_names(path).names]
        table = census.select_names(table, subset, excluded)
    templates = sorted(int(t) for t in errors["template"].unique())
    labels = run.tables.get("census_labels")
    if run.setting("tagger.kind") == "precomputed" or predictions:  # labels per year: read the files again
        folder = predictions or run.setting("tagger.path")
        fmt = run.setting("tagger.format") or "auto"
        kinds = published.published_kinds(*published.read_published(folder, table, fmt, progress=False))
        outcomes = census.CensusOutcomes(table, tuple(templates), np.stack([kinds] * len(templates)))
    elif labels is not None:
        per_template = {}
        for template, part in labels.groupby("template"):
            position = pd.Index(part["name"].astype(str)).get_indexer(table.names)
            if (position < 0).any():
                raise NerbiasError(f"{run.path}: census_labels.csv has no template-{template} label for "
                                   f"{int((position < 0).sum())} names, e.g. {table.names[np.argmax(position < 0)]!r}")
            per_template[int(template)] = part["label"].to_numpy(dtype=object)[position]
        outcomes = census.CensusOutcomes.from_name_labels(table, per_template)
    else:
        raise NerbiasError(f"{run.path}: no census_labels.csv and not a precomputed run: per-name labels unknown")
    rebuilt = outcomes.errors().merge(errors, on=["year", "gender", "template"], suffixes=("", "_saved"))
    if len(rebuilt) != len(errors):
        raise NerbiasError(f"{run.path}: rebuilt census errors cover {len(rebuilt)} of {len(errors)} rows")
    worst = max(float((rebuilt[c] - rebuilt[f"{c}_saved"]).abs().max()) for c in census.ERROR_COLUMNS)
    if worst > 1e-4:  # the saved CSV keeps 6 significant digits
        raise NerbiasError(f"{run.path}: per-name labels do not reproduce census_errors.csv (max difference "
                           f"{worst:.2g}); SSA or prediction files differ from the run's")
    return outcomes
