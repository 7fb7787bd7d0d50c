"""How sure are the bias figures? Bootstrap intervals and permutation tests (no paper gives them).

Name-substitution corpora (Mishra et al. 2020)
----------------------------------------------
The unit of variation is the *name*: a group's accuracy ``p_c = sum_n p(n) p(PER|n)`` (p(n) the
name's share of the group's slots) depends on which 15 names happen to stand for the group. With
thousands of slots per name the within-name binomial noise is negligible next to that.

- ``bootstrap_group_accuracy``: percentile intervals from ``n_boot`` replicates (default 2000).
  Each replicate resamples the names of every group with replacement, *within* the group, so
  group sizes stay as designed. With several runs of one model (training seeds) the seed part is
  not resampled (2-5 seeds give [min, max]-like intervals) but added as the study's t-based part
  (``reporting.intervals``), the same multipliers for every group of a replicate, so the gap between
  the best and the worst group is recomputed replicate by replicate (``GroupBootstrap.gap``). That gap
  is a range, never below 0: its interval says how large it is, the permutation tests whether it is
  there at all.
- ``bootstrap_spread``: the same resampling for the Table 4/5 statistics (min, mean, std, median
  of a per-name column over all names). The bootstrap of a minimum is not consistent, so no
  interval is given for ``min``.
- ``bootstrap_ecdf``: pointwise percentile bands of the per-group ECDF on a grid.
- ``pairwise_permutation_tests`` / ``gender_permutation_test``: ``scipy.stats.permutation_test``
  on name-level accuracies (mean over seeds), statistic = difference of the two weighted group
  accuracies; H0: the group labels are exchangeable among the names. Two-sided p-values, with a
  Holm-adjusted column for the family of all pairs.

Census benchmark (Mehrabi et al.)
---------------------------------
``bootstrap_census`` resamples the names of each (template, year, sex) with replacement. The
rates depend on a name only through its count and its outcome (PERSON / other type / untagged),
so names are pooled into classes of equal (count, outcome) and a replicate is one multinomial
draw of class multiplicities: exactly the name bootstrap, at the cost of a few hundred classes
per year instead of tens of thousands of names. Female and male names are drawn independently
and the female - male gap is taken replicate by replicate. ``permutation_census`` shuffles the
sex labels among a year's names (a multivariate hypergeometric draw over the same classes).
Years are treated one at a time: a name recurs across years, so no across-year interval is made
from these per-year draws.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats
from tqdm.auto import tqdm

from nerbias.bias.census import PERSON, UNTAGGED
from nerbias.errors import NerbiasError
from nerbias.bias.names import OOV_GROUP, NameList
from nerbias.reporting import intervals
from nerbias.reporting.intervals import SeedNoise

DEFAULT_N_BOOT = 2000
DEFAULT_N_PERMUTATIONS = 9999
DEFAULT_CONFIDENCE = 0.95
CENSUS_N_BOOT = 1000  # exact per-year name bootstrap of 139 x 2 cells: ~10 s at 1000 on one core
CENSUS_N_PERMUTATIONS = 999
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

    def table(self, with_all: bool = False) -> pd.DataFrame:
        """One row per group (and ``ALL`` last when asked): accuracy, interval, bootstrap SE."""
        labels, names, point, replicates = list(self.labels), list(self.names), self.point, self.replicates
        if with_all and self.all_replicates is not None:
            labels.append("ALL")
            names.append(sum(self.names))
            point = np.append(point, self.all_point)
            replicates = np.column_stack([replicates, self.all_replicates])
        low, high = percentile_interval(replicates, self.confidence)
        return pd.DataFrame({self.by: labels, "names": names, "seeds": self.n_seeds,
                             "accuracy": point, "ci_low": low, "ci_high": high,
                             "se": replicates.std(axis=0, ddof=1)})

    def gap(self) -> dict:
        """Best minus worst group accuracy, its interval recomputed replicate by replicate."""
        gaps = self.replicates.max(axis=1) - self.replicates.min(axis=1)
        low, high = percentile_interval(gaps, self.confidence)
        best, worst = int(np.argmax(self.point)), int(np.argmin(self.point))
        return {"best": self.labels[best], "worst": self.labels[worst],
                "gap": float(self.point[best] - self.point[worst]), "ci_low": float(low), "ci_high": float(high),
                "confidence": self.confidence, "n_boot": len(self.replicates), "seeds": self.n_seeds}


def bootstrap_group_accuracy(table: NameTable, by: str = "group", n_boot: int = DEFAULT_N_BOOT,
                             confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> GroupBootstrap:
    """Accuracy ``p_c`` of each group (mean over seeds): one run, the percentile bootstrap over names
    within groups; several runs (training seeds), the study's two-level replicates (``reporting.intervals``)."""
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

    for g, label in enumerate(labels):
        members = np.flatnonzero(facets == label)
        sizes.append(len(members))
        point[g] = (rec[:, members].sum(1) / sen[:, members].sum(1)).mean()
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
    return GroupBootstrap(by, labels, sizes, point, replicates, table.n_seeds, confidence, all_point, all_replicates)


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


