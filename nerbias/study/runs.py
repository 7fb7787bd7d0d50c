"""A mitigation study's runs, read back: the finished training runs of a sweep by condition
(``find_study``), the figures of one condition on one corpus (``Figures``), and the census figures with
their name-part replicates (``census_figures``). ``mitigation`` gives them intervals and writes the tables."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from nerbias.bias import census
from nerbias.bias.names import load_names, substitution_pool
from nerbias.bias.name_pools import SSA_POOLS
from nerbias.data.ambiguity import saved_name_pool
from nerbias.bias.ssa import SEXES, load_ssa
from nerbias.errors import NerbiasError
from nerbias.fileio import RESOLVED_CONFIG
from nerbias.reporting.intervals import Statistic, inflate
from nerbias.reporting.runs import Run, is_hydra_run, load_run, read_metrics, recorded_run_dir, saved_config, select

NAME_CORPORA = ("winogender", "insitu")  # the corpora that fill templates with the names of the groups
REFERENCE_RACE = "White"  # race gaps are the White names' accuracy minus each other race's
RACE_GAP_PREFIX = f"{REFERENCE_RACE} - "


def race_gap_metric(race: str) -> str:
    """The metric name of the reference race's accuracy minus ``race``'s: ``White - Black``."""
    return RACE_GAP_PREFIX + race


CONLL_METRICS = {"test_f1": "CoNLL test F1", "test_lower_f1": "CoNLL test F1 (lower-cased)",
                 "test_span_ece": "CoNLL test span ECE",
                 # places that are places: what a condition that makes place-like names persons may cost (issue 45)
                 "test_recall_LOC": "CoNLL test LOCATION recall"}


@dataclass
class StudyRun:
    condition: str
    seed: int
    path: Path
    conll: dict[str, float]
    best_epoch: int | None = None   # 1-based, as metrics.json records it
    epochs: int | None = None
    commit: str | None = None       # the code that trained it (metrics.json "code")
    # the kinds of CPU or GPU it trained on, one per change across resumed attempts (metrics.json "platforms";
    # "platform" alone in runs trained before attempts were recorded); empty: not recorded
    platforms: list[dict] = field(default_factory=list)
    # the pool its name substitution drew from: (source, the name lists it avoids), data dir; None: no substitution
    pool: tuple[str, list[str | None]] | None = None
    data_dir: str | None = None


@dataclass
class Study:
    runs: dict[str, list[StudyRun]]          # condition -> finished runs, seed order
    unfinished: list[Path] = field(default_factory=list)

    def only(self, conditions: Sequence[str], baseline: str, condition_key: str = "condition") -> "Study":
        """The study of ``conditions`` alone (their family and their unfinished jobs, as a sweep of only them
        would give), or an error naming a condition the sweep lacks or the baseline left out."""
        if baseline not in conditions:
            raise NerbiasError(f"--conditions {','.join(conditions)}: the baseline ({baseline}) must be among them "
                               "(every difference is taken from it)")
        missing = [c for c in conditions if c not in self.runs]
        if missing:
            raise NerbiasError(f"--conditions: no finished run of {', '.join(missing)} in the sweep; it has "
                               f"{', '.join(self.runs)}")
        unfinished = [p for p in self.unfinished if str(select(saved_config(p, resolve=True), condition_key)) in conditions]
        return Study({c: rs for c, rs in self.runs.items() if c in conditions}, unfinished)


def find_study(sweep_dir: str | Path, condition_key: str = "condition") -> Study:
    """The finished training runs under ``sweep_dir``, by condition (order of first appearance)."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise NerbiasError(f"{sweep_dir}: no such sweep directory")
    runs: dict[str, list[StudyRun]] = {}
    unfinished = []
    identities: dict[tuple[str, str], Path] = {}
    for path in sorted(p for p in sweep_dir.iterdir() if p.is_dir()):
        if not ((path / RESOLVED_CONFIG).is_file() or is_hydra_run(path)):
            continue  # not a run directory (e.g. the study's own output)
        config = saved_config(path, resolve=True)
        condition = select(config, condition_key)
        if condition is None:
            continue
        check_job_folder(path, config, condition, select(config, "seed"), identities)
        metrics = read_metrics(path)
        if metrics is None or "test_f1" not in metrics.get("metrics", {}):
            unfinished.append(path)
            continue
        conll = {key: float(metrics["metrics"][key]) for key in CONLL_METRICS if key in metrics["metrics"]}
        recorded = metrics["metrics"]
        runs.setdefault(str(condition), []).append(StudyRun(
            str(condition), int(select(config, "seed")), path, conll,
            int(recorded["best_epoch"]) if "best_epoch" in recorded else None,
            int(recorded["epochs"]) if "epochs" in recorded else None,
            str(metrics["code"]["commit"])[:12] if (metrics.get("code") or {}).get("commit") else None,
            list(metrics.get("platforms") or ([metrics["platform"]] if metrics.get("platform") else [])),
            substituted_pool(select(config, "augment") or {}), select(config, "paths.data_dir")))
    if not runs:
        raise NerbiasError(f"{sweep_dir}: no finished run with a '{condition_key}' in its config")
    for members in runs.values():
        members.sort(key=lambda run: run.seed)
    return Study(runs, unfinished)


