"""Coverage and power of one-group intervals, by simulation in the shapes the real groups have.

    python -m nerbias.reporting.group_coverage [--studies 1000] [-o DIR]

writes ``group_coverage.csv`` (method x shape x names x seeds: coverage and mean width), ``group_power.csv``
(names and seeds against the group difference a test detects), prints both as Markdown (in docs/group-statistics.md).

**Model.** A name's recognition probability is ``expit(a + b_s + c_sn)``: ``a`` the name's logit, ``b_s`` a
seed effect (sd ``SEED_SD``), ``c_sn`` a seed x name interaction (sd ``INTERACTION_SD``; both measured on
the archived baseline's Winogender names, logit scale); each (seed, name) has ``SLOTS`` binomial slots, as in
the 100k Winogender sample. A shape is a population of name logits: the per-name accuracies (mean over
seeds) of one real group of the archived baseline (``results/mitigation_study``), each drawn name taking one
of them at random plus a jitter (sd ``JITTER_SD``), so a draw of 15 names can miss a group's one or two rare
low names, as a real list can. Truths are exact (Gauss-Hermite over the normal parts):

- **names like these**: ``E`` over the population's names and over seeds;
- **these names**: ``E`` over seeds for the names drawn;
- one seed: the names-like-these truth given that seed's effect (one trained model says nothing of another).

The paired difference of one group puts the condition's change in a few names, as ``ambiguous_names`` does:
names whose baseline accuracy is under 0.1 gain ``PLACE_SHIFT`` logits, the rest none.

**Methods** (every one run through the estimator code it names):

- ``log-error t``: ``group_effects.names_like_these_interval`` (kept for a group's accuracy): names part +
  seeds part, Welch df, the t interval of log(1 - accuracy) mapped back; not defined for a difference;
- ``Welch t``: the same variance, symmetric on the accuracy scale;
- ``crossed t``: the mixed model of a balanced names x seeds layout (``group_effects.crossed_variance``);
- ``bootstrap``: the study's name bootstrap plus t seed part (``intervals.ratio_statistic`` + ``replicates``);
- ``studentised bootstrap``: a bootstrap-t over names (names resampled within the group, each resample's own
  standard error, the seed part added; Davison & Hinkley 1997, 5.2);
- ``BCa bootstrap``: bias-corrected and accelerated percentiles over the names' means over seeds (Efron 1987;
  ``scipy.stats.bootstrap``);
- ``seeds t``: ``group_effects.these_names_interval``, against the these-names truth (kept for every
  figure of one group below ``MIN_NAMES`` names and for every difference).

**Power** (``power_table``): two groups of the pooled shape of Mishra et al.'s 120 names, the second's
logits shifted so that its names-like-these accuracy is lower by the difference, tested by
``group_effects.group_effect_test`` (the permutation test over names the reports open with) at 0.05.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from nerbias.fileio import write_csv
from nerbias.reporting import group_effects
from nerbias.reporting.intervals import Interval, SeedNoise, ratio_statistic, replicates
from nerbias.reporting.tables import markdown_table

ARCHIVE = Path(__file__).resolve().parents[2] / "results" / "mitigation_study"
SEED_SD, INTERACTION_SD, JITTER_SD = 0.15, 0.5, 0.3
SLOTS = 2459
PLACE_SHIFT = 3.0   # logits: a place-like name at 0.02 rises to about 0.3, as ambiguous_names moved Sofia
LOW = 0.1           # a name under this baseline accuracy is "place-like" for the difference's shapes
CONFIDENCE = 0.95
HERMITE = np.polynomial.hermite_e.hermegauss(60)
# shape -> (archived group whose names it takes, whether a place-like name is added to it)
SHAPES = {
    "near ceiling, no tail (White Male)": ("White Male", False),
    "one low name (White Female)": ("White Female", False),
    "two low names (Black Female)": ("Black Female", False),
    "place-like names in this group (Hispanic Female)": ("Hispanic Female", False),
    "a place-like name in every group (White Male + 1)": ("White Male", True),
    "mid-heavy (Muslim Male)": ("Muslim Male", False),
}
DIFFERENCE_SHAPES = ("place-like names in this group (Hispanic Female)",
                     "a place-like name in every group (White Male + 1)")


def archived_accuracies(archive: Path = ARCHIVE, condition: str = "baseline") -> dict[str, np.ndarray]:
    """Per group: its names' Winogender accuracy, mean over the archived condition's seeds."""
    frames = [pd.read_csv(path / "bias" / "winogender" / "per_name.csv")
              for path in sorted(archive.glob(f"{condition}-seed*")) if (path / "bias" / "winogender").is_dir()]
    if not frames:
        raise FileNotFoundError(f"{archive}: no {condition}-seed*/bias/winogender/per_name.csv")
    means = pd.concat(frames).groupby(["group", "name"])["accuracy"].mean().reset_index()
    return {group: np.sort(part["accuracy"].to_numpy()) for group, part in means.groupby("group")}


def shape_logits(shape: str, accuracies: dict[str, np.ndarray]) -> np.ndarray:
    group, add_place = SHAPES[shape]
    values = accuracies[group]
    if add_place:
        values = np.append(values, accuracies["Hispanic Female"].min())   # a Sofia among them
    return special.logit(np.clip(values, 0.002, 0.998))


def logistic_normal_mean(logits: np.ndarray, variance: float) -> np.ndarray:
    """``E expit(a + z)``, z ~ N(0, variance), for each ``a`` (Gauss-Hermite, 60 nodes)."""
    nodes, weights = HERMITE
    values = special.expit(np.asarray(logits, dtype=np.float64)[..., None] + np.sqrt(variance) * nodes)
    return values @ weights / weights.sum()


def population_mean(logits: np.ndarray, extra_variance: float) -> float:
    return float(logistic_normal_mean(logits, JITTER_SD ** 2 + extra_variance).mean())


def shift_of(logits: np.ndarray) -> np.ndarray:
    return np.where(special.expit(logits) < LOW, PLACE_SHIFT, 0.0)


@dataclass
class Draw:
    """One batch of simulated studies of one group: accuracies (studies, seeds, names) and their truths."""

    accuracy: np.ndarray
    recognised: np.ndarray
    truth_population: np.ndarray   # (studies,): names like these (given the seed when there is one seed)
    truth_these: np.ndarray        # (studies,): these names


def simulate(logits: np.ndarray, names: int, seeds: int, studies: int, rng: np.random.Generator,
             shifted: bool = False, slots: int = SLOTS) -> Draw:
    """Studies of one group (``shifted``: the paired difference, condition - baseline, per (seed, name))."""
    kind = rng.integers(0, len(logits), (studies, names))
    a = logits[kind] + JITTER_SD * rng.standard_normal((studies, names))
    shift = shift_of(logits)[kind] if shifted else np.zeros_like(a)

    def one_condition(delta: np.ndarray) -> np.ndarray:
        b = SEED_SD * rng.standard_normal((studies, seeds, 1))
        c = INTERACTION_SD * rng.standard_normal((studies, seeds, names))
        return rng.binomial(slots, special.expit(a[:, None, :] + delta[:, None, :] + b + c)), b

    rec, b = one_condition(shift)
    seed_var = SEED_SD ** 2 + INTERACTION_SD ** 2
    if not shifted:
        these = logistic_normal_mean(a, seed_var).mean(1)
        if seeds == 1:   # given the one seed's effect: the interaction stays random
            given = logistic_normal_mean(logits[None, :] + b[:, 0, :], JITTER_SD ** 2 + INTERACTION_SD ** 2)
            population = given.mean(1)
        else:
            population = np.full(studies, population_mean(logits, seed_var))
        return Draw(rec / slots, rec.astype(np.float64), population, these)
    base, _ = one_condition(np.zeros_like(a))
    delta = shift_of(logits)
    these = (logistic_normal_mean(a + shift, seed_var) - logistic_normal_mean(a, seed_var)).mean(1)
    population = np.full(studies, float((logistic_normal_mean(logits + delta, JITTER_SD ** 2 + seed_var)
                                         - logistic_normal_mean(logits, JITTER_SD ** 2 + seed_var)).mean()))
    return Draw((rec - base) / slots, (rec - base).astype(np.float64), population, these)


# ----------------------------------------------------------------------------------------------
# Methods: (studies, seeds, names) accuracies -> (low, high) per study


def _symmetric(variance_of: Callable) -> Callable:
    def method(accuracy: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        lows, highs = np.empty(len(accuracy)), np.empty(len(accuracy))
        for i, table in enumerate(accuracy):
            variance, df = variance_of(table)
            half = stats.t.ppf(0.5 + CONFIDENCE / 2, df) * np.sqrt(variance)
            lows[i], highs[i] = table.mean() - half, table.mean() + half
        return lows, highs
    return method


def log_error_t(accuracy: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    out = [group_effects.names_like_these_interval(table, CONFIDENCE) for table in accuracy]
    return np.array([i.low for i in out]), np.array([i.high for i in out])


def seeds_t(accuracy: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    out = [group_effects.these_names_interval(table.mean(1), CONFIDENCE) for table in accuracy]
    return np.array([i.low for i in out]), np.array([i.high for i in out])


def study_bootstrap(accuracy: np.ndarray, rng: np.random.Generator, n_boot: int = 400
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The study's interval of a group figure: ``ratio_statistic`` (names drawn within the group) and
    ``replicates`` (t-scaled seed part), read by ``Interval.from_replicates``."""
    studies, seeds, names = accuracy.shape
    noise = SeedNoise(n_boot, int(rng.integers(1 << 30)))
    lows, highs = np.empty(studies), np.empty(studies)
    sentences = np.full((seeds, names), float(SLOTS))
    members = np.arange(names)
    for i, table in enumerate(accuracy):
        drawn = members[rng.integers(0, names, (n_boot, names))]
        statistic = ratio_statistic(table * SLOTS, sentences, members, drawn, tuple(range(1, seeds + 1)), names,
                                    bounds=(-1.0, 1.0))
        interval = Interval.from_replicates(statistic.point, replicates(noise, statistic),
                                            "names+seeds" if seeds > 1 else "names", CONFIDENCE)
        lows[i], highs[i] = interval.low, interval.high
    return lows, highs


