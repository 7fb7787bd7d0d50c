"""Intervals that hold with few training seeds: a name bootstrap plus a t-based seed part.

A study figure varies with two things: which names stand for a group (15-16 per group, drawn from
a population of names) and which training seed made the model (2-5 per condition). The bootstrap is
right for the names and wrong for the seeds: with ``n <= 3`` seeds a resampled mean's percentile
interval is [min, max] of the seed values (coverage 0.50 with 2 seeds, 0.75 with 3). So every
replicate here is the sum of two parts, as in a two-stage bootstrap with a small-sample correction
(Davison & Hinkley 1997, 3.8):

- **names**: the statistic recomputed on names drawn with replacement within each group, averaged
  over *all* the condition's seeds; one draw of names serves every condition (paired). Its deviation
  from the centre is inflated by ``sqrt(n / (n - 1))`` (n = names per group), the factor by which the
  plain bootstrap understates the variance of a mean of n units.
- **seeds**: a Gaussian multiplier draw of the per-seed deviations, ``sum_s z_s d_s / sqrt(S (S-1))``,
  normal with the seed mean's estimated variance ``s^2 / S``.
- the sum of the two is multiplied by one ``sqrt(df / chi2_df)`` factor per replicate, ``df`` the
  Welch-Satterthwaite degrees of freedom of the two variance estimates (names - 1 and S - 1; the seed
  variance taken at an upper quantile for the df, see ``_df_seed_variance``): a replicate-form Welch t
  interval. A seed-only figure (CoNLL F1, the single OOV string) gets the classical ``t_{S-1}``
  interval (computed exactly by ``seed_only_interval``, not from replicates), a names-only one (one seed) a
  ``t_{n-1}`` one. The multipliers
  belong to the seed *number*: seed i of a condition and seed i of the baseline share ``z_i`` (same
  initialisation, same batch order), so a difference between conditions with the same seeds is a paired
  t on the per-seed differences; with different seed sets the two sides are independent.

With one seed there is no seed part: a figure that varies with names gets a names-only interval
(labelled ``names``), a seed-only figure gets none (``1 seed``).

The best - worst group gap (max - min of noisy group means) is biased upward. ``gap_interval`` corrects it by
the bootstrap, ``2 * gap - mean(gap*)``; the study prints the corrected gap **without** an interval (a max - min
is a non-smooth statistic whose bootstrap is not consistent: with names that are also places spread over the
groups an outside simulation found its interval covering 0.30-0.34), beside a **noise floor**: the gap of the
same per-name results with names permuted across groups (sizes kept), its mean and 95th percentile, and the
group-effect test of ``reporting.group_effects``. Figures of one group take their intervals from there too.

``tests/reporting/test_intervals_coverage.py`` checks every interval here by simulation against known truth.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special, stats

from nerbias.errors import NerbiasError

COVERS_BOTH, COVERS_NAMES, COVERS_SEEDS, ONE_SEED = "names+seeds", "names", "seeds", "1 seed"
# a figure of one group read for its listed names only (a t over the seeds; reporting.group_effects), and a
# figure printed without an interval because none shown to hold exists for it (a max - min, a ratio of two)
COVERS_THESE_NAMES, NO_INTERVAL = "these names (seeds)", "none"
SEED_VARIANCE_QUANTILE = 0.3  # see _df_seed_variance
MONTE_CARLO_LEVEL = 0.99  # the Monte-Carlo interval of a replicate p (monte_carlo_p_bounds)


def small_sample_factor(names: int) -> float:
    """``sqrt(n / (n - 1))``: the plain bootstrap's variance of a mean of n units is (n - 1) / n too small."""
    return float(np.sqrt(names / (names - 1))) if names > 1 else 1.0


