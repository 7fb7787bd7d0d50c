"""How sure are the bias figures? Bootstrap intervals and permutation tests (no paper gives them).

Name-substitution corpora (Mishra et al. 2020)
----------------------------------------------
The unit of variation is the *name*: a group's accuracy ``p_c = sum_n p(n) p(PER|n)`` (p(n) the
name's share of the group's slots) depends on which 15 names happen to stand for the group. With
thousands of slots per name the within-name binomial noise is negligible next to that.

- ``bootstrap_group_accuracy``: each group's accuracy with the interval of ``reporting.group_effects``
  (``group_interval``): names like these (a t on log(1 - accuracy), names + seeds) for a group of at least
  ``group_effects.MIN_NAMES`` names, these names (a t over the seeds) for a smaller one from 2 seeds,
  none from one seed; the ``estimand`` column says which. The pooled ``ALL`` row keeps the percentile
  bootstrap from ``n_boot`` replicates (default 2000): names resampled with replacement within every
  group, and with several seeds the study's t-based seed part (``reporting.intervals``). The best -
  worst gap (``GroupBootstrap.gap``) is a max - min, whose bootstrap is not consistent: it is given
  without an interval; ``group_effects.group_effect_test`` says whether there is a group effect at all.
- ``bootstrap_spread``: the same resampling for the Table 4/5 statistics (min, mean, std, median
  of a per-name column over all names). The bootstrap of a minimum is not consistent, so no
  interval is given for ``min``.
- ``bootstrap_ecdf``: pointwise percentile bands of the per-group ECDF on a grid.
- ``pairwise_permutation_tests`` / ``gender_permutation_test``: ``scipy.stats.permutation_test``
  on name-level accuracies (mean over seeds), statistic = difference of the two weighted group
  accuracies; H0: the group labels are exchangeable among the names. Two-sided p-values, with a
  Holm-adjusted column for the family of all pairs.

The census benchmark's intervals and tests are in ``census_uncertainty``; Holm and the permutation tests
in ``significance``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from nerbias.errors import NerbiasError
from nerbias.bias.names import OOV_GROUP, NameList
from nerbias.reporting import group_effects, intervals
from nerbias.reporting.group_effects import GroupInterval
from nerbias.reporting.intervals import COVERS_BOTH, COVERS_NAMES, SeedNoise
from nerbias.reporting.options import DEFAULT_CONFIDENCE, DEFAULT_N_BOOT, DEFAULT_N_PERMUTATIONS

FACETS = ("group", "gender", "race")
GENDERS = ("Female", "Male")
SPREAD_STATISTICS = ("min", "mean", "std", "median")


# ----------------------------------------------------------------------------------------------
# Name tables


def split_group(group: str) -> tuple[str | None, str | None]:
    """``"Black Female"`` -> ``("Black", "Female")``; a group without a gender word -> (None, None)."""
    words = group.split()
    if len(words) >= 2 and words[-1].capitalize() in GENDERS:
        return " ".join(words[:-1]), words[-1].capitalize()
    return None, None


@dataclass
class NameTable:
    """Per-name results of one model on one corpus: ``seeds x names`` matrices (OOV name apart).

    Built from the ``per_name.csv`` of each run (one run per training seed).
    """

    names: list[str]
    groups: list[str]
    sentences: np.ndarray  # (seeds, names)
    recognised: np.ndarray  # (seeds, names)
    columns: dict[str, np.ndarray] = field(default_factory=dict)  # other numeric columns, (seeds, names)
    gender: list[str | None] = field(default_factory=list)
    race: list[str | None] = field(default_factory=list)
    oov_name: str | None = None
    oov: dict[str, np.ndarray] = field(default_factory=dict)  # column -> (seeds,) values of the OOV name

    @classmethod
    def from_frames(cls, frames: Sequence[pd.DataFrame], names: NameList | None = None) -> "NameTable":
        if not frames:
            raise NerbiasError("no per-name results given")
        first = frames[0]
        is_oov = first["group"] == OOV_GROUP
        if names is not None and names.oov:
            is_oov |= first["name"] == names.oov
        listed = first.loc[~is_oov, "name"].tolist()
        common = set(listed)
        for frame in frames[1:]:
            common &= set(frame["name"])
        if len(common) < len(listed):
            warnings.warn(f"{len(listed) - len(common)} names are missing from some runs; using the "
                          f"{len(common)} names every run scored", stacklevel=2)
        ordered = [name for name in listed if name in common]
        if not ordered:
            raise NerbiasError("no name is scored in every run")
        indexed = [frame.drop_duplicates("name").set_index("name") for frame in frames]
        group_of = first.set_index("name")["group"]
        groups = [str(group_of[name]) for name in ordered]

        def matrix(column: str) -> np.ndarray:
            return np.vstack([frame.loc[ordered, column].to_numpy(dtype=np.float64) for frame in indexed])

        sentences, recognised = matrix("sentences"), matrix("recognised")
        if (sentences <= 0).any():
            raise NerbiasError("every name needs at least one sentence")
        numeric = [c for c in first.columns if c not in ("name", "group", "sentences", "recognised")
                   and pd.api.types.is_numeric_dtype(first[c])]
        columns = {column: matrix(column) for column in numeric if all(column in f.columns for f in indexed)}
        columns["accuracy"] = recognised / sentences
        gender, race = [], []
        for name, group in zip(ordered, groups):
            parsed_race, parsed_gender = split_group(group)
            gender.append((names.gender_of.get(name) if names and names.gender_of else None) or parsed_gender)
            race.append((names.race_of.get(name) if names and names.race_of else None) or parsed_race)
        oov_name = first.loc[is_oov, "name"].iloc[0] if is_oov.any() else None
        oov = {}
        if oov_name is not None and all(oov_name in frame.index for frame in indexed):
            oov = {column: np.array([float(frame.loc[oov_name, column]) for frame in indexed])
                   for column in columns if column != "accuracy"}
            oov["accuracy"] = np.array([frame.loc[oov_name, "recognised"] / frame.loc[oov_name, "sentences"]
                                        for frame in indexed], dtype=np.float64)
        return cls(ordered, groups, sentences, recognised, columns, gender, race, oov_name, oov)

    @property
    def n_seeds(self) -> int:
        return self.sentences.shape[0]

    def values(self, column: str) -> np.ndarray:
        if column not in self.columns:
            raise NerbiasError(f"per-name column {column!r} not found; have {sorted(self.columns)}")
        return self.columns[column]

    def name_values(self, column: str) -> np.ndarray:
        """The column per name, averaged over seeds (NaN where no seed has a value)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN names (never recognised)
            return np.nanmean(self.values(column), axis=0)

    def oov_value(self, column: str) -> float | None:
        values = self.oov.get(column)
        if values is None or np.all(np.isnan(values)):
            return None
        return float(np.nanmean(values))

    def facet(self, by: str = "group") -> np.ndarray:
        """The label of each name under ``by`` (group, gender or race)."""
        if by not in FACETS:
            raise NerbiasError(f"facet must be one of {FACETS}, not {by!r}")
        labels = {"group": self.groups, "gender": self.gender, "race": self.race}[by]
        if any(label is None for label in labels):
            raise NerbiasError(f"no {by} for some names: give a name list with a {by} column")
        return np.asarray(labels, dtype=object)

    def has_facet(self, by: str) -> bool:
        try:
            self.facet(by)
        except NerbiasError:
            return False
        return True

    def facet_labels(self, by: str = "group") -> list[str]:
        return list(dict.fromkeys(self.facet(by).tolist()))  # order of first appearance