def check_job_folder(path: Path, config: Any, condition: Any, seed: Any, seen: dict[tuple[str, str], Path]) -> None:
    """A job counts once, as what its own config says it is: refuse a folder other than the one it ran in
    (a copy or a renamed job) and a second folder of the same (condition, seed)."""
    ran_in = recorded_run_dir(config)
    if ran_in is not None and ran_in.name != path.name:
        raise NerbiasError(f"{path}: its config says it ran in {ran_in} (condition {condition}, seed {seed}); a job "
                           f"copied or renamed would count twice or as another seed: move it back to "
                           f"{ran_in.name}/ or out of {path.parent}")
    identity = (str(condition), str(seed))
    if identity in seen:
        raise NerbiasError(f"{seen[identity]} and {path}: both are condition {condition}, seed {seed}; keep one "
                           f"(the study counts each job once)")
    seen[identity] = path


def evaluation_labels(runs: Mapping[str, Sequence[StudyRun]]) -> tuple[list[str], dict[str, list[str]]]:
    """Every bias evaluation any run holds, and per evaluation the conditions none of whose runs hold it.
    A condition that holds it for some runs only is refused: leaving the condition out would shrink the
    claims family and move every Holm p; counting it with fewer seeds would pair it wrongly."""
    held = {run.path: {p.name for p in (run.path / "bias").iterdir() if (p / "metrics.json").is_file()}
            if (run.path / "bias").is_dir() else set() for members in runs.values() for run in members}
    labels = sorted(set().union(*held.values()))
    not_evaluated: dict[str, list[str]] = {}
    for label in labels:
        for condition, members in runs.items():
            lacking = [run.path for run in members if label not in held[run.path]]
            if len(lacking) == len(members):
                not_evaluated.setdefault(label, []).append(condition)
            elif lacking:
                raise NerbiasError(f"{lacking[0] / 'bias' / label / 'metrics.json'}: missing, while other {condition} "
                                   f"runs have it; rerun the job's command (it resumes and evaluates only what is "
                                   f"missing) or move the job out of the sweep")
    return labels, not_evaluated


def substituted_pool(section: Mapping[str, Any]) -> tuple[str, list[str | None]] | None:
    """The pool a saved ``augment`` section drew names from, as (its source, the name lists it avoids), when the
    run substitutes pool names (``names`` or ``place_names`` above 0); None when it put no pool name into training."""
    if not any(float(section.get(key) or 0) > 0 for key in ("names", "place_names")):
        return None
    source, exclude, _ = saved_name_pool(section)
    return source, exclude


