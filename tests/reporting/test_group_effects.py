"""One group's intervals, the group-effect test and the simultaneous contrasts, against brute-force references;
their coverage in the shapes of the real groups (reporting/group_coverage.py) at the sizes a report prints them."""

import itertools
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from nerbias.errors import NerbiasError
from nerbias.reporting import group_coverage, group_effects
from nerbias.reporting.group_effects import (MIN_NAMES, crossed_variance, group_contrasts, group_effect_test,
                                             group_interval, names_like_these_interval, names_seeds_variance)


def test_the_crossed_variance_is_the_two_way_anova_of_statsmodels():
    smf = pytest.importorskip("statsmodels.formula.api")
    from statsmodels.stats.anova import anova_lm

    rng = np.random.default_rng(0)
    seeds, names = 4, 9
    values = 0.8 + rng.normal(0, 0.05, names)[None, :] + rng.normal(0, 0.03, seeds)[:, None] \
        + rng.normal(0, 0.02, (seeds, names))
    frame = pd.DataFrame({"y": values.ravel(), "seed": np.repeat(np.arange(seeds), names),
                          "name": np.tile(np.arange(names), seeds)})
    table = anova_lm(smf.ols("y ~ C(name) + C(seed)", frame).fit())
    mean_square = (table["sum_sq"] / table["df"]).to_dict()
    ms_names, ms_seeds, ms_resid = mean_square["C(name)"], mean_square["C(seed)"], mean_square["Residual"]
    assert ms_seeds > ms_resid
    variance, df = crossed_variance(values)
    assert variance == pytest.approx((ms_names + ms_seeds - ms_resid) / (names * seeds))
    terms = [(ms_names, names - 1), (ms_seeds, seeds - 1), (-ms_resid, (names - 1) * (seeds - 1))]
    assert df == pytest.approx(sum(t for t, _ in terms) ** 2 / sum(t ** 2 / d for t, d in terms))
    # no seed component (seeds identical): the names' variance alone, as from one seed
    same = np.repeat(values[:1], 3, axis=0)
    assert crossed_variance(same) == pytest.approx((values[0].var(ddof=1) / names, names - 1))


def test_a_group_interval_is_names_like_these_only_from_min_names():
    rng = np.random.default_rng(1)
    small, large = rng.uniform(0.8, 1, (3, 15)), rng.uniform(0.8, 1, (3, MIN_NAMES))
    assert group_interval(small, 0.95).estimand == "these names"
    assert group_interval(large, 0.95).estimand == "names like these"
    assert group_interval(large * 0.3, 0.95).estimand == "these names"   # below MIN_ACCURACY: not simulated
    assert group_interval(small[:1], 0.95).estimand == "none" and np.isnan(group_interval(small[:1], 0.95).low)


def test_the_names_like_these_interval_is_a_t_on_the_log_error_rate():
    """Brute force: the delta-method t interval of log(1 - mean), names part + seeds part, Welch df, mapped back."""
    rng = np.random.default_rng(4)
    values = np.clip(rng.normal(0.95, 0.04, (3, MIN_NAMES)), 0, 1)
    seeds, names = values.shape
    names_part, seeds_part = values.mean(0).var(ddof=1) / names, values.mean(1).var(ddof=1) / seeds
    variance, df = names_seeds_variance(values)
    assert variance == pytest.approx(names_part + seeds_part)
    assert df == pytest.approx(variance ** 2 / (names_part ** 2 / (names - 1) + seeds_part ** 2 / (seeds - 1)))
    error = 1 - values.mean()
    spread = stats.t.ppf(0.975, df) * np.sqrt(variance) / error
    interval = names_like_these_interval(values, 0.95)
    assert (interval.low, interval.high) == pytest.approx((1 - error * np.exp(spread), 1 - error * np.exp(-spread)))
    assert values.mean() - interval.low > interval.high - values.mean()   # longer towards low accuracy
    one_seed = names_like_these_interval(values[:1], 0.95)
    assert one_seed.df == pytest.approx(names - 1) and one_seed.estimand == "names like these (1 seed)"