@dataclass
class Statistic:
    """One figure of one condition, ready to be given an interval.

    ``seed_values``: the figure computed by each seed on every name, in ``seeds`` order (for the seed
    part). ``name_replicates``: the figure on each replicate's resampled names, averaged over every
    seed, *already* inflated around ``point`` (None: the figure does not depend on the names);
    ``names``: how many names per group it rests on (the names part's degrees of freedom are names - 1).
    """

    point: float
    seeds: tuple[int, ...]
    seed_values: np.ndarray
    name_replicates: np.ndarray | None = None
    names: int = 0
    bounds: tuple[float, float] | None = None   # the figure's range (accuracies: 0 to 1); replicates stay in it
    # (seeds x names) per-name values of a figure of one group, for reporting.group_effects' intervals
    name_values: np.ndarray | None = None
    # the fewest slots (sentences) any seed gave its names: whether a t over the seeds holds (group_effects)
    slots: float | None = None
    # each seed's slots, where they may differ (one name's figure: group_effects.median_seed_lower_bound)
    seed_slots: np.ndarray | None = None

    @property
    def covers(self) -> str:
        if len(self.seeds) > 1:
            return COVERS_BOTH if self.name_replicates is not None else COVERS_SEEDS
        return COVERS_NAMES if self.name_replicates is not None else ONE_SEED

    def name_deviation(self) -> np.ndarray | float:
        return 0.0 if self.name_replicates is None else self.name_replicates - self.point


def inflate(point: float, replicates: np.ndarray, names: int) -> np.ndarray:
    """Name-bootstrap replicates spread by the small-sample factor around ``point``."""
    return point + small_sample_factor(names) * (np.asarray(replicates, dtype=np.float64) - point)


class DrawnNames:
    """The names each bootstrap replicate draws (``indices``: B x m positions in a table's names), kept also
    as how often each distinct name is drawn (``counts``: names x B): a sum over the drawn names is then one
    BLAS product, (seeds x names) @ (names x B), instead of a (seeds x B x m) gather. Sums of counts are
    exact either way; other values agree to rounding."""

    def __init__(self, indices: np.ndarray):
        self.indices = np.asarray(indices)
        self.names, inverse = np.unique(self.indices, return_inverse=True)
        replicates_, distinct = self.indices.shape[0], len(self.names)
        flat = inverse.reshape(replicates_, -1) + (np.arange(replicates_) * distinct)[:, None]
        self.counts = np.ascontiguousarray(
            np.bincount(flat.ravel(), minlength=replicates_ * distinct).reshape(replicates_, distinct).T,
            dtype=np.float64)

    @classmethod
    def joined(cls, parts: Sequence["DrawnNames"]) -> "DrawnNames":
        """The draws of several disjoint pools side by side (a replicate draws from each)."""
        joined = cls.__new__(cls)
        joined.indices = np.concatenate([part.indices for part in parts], axis=1)
        joined.names = np.concatenate([part.names for part in parts])
        if len(np.unique(joined.names)) != len(joined.names):
            return cls(joined.indices)
        joined.counts = np.vstack([part.counts for part in parts])
        return joined

    def sum(self, values: np.ndarray) -> np.ndarray:
        """(seeds, B): each replicate's sum of (seeds x names) ``values`` over its drawn names."""
        picked = values[:, self.names]
        if not np.isfinite(picked).all():  # a name without a value must not reach replicates that skip it
            return values[:, self.indices].sum(-1)
        return picked @ self.counts


def ratio_statistic(rec: np.ndarray, sen: np.ndarray, idx: np.ndarray, drawn: np.ndarray | DrawnNames,
                     seeds: tuple[int, ...], names: int, bounds: tuple[float, float] = (0.0, 1.0)) -> Statistic:
    """Slot-weighted ratio (accuracy, recall) of the names ``idx`` per seed, from (seeds x names) counts
    ``rec`` / ``sen``; its names part from each replicate's ``drawn`` names (B x names, or ``DrawnNames``)."""
    drawn = drawn if isinstance(drawn, DrawnNames) else DrawnNames(drawn)
    per_seed = rec[:, idx].sum(1) / sen[:, idx].sum(1)
    point = float(per_seed.mean())
    resampled = (drawn.sum(rec) / drawn.sum(sen)).mean(0)   # (B,): every seed on the drawn names
    with np.errstate(invalid="ignore", divide="ignore"):
        name_values = rec[:, idx] / sen[:, idx]
    return Statistic(point, seeds, per_seed, inflate(point, resampled, names), names, bounds, name_values,
                     float(sen[:, idx].sum(1).min()))