def drawable_names(names: Sequence[str], runs: Mapping[str, Sequence[StudyRun]]) -> set[str]:
    """The ``names`` some run's name substitution could have put into training: those of its pool's source
    (the SSA names, or the pool's file) in the training hash half and outside the lists it avoids
    (``substitution_pool``: the census benchmark's ``heldout`` rule, so an ambiguous pool counts its whole half).
    The study compares conditions only on names none of their runs can have seen; Mishra et al.'s names,
    which every default pool avoids, and name-shaped strings no source holds (the OOV set) are never among them.
    The source is read only when some name could be in it."""
    drawable: set[str] = set()
    pools = {(run.pool[0], tuple(run.pool[1]), run.data_dir) for members in runs.values() for run in members if run.pool}
    for source, exclude, data_dir in sorted(pools, key=str):
        excluded = [name for path in exclude for name in load_names(path).names]
        hashed = substitution_pool(names, excluded, "train" if source in SSA_POOLS else None)
        if hashed:
            known = _pool_source_names(source, data_dir)
            drawable |= {name for name in hashed if name.lower() in known}
    return drawable


def _pool_source_names(source: str, data_dir: str | None) -> frozenset[str]:
    """The lower-cased names a pool ``source`` draws from: the SSA names under the run's data directory (its
    saved ``paths.data_dir``, else ``$NERBIAS_DATA_DIR``, else ./data), or the lines of the pool's file."""
    if source not in SSA_POOLS:
        path = Path(source)
        if not path.is_file():
            raise NerbiasError(f"augment.name_pool.source={source}: no such file; the study needs the names a run "
                               "substituted to leave them out of its names corpora")
        return frozenset(line.strip().lower() for line in path.read_text(encoding="utf-8").splitlines())
    candidates = [Path(d) / "ssa_names" for d in (data_dir, os.environ.get("NERBIAS_DATA_DIR"), "data") if d]
    for ssa in candidates:
        if ssa.is_dir():
            return _ssa_names(ssa.resolve())
    raise NerbiasError(f"no SSA names at {', '.join(map(str, candidates))}: the study needs the names its runs "
                       "substituted from (set NERBIAS_DATA_DIR to the data directory)")


@functools.lru_cache(maxsize=2)
def _ssa_names(folder: Path) -> frozenset[str]:
    """The distinct SSA first names under ``folder``, lower-cased (read once a process: every corpus asks)."""
    return frozenset(name.lower() for name in load_ssa(folder, progress=False).names.tolist())


@dataclass
class Figures:
    """Every figure of one condition on one corpus, each ready for an interval (``reporting.intervals``).

    ``groups``: the keys of the group accuracies (for the best - worst gap); ``floor``: the gap's noise
    floor (names permuted across groups)."""

    statistics: dict[str, Statistic] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    floor: dict[str, float] | None = None

    def add(self, key: str, statistic: Statistic) -> None:
        self.statistics[key] = statistic


def seed_ids(runs: Sequence[StudyRun]) -> tuple[int, ...]:
    return tuple(run.seed for run in runs)


def add_conll_statistics(figures: Figures, runs: Sequence[StudyRun]) -> None:
    for key in CONLL_METRICS:
        values = np.array([run.conll.get(key, np.nan) for run in runs])
        if np.isnan(values).any():
            continue
        figures.add(key, Statistic(float(values.mean()), seed_ids(runs), values, bounds=(0.0, 1.0)))


# ----------------------------------------------------------------------------------------------
# Census


def _census_units(run: Run) -> tuple[pd.DataFrame, dict[str, sparse.csr_matrix], dict[str, list[str]]]:
    """The SSA rows the run scored, as one (years x units) count matrix per sex; units = names."""
    ssa_path, config = run.setting("corpus.ssa"), run.config
    errors = run.tables["census_errors"]
    years = sorted(int(y) for y in errors["year"].unique())
    table = load_ssa(ssa_path, years=years, progress=False)
    subset = str(select(config, "corpus.names", "all") or "all")
    if subset != "all":
        excluded = [n for path in (select(config, "corpus.pool_exclude") or [None]) for n in load_names(path).names]
        table = census.select_names(table, subset, excluded)
    row_of_year = np.searchsorted(np.asarray(years), table.year)
    matrices, unit_names = {}, {}
    for code, sex in enumerate(SEXES):
        rows = table.sex == code
        used, column = np.unique(table.name[rows], return_inverse=True)
        matrices[sex] = sparse.csr_matrix((table.count[rows].astype(np.float64), (row_of_year[rows], column)),
                                          shape=(len(years), len(used)))
        unit_names[sex] = table.names[used].tolist()
    return errors, matrices, unit_names