def test_the_group_effect_p_equals_the_exact_permutation_p():
    values = np.array([0.91, 0.95, 0.99, 0.62, 0.80, 0.70])
    groups = ["A", "A", "A", "B", "B", "B"]
    result = group_effect_test(values, groups, n_permutations=20000, seed=3)

    def between(a_members):
        a = values[list(a_members)]
        b = np.delete(values, list(a_members))
        return 3 * (a.mean() - values.mean()) ** 2 + 3 * (b.mean() - values.mean()) ** 2

    splits = list(itertools.combinations(range(6), 3))
    exact = np.mean([between(s) >= between((0, 1, 2)) - 1e-12 for s in splits])   # 2 of 20: the split and its mirror
    assert exact == pytest.approx(0.1)
    assert result["p_value"] == pytest.approx(exact, abs=0.01)
    null = group_effect_test(np.arange(12.0) % 5, ["A", "B", "C"] * 4, n_permutations=2000)
    assert null["p_value"] > 0.2
    assert 0 < group_effect_test(values[:4], ["A", "A", "A", "B"], n_permutations=200)["p_value"] <= 1  # B alone
    with pytest.raises(NerbiasError, match="a group of two names or more"):   # every group of one name
        group_effect_test(values[:3], ["A", "B", "C"])


def test_the_contrasts_are_simultaneous_over_the_groups():
    rng = np.random.default_rng(2)
    values = np.clip(rng.normal(0.9, 0.05, (3, 12)), 0, 1)
    members = {"A": np.arange(0, 4), "B": np.arange(4, 8), "C": np.arange(8, 12)}
    table = group_contrasts(values, members, 0.95).set_index("group")
    per_seed = np.column_stack([values[:, m].mean(1) for m in members.values()])
    contrast = per_seed[:, 0] - per_seed[:, 1:].mean(1)
    half = stats.t.ppf(1 - 0.05 / 3 / 2, 2) * contrast.std(ddof=1) / np.sqrt(3)   # Bonferroni over 3 groups
    assert table.loc["A", "minus_others"] == pytest.approx(contrast.mean())
    assert (table.loc["A", "ci_low"], table.loc["A", "ci_high"]) == pytest.approx((contrast.mean() - half,
                                                                                    contrast.mean() + half))
    assert (table["estimand"] == "these names").all()
    assert table["simultaneous_level"].iloc[0] == pytest.approx(1 - 0.05 / 3)
    one_seed = group_contrasts(values[:1], members, 0.95)
    assert one_seed["ci_low"].isna().all() and (one_seed["estimand"] == "none").all()


@pytest.fixture(scope="module")
def accuracies():
    try:
        return group_coverage.archived_accuracies()
    except FileNotFoundError:
        pytest.skip("results/mitigation_study is not in this checkout")


def test_every_printed_group_interval_covers_in_the_real_shapes(accuracies):
    """The intervals a report prints: names like these for a group's accuracy from MIN_NAMES names (1, 3 and 5
    seeds), these names (seeds only) at 15 names for an accuracy and for a paired difference; 0.93-0.97 in every
    shape (1,000 studies a cell: Monte-Carlo SE about 0.007)."""
    coverage = group_coverage.coverage_table(studies=1000, names=(MIN_NAMES,), seeds=(1, 3, 5),
                                             methods=(group_coverage.KEPT,), accuracies=accuracies)
    these = group_coverage.coverage_table(studies=1000, names=(15,), seeds=(3, 5),
                                          methods=("seeds t (these names)",), accuracies=accuracies)
    table = pd.concat([coverage, these])
    print(table.to_string())
    shapes, differences = len(group_coverage.SHAPES), len(group_coverage.DIFFERENCE_SHAPES)
    assert len(table) == shapes * 3 + shapes * 2 + differences * 2   # the log-error t is not one of a difference
    assert table["coverage"].between(0.93, 0.97).all(), table[~table["coverage"].between(0.93, 0.97)]


def test_no_names_interval_is_printed_where_15_names_cannot_hold_one(accuracies):
    """The control: at 15 names a group with one rare low name is covered far below 95 % by the kept interval
    (so the test above can fail), and the report prints a these-names interval there instead."""
    coverage = group_coverage.coverage_table(studies=400, names=(15,), seeds=(5,), methods=(group_coverage.KEPT,),
                                             shapes=("one low name (White Female)",), accuracies=accuracies)
    assert coverage["coverage"].max() < 0.85
    assert group_interval(np.full((5, 15), 0.9), 0.95).estimand == "these names"