def percentile_interval(replicates: np.ndarray, confidence: float = DEFAULT_CONFIDENCE,
                        axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    tail = 100 * (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(replicates, [tail, 100 - tail], axis=axis)
    return low, high


def _seed_draws(rng: np.random.Generator, n_seeds: int, n_boot: int) -> np.ndarray:
    # One seed: nothing to resample, every replicate keeps it.
    if n_seeds == 1:
        return np.zeros((n_boot, 1), dtype=np.int64)
    return rng.integers(0, n_seeds, size=(n_boot, n_seeds))


def _name_draws(rng: np.random.Generator, members: np.ndarray, n_boot: int) -> np.ndarray:
    return members[rng.integers(0, len(members), size=(n_boot, len(members)))]


# ----------------------------------------------------------------------------------------------
# Group accuracy and the gap


@dataclass
class GroupBootstrap:
    by: str
    labels: list[str]
    names: list[int]
    point: np.ndarray  # (groups,)
    replicates: np.ndarray  # (n_boot, groups)
    n_seeds: int
    confidence: float
    all_point: float = float("nan")  # every name of every group pooled (per_group's ALL row)
    all_replicates: np.ndarray | None = None
    intervals: list[GroupInterval] = field(default_factory=list)  # per group: group_effects.group_interval

    def table(self, with_all: bool = False) -> pd.DataFrame:
        """One row per group (and ``ALL`` last when asked): accuracy, interval, its SE and estimand."""
        frame = pd.DataFrame({self.by: self.labels, "names": self.names, "seeds": self.n_seeds,
                              "accuracy": self.point, "ci_low": [i.low for i in self.intervals],
                              "ci_high": [i.high for i in self.intervals], "se": [i.se for i in self.intervals],
                              "estimand": [i.estimand for i in self.intervals]})
        if with_all and self.all_replicates is not None:
            low, high = percentile_interval(self.all_replicates, self.confidence)
            estimand = group_effects.ESTIMANDS[COVERS_BOTH if self.n_seeds > 1 else COVERS_NAMES]
            frame.loc[len(frame)] = {self.by: "ALL", "names": sum(self.names), "seeds": self.n_seeds,
                                     "accuracy": self.all_point, "ci_low": low, "ci_high": high,
                                     "se": self.all_replicates.std(ddof=1), "estimand": estimand}
        return frame

    def gap(self) -> dict:
        """Best minus worst group accuracy, without an interval (a max - min: its bootstrap is not consistent)."""
        best, worst = int(np.argmax(self.point)), int(np.argmin(self.point))
        return {"best": self.labels[best], "worst": self.labels[worst],
                "gap": float(self.point[best] - self.point[worst]), "ci_low": float("nan"), "ci_high": float("nan"),
                "confidence": self.confidence, "n_boot": len(self.replicates), "seeds": self.n_seeds}


def bootstrap_group_accuracy(table: NameTable, by: str = "group", n_boot: int = DEFAULT_N_BOOT,
                             confidence: float = DEFAULT_CONFIDENCE, seed: int = 0, accuracy: bool = True
                             ) -> GroupBootstrap:
    """Accuracy ``p_c`` of each group (mean over seeds) with ``group_effects.group_interval`` (``accuracy``
    false: a figure that is no accuracy, such as a calibration gap, for these names only); the pooled ALL from
    the percentile bootstrap over names within groups, with several runs the study's two-level replicates."""
    facets = table.facet(by)
    labels = table.facet_labels(by)
    rng = np.random.default_rng(seed)
    point = np.empty(len(labels))
    replicates = np.empty((n_boot, len(labels)))
    sizes, drawn_all, members_all = [], [], []
    rec, sen, seeds = table.recognised, table.sentences, tuple(range(table.n_seeds))
    noise = SeedNoise(n_boot, seed) if table.n_seeds > 1 else None

    def two_level(idx: np.ndarray, drawn: np.ndarray, names: int) -> np.ndarray:
        per_seed = rec[:, idx].sum(1) / sen[:, idx].sum(1)
        resampled = (rec[:, drawn].sum(-1) / sen[:, drawn].sum(-1)).mean(0)
        centre = float(per_seed.mean())
        return intervals.replicates(noise, intervals.Statistic(centre, seeds, per_seed,
                                                               intervals.inflate(centre, resampled, names), names,
                                                               (0.0, 1.0)))

    group_intervals = []
    for g, label in enumerate(labels):
        members = np.flatnonzero(facets == label)
        sizes.append(len(members))
        point[g] = (rec[:, members].sum(1) / sen[:, members].sum(1)).mean()
        values = group_effects.accuracy_table(rec[:, members], sen[:, members])
        slots = float(sen[:, members].sum(1).min())   # the fewest slots a seed gave the group
        group_intervals.append(group_effects.group_interval(values, confidence, point[g], slots=slots) if accuracy
                               else group_effects.these_names_interval(values.mean(1), confidence, point[g], slots))
        drawn = _name_draws(rng, members, n_boot)  # (B, n)
        drawn_all, members_all = drawn_all + [drawn], members_all + [members]
        if noise is None:  # p_c on the drawn names: slots-weighted, so recognised / slots of the draw
            replicates[:, g] = rec[0, drawn].sum(-1) / sen[0, drawn].sum(-1)
        else:
            replicates[:, g] = two_level(members, drawn, len(members))
    every, drawn = np.concatenate(members_all), np.concatenate(drawn_all, axis=1)
    all_point = float((rec.sum(1) / sen.sum(1)).mean())
    all_replicates = (rec[0, drawn].sum(-1) / sen[0, drawn].sum(-1) if noise is None
                      else two_level(every, drawn, min(sizes)))
    return GroupBootstrap(by, labels, sizes, point, replicates, table.n_seeds, confidence, all_point, all_replicates,
                          group_intervals)


# ----------------------------------------------------------------------------------------------
# Spread of per-name values (Tables 4 and 5) and ECDF bands


def _spread_of(values: np.ndarray) -> dict[str, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN (no confidences)
        return {"min": np.nanmin(values, axis=-1), "mean": np.nanmean(values, axis=-1),
                "std": np.nanstd(values, axis=-1), "median": np.nanmedian(values, axis=-1)}


def _resampled_name_values(table: NameTable, column: str, seeds: np.ndarray) -> np.ndarray:
    """(B, names): each name's value averaged over the replicate's seeds."""
    values = table.values(column)
    if table.n_seeds == 1:
        return np.broadcast_to(values[0], (len(seeds), values.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values[seeds], axis=1)


def bootstrap_spread(table: NameTable, column: str = "accuracy", by: str = "group",
                     n_boot: int = DEFAULT_N_BOOT, confidence: float = DEFAULT_CONFIDENCE,
                     seed: int = 0) -> pd.DataFrame:
    """min / mean / std / median of a per-name column for each group and for ALL names.

    ALL resamples names within each group (stratified), as the groups' replicates do.
    Returns one row per group then ``ALL``: names, the four statistics and ``<stat>_low`` /
    ``<stat>_high`` (NaN for min, whose bootstrap is not consistent).
    """
    facets = table.facet(by)
    labels = table.facet_labels(by)
    rng = np.random.default_rng(seed)
    seeds = _seed_draws(rng, table.n_seeds, n_boot)
    resampled = _resampled_name_values(table, column, seeds)
    point_values = table.name_values(column)
    rows, all_draws = [], []
    for label in labels:
        members = np.flatnonzero(facets == label)
        drawn = rng.integers(0, len(members), size=(n_boot, len(members)))
        values = np.take_along_axis(resampled[:, members], drawn, axis=1)
        all_draws.append(values)
        rows.append((label, point_values[members], values))
    rows.append(("ALL", point_values, np.concatenate(all_draws, axis=1)))
    out = []
    for label, point, values in rows:
        row = {by: label, "names": int(np.sum(~np.isnan(point)))}
        point_stats, boot_stats = _spread_of(point), _spread_of(values)
        for name in SPREAD_STATISTICS:
            row[name] = float(point_stats[name])
            low, high = (np.nan, np.nan) if name == "min" else percentile_interval(boot_stats[name], confidence)
            row[f"{name}_low"], row[f"{name}_high"] = float(low), float(high)
        out.append(row)
    return pd.DataFrame(out)


def ecdf(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Share of the (non-NaN) values at or below each grid point; last axis = values."""
    valid = ~np.isnan(values)
    below = ((values[..., None] <= grid) & valid[..., None]).sum(-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return below / valid.sum(-1)[..., None]


def bootstrap_ecdf(table: NameTable, column: str = "accuracy", by: str = "group", grid: np.ndarray | None = None,
                   n_boot: int = DEFAULT_N_BOOT, confidence: float = DEFAULT_CONFIDENCE,
                   seed: int = 0) -> dict[str, pd.DataFrame]:
    """Per facet: the ECDF of the per-name column on ``grid`` with a pointwise percentile band."""
    grid = np.linspace(0.0, 1.0, 201) if grid is None else np.asarray(grid, dtype=np.float64)
    facets = table.facet(by)
    rng = np.random.default_rng(seed)
    seeds = _seed_draws(rng, table.n_seeds, n_boot)
    resampled = _resampled_name_values(table, column, seeds)
    point_values = table.name_values(column)
    bands = {}
    for label in table.facet_labels(by):
        members = np.flatnonzero(facets == label)
        drawn = rng.integers(0, len(members), size=(n_boot, len(members)))
        curves = ecdf(np.take_along_axis(resampled[:, members], drawn, axis=1), grid)  # (B, grid)
        low, high = percentile_interval(curves, confidence)
        bands[label] = pd.DataFrame({"x": grid, "ecdf": ecdf(point_values[members], grid), "low": low,
                                     "high": high})
    return bands


def interval_text(value: float, low: float, high: float, digits: int = 3) -> str:
    """``0.894 [0.871, 0.912]``; a missing interval prints the value alone."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if low is None or high is None or np.isnan(low) or np.isnan(high):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


__all__ = [
    "DEFAULT_CONFIDENCE", "DEFAULT_N_BOOT", "DEFAULT_N_PERMUTATIONS", "GroupBootstrap", "NameTable", "bootstrap_ecdf",
    "bootstrap_group_accuracy", "bootstrap_spread", "ecdf", "interval_text", "percentile_interval", "split_group",
]