def _type1_by_year(run: Run, matrices, unit_names, errors: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each unit's type-1 error averaged over the run's templates, per sex; checked against the run's
    own census_errors.csv (mean over templates of type1_w, every year and sex)."""
    labels = run.tables.get("census_labels")
    if labels is None:
        raise NerbiasError(f"{run.path}: no census_labels.csv (per-name labels)")
    wrong = (labels["label"].fillna("") != census.PERSON).astype(np.float64)
    mean_wrong = wrong.groupby(labels["name"]).mean()
    out = {}
    for sex, matrix in matrices.items():
        error = mean_wrong.reindex(unit_names[sex]).to_numpy()
        if np.isnan(error).any():
            raise NerbiasError(f"{run.path}: census_labels.csv lacks {int(np.isnan(error).sum())} scored names")
        out[sex] = error
        rate = (matrix @ error) / np.asarray(matrix.sum(1)).ravel()
        saved = errors[errors["gender"] == sex].groupby("year")["type1_w"].mean().to_numpy()
        if np.abs(rate - saved).max() > 1e-4:  # the CSV keeps 6 significant digits
            raise NerbiasError(f"{run.path}: labels do not reproduce census_errors.csv (type1_w)")
    return out


CENSUS_CHUNK = 250  # replicates drawn at a time: (units x chunk) weights, ~70 MB for 34k units
DENSE_FILL = 0.05  # a unit counted in at least this share of the rows is summed by BLAS, the rest sparse


def drawn_unit_counts(rng: np.random.Generator, units: int, size: int) -> np.ndarray:
    """(units, size): how often each unit is drawn in each of ``size`` bootstrap samples of ``units`` units,
    Multinomial(units, equal probabilities) (the draws of every study table so far, kept so they stay
    identical; counting uniform draws instead would be three times faster, the same distribution)."""
    return np.ascontiguousarray(rng.multinomial(units, np.full(units, 1.0 / units), size=size).T, dtype=np.float64)


class YearlySums:
    """Per-year sums of ``rows`` ((k x years) x units, sparse) under unit weights: ``rows @ weights``, with the
    units counted in most years as one dense BLAS product and the rest sparse. Census counts are 10-15 % dense
    overall but a third of the units carry 85 % of the entries, where BLAS is ten times a sparse product."""

    def __init__(self, rows: sparse.csr_matrix, years: int):
        fill = np.diff(rows.tocsc().indptr) / rows.shape[0]
        self.dense_units = np.flatnonzero(fill >= DENSE_FILL)
        self.sparse_units = np.flatnonzero(fill < DENSE_FILL)
        self.dense = np.ascontiguousarray(rows[:, self.dense_units].toarray())
        self.sparse = rows[:, self.sparse_units].tocsr()
        self.blocks, self.years = rows.shape[0] // years, years

    def __call__(self, weights: np.ndarray) -> np.ndarray:
        """(blocks, years, samples) sums for (units, samples) ``weights``."""
        sums = self.dense @ weights[self.dense_units]
        sums += self.sparse @ weights[self.sparse_units]
        return sums.reshape(self.blocks, self.years, -1)


def names_part_replicates(matrices: Mapping[str, sparse.csr_matrix], errors: Sequence[Sequence[Mapping[str, np.ndarray]]],
                           n_boot: int, seed: int) -> dict[str, np.ndarray]:
    """Per sex, (conditions, B): each condition's mean over its seeds of each seed's mean over years of its
    error-weighted counts over the counts, the units drawn with replacement (the same draws for every
    condition). ``matrices``: sex -> (years x units) counts; ``errors[c][s][sex]``: seed s's error a unit.

    The seeds share the years' denominators (and so the years a draw leaves empty), so that figure is the
    mean over years of the seeds' mean error weighted by the counts, over the counts: one numerator a
    condition, not one a seed."""
    drawn = {}
    for number, (sex, matrix) in enumerate(matrices.items()):
        mean_error = [np.mean([by_sex[sex] for by_sex in per_seed], axis=0) for per_seed in errors]
        sums = YearlySums(sparse.vstack([matrix] + [matrix.multiply(e[None, :]) for e in mean_error]).tocsr(),
                          matrix.shape[0])
        drawn[sex] = np.empty((len(errors), n_boot))
        for start in range(0, n_boot, CENSUS_CHUNK):
            size = min(CENSUS_CHUNK, n_boot - start)
            weights = drawn_unit_counts(np.random.default_rng([seed, number, start]), matrix.shape[1], size)
            yearly = sums(weights)                           # (1 + conditions, years, chunk)
            with np.errstate(invalid="ignore", divide="ignore"):
                drawn[sex][:, start:start + size] = np.nanmean(yearly[1:] / yearly[0], axis=1)
    return drawn


def census_figures(study: Study, label: str, n_boot: int, seed: int) -> dict[str, Figures]:
    """Female and male weighted type-1 error and their gap, per condition. The units ((name, sex), each
    with all its years) are drawn in chunks of replicates, each chunk from its own generator, so every
    condition sees the same draws (paired) and memory stays at one chunk's weights
    (``names_part_replicates``)."""
    units = None
    wrong: dict[str, list[dict[str, np.ndarray]]] = {}
    for condition, runs in study.runs.items():
        wrong[condition] = []
        for member in runs:
            run = load_run(member.path / "bias" / label)
            if units is None:
                _, matrices, names = _census_units(run)
                units = (matrices, names)
            wrong[condition].append(_type1_by_year(run, *units, run.tables["census_errors"]))
    matrices, _ = units
    totals = {sex: np.asarray(matrix.sum(1)).ravel() for sex, matrix in matrices.items()}
    drawn = names_part_replicates(matrices, list(wrong.values()), n_boot, seed)
    unit_count = min(matrix.shape[1] for matrix in matrices.values())
    out = {}
    for number, (condition, runs) in enumerate(study.runs.items()):  # wrong's order: the draws' rows
        seeds = seed_ids(runs)
        point = {sex: np.array([float(np.mean((matrix @ errors[sex]) / totals[sex])) for errors in wrong[condition]])
                 for sex, matrix in matrices.items()}
        names_part = {sex: drawn[sex][number] for sex in matrices}  # every seed, drawn units
        figures = Figures()
        for key, values, reps, bounds in (
                ("female_type1_w", point["F"], names_part["F"], (0.0, 1.0)),
                ("male_type1_w", point["M"], names_part["M"], (0.0, 1.0)),
                ("female_male_type1_w_gap", point["F"] - point["M"], names_part["F"] - names_part["M"], (-1.0, 1.0))):
            figures.add(key, Statistic(float(values.mean()), seeds, values, inflate(values.mean(), reps, unit_count),
                                       unit_count, bounds))
        add_conll_statistics(figures, runs)
        out[condition] = figures
    return out


def platform_kind(platforms: Sequence[Mapping[str, Any]]) -> str:
    """The kinds a run trained on, as metrics.json's ``platforms`` lists them: "A resumed on B" for a run resumed
    on another kind; "not recorded" for none."""
    described = [f"{p.get('cuda') or p.get('cpu')} ({p.get('cpu_capability')} kernels, {p.get('threads')} threads)"
                 for p in platforms]
    return " resumed on ".join(described) if described else "not recorded"


def platforms_note(runs: Mapping[str, Sequence[StudyRun]]) -> str:
    """Which CPU kinds trained the runs: the same seed drifts from one kind to another (docs/training.md)."""
    kinds: dict[str, int] = {}
    for run in (r for rs in runs.values() for r in rs):
        kind = platform_kind(run.platforms)
        kinds[kind] = kinds.get(kind, 0) + 1
    if list(kinds) == ["not recorded"]:
        return ""
    return "; trained on " + ", ".join(f"{kind}: {n} run{'' if n == 1 else 's'}" for kind, n in sorted(kinds.items()))


__all__ = ["CONLL_METRICS", "NAME_CORPORA", "RACE_GAP_PREFIX", "REFERENCE_RACE", "Figures", "Study", "StudyRun",
           "YearlySums", "add_conll_statistics", "census_figures", "platforms_note", "drawn_unit_counts",
           "names_part_replicates", "drawable_names", "find_study", "platform_kind", "race_gap_metric", "seed_ids"]