def test_with_the_census_lists_few_slots_a_name_the_kept_interval_does_not_undercover(accuracies):
    """The census-scale list gives a name 29-88 slots: slot noise grows, and the kept interval, which counts it
    in both its names and its seeds part, may over-cover near the ceiling but must not undercover."""
    coverage = group_coverage.coverage_table(studies=600, names=(MIN_NAMES,), seeds=(1, 3), slots=30,
                                             methods=(group_coverage.KEPT,), accuracies=accuracies,
                                             shapes=("near ceiling, no tail (White Male)",
                                                     "one low name (White Female)"))
    assert (coverage["slots"] == 30).all() and coverage["coverage"].min() >= 0.93, coverage


def test_the_simultaneous_contrasts_cover_every_group_at_once_in_the_real_shapes(accuracies):
    """Each group minus the others, as reports and the study print it: all eight real groups side by side, a seed
    effect shared by them, covered together in 0.93-0.97 of 1,000 studies a cell; and at one level per group
    (no Bonferroni) the family's coverage falls well below 95 %, so this test can fail."""
    held_out = (13, 6, 95, 128, 76, 141, 720, 574)  # the census-scale list's held-out groups, 88 slots a name
    table = pd.concat([group_coverage.contrast_coverage(studies=1000, names=(15, MIN_NAMES), seeds=(3, 5),
                                                        accuracies=accuracies),
                       group_coverage.contrast_coverage(studies=1000, names=(held_out,), seeds=(3,), slots=88,
                                                        accuracies=accuracies)])
    print(table.to_string())
    assert len(table) == 5 and (table["groups"] == 8).all()
    assert table["printed"].tolist() == [8, 8, 8, 8, 6]  # Black Female and Male: too few slots for a contrast
    assert table["coverage"].between(0.93, 0.97).all(), table
    unadjusted = group_effects.these_names_interval
    with mock.patch.object(group_effects, "these_names_interval",
                           lambda values, level, slots=None: unadjusted(values, 0.95)):  # each at 95 %, not 1 - 0.05 / 8
        control = group_coverage.contrast_coverage(studies=400, names=(15,), seeds=(5,), accuracies=accuracies)
    assert control["coverage"].iloc[0] < 0.85, control


def test_two_seeds_give_no_names_like_these_interval_and_few_slots_no_seeds_interval():
    rng = np.random.default_rng(3)
    values = np.clip(0.95 + rng.normal(0, 0.02, (2, MIN_NAMES)), 0, 1)
    assert group_interval(values, 0.95, slots=MIN_NAMES * 300).estimand == "these names"   # 2 seeds
    assert group_interval(np.vstack([values, values[:1]]), 0.95).estimand == "names like these"  # 3 seeds
    assert group_interval(values[:1], 0.95).estimand == "names like these (1 seed)"
    small = values[:, :6]
    assert group_interval(small, 0.95, slots=6 * 30).estimand == "none"              # 180 slots a seed
    assert group_interval(np.vstack([small] * 2)[:3], 0.95, slots=6 * 400).estimand == "these names"
    assert group_effects.seed_interval_holds(2, 9_999) is False and group_effects.seed_interval_holds(2, 10_000)
    assert group_effects.seed_interval_holds(5, 2_000) and not group_effects.seed_interval_holds(5, 1_999)
    assert not group_effects.seed_interval_holds(1, None) and group_effects.seed_interval_holds(3, None)