# ----------------------------------------------------------------------------------------------
# Permutation tests


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment (family-wise error), NaNs left out of the family."""
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full_like(p, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def _name_level(table: NameTable) -> tuple[np.ndarray, np.ndarray]:
    """Name accuracy (mean over seeds) and slot weight (mean slots over seeds)."""
    return table.values("accuracy").mean(0), table.sentences.mean(0)


def permutation_difference(accuracy: np.ndarray, weight: np.ndarray, a: np.ndarray, b: np.ndarray,
                           n_resamples: int = DEFAULT_N_PERMUTATIONS, seed: int = 0,
                           alternative: str = "two-sided") -> tuple[float, float]:
    """Weighted accuracy of names ``a`` minus that of names ``b``, and its permutation p-value.

    The samples handed to scipy are the names' indices, so the weights travel with the names
    when labels are shuffled.
    """

    def statistic(x, y, axis=-1):
        x, y = x.astype(np.int64), y.astype(np.int64)
        mean_x = (weight[x] * accuracy[x]).sum(axis) / weight[x].sum(axis)
        mean_y = (weight[y] * accuracy[y]).sum(axis) / weight[y].sum(axis)
        return mean_x - mean_y

    result = stats.permutation_test((a.astype(np.float64), b.astype(np.float64)), statistic,
                                    permutation_type="independent", vectorized=True, n_resamples=n_resamples,
                                    alternative=alternative, rng=np.random.default_rng(seed))
    return float(result.statistic), float(result.pvalue)


MIN_NAMES_PER_SIDE = 2  # a permutation test needs at least two names on each side


def _test_rows(table: NameTable, by: str, pairs: Sequence[tuple[str, str]], n_resamples: int, seed: int,
               alternative: str) -> pd.DataFrame:
    facets = table.facet(by)
    accuracy, weight = _name_level(table)
    rows = []
    for index, (first, second) in enumerate(pairs):
        a, b = np.flatnonzero(facets == first), np.flatnonzero(facets == second)
        if not len(a) or not len(b):
            raise NerbiasError(f"no names for {first!r} or {second!r} (have {table.facet_labels(by)})")
        accuracy_a = float(np.average(accuracy[a], weights=weight[a]))
        accuracy_b = float(np.average(accuracy[b], weights=weight[b]))
        small = [label for label, members in ((first, a), (second, b)) if len(members) < MIN_NAMES_PER_SIDE]
        if small:  # a side of one name has nothing to shuffle: no test, and the reason in the table
            note = f"not tested: {' and '.join(small)} {'has' if len(small) == 1 else 'have'} fewer than " \
                   f"{MIN_NAMES_PER_SIDE} names"
            difference, p = accuracy_a - accuracy_b, float("nan")
        else:
            note = ""
            difference, p = permutation_difference(accuracy, weight, a, b, n_resamples, seed + index, alternative)
        rows.append({"a": first, "b": second, "n_a": len(a), "n_b": len(b), "accuracy_a": accuracy_a,
                     "accuracy_b": accuracy_b, "difference": difference, "p_value": p, "note": note})
    frame = pd.DataFrame(rows, columns=["a", "b", "n_a", "n_b", "accuracy_a", "accuracy_b", "difference", "p_value",
                                        "note"])
    tested = frame["p_value"].notna().to_numpy()
    frame["p_holm"] = np.nan
    if tested.any():  # Holm over the tests that ran
        frame.loc[tested, "p_holm"] = holm(frame.loc[tested, "p_value"].to_numpy())
    return frame


def pairwise_permutation_tests(table: NameTable, by: str = "group", n_resamples: int = DEFAULT_N_PERMUTATIONS,
                               seed: int = 0, alternative: str = "two-sided") -> pd.DataFrame:
    """Every pair of groups: difference of weighted accuracies, p-value, Holm-adjusted over all pairs."""
    pairs = list(itertools.combinations(table.facet_labels(by), 2))
    return _test_rows(table, by, pairs, n_resamples, seed, alternative)


def gender_permutation_test(table: NameTable, n_resamples: int = DEFAULT_N_PERMUTATIONS, seed: int = 0,
                            alternative: str = "two-sided") -> pd.DataFrame:
    """Female vs male names (all races pooled): one row, difference = female - male."""
    labels = table.facet_labels("gender")
    if not all(g in labels for g in GENDERS):
        raise NerbiasError(f"need Female and Male names, found genders {labels}")
    return _test_rows(table, "gender", [GENDERS], n_resamples, seed, alternative)


# ----------------------------------------------------------------------------------------------
# Census


CENSUS_MEASURES = ("type1_w", "type2_w", "type3_w", "type1_u", "type2_u", "type3_u")
_OTHER, _UNTAGGED = 1, 2  # outcome kinds; 0 = PERSON


def census_classes(frame: pd.DataFrame) -> pd.DataFrame:
    """Names pooled by (template, year, sex, count, outcome kind): ``size`` names per class.

    ``frame`` is census_errors' input (year, sex, name, count, template, label).
    """
    label = frame["label"]
    kind = np.where(label == PERSON, 0, np.where(label == UNTAGGED, _UNTAGGED, _OTHER))
    pooled = pd.DataFrame({"template": frame["template"].to_numpy(), "year": frame["year"].to_numpy(),
                           "sex": frame["sex"].to_numpy(), "count": frame["count"].to_numpy(dtype=np.float64),
                           "kind": kind})
    return pooled.groupby(["template", "year", "sex", "count", "kind"], sort=True).size().rename("size").reset_index()


def _census_rates(multiplicity: np.ndarray, count: np.ndarray, kind: np.ndarray) -> dict[str, np.ndarray]:
    """Six error rates from class multiplicities (..., classes)."""
    weighted = multiplicity * count
    total_w, total_u = weighted.sum(-1), multiplicity.sum(-1)
    other, untagged = kind == _OTHER, kind == _UNTAGGED
    out = {}
    for kind_name, mask in (("type1", other | untagged), ("type2", other), ("type3", untagged)):
        out[f"{kind_name}_w"] = weighted[..., mask].sum(-1) / total_w
        out[f"{kind_name}_u"] = multiplicity[..., mask].sum(-1) / total_u
    return out


def _census_cells(frame: pd.DataFrame, years: Sequence[int] | None):
    """``((template, year), classes of that cell)`` in order, for the chosen years (all if None)."""
    classes = census_classes(frame)
    if years is not None:
        classes = classes[classes["year"].isin(list(years))]
    return classes.groupby(["template", "year"], sort=True)


def bootstrap_census(frame: pd.DataFrame, n_boot: int = CENSUS_N_BOOT, confidence: float = DEFAULT_CONFIDENCE,
                     seed: int = 0, years: Sequence[int] | None = None) -> pd.DataFrame:
    """Per template, year and error measure: female and male rates and the female - male gap,
    each with a percentile interval from resampling that year's names of each sex.

    Columns: template, year, measure, F, F_low, F_high, M, M_low, M_high, gap, gap_low, gap_high.
    """
    rng = np.random.default_rng(seed)
    rows = []
    cells = _census_cells(frame, years)
    total = frame.groupby(["template", "year"]).ngroups if years is None else None
    for (template, year), cell in tqdm(cells, total=total, desc=f"census bootstrap (B={n_boot})", unit="year",
                                       leave=False):
        point, boot = {}, {}
        for sex, part in cell.groupby("sex"):
            size, count, kind = (part[c].to_numpy() for c in ("size", "count", "kind"))
            n = int(size.sum())
            draws = rng.multinomial(n, size / n, size=n_boot).astype(np.float64)
            point[sex] = _census_rates(size.astype(np.float64), count, kind)
            boot[sex] = _census_rates(draws, count, kind)
        for measure in CENSUS_MEASURES:
            row = {"template": int(template), "year": int(year), "measure": measure}
            for sex in ("F", "M"):
                if sex in point:
                    low, high = percentile_interval(boot[sex][measure], confidence)
                    row.update({sex: float(point[sex][measure]), f"{sex}_low": float(low), f"{sex}_high": float(high)})
                else:
                    row.update({sex: np.nan, f"{sex}_low": np.nan, f"{sex}_high": np.nan})
            if "F" in point and "M" in point:
                low, high = percentile_interval(boot["F"][measure] - boot["M"][measure], confidence)
                row.update(gap=row["F"] - row["M"], gap_low=float(low), gap_high=float(high))
            else:
                row.update(gap=np.nan, gap_low=np.nan, gap_high=np.nan)
            rows.append(row)
    return pd.DataFrame(rows, columns=["template", "year", "measure", "F", "F_low", "F_high", "M", "M_low", "M_high",
                                       "gap", "gap_low", "gap_high"])


def permutation_census(frame: pd.DataFrame, measure: str = "type1_w", n_resamples: int = CENSUS_N_PERMUTATIONS,
                       seed: int = 0, years: Sequence[int] | None = None) -> pd.DataFrame:
    """Per template and year: two-sided permutation p-value of the female - male gap of ``measure``
    (sex labels shuffled among the year's names), and Holm over the years of each template.

    p = (1 + #{|T*| >= |T|}) / (1 + n_resamples), the usual Monte-Carlo p-value.
    """
    if measure not in CENSUS_MEASURES:
        raise NerbiasError(f"measure must be one of {CENSUS_MEASURES}")
    rng = np.random.default_rng(seed)
    rows = []
    for (template, year), cell in _census_cells(frame, years):
        wide = cell.pivot_table(index=["count", "kind"], columns="sex", values="size", fill_value=0)
        if not {"F", "M"} <= set(wide.columns):
            continue
        count = wide.index.get_level_values("count").to_numpy(dtype=np.float64)
        kind = wide.index.get_level_values("kind").to_numpy()
        female, male = wide["F"].to_numpy(np.int64), wide["M"].to_numpy(np.int64)
        observed = (_census_rates(female.astype(np.float64), count, kind)[measure]
                    - _census_rates(male.astype(np.float64), count, kind)[measure])
        pooled = female + male
        drawn = rng.multivariate_hypergeometric(pooled, int(female.sum()), size=n_resamples, method="marginals")
        shuffled = (_census_rates(drawn.astype(np.float64), count, kind)[measure]
                    - _census_rates((pooled - drawn).astype(np.float64), count, kind)[measure])
        extreme = np.sum(np.abs(shuffled) >= abs(observed) - 1e-12)
        rows.append({"template": int(template), "year": int(year), "measure": measure, "gap": float(observed),
                     "p_value": float((1 + extreme) / (1 + n_resamples))})
    result = pd.DataFrame(rows, columns=["template", "year", "measure", "gap", "p_value"])
    result["p_holm"] = np.nan
    for _, index in result.groupby("template").groups.items():
        result.loc[index, "p_holm"] = holm(result.loc[index, "p_value"])
    return result


def census_gap_summary(boot: pd.DataFrame, measure: str = "type1_w") -> pd.DataFrame:
    """Per template: years counted, years whose interval of the female - male gap lies above 0
    (female names worse), below 0 (male names worse), and the largest gaps."""
    rows = []
    for template, part in boot[boot["measure"] == measure].groupby("template"):
        part = part.dropna(subset=["gap"])
        rows.append({"template": int(template), "measure": measure, "years": len(part),
                     "years_female_worse": int((part["gap_low"] > 0).sum()),
                     "years_male_worse": int((part["gap_high"] < 0).sum()),
                     "years_inconclusive": int(((part["gap_low"] <= 0) & (part["gap_high"] >= 0)).sum()),
                     "median_gap": float(part["gap"].median()) if len(part) else np.nan})
    return pd.DataFrame(rows)


def interval_text(value: float, low: float, high: float, digits: int = 3) -> str:
    """``0.894 [0.871, 0.912]``; a missing interval prints the value alone."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "–"
    if low is None or high is None or np.isnan(low) or np.isnan(high):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


__all__ = [
    "CENSUS_MEASURES", "CENSUS_N_BOOT", "CENSUS_N_PERMUTATIONS", "DEFAULT_CONFIDENCE", "DEFAULT_N_BOOT",
    "DEFAULT_N_PERMUTATIONS", "GroupBootstrap", "NameTable", "bootstrap_census", "bootstrap_ecdf",
    "bootstrap_group_accuracy", "bootstrap_spread", "census_classes", "census_gap_summary", "ecdf",
    "gender_permutation_test", "holm", "interval_text", "pairwise_permutation_tests", "percentile_interval",
    "permutation_census", "permutation_difference", "split_group",
]