class SeedNoise:
    """The random numbers of one study's intervals: a standard normal multiplier per (seed number,
    replicate), shared by every condition and figure, and one uniform per replicate from which every
    ``sqrt(df / chi2_df)`` scale is taken (the same quantile for every df, so figures with different
    degrees of freedom still move together, as a gap over groups needs)."""

    SIDES = (None, "first", "second")  # a figure's own seed part; the two sides of an unpaired difference

    def __init__(self, n_boot: int, seed: int = 0):
        self.n_boot = n_boot
        self._seed = seed
        self._rng = np.random.default_rng([seed, 7919])
        # stratified: one uniform in each of B equal slices, in random order, so the t quantiles the
        # percentile interval reads are not blurred by the Monte-Carlo noise of B chi-square draws
        self._uniform = (self._rng.permutation(n_boot) + self._rng.random(n_boot)) / n_boot
        self._z: dict[tuple[str | None, int], np.ndarray] = {}
        self._scale: dict[float, np.ndarray] = {}

    def z(self, key: tuple[str | None, int]) -> np.ndarray:
        """The multipliers of (side, seed number), from a generator of their own: a comparison's draws do not
        depend on which figures asked before it, so adding a run of one condition leaves the others' as they were."""
        if key not in self._z:
            side, seed_number = key
            generator = np.random.default_rng([self._seed, 7919, self.SIDES.index(side), int(seed_number)])
            self._z[key] = generator.standard_normal(self.n_boot)
        return self._z[key]

    def scale(self, df: float) -> np.ndarray:
        """``sqrt(df / chi2_df)`` per replicate: turns a normal draw into a t_df one (1 for df = inf)."""
        if not np.isfinite(df):
            return np.ones(self.n_boot)
        key = round(float(df), 6)
        if key not in self._scale:
            self._scale[key] = np.sqrt(key / chi2_quantile(self._uniform, key))
        return self._scale[key]

    def gaussian(self, seeds: Sequence[int], deviations: np.ndarray, side: str | None = None) -> np.ndarray:
        """``sum_s z_s d_s / sqrt(S (S - 1))``: normal with variance s^2 / S given the deviations."""
        count = len(seeds)
        if count < 2:
            return np.zeros(self.n_boot)
        total = sum(self.z((side, s)) * d for s, d in zip(seeds, deviations))
        return total / np.sqrt(count * (count - 1))


def chi2_quantile(q: np.ndarray | float, df: float) -> np.ndarray:
    """``stats.chi2.ppf(q, df)`` (the same function and bits), without its argument checks: the study's
    intervals call it thousands of times on valid arguments, where those checks took most of the time."""
    return 2 * special.gammaincinv(df / 2, q)