def test_the_seeds_interval_covers_where_its_slots_allow_it_and_not_below(accuracies):
    """The rule's cells: a t over the seeds at about the fewest slots a seed it is printed from (2 seeds: 10,000
    slots; 3: 2,000), in the census-scale list's slots a name, covers 0.93-0.97 in every shape; the control below
    the rule (6 names x 30 slots, 3 seeds) covers under 0.9 in some shape, so the rule is needed."""
    method = ("seeds t (these names)",)
    held = pd.concat([group_coverage.coverage_table(studies=1000, names=(names,), seeds=(seeds,), slots=slots,
                                                    methods=method, accuracies=accuracies)
                      for names, slots, seeds in [(120, 88, 2), (24, 88, 3), (70, 30, 3)]])
    print(held.to_string())
    assert all(group_effects.seed_interval_holds(s, n * k) for n, k, s in zip(held["names"], held["slots"],
                                                                             held["seeds"]))
    assert held["coverage"].between(0.93, 0.97).all(), held
    control = group_coverage.coverage_table(studies=400, names=(6,), seeds=(3,), slots=30, methods=method,
                                            accuracies=accuracies)
    assert not group_effects.seed_interval_holds(3, 6 * 30) and control["coverage"].min() < 0.9, control


def test_a_contrast_rests_on_its_group_and_on_the_mean_of_the_others():
    slots = [100.0, 400.0, 400.0]
    others = [4 / (1 / 400 + 1 / 400), 4 / (1 / 100 + 1 / 400), 4 / (1 / 100 + 1 / 400)]   # (k - 1)^2 / sum(1 / s)
    assert group_effects.contrast_slots(slots) == pytest.approx([min(s, o) for s, o in zip(slots, others)])
    assert group_effects.contrast_slots([100.0, None]) == [None, None]
    values = np.array([[0.5, 0.7, 0.9], [0.6, 0.8, 0.9], [0.55, 0.75, 0.95]])
    intervals, level = group_effects.simultaneous_contrasts(values, 0.95, [1_000, 50_000, 50_000])
    assert np.isnan(intervals[0].low) and np.isfinite(intervals[1].low)   # the first group: 1,000 slots, 3 seeds
    assert level == pytest.approx(1 - 0.05 / 2)   # Bonferroni over the two intervals printed


def test_one_names_median_seed_bound_is_a_t_over_the_seeds_logits():
    accuracy, slots = np.array([0.90, 0.85, 0.88, 0.92, 0.70]), 300
    logits = np.log((accuracy * slots + 0.5) / (slots - accuracy * slots + 0.5))
    point, lower = group_effects.median_seed_lower_bound(accuracy, slots, 0.95)
    assert point == pytest.approx(1 / (1 + np.exp(-logits.mean())))
    se = logits.std(ddof=1) / np.sqrt(5)
    assert lower == pytest.approx(1 / (1 + np.exp(-(logits.mean() - stats.t.ppf(0.95, 4) * se))))
    assert point > accuracy.mean()  # one low seed pulls the mean more than the median seed: not the same estimand
    assert np.isnan(group_effects.median_seed_lower_bound(accuracy[:1], slots, 0.95)[1])
    per_seed = np.array([300, 290, 300, 310, 300])  # a seed's own slots rebuild its hits
    hits = np.round(accuracy * per_seed)
    point, _ = group_effects.median_seed_lower_bound(hits / per_seed, per_seed, 0.95)
    assert point == pytest.approx(1 / (1 + np.exp(-np.log((hits + 0.5) / (per_seed - hits + 0.5)).mean())))


def test_one_names_lower_bound_holds_at_the_margins_where_the_mean_over_seeds_has_none():
    """Issue 45's test of Sofia at 0.80: the median-seed bound covers 0.93-0.97 from 0.6 to 0.95 with In-Situ's
    302 and Winogender's 2,459 slots a seed, 3 and 5 seeds, the seeds' logit sd 0.4 and 1.2; the one-sided t of
    the mean over seeds (the control) falls under 0.90 near the ceiling with a wide seed spread."""
    table = group_coverage.median_seed_coverage(1000, accuracies=(0.6, 0.8, 0.95), seeds=(3, 5), seed_sds=(0.4, 1.2))
    kept = table[table["method"] == "median-seed logit t (kept)"]
    assert kept["coverage"].between(0.93, 0.975).all(), kept[~kept["coverage"].between(0.93, 0.975)]
    control = table[(table["method"] == "t of the mean") & (table["accuracy"] == 0.95) & (table["seed_sd"] == 1.2)]
    assert (control["coverage"] < 0.90).all(), control
