"""Bootstrap intervals and permutation tests: agree with scipy, with the point estimates, and behave."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from nerbias.bias import census
from nerbias.bias.statistics import per_group
from nerbias.bias.names import NameList
from nerbias.reporting.census_uncertainty import bootstrap_census, census_gap_summary, permutation_census
from nerbias.reporting.group_effects import MIN_NAMES
from nerbias.reporting.significance import gender_permutation_test, holm, pairwise_permutation_tests
from nerbias.reporting.uncertainty import (
    NameTable, bootstrap_ecdf, bootstrap_group_accuracy, bootstrap_spread, ecdf, interval_text, split_group,
)

GROUPS = {"White Female": 0.95, "White Male": 0.9, "Black Female": 0.7, "Black Male": 0.8}


def name_list(per_group_names: int = 6) -> NameList:
    names, group_of, race_of, gender_of = [], {}, {}, {}
    for group in GROUPS:
        race, gender = split_group(group)
        for i in range(per_group_names):
            name = f"{race}{gender}{i}"
            names.append(name)
            group_of[name], race_of[name], gender_of[name] = group, race, gender
    names.append("Zzoov")
    group_of["Zzoov"], race_of["Zzoov"], gender_of["Zzoov"] = "OOV", "OOV", "OOV"
    return NameList(names, group_of, "Zzoov", race_of, gender_of)


def per_name_frame(names: NameList, seed: int = 0, shift: float = 0.0, spread: float = 0.08,
                   slots: tuple[int, int] = (200, 400)) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for name in names.names:
        group = names.group_of[name]
        sentences = int(rng.integers(*slots))
        accuracy = float(np.clip(GROUPS.get(group, 0.6) + shift + rng.normal(0, spread), 0, 1))
        recognised = int(round(accuracy * sentences))
        rows.append({"name": name, "group": group, "sentences": sentences, "recognised": recognised,
                     "accuracy": recognised / sentences, "conf_count": recognised, "conf_min": 0.3,
                     "conf_p25": rng.uniform(0.6, 0.9), "conf_median": rng.uniform(0.8, 1.0),
                     "conf_mean": 0.85, "conf_std": 0.1})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def names():
    return name_list()


def test_point_estimates_match_per_group(names):
    frame = per_name_frame(names)
    table = NameTable.from_frames([frame], names)
    assert table.oov_name == "Zzoov" and "Zzoov" not in table.names
    expected = per_group(frame, names).set_index("group")
    boot = bootstrap_group_accuracy(table, n_boot=50)
    result = boot.table(with_all=True).set_index("group")
    for group in [*GROUPS, "ALL"]:
        assert result.loc[group, "accuracy"] == pytest.approx(expected.loc[group, "accuracy"])
    spread = bootstrap_spread(table, "accuracy", n_boot=50).set_index("group")
    for stat in ("min", "mean", "std", "median"):
        assert spread.loc["ALL", stat] == pytest.approx(expected.loc["ALL", f"name_accuracy_{stat}"])
    assert np.isnan(spread.loc["ALL", "min_low"])  # no interval for a minimum
    assert table.oov_value("accuracy") == pytest.approx(expected.loc["OOV", "accuracy"])


def test_a_group_of_enough_names_gets_the_log_error_t_interval_from_one_seed():
    # MIN_NAMES a group, equal slots: p_c is the mean name accuracy and the interval the t interval of
    # log(1 - p_c) on n - 1 degrees of freedom, mapped back (names like these, given this one trained model)
    names = name_list(MIN_NAMES)
    frame = per_name_frame(names, spread=0.1).assign(sentences=1000)
    frame["recognised"] = (frame["accuracy"] * 1000).round()
    frame["accuracy"] = frame["recognised"] / 1000
    boot = bootstrap_group_accuracy(NameTable.from_frames([frame], names), n_boot=200, seed=1).table()
    boot = boot.set_index("group")
    for group in GROUPS:
        values = frame.loc[frame["group"] == group, "accuracy"].to_numpy()
        error = 1 - values.mean()
        spread = stats.t.ppf(0.975, len(values) - 1) * stats.sem(values) / error
        low, high = 1 - error * np.exp(spread), 1 - error * np.exp(-spread)
        assert (boot.loc[group, "ci_low"], boot.loc[group, "ci_high"]) == pytest.approx((low, high), rel=1e-9)
        assert boot.loc[group, "estimand"] == "names like these (1 seed)"


def test_a_small_group_gets_a_seed_interval_or_none(names):
    base = per_name_frame(names, seed=5)
    one = bootstrap_group_accuracy(NameTable.from_frames([base], names), n_boot=200, seed=0).table(with_all=True)
    groups = one[one["group"] != "ALL"]
    assert groups["ci_low"].isna().all() and (groups["estimand"] == "none").all()  # 6 names, one seed: none
    assert one.set_index("group").loc["ALL", "ci_low"] < one.set_index("group").loc["ALL", "accuracy"]  # pooled: kept
    few = NameTable.from_frames([per_name_frame(names, seed=5, shift=s) for s in (-0.04, 0.0, 0.05)], names)
    thin = bootstrap_group_accuracy(few, n_boot=200, seed=0).table().set_index("group")
    assert (thin.loc[list(GROUPS), "estimand"] == "none").all()  # 6 names x 200-400 slots: under 2,000 a seed
    shifted = [per_name_frame(names, seed=5, shift=s, slots=(400, 800)) for s in (-0.04, 0.0, 0.05)]
    table = NameTable.from_frames(shifted, names)
    three = bootstrap_group_accuracy(table, n_boot=200, seed=0).table().set_index("group")
    for group in GROUPS:  # these names: the t interval over the seeds' group accuracies
        members = np.flatnonzero(table.facet("group") == group)
        per_seed = (table.recognised[:, members] / table.sentences[:, members]).mean(1)
        half = stats.t.ppf(0.975, 2) * per_seed.std(ddof=1) / np.sqrt(3)
        point = three.loc[group, "accuracy"]
        assert (three.loc[group, "ci_low"], three.loc[group, "ci_high"]) == pytest.approx((point - half, point + half))
        assert three.loc[group, "estimand"] == "these names"


def test_the_gap_has_no_interval_and_the_draws_reproduce(names):
    table = NameTable.from_frames([per_name_frame(names)], names)
    first = bootstrap_group_accuracy(table, n_boot=500, seed=3)
    again = bootstrap_group_accuracy(table, n_boot=500, seed=3)
    assert np.array_equal(first.replicates, again.replicates)
    gap = first.gap()
    assert (gap["best"], gap["worst"]) == ("White Female", "Black Female")
    assert np.isnan(gap["ci_low"]) and np.isnan(gap["ci_high"])  # a max - min: no interval (docs/group-statistics.md)



def test_permutation_tests_and_holm(names):
    table = NameTable.from_frames([per_name_frame(names)], names)
    pairs = pairwise_permutation_tests(table, n_resamples=2000, seed=0).set_index(["a", "b"])
    assert len(pairs) == 6
    assert pairs.loc[("White Female", "Black Female"), "p_value"] < 0.01
    assert pairs.loc[("White Female", "Black Female"), "difference"] > 0.15
    assert (pairs["p_holm"] >= pairs["p_value"]).all()
    gender = gender_permutation_test(table, n_resamples=2000).iloc[0]
    assert (gender["a"], gender["b"]) == ("Female", "Male")
    assert gender["difference"] == pytest.approx(gender["accuracy_a"] - gender["accuracy_b"])
    # every name equally accurate: no difference to find
    flat = per_name_frame(names).assign(sentences=1000, recognised=900)
    flat_pairs = pairwise_permutation_tests(NameTable.from_frames([flat], names), n_resamples=500)
    assert flat_pairs["difference"].abs().max() < 1e-12 and flat_pairs["p_value"].min() == 1.0
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert np.isnan(holm([0.2, np.nan])[1])


def test_ecdf_bands(names):
    assert ecdf(np.array([0.1, 0.5, np.nan, 0.9]), np.array([0.0, 0.5, 1.0])) == pytest.approx([0, 2 / 3, 1])
    table = NameTable.from_frames([per_name_frame(names)], names)
    bands = bootstrap_ecdf(table, "accuracy", "gender", n_boot=300)
    assert list(bands) == ["Female", "Male"]
    for band in bands.values():
        assert (band["low"] <= band["ecdf"] + 1e-12).all() and (band["ecdf"] <= band["high"] + 1e-12).all()
        assert band["ecdf"].iloc[-1] == 1.0
    assert set(bootstrap_ecdf(table, "conf_p25", "race", n_boot=50)) == {"White", "Black"}


def test_facets_from_group_names_without_a_name_list(names):
    frame = per_name_frame(names)
    table = NameTable.from_frames([frame])
    assert table.facet_labels("gender") == ["Female", "Male"]
    assert table.facet_labels("race") == ["White", "Black"]
    assert split_group("Muslim Male") == ("Muslim", "Male") and split_group("Other") == (None, None)
    assert interval_text(0.5, 0.4, 0.6) == "0.500 [0.400, 0.600]" and interval_text(0.5, np.nan, 1) == "0.500"


def census_frame(rng, years=(1990, 1991), female_error=0.4, male_error=0.1, n=300):
    rows = []
    for year in years:
        for sex, error in (("F", female_error), ("M", male_error)):
            for i in range(n):
                u = rng.random()
                label = census.PERSON if u >= error else ("LOCATION" if u < error / 2 else census.UNTAGGED)
                rows.append({"year": year, "sex": sex, "name": f"N{sex}{i}", "count": int(rng.integers(5, 60)),
                             "template": 4, "label": label})
    return pd.DataFrame(rows)


def test_census_bootstrap_points_match_census_errors_and_cover_the_gap():
    frame = census_frame(np.random.default_rng(0))
    boot = bootstrap_census(frame, n_boot=400, seed=0)
    errors = census.census_errors(frame).set_index(["year", "gender"])
    for row in boot.itertuples(index=False):
        assert row.F == pytest.approx(errors.loc[(row.year, "F"), row.measure])
        assert row.M == pytest.approx(errors.loc[(row.year, "M"), row.measure])
        assert row.F_low <= row.F <= row.F_high and row.gap_low <= row.gap <= row.gap_high
    summary = census_gap_summary(boot).iloc[0]
    assert (summary["years"], summary["years_female_worse"]) == (2, 2)
    # the class-pooled multinomial equals resampling names: compare with a plain name bootstrap
    rng = np.random.default_rng(1)
    part = frame[(frame["year"] == 1990) & (frame["sex"] == "F")]
    flag = (part["label"] != census.PERSON).to_numpy()
    counts = part["count"].to_numpy(float)
    draws = rng.integers(0, len(part), size=(4000, len(part)))
    plain = (counts[draws] * flag[draws]).sum(1) / counts[draws].sum(1)
    ours = boot[(boot["year"] == 1990) & (boot["measure"] == "type1_w")].iloc[0]
    assert ours["F_low"] == pytest.approx(np.percentile(plain, 2.5), abs=0.02)
    assert ours["F_high"] == pytest.approx(np.percentile(plain, 97.5), abs=0.02)
    only = bootstrap_census(frame, n_boot=50, years=[1991])
    assert set(only["year"]) == {1991}


def test_census_permutation_test():
    frame = census_frame(np.random.default_rng(2))
    tests = permutation_census(frame, n_resamples=199, seed=0)
    assert len(tests) == 2 and (tests["p_value"] <= 0.01).all() and (tests["p_holm"] >= tests["p_value"]).all()
    same = census_frame(np.random.default_rng(3), female_error=0.2, male_error=0.2)
    assert permutation_census(same, n_resamples=199)["p_value"].max() > 0.05