def welch_df(variances: Sequence[float], dfs: Sequence[float]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates."""
    total = sum(variances)
    denominator = sum(v ** 2 / df for v, df in zip(variances, dfs) if v > 0 and df > 0)
    if total <= 0 or denominator <= 0:
        return float("inf")
    return float(total ** 2 / denominator)


def _seed_variance(values: np.ndarray) -> float:
    return float(values.var(ddof=1) / len(values)) if len(values) > 1 else 0.0


def _df_seed_variance(variance: float, df: int) -> float:
    """The seed variance as it enters the degrees of freedom (only there): ``v (S-1) / chi2_{S-1}(q)``
    with q = ``SEED_VARIANCE_QUANTILE``, an upper bound the true variance exceeds with probability q. With
    2-4 seed degrees of freedom the plug-in Welch df is itself noisy (a low variance estimate also raises
    df, and so narrows the interval twice): in the coverage simulation (tests/reporting/test_intervals_coverage.py)
    the plug-in df left a seed-dominated figure (ALL, 3 seeds) at 0.92, q = 0.5 at 0.93 and q = 0.3 at 0.94,
    with every other figure at 0.94-0.96."""
    return variance * df / _seed_variance_chi2(df) if df > 0 else variance


@functools.lru_cache(maxsize=None)
def _seed_variance_chi2(df: int) -> float:
    return float(chi2_quantile(SEED_VARIANCE_QUANTILE, df))


def _names_variance(deviation: np.ndarray | float) -> float:
    return float(np.var(deviation, ddof=1)) if np.ndim(deviation) else 0.0


def replicates(noise: SeedNoise, statistic: Statistic) -> np.ndarray:
    """Joint replicates of one figure: ``point + scale_df * (names part + seed part)`` with ``df`` the
    Welch-Satterthwaite degrees of freedom of the two parts (names - 1 and seeds - 1)."""
    values = np.asarray(statistic.seed_values, dtype=np.float64)
    names = statistic.name_deviation()
    seeds = noise.gaussian(statistic.seeds, values - values.mean())
    seed_df = len(values) - 1
    df = welch_df([_names_variance(names), _df_seed_variance(_seed_variance(values), seed_df)],
                  [statistic.names - 1, seed_df])
    out = statistic.point + noise.scale(df) * (names + seeds)
    return out if statistic.bounds is None else np.clip(out, *statistic.bounds)


def difference_covers(first: Statistic, second: Statistic) -> str:
    has_names = first.name_replicates is not None or second.name_replicates is not None
    seeds_known = len(first.seeds) > 1 and len(second.seeds) > 1
    if seeds_known:
        return COVERS_BOTH if has_names else COVERS_SEEDS
    return COVERS_NAMES if has_names else ONE_SEED


def difference_replicates(noise: SeedNoise, first: Statistic, second: Statistic) -> np.ndarray:
    """Replicates of ``first - second``: names paired through the shared draw; seeds paired (a t on the
    per-seed differences) when both have the same seeds, otherwise independent sides (Welch)."""
    names = np.asarray(first.name_deviation()) - np.asarray(second.name_deviation())
    name_df = min(s.names for s in (first, second) if s.name_replicates is not None) - 1 \
        if first.name_replicates is not None or second.name_replicates is not None else 0
    a, b = (np.asarray(s.seed_values, dtype=np.float64) for s in (first, second))
    if tuple(first.seeds) == tuple(second.seeds):
        difference = a - b
        seeds = noise.gaussian(first.seeds, difference - difference.mean())
        variances = [_names_variance(names), _df_seed_variance(_seed_variance(difference), len(a) - 1)]
        dfs = [name_df, len(a) - 1]
    else:
        seeds = (noise.gaussian(first.seeds, a - a.mean(), side="first")
                 - noise.gaussian(second.seeds, b - b.mean(), side="second"))
        variances = [_names_variance(names), _df_seed_variance(_seed_variance(a), len(a) - 1),
                     _df_seed_variance(_seed_variance(b), len(b) - 1)]
        dfs = [name_df, len(a) - 1, len(b) - 1]
    out = first.point - second.point + noise.scale(welch_df(variances, dfs)) * (names + seeds)
    if first.bounds is None or second.bounds is None:
        return out
    return np.clip(out, first.bounds[0] - second.bounds[1], first.bounds[1] - second.bounds[0])


def seed_only_interval(statistic: Statistic, confidence: float, base: Statistic | None = None) -> "Interval":
    """A figure that does not vary with the names (CoNLL F1, the single OOV string), or its difference from
    ``base``: the t interval that its replicates (``replicates``, ``difference_replicates``) draw from,
    computed exactly, so that every table prints the same interval and p whatever its replicate count. A
    paired t on the per-seed differences when both have the same seeds; otherwise Welch, its degrees of
    freedom as in ``difference_replicates``."""
    a = np.asarray(statistic.seed_values, dtype=np.float64)
    bounds = statistic.bounds
    if base is None:
        point, variance, df = statistic.point, _seed_variance(a), float(len(a) - 1)
    else:
        b = np.asarray(base.seed_values, dtype=np.float64)
        point = statistic.point - base.point
        if tuple(statistic.seeds) == tuple(base.seeds):
            variance, df = _seed_variance(a - b), float(len(a) - 1)
        else:
            va, vb = _seed_variance(a), _seed_variance(b)
            variance = va + vb
            df = welch_df([_df_seed_variance(va, len(a) - 1), _df_seed_variance(vb, len(b) - 1)],
                          [len(a) - 1, len(b) - 1])
        bounds = (None if statistic.bounds is None or base.bounds is None else
                  (statistic.bounds[0] - base.bounds[1], statistic.bounds[1] - base.bounds[0]))
    if variance <= 0:  # every seed gave the same value: no spread, as the replicates would show
        return Interval(float(point), float(point), float(point), COVERS_SEEDS, 1.0 if point == 0 else 0.0)
    se = float(np.sqrt(variance))
    half = float(stats.t.ppf(0.5 + confidence / 2, df)) * se
    low, high = point - half, point + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    p_value = float(2 * stats.t.sf(abs(point) / se, df))
    return Interval(float(point), float(low), float(high), COVERS_SEEDS, p_value)


@dataclass
class Interval:
    """A figure, its interval and what the interval covers. ``low``/``high`` are NaN where none is given."""

    value: float
    low: float
    high: float
    covers: str
    p_value: float = float("nan")  # two-sided, H0: the figure is 0 (differences)
    # where the p-value is read off B replicates: its Monte-Carlo interval (MONTE_CARLO_LEVEL), the p's an
    # infinite number of replicates could give; an exact p (seed_only_interval) is its own interval
    p_low: float = float("nan")
    p_high: float = float("nan")

    def __post_init__(self):
        if math.isnan(self.p_low) and math.isnan(self.p_high):
            self.p_low = self.p_high = self.p_value

    @classmethod
    def from_replicates(cls, value: float, reps: np.ndarray, covers: str, confidence: float) -> "Interval":
        """``value`` with the percentile interval of its replicates and the p-value that inverts it."""
        if covers == ONE_SEED:
            return cls(value, float("nan"), float("nan"), covers)
        reps = np.asarray(reps, dtype=np.float64)
        reps = reps[np.isfinite(reps)]
        if not len(reps):
            return cls(value, float("nan"), float("nan"), covers)
        tail = (1 - confidence) / 2
        low, high = np.quantile(reps, [tail, 1 - tail])
        above, below = np.mean(reps > 0), np.mean(reps < 0)
        p_value = float(min(1.0, 2 * min(above + 0.5 * np.mean(reps == 0), below + 0.5 * np.mean(reps == 0))))
        p_low, p_high = monte_carlo_p_bounds(p_value, len(reps))
        p_value = max(p_value, 1.0 / len(reps))  # resolution of B replicates
        return cls(float(value), float(low), float(high), covers, p_value, p_low, p_high)


def monte_carlo_p_bounds(p_value: float, n_replicates: int, level: float = MONTE_CARLO_LEVEL) -> tuple[float, float]:
    """Clopper-Pearson bounds of a two-sided p read off ``n_replicates`` replicates (``2 k / B``, k the
    replicates in the smaller tail): where the p that infinitely many replicates would give lies, with
    probability ``level``. A decision whose adjusted p crosses the threshold inside these bounds is one the
    replicates cannot make (``claims_family``); more replicates (``--n-boot``) narrow them."""
    tail = min(p_value, 1.0) * n_replicates / 2
    fewest, most = math.floor(tail), math.ceil(tail)  # ties count a half
    alpha = 1 - level
    low = stats.beta.ppf(alpha / 2, fewest, n_replicates - fewest + 1) if fewest > 0 else 0.0
    high = stats.beta.ppf(1 - alpha / 2, most + 1, n_replicates - most) if most < n_replicates else 1.0
    return float(min(1.0, 2 * low)), float(min(1.0, 2 * high))


def replicates_to_resolve(threshold: float, level: float = MONTE_CARLO_LEVEL) -> int:
    """The fewest replicates B at which a p that no replicate crosses (k = 0) has its Monte-Carlo upper bound
    (``monte_carlo_p_bounds``) below ``threshold``. With fewer, no p read off the replicates can be shown to
    pass that threshold, however small the true p: the bound of k = 0 is ``2 (1 - ((1 - level) / 2) ** (1 / B))``."""
    if not 0 < threshold < 2:
        raise NerbiasError(f"replicates_to_resolve: threshold {threshold} is not in (0, 2)")
    return math.floor(math.log((1 - level) / 2) / math.log1p(-threshold / 2)) + 1


def bias_corrected(value: float, reps: np.ndarray) -> float:
    """``2 * value - mean(replicates)``: the bootstrap bias correction."""
    finite = np.asarray(reps, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    return float(2 * value - finite.mean()) if len(finite) else float(value)


def gap_interval(points: np.ndarray, group_replicates: np.ndarray, covers: str, confidence: float,
                 base: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[Interval, float, np.ndarray]:
    """The best - worst gap of ``points`` (groups,) from joint replicates (B, groups), bias-corrected
    (``2 gap - mean(gap*)``), with the percentile interval of the replicates (widened to the point where the
    correction moved it outside); with ``base`` = (points,
    replicates) of the baseline: the same for the difference of the two gaps. Returns the interval, the uncorrected figure and its replicates."""
    raw, reps = float(gap_of(points)), gap_of(group_replicates)
    if base is not None:
        raw, reps = raw - float(gap_of(base[0])), reps - gap_of(base[1])
    interval = Interval.from_replicates(bias_corrected(raw, reps), reps, covers, confidence)
    if np.isfinite(interval.low):  # with a few names far off (a skewed group) the correction can leave the
        # replicates' interval: it is widened to reach the point (coverage can only rise; measured in the test)
        interval = dataclasses.replace(interval, low=min(interval.low, interval.value),
                                       high=max(interval.high, interval.value))
    return interval, raw, reps


def gap_of(accuracies: np.ndarray) -> np.ndarray:
    """Best minus worst along the last axis."""
    return accuracies.max(axis=-1) - accuracies.min(axis=-1)


def group_accuracies(recognised: np.ndarray, sentences: np.ndarray, groups: Sequence[np.ndarray]) -> np.ndarray:
    """(..., groups): slot-weighted accuracy of each group per seed, averaged over seeds.

    ``recognised``/``sentences``: (..., seeds, names)."""
    columns = [recognised[..., g].sum(-1) / sentences[..., g].sum(-1) for g in groups]
    return np.stack(columns, axis=-1).mean(-2)


def noise_floor(recognised: np.ndarray, sentences: np.ndarray, groups: Sequence[np.ndarray],
                n_permutations: int = 1000, seed: int = 0) -> dict[str, float]:
    """The best - worst gap with names permuted across groups (group sizes kept, every seed permuted
    alike): mean, 95th percentile, and the share of permuted gaps at least the observed one (p)."""
    if len(groups) < 2:
        raise NerbiasError("a noise floor needs at least two groups")
    if any(len(group) == 0 for group in groups):
        raise NerbiasError("a noise floor needs at least one name in every group")
    rng = np.random.default_rng([seed, 104729])
    every = np.concatenate(groups)
    sizes = np.cumsum([len(g) for g in groups])[:-1]
    permuted = every[np.argsort(rng.random((n_permutations, len(every))), axis=1)]   # (permutations, names)
    starts = np.concatenate([[0], sizes])
    # every permutation at once: (..., seeds, permutations, groups) sums of each permuted group's names
    recognised_sums = np.add.reduceat(recognised[..., permuted], starts, axis=-1)
    sentence_sums = np.add.reduceat(sentences[..., permuted], starts, axis=-1)
    gaps = gap_of((recognised_sums / sentence_sums).mean(-3))
    observed = float(gap_of(group_accuracies(recognised, sentences, groups)))
    return {"floor_mean": float(gaps.mean()), "floor_p95": float(np.quantile(gaps, 0.95)),
            "floor_p": float((1 + np.sum(gaps >= observed - 1e-12)) / (1 + n_permutations))}


def t_interval(values: Sequence[float], confidence: float) -> tuple[float, float]:
    """Classical t interval of a mean (reference for tests and the seed-only figures)."""
    values = np.asarray(values, dtype=np.float64)
    half = stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean() - half), float(values.mean() + half)


__all__ = ["COVERS_BOTH", "COVERS_NAMES", "COVERS_SEEDS", "COVERS_THESE_NAMES", "DrawnNames", "Interval", "NO_INTERVAL", "MONTE_CARLO_LEVEL", "ONE_SEED", "SeedNoise",
           "Statistic", "bias_corrected", "difference_covers", "difference_replicates", "gap_interval", "gap_of",
           "group_accuracies", "inflate", "monte_carlo_p_bounds", "noise_floor", "ratio_statistic", "replicates",
           "replicates_to_resolve", "seed_only_interval", "small_sample_factor", "t_interval", "welch_df"]