def studentised_bootstrap(accuracy: np.ndarray, rng: np.random.Generator, n_boot: int = 400
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap-t over names; the seed part (the crossed variance less its names part) added to every
    resample's variance."""
    studies, seeds, names = accuracy.shape
    lows, highs = np.empty(studies), np.empty(studies)
    tail = (1 - CONFIDENCE) / 2
    for i, table in enumerate(accuracy):
        name_means = table.mean(0)
        variance, _ = group_effects.names_seeds_variance(table)
        seed_part = max(variance - name_means.var(ddof=1) / names, 0.0)
        drawn = name_means[rng.integers(0, names, (n_boot, names))]
        se_star = np.sqrt(drawn.var(axis=1, ddof=1) / names + seed_part)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_star = (drawn.mean(1) - name_means.mean()) / se_star
        t_star = t_star[np.isfinite(t_star)]
        se = np.sqrt(variance)
        if not len(t_star):
            lows[i] = highs[i] = name_means.mean()
            continue
        upper_t, lower_t = np.quantile(t_star, [1 - tail, tail])
        lows[i], highs[i] = name_means.mean() - upper_t * se, name_means.mean() - lower_t * se
    return lows, highs


def bca_bootstrap(accuracy: np.ndarray, rng: np.random.Generator, n_boot: int = 400
                  ) -> tuple[np.ndarray, np.ndarray]:
    """BCa (Efron 1987; ``scipy.stats.bootstrap``) over the names' means over seeds: the seeds enter only
    through each name's mean, as in a bootstrap over names of a seed-averaged table."""
    lows, highs = np.empty(len(accuracy)), np.empty(len(accuracy))
    for i, table in enumerate(accuracy):
        name_means = table.mean(0)
        if np.ptp(name_means) == 0:  # every name alike: no spread to resample
            lows[i] = highs[i] = name_means.mean()
            continue
        result = stats.bootstrap((name_means,), np.mean, confidence_level=CONFIDENCE, n_resamples=n_boot,
                                 method="BCa", rng=rng, vectorized=True)
        lows[i], highs[i] = result.confidence_interval
    return lows, highs


KEPT = "log-error t (kept)"
METHODS: dict[str, tuple[Callable, str]] = {  # name -> (function, estimand it is scored against)
    KEPT: (log_error_t, "population"),
    "Welch t": (_symmetric(group_effects.names_seeds_variance), "population"),
    "crossed t (mixed model)": (_symmetric(group_effects.crossed_variance), "population"),
    "bootstrap (study, before)": (study_bootstrap, "population"),
    "studentised bootstrap": (studentised_bootstrap, "population"),
    "BCa bootstrap (names)": (bca_bootstrap, "population"),
    "seeds t (these names)": (seeds_t, "these"),
}


def coverage_table(studies: int = 1000, names: Sequence[int] = (15, 60, 120, 250), seeds: Sequence[int] = (1, 3, 5, 10),
                   methods: Sequence[str] = tuple(METHODS), shapes: Sequence[str] = tuple(SHAPES), seed: int = 0,
                   accuracies: dict[str, np.ndarray] | None = None, slow_studies: int | None = None,
                   slow_names: int = 60, slots: int = SLOTS) -> pd.DataFrame:
    """One row per (figure, shape, names, seeds, method): coverage of the nominal 95 % interval and mean width.
    ``slow_studies``: fewer studies for the two bootstraps (each draws replicates per study), which run only up to
    ``slow_names`` names a group."""
    accuracies = accuracies or archived_accuracies()
    rows = []
    figures = [("group accuracy", shape, False) for shape in shapes]
    figures += [("paired difference", shape, True) for shape in shapes if shape in DIFFERENCE_SHAPES]
    for figure, shape, shifted in figures:
        logits = shape_logits(shape, accuracies)
        for n in names:
            for s in seeds:
                rng = np.random.default_rng([seed, n, s, list(SHAPES).index(shape), int(shifted)])
                draw = simulate(logits, n, s, studies, rng, shifted, slots)
                for method in methods:
                    function, estimand = METHODS[method]
                    if s < 2 and (estimand == "these" or shifted):  # no seed interval; no one-seed claim
                        continue
                    if "bootstrap" in method and n > slow_names or shifted and method == KEPT:
                        continue  # (the log-error interval is one of an accuracy, not of a difference)
                    count = studies if "bootstrap" not in method or slow_studies is None else slow_studies
                    low, high = function(draw.accuracy[:count], rng)
                    truth = (draw.truth_these if estimand == "these" else draw.truth_population)[:count]
                    covered = (low <= truth) & (truth <= high)
                    rows.append({"figure": figure, "shape": shape, "slots": slots, "names": n, "seeds": s,
                                 "method": method,
                                 "estimand": "these names" if estimand == "these" else "names like these",
                                 "studies": count, "coverage": float(covered.mean()),
                                 "width": float(np.nanmean(high - low))})
    return pd.DataFrame(rows)


def contrast_coverage(studies: int = 1000, names: Sequence[int | Sequence[int]] = (15, 60),
                      seeds: Sequence[int] = (2, 3, 5, 10), slots: int = SLOTS, seed: int = 0,
                      accuracies: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """Simultaneous coverage of each group minus the others (``group_effects.simultaneous_contrasts``, the
    Bonferroni t over the seeds the reports and the study print): every archived group at once (the real shapes
    side by side), one seed effect shared by the groups of a seed (one model scores them all), and a study counts
    as covered only when every interval printed holds its these-names truth. ``names``: names drawn a group, or a
    sequence of one count a group (unequal groups, as the census-scale list's). The slot rule
    (``group_effects.contrast_slots``) decides which contrasts get an interval; a cell where none does is left out."""
    accuracies = accuracies or archived_accuracies()
    groups = [g for g in accuracies if g != "OOV"]
    seed_var = SEED_SD ** 2 + INTERACTION_SD ** 2
    rows = []
    for size in names:
        counts = [int(size)] * len(groups) if np.isscalar(size) else [int(n) for n in size]
        if len(counts) != len(groups):
            raise ValueError(f"{len(counts)} group sizes for {len(groups)} groups")
        group_slots = [n * slots for n in counts]
        for s in seeds:
            printed = np.array([group_effects.seed_interval_holds(s, rest)
                                for rest in group_effects.contrast_slots(group_slots)])
            if not printed.any():
                continue  # no interval is printed there (too few slots a group for a t over the seeds)
            rng = np.random.default_rng([seed, *counts, s, 7])
            per_seed, truths = [], []
            b = SEED_SD * rng.standard_normal((studies, s, 1))                  # shared by the groups
            for group, n in zip(groups, counts):
                logits = special.logit(np.clip(accuracies[group], 0.002, 0.998))
                a = logits[rng.integers(0, len(logits), (studies, n))] + JITTER_SD * rng.standard_normal((studies, n))
                c = INTERACTION_SD * rng.standard_normal((studies, s, n))
                per_seed.append(rng.binomial(slots, special.expit(a[:, None, :] + b + c)).mean(2) / slots)
                truths.append(logistic_normal_mean(a, seed_var).mean(1))
            values = np.stack(per_seed, axis=2)                                   # (studies, seeds, groups)
            truth = group_effects.minus_others(np.stack(truths, axis=1))          # (studies, groups)
            covered = np.empty(studies, dtype=bool)
            widths = np.empty(studies)
            for i in range(studies):
                intervals, _ = group_effects.simultaneous_contrasts(values[i], CONFIDENCE, group_slots)
                low = np.array([interval.low for interval in intervals])[printed]
                high = np.array([interval.high for interval in intervals])[printed]
                covered[i] = bool(((low <= truth[i][printed]) & (truth[i][printed] <= high)).all())
                widths[i] = float(np.mean(high - low))
            rows.append({"figure": "each group minus the others (all groups at once)", "groups": len(groups),
                         "slots": slots, "names": n if np.isscalar(size) else "/".join(map(str, counts)),
                         "seeds": s, "printed": int(printed.sum()), "studies": studies,
                         "coverage": float(covered.mean()), "width": float(widths.mean())})
    return pd.DataFrame(rows)


def median_seed_coverage(studies: int = 1000, accuracies: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.86, 0.95),
                         slots: Sequence[int] = (302, SLOTS), seeds: Sequence[int] = (3, 5, 10),
                         seed_sds: Sequence[float] = (0.2, 0.4, 0.8, 1.2), seed: int = 0) -> pd.DataFrame:
    """One name's one-sided 95 % lower bound over seeds, two ways: ``group_effects.median_seed_lower_bound``
    (kept for a test against a margin) against its truth, the accuracy at the median seed, and the one-sided t
    of the per-seed mean on the accuracy scale against its truth, the mean over seeds. A seed's logit is the
    name's plus a normal seed effect (sd ``seed_sds``; Sofia and Victoria's spread over the study's seeds is
    about 0.4 and 0.8), its slots binomial. Coverage: the share of studies whose bound is at or below the truth."""
    rows = []
    for p, n, s, sd in itertools.product(accuracies, slots, seeds, seed_sds):
        rng = np.random.default_rng([seed, int(p * 1000), n, s, int(sd * 100)])
        mu = special.logit(p)
        accuracy = rng.binomial(n, special.expit(mu + sd * rng.standard_normal((studies, s)))) / n
        median_lower = np.array([group_effects.median_seed_lower_bound(a, n, CONFIDENCE)[1] for a in accuracy])
        mean_lower = accuracy.mean(1) - stats.t.ppf(CONFIDENCE, s - 1) * accuracy.std(1, ddof=1) / np.sqrt(s)
        truths = {"median-seed logit t (kept)": (median_lower, p),
                  "t of the mean": (mean_lower, float(logistic_normal_mean(np.array([mu]), sd ** 2)[0]))}
        for method, (lower, truth) in truths.items():
            rows.append({"figure": "one name, one-sided lower bound", "accuracy": p, "slots": n, "seeds": s,
                         "seed_sd": sd, "method": method, "studies": studies, "coverage": float((lower <= truth).mean())})
    return pd.DataFrame(rows)


def power_table(differences: Sequence[float] = (0.02, 0.05, 0.10), names: Sequence[int] = (15, 30, 60, 120, 250),
                seeds: Sequence[int] = (1, 3, 5), studies: int = 400, permutations: int = 200, seed: int = 0,
                accuracies: dict[str, np.ndarray] | None = None, slots: int = SLOTS) -> pd.DataFrame:
    """Power of the group-effect permutation test (0.05) to tell two groups apart whose names-like-these
    accuracies differ by ``differences``: both of the pooled shape of every archived group (Mishra et al.'s
    120 names), the second shifted on the logit scale."""
    accuracies = accuracies or archived_accuracies()
    pooled = special.logit(np.clip(np.concatenate([v for g, v in accuracies.items() if g != "OOV"]), 0.002, 0.998))
    seed_var = SEED_SD ** 2 + INTERACTION_SD ** 2
    base = population_mean(pooled, seed_var)
    rows = []
    for difference in differences:
        shift = optimize.brentq(lambda d: population_mean(pooled - d, seed_var) - (base - difference), 0, 10)
        for n in names:
            labels = ["first"] * n + ["second"] * n
            for s in seeds:
                rng = np.random.default_rng([seed, n, s, int(difference * 1000)])
                first = simulate(pooled, n, s, studies, rng, slots=slots).accuracy.mean(1)  # (studies, names)
                second = simulate(pooled - shift, n, s, studies, rng, slots=slots).accuracy.mean(1)
                rejected = sum(group_effects.group_effect_test(np.concatenate([a, b]), labels, permutations,
                                                               seed=i)["p_value"] <= 0.05
                               for i, (a, b) in enumerate(zip(first, second)))
                rows.append({"difference": difference, "names": n, "seeds": s, "slots": slots, "studies": studies,
                             "power": rejected / studies})
    return pd.DataFrame(rows)


def smallest_names_that_hold(coverage: pd.DataFrame, method: str = KEPT, low: float = 0.93,
                             high: float = 0.97) -> int | None:
    """The smallest simulated group size at which ``method`` covers within [low, high] in every shape, seed
    count and figure it is run for; None when no size does."""
    part = coverage[coverage["method"] == method]
    holding = part.groupby("names")["coverage"].agg(lambda c: bool(((c >= low) & (c <= high)).all()))
    sizes = sorted(n for n, ok in holding.items() if ok)
    return sizes[0] if sizes else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nerbias.reporting.group_coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=1000, help="simulated studies per cell (default %(default)s)")
    parser.add_argument("--bootstrap-studies", type=int, default=400,
                        help="studies per cell for the two bootstraps (default %(default)s)")
    parser.add_argument("--power-studies", type=int, default=400, help="0: no power table")
    parser.add_argument("--power-names", type=int, nargs="+", default=[15, 30, 60, 120, 250], help="names a group "
                        "in the power table")
    parser.add_argument("--power-seeds", type=int, nargs="+", default=[1, 3, 5], help="seeds in the power table")
    parser.add_argument("--slots", type=int, default=SLOTS, help="binomial slots per (seed, name) (default: the "
                        "100k Winogender sample's %(default)s; the census-scale list gets 30-88)")
    parser.add_argument("--names", type=int, nargs="+", default=[15, 60, 120, 250], help="names a group")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 3, 5, 10], help="seeds a study")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--contrasts", action="store_true", help="also the simultaneous coverage of each group "
                        "minus the others (contrast_coverage.csv; 2 seeds or more)")
    parser.add_argument("--median-seed", action="store_true", help="also one name's one-sided lower bound "
                        "(median_seed_coverage.csv)")
    parser.add_argument("-o", "--output-dir", default="group_coverage")
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    coverage = coverage_table(args.studies, names=args.names, seeds=args.seeds, methods=args.methods,
                              slow_studies=args.bootstrap_studies, slots=args.slots)
    write_csv(out / "group_coverage.csv", coverage)
    wide = coverage.pivot_table(index=["figure", "shape", "method"], columns=["names", "seeds"], values="coverage")
    wide.columns = [f"{n} names, {s} seed{'s' if s > 1 else ''}" for n, s in wide.columns]
    print(markdown_table(wide.reset_index(), digits=3))
    print(f"\nsmallest group size at which {KEPT} holds (0.93-0.97) in every shape and seed count: "
          f"{smallest_names_that_hold(coverage)}")
    if args.contrasts:
        contrasts = contrast_coverage(args.studies, names=args.names, seeds=[s for s in args.seeds if s > 1],
                                      slots=args.slots)
        write_csv(out / "contrast_coverage.csv", contrasts)
        print()
        print(markdown_table(contrasts, digits=3))
    if args.median_seed:
        median = median_seed_coverage(args.studies)
        write_csv(out / "median_seed_coverage.csv", median)
        print()
        spread = median.groupby(["method", "slots", "seeds", "accuracy"])["coverage"].agg(
            lambda c: f"{c.min():.3f}-{c.max():.3f}").unstack("accuracy")  # over the seeds' spreads
        spread.columns = [f"accuracy {a:g}" for a in spread.columns]
        print(markdown_table(spread.reset_index()))
    if not args.power_studies:
        return 0
    power = power_table(names=args.power_names, seeds=args.power_seeds, studies=args.power_studies, slots=args.slots)
    write_csv(out / "group_power.csv", power)
    table = power.pivot_table(index=["difference", "seeds"], columns="names", values="power")
    table.columns = [f"{n} names" for n in table.columns]
    print()
    print(markdown_table(table.reset_index(), digits=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
