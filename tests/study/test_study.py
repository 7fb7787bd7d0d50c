"""The mitigation study's tables: point values by hand, paired differences, the census on held-out
names, and the study command on a sweep written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from nerbias.bias import census
from nerbias.bias.ssa import read_ssa
from nerbias.errors import NerbiasError
from nerbias.study.mitigation import find_study, run_study
from nerbias.study.runs import drawable_names
from helpers import SHARED_DATA

SLOTS = 600
GROUPS = {"Black Female": ["Aisha", "Ebony"], "White Male": ["Greg", "Todd"], "White Female": ["Emily", "Anne"]}
SSA = "Aisha,F,30\nEmily,F,20\nAnne,F,5\nGreg,M,25\nJohn,M,10\nTodd,M,3\n"


def write_run(root: Path, condition: str, seed: int, recognised: dict[str, int], f1: float,
              census_labels: dict[str, str] | None = None, ssa: Path | None = None,
              augment: dict | None = None) -> Path:
    run = root / f"{condition}-seed{seed}"
    run.mkdir(parents=True)
    (run / "config_resolved.yaml").write_text(yaml.safe_dump({"condition": condition, "seed": seed,
                                                              "paths": {"output_dir": str(run)},
                                                              **({"augment": augment} if augment else {})}))
    (run / "metrics.json").write_text(json.dumps({"metrics": {"test_f1": f1, "test_lower_f1": f1 / 2,
                                                              "test_recall_LOC": 0.9 + f1 / 10}}))
    # SLOTS slots a name for each "recognised of 10": a group's 2 names then give a t over 2 seeds the 10,000
    # slots a seed it needs (reporting.group_effects.seed_interval_holds)
    rows = [{"name": n, "group": g, "sentences": 10 * SLOTS, "recognised": recognised[n] * SLOTS,
             "accuracy": recognised[n] / 10, "conf_median": recognised[n] / 10}
            for g, names in GROUPS.items() for n in names]
    rows.append({"name": "Syedtiastephen", "group": "OOV", "sentences": 10 * SLOTS,
                 "recognised": recognised.get("OOV", 5) * SLOTS,
                 "accuracy": recognised.get("OOV", 5) / 10, "conf_median": 0.5})
    bias = run / "bias" / "winogender"
    bias.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(bias / "per_name.csv", index=False)
    (bias / "metrics.json").write_text(json.dumps({"metrics": {}}))
    (bias / "config_resolved.yaml").write_text(yaml.safe_dump({"corpus": {"name": "winogender", "lowercase": False}}))
    if census_labels is not None:
        folder = run / "bias" / "census"
        folder.mkdir(parents=True)
        frame = read_ssa(ssa, years=[2017, 2018], progress=False)
        labels = pd.DataFrame([{"name": n, "template": t, "label": census_labels[n]}
                               for t in (1, 2) for n in sorted(census_labels)])
        frames = [census.attach_labels(frame, census_labels, t) for t in (1, 2)]
        census.census_errors(pd.concat(frames)).to_csv(folder / "census_errors.csv", index=False)
        labels.to_csv(folder / "census_labels.csv", index=False)
        (folder / "metrics.json").write_text(json.dumps({"metrics": {}}))
        (folder / "config_resolved.yaml").write_text(yaml.safe_dump(
            {"corpus": {"name": "census", "lowercase": False, "ssa": str(ssa), "names": "all"}}))
    return run


BASE = {"Aisha": 6, "Ebony": 8, "Greg": 10, "Todd": 10, "Emily": 9, "Anne": 7}


def read(out: Path, label: str) -> pd.DataFrame:
    return pd.read_csv(out / f"study_{label}.csv").set_index(["condition", "metric"])


def gap_p(table: pd.DataFrame, condition: str) -> float:
    return float(table.loc[(condition, "best_worst_gap"), "group_effect_p"])


def test_point_values_are_the_papers_statistics_averaged_over_seeds(tmp_path):
    write_run(tmp_path, "baseline", 1, BASE, 0.90)
    write_run(tmp_path, "baseline", 2, {**BASE, "Aisha": 8, "OOV": 7}, 0.92)
    run_study(tmp_path, tmp_path / "out", n_boot=200)
    table = read(tmp_path / "out", "winogender")
    value = lambda metric: table.loc[("baseline", metric), "value"]  # noqa: E731
    assert value("Black Female") == pytest.approx(np.mean([14 / 20, 16 / 20]))
    assert value("White Male") == 1.0
    assert value("ALL") == pytest.approx(np.mean([50 / 60, 52 / 60]))
    female = np.mean([(6 + 8 + 9 + 7) / 40, (8 + 8 + 9 + 7) / 40])
    assert value("female_male_gap") == pytest.approx(female - 1.0)
    white = np.mean([(10 + 10 + 9 + 7) / 40, (10 + 10 + 9 + 7) / 40])   # White Male and White Female pooled
    assert value("White - Black") == pytest.approx(white - value("Black Female"))
    # a race's pool of 2 names a group: for these names only (a t over the two seeds), not for names like these
    assert table.loc[("baseline", "White - Black"), "ci_covers"] == "these names (seeds)"
    race_gap = table.loc[("baseline", "White - Black")]
    per_seed = np.array([36 / 40 - 14 / 20, 36 / 40 - 16 / 20])
    assert (race_gap["ci_low"], race_gap["ci_high"]) == pytest.approx(
        stats.t.interval(0.95, 1, per_seed.mean(), per_seed.std(ddof=1) / np.sqrt(2)))
    assert (race_gap["ci_p"] < 0.05) == (race_gap["ci_low"] > 0 or race_gap["ci_high"] < 0)  # p inverts the interval
    assert table.loc[("baseline", "Black Female"), "ci_covers"] == "these names (seeds)"
    assert 0 < gap_p(table, "baseline") <= 1
    assert np.isnan(table.loc[("baseline", "best_worst_gap"), "ci_p"])  # a gap is not tested against 0
    gap = table.loc[("baseline", "best_worst_gap")]
    assert gap["raw"] == pytest.approx(1.0 - value("Black Female"))
    assert gap["value"] < gap["raw"]  # bias-corrected: max - min of noisy group means overshoots
    assert gap["floor_mean"] > 0 and gap["floor_p95"] >= gap["floor_mean"] and 0 < gap["floor_p"] <= 1
    assert value("OOV") == pytest.approx(0.6)
    medians = np.mean([[0.6, 0.8, 1, 1, 0.9, 0.7], [0.8, 0.8, 1, 1, 0.9, 0.7]], axis=0)
    assert value("median_confidence_std") == pytest.approx(np.std(medians))
    assert value("test_f1") == pytest.approx(0.91) and value("test_lower_f1") == pytest.approx(0.455)
    low, high = table.loc[("baseline", "best_worst_gap"), ["ci_low", "ci_high"]]
    assert np.isnan(low) and np.isnan(high)  # a max - min: no interval (docs/group-statistics.md)
    assert table.loc[("baseline", "best_worst_gap"), "ci_covers"] == "none"
    assert table.loc[("baseline", "ALL"), "ci_covers"] == "names+seeds"
    assert table.loc[("baseline", "test_f1"), "ci_covers"] == "seeds"
    # in place of the gap's interval: each group minus the others, simultaneous over the 3 groups (Bonferroni)
    per_seed = np.array([[14 / 20, 1.0, 16 / 20], [16 / 20, 1.0, 16 / 20]])   # Black F, White M, White F
    contrast = per_seed[:, 0] - per_seed[:, 1:].mean(1)
    row = table.loc[("baseline", "minus the others: Black Female")]
    half = stats.t.ppf(1 - 0.05 / 3 / 2, 1) * contrast.std(ddof=1) / np.sqrt(2)
    assert (row["value"], row["ci_low"], row["ci_high"]) == pytest.approx((contrast.mean(), contrast.mean() - half,
                                                                          contrast.mean() + half))
    assert row["ci_covers"] == "these names (seeds)" and row["simultaneous_level"] == pytest.approx(1 - 0.05 / 3)


def test_differences_are_paired_on_the_names(tmp_path):
    write_run(tmp_path, "baseline", 1, BASE, 0.90)
    write_run(tmp_path, "same", 1, BASE, 0.90)                # the baseline's results again
    better = {**BASE, "Aisha": 9, "Ebony": 9, "Anne": 9}
    write_run(tmp_path, "better", 1, better, 0.90)
    path = run_study(tmp_path, tmp_path / "out", n_boot=300)
    table = read(tmp_path / "out", "winogender")
    # the same model on the same names in every replicate: no difference at all, not a wide interval
    for metric in ("ALL", "median_confidence_std"):
        assert tuple(table.loc[("same", metric), ["diff", "diff_low", "diff_high"]]) == (0.0, 0.0, 0.0)
    assert table.loc[("same", "best_worst_gap"), "diff"] == 0.0
    # one seed a side and 2 names a group: a group's difference has no interval that holds
    assert np.isnan(table.loc[("same", "Black Female"), "diff_low"])
    gap, base_gap = table.loc[("better", "best_worst_gap")], table.loc[("baseline", "best_worst_gap")]
    assert gap["raw"] - base_gap["raw"] == pytest.approx((1 - 0.9) - (1 - 0.7))
    assert gap["diff"] == pytest.approx(gap["value"] - base_gap["value"])  # of the bias-corrected gaps
    if base_gap["value"] > 0:  # two names a group: the corrected gap can be any size
        assert gap["ratio"] == pytest.approx(gap["value"] / base_gap["value"])
    else:
        assert np.isnan(gap.get("ratio", np.nan))
    assert np.isnan(gap["diff_low"]) and np.isnan(gap["ratio_low"])  # no interval for a gap's change or ratio
    text = path.read_text()
    assert "## Winogender" in text and "Difference from `baseline`" in text and "## Claims" in text
    assert "Each group minus the mean of the other groups (intervals simultaneous over the groups" in text
    assert "0.000 (no spread)" in text and "[0.000, 0.000]" not in text  # never a zero-width interval


def test_census_gap_is_the_mean_over_templates_and_years_of_the_weighted_type1_errors(tmp_path):
    ssa = tmp_path / "ssa"
    ssa.mkdir()
    for year in (2017, 2018):
        (ssa / f"yob{year}.txt").write_text(SSA)
    labels = {"Aisha": "LOC", "Emily": "PERSON", "Anne": "", "Greg": "PERSON", "John": "PERSON", "Todd": "ORG"}
    write_run(tmp_path / "sweep", "baseline", 1, BASE, 0.9, census_labels=labels, ssa=ssa)
    write_run(tmp_path / "sweep", "fixed", 1, BASE, 0.9, census_labels=dict.fromkeys(labels, "PERSON"), ssa=ssa)
    write_run(tmp_path / "sweep", "same", 1, BASE, 0.9, census_labels=labels, ssa=ssa)
    run_study(tmp_path / "sweep", tmp_path / "out", n_boot=100, census_boot=200)
    table = read(tmp_path / "out", "census")
    female, male = (30 + 5) / 55, 3 / 38          # births of mis-tagged names / all births, each year
    assert table.loc[("baseline", "female_type1_w"), "value"] == pytest.approx(female)
    assert table.loc[("baseline", "male_type1_w"), "value"] == pytest.approx(male)
    assert table.loc[("baseline", "female_male_type1_w_gap"), "value"] == pytest.approx(female - male)
    fixed = table.loc[("fixed", "female_male_type1_w_gap")]
    assert fixed["value"] == 0 and fixed["diff"] == pytest.approx(male - female)
    assert fixed["diff_low"] < fixed["diff"] < fixed["diff_high"]
    same = table.loc[("same", "female_male_type1_w_gap")]  # one draw of names for every condition
    assert (same["diff"], same["diff_low"], same["diff_high"]) == (0.0, 0.0, 0.0)
    from nerbias.study.archive import pack  # the study read from its archive: the same tables
    pack(tmp_path / "sweep", tmp_path / "archive")
    run_study(tmp_path / "archive", tmp_path / "from_archive", n_boot=100, census_boot=200)
    for name in ("study_census.csv", "study_winogender.csv", "claims.csv"):
        assert (tmp_path / "from_archive" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()
    assert "Sweep: `archive`" in (tmp_path / "from_archive" / "study.md").read_text()


def test_census_labels_that_do_not_reproduce_the_saved_errors_are_refused(tmp_path):
    ssa = tmp_path / "ssa"
    ssa.mkdir()
    for year in (2017, 2018):
        (ssa / f"yob{year}.txt").write_text(SSA)
    labels = dict.fromkeys(["Aisha", "Emily", "Anne", "Greg", "John", "Todd"], "PERSON")
    run = write_run(tmp_path / "sweep", "baseline", 1, BASE, 0.9, census_labels=labels, ssa=ssa)
    saved = run / "bias" / "census" / "census_labels.csv"
    saved.write_text(saved.read_text().replace("Aisha,1,PERSON", "Aisha,1,LOC"))
    with pytest.raises(NerbiasError, match="do not reproduce census_errors.csv"):
        run_study(tmp_path / "sweep", tmp_path / "out", n_boot=50, census_boot=50)


def test_unfinished_runs_are_listed_and_an_empty_sweep_is_an_error(tmp_path):
    write_run(tmp_path, "baseline", 1, BASE, 0.9)
    (tmp_path / "mask-seed1").mkdir()
    (tmp_path / "mask-seed1" / "config_resolved.yaml").write_text(yaml.safe_dump({"condition": "mask", "seed": 1}))
    study = find_study(tmp_path)
    assert list(study.runs) == ["baseline"] and [p.name for p in study.unfinished] == ["mask-seed1"]
    assert "Unfinished (left out): `mask-seed1`" in run_study(tmp_path, tmp_path / "out", n_boot=50).read_text()
    with pytest.raises(NerbiasError, match="no finished run"):
        find_study(tmp_path / "out")


def test_aggregate_study_command_writes_the_tables_and_fails_clearly(tmp_path, capsys):
    from nerbias.study.aggregate import main
    write_run(tmp_path / "sweep", "baseline", 1, BASE, 0.9)
    assert main(["--study", str(tmp_path / "sweep"), "--n-boot", "50"]) == 0
    assert "## Winogender" in capsys.readouterr().out and (tmp_path / "sweep" / "study" / "study.md").is_file()
    (tmp_path / "empty").mkdir()
    assert main(["--study", str(tmp_path / "empty")]) == 2
    assert "no finished run" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # refused before any file is read
        main(["--study", str(tmp_path / "sweep"), "--census-boot", "0"])
    assert exit_.value.code == 2 and "--census-boot 0: must be an integer >= 1" in capsys.readouterr().err


def test_the_header_names_the_cpu_kinds_that_trained_the_runs(tmp_path):
    write_run(tmp_path / "sweep", "baseline", 1, BASE, 0.9)
    recorded = write_run(tmp_path / "sweep", "baseline", 2, BASE, 0.9) / "metrics.json"
    platform = {"torch": "2.13.0", "cpu": "Some Xeon", "cpu_capability": "AVX512", "threads": 2, "cuda": None}
    recorded.write_text(json.dumps({**json.loads(recorded.read_text()), "platform": platform}))
    header = run_study(tmp_path / "sweep", tmp_path / "out", n_boot=20).read_text().splitlines()[2]
    assert "trained on Some Xeon (AVX512 kernels, 2 threads): 1 run, not recorded: 1 run" in header
    other = {**platform, "cpu": "Some EPYC", "cpu_capability": "AVX2"}  # killed there, resumed on the Xeon
    recorded.write_text(json.dumps({**json.loads(recorded.read_text()), "platforms": [other, platform]}))
    header = run_study(tmp_path / "sweep", tmp_path / "out", n_boot=20).read_text().splitlines()[2]
    assert ("Some EPYC (AVX2 kernels, 2 threads) resumed on Some Xeon (AVX512 kernels, 2 threads): 1 run"
            in header)


def test_one_seed_a_side_makes_no_claim(tmp_path):
    """From one seed a difference's interval covers the names only: it says nothing of another training run."""
    write_run(tmp_path, "baseline", 1, BASE, 0.90)
    write_run(tmp_path, "names", 1, {**BASE, "Aisha": 10, "Ebony": 10}, 0.95)
    run_study(tmp_path, tmp_path / "out", n_boot=200)
    assert pd.read_csv(tmp_path / "out" / "claims.csv").empty
    assert "None: a claim needs at least 2 seeds" in (tmp_path / "out" / "study.md").read_text()
    write_run(tmp_path, "baseline", 2, BASE, 0.90)
    write_run(tmp_path, "names", 2, {**BASE, "Aisha": 10, "Ebony": 10}, 0.95)
    run_study(tmp_path, tmp_path / "out2", n_boot=200)
    claims = pd.read_csv(tmp_path / "out2" / "claims.csv")
    assert set(claims["metric"]) == {"ALL", "female_male_gap", "test_f1"} and (claims["diff_covers"] != "names").all()


def test_conll_f1_is_one_claim_per_condition_from_any_corpus_that_holds_the_condition(tmp_path):
    """The census sorts first; a condition without a census evaluation still has its CoNLL F1 claim,
    taken once (from the Winogender table), and a condition with both corpora has it once too, from the
    Winogender table (the census draws fewer replicates): the claim is the interval study.md prints."""
    ssa = tmp_path / "ssa"
    ssa.mkdir()
    for year in (2017, 2018):
        (ssa / f"yob{year}.txt").write_text(SSA)
    labels = {"Aisha": "LOC", "Emily": "PERSON", "Anne": "", "Greg": "PERSON", "John": "PERSON", "Todd": "ORG"}
    for seed in (1, 2):
        write_run(tmp_path / "sweep", "baseline", seed, BASE, 0.90, census_labels=labels, ssa=ssa)
        write_run(tmp_path / "sweep", "both", seed, BASE, 0.91 + seed / 100, census_labels=labels, ssa=ssa)
        write_run(tmp_path / "sweep", "names_only", seed, BASE, 0.92 + seed / 100)
    run_study(tmp_path / "sweep", tmp_path / "out", n_boot=50, census_boot=20)
    claims = pd.read_csv(tmp_path / "out" / "claims.csv")
    f1 = claims[claims["metric"] == "test_f1"]
    assert sorted(f1["condition"]) == ["both", "names_only"]
    assert set(f1["corpus"]) == {"winogender"}
    printed = pd.read_csv(tmp_path / "out" / "study_winogender.csv").set_index(["condition", "metric"])
    for row in f1.itertuples():
        assert (row.diff_low, row.diff_high, row.p_value) == tuple(printed.loc[(row.condition, "test_f1"),
                                                                               ["diff_low", "diff_high", "p_value"]])
    # a seed-only figure's interval is the exact t interval, not a Monte-Carlo one: every table prints the
    # same (the census draws 20 replicates here, Winogender 50), a paired t on the per-seed differences
    census_table = pd.read_csv(tmp_path / "out" / "study_census.csv").set_index(["condition", "metric"])
    columns = ["value", "ci_low", "ci_high", "diff", "diff_low", "diff_high", "p_value"]
    assert tuple(census_table.loc[("both", "test_f1"), columns]) == pytest.approx(
        tuple(printed.loc[("both", "test_f1"), columns]), abs=1e-15)
    expected = stats.ttest_rel([0.92, 0.93], [0.90, 0.90])
    low, high = expected.confidence_interval(0.95)
    assert tuple(printed.loc[("both", "test_f1"), ["diff_low", "diff_high", "p_value"]]) == pytest.approx(
        (low, high, expected.pvalue), rel=1e-9)


def test_adding_a_run_of_one_condition_leaves_the_other_conditions_rows_as_they_were(tmp_path):
    """The seed multipliers of every (side, seed number) have their own generator: a sweep that finishes
    another job of `mask` must not move `names`'s intervals against the baseline (it did, by about 0.003 at
    an interval's end, when they were drawn in the order the comparisons asked for them)."""
    for seed, shift in ((1, 0), (2, 1), (3, -1), (4, 1)):
        write_run(tmp_path, "baseline", seed, {**BASE, "Aisha": 6 + shift, "Anne": 7 - shift}, 0.90 + shift / 100)
    for seed, shift in ((1, 1), (2, 0)):
        write_run(tmp_path, "mask", seed, {**BASE, "Ebony": 7 + shift}, 0.91 + shift / 100)
        write_run(tmp_path, "names", seed, {**BASE, "Aisha": 8 + shift, "Todd": 9 - shift}, 0.89 + shift / 100)
    run_study(tmp_path, tmp_path / "before", n_boot=300)
    write_run(tmp_path, "mask", 3, {**BASE, "Ebony": 9}, 0.93)   # mask: seeds 1-3 against 1-4, still unpaired
    run_study(tmp_path, tmp_path / "after", n_boot=300)
    before, after = read(tmp_path / "before", "winogender"), read(tmp_path / "after", "winogender")
    for table in (before, after):
        assert table.loc[("names", "ALL"), "diff_covers"] == "names+seeds"   # the Welch path: seeds 1-2 against 1-4
    pd.testing.assert_frame_equal(before.loc[["baseline", "names"]], after.loc[["baseline", "names"]])
    assert not before.loc["mask"].equals(after.loc["mask"])


def test_a_study_of_chosen_conditions_is_the_study_of_a_sweep_holding_only_them(tmp_path, capsys):
    """--conditions: an archive that gained a condition still gives its earlier family's tables (a condition
    added to a sweep grows the Holm family and moves every p); a condition the sweep lacks is named."""
    for root, conditions in ((tmp_path / "all", ("baseline", "names", "mask")), (tmp_path / "two", ("baseline", "names"))):
        for seed, shift in ((1, 0), (2, 1), (3, -1)):
            write_run(root, "baseline", seed, {**BASE, "Aisha": 6 + shift}, 0.90 + shift / 100)
            write_run(root, "names", seed, {**BASE, "Aisha": 9 - shift, "Ebony": 9}, 0.91 + shift / 100)
            if "mask" in conditions:
                write_run(root, "mask", seed, {**BASE, "Anne": 9 + shift // 2}, 0.89)
    run_study(tmp_path / "all", tmp_path / "out_all", n_boot=200)
    run_study(tmp_path / "all", tmp_path / "out_chosen", n_boot=200, conditions=["baseline", "names"])
    run_study(tmp_path / "two", tmp_path / "out_two", n_boot=200)
    chosen, alone = (pd.read_csv(tmp_path / out / "claims.csv") for out in ("out_chosen", "out_two"))
    pd.testing.assert_frame_equal(chosen, alone)
    assert len(pd.read_csv(tmp_path / "out_all" / "claims.csv")) > len(chosen)   # control: the wider family
    assert (read(tmp_path / "out_chosen", "winogender").equals(read(tmp_path / "out_two", "winogender")))
    from nerbias.study.aggregate import main
    assert main(["--study", str(tmp_path / "all"), "--conditions", "baseline, nosuch", "-o", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip() == ("error: --conditions: no finished run of nosuch in the sweep; it has "
                                               "baseline, mask, names")
    assert main(["--study", str(tmp_path / "all"), "--conditions", "names,mask", "-o", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --conditions names,mask: the baseline (baseline) must")
    with pytest.raises(SystemExit):
        main(["--study", str(tmp_path / "all"), "--conditions", " ,", "-o", str(tmp_path / "x")])
    assert "--conditions names no condition" in capsys.readouterr().err
    # an unfinished job of a condition left out is not the chosen study's
    (tmp_path / "all" / "mask-seed1" / "metrics.json").unlink()
    run_study(tmp_path / "all", tmp_path / "out_unfinished", n_boot=200, conditions=["baseline", "names"])
    assert "Unfinished" not in (tmp_path / "out_unfinished" / "study.md").read_text()


def test_a_claim_holds_only_where_the_monte_carlo_bounds_of_its_p_agree():
    """Holm at the p's, at their lower and at their upper Monte-Carlo bounds: `a` holds at its p (Holm 0.04)
    and at the lower bounds (0.02) but not at the upper (0.06), so the replicates do not decide it."""
    from nerbias.study.claims import UNDECIDED_BY_REPLICATES, claims_family
    from nerbias.study.mitigation import claims_section

    def row(condition, p, low, high):
        return {"condition": condition, "metric": "ALL", "diff": 0.1, "diff_low": 0.05, "diff_high": 0.15,
                "diff_covers": "names+seeds", "p_value": p, "p_value_low": low, "p_value_high": high}

    frame = pd.DataFrame([{"condition": "baseline", "metric": "ALL", "p_value": np.nan},
                          row("a", 0.02, 0.01, 0.03), row("b", 0.3, 0.3, 0.3), row("c", 1e-4, 5e-5, 2e-4)])
    family = claims_family({"winogender": frame}, "baseline", 0.05).set_index("condition")
    assert family["p_holm"].to_dict() == pytest.approx({"a": 0.04, "b": 0.3, "c": 3e-4})
    assert family["holds"].to_dict() == {"a": False, "b": False, "c": True}
    assert family["undecided"].to_dict() == {"a": True, "b": False, "c": False}
    assert frame.set_index("condition").loc[["a", "b", "c"], "holds"].to_list() == [False, False, True]
    table = "\n".join(claims_section(family.reset_index(), 0.05))
    assert table.count(UNDECIDED_BY_REPLICATES) == 2 and table.count("| holds |") == 1  # the text names it once


def test_the_study_says_when_its_replicates_are_too_few_for_the_family(caplog):
    """``replicate_resolution``: a family of 64 (Holm's first threshold 0.00078) is out of reach of 12,000 census
    replicates (floor 0.00088) but not of 16,000 (0.00066) or of 20,000 name replicates; exact p's need none."""
    from nerbias.study.claims import replicate_resolution

    rows = [{"corpus": "census" if i % 8 == 0 else "winogender", "p_value": 0.01, "p_value_low": 0.005,
             "p_value_high": 0.02} for i in range(63)]
    rows.append({"corpus": "winogender", "p_value": 0.003, "p_value_low": 0.003, "p_value_high": 0.003})  # exact
    family = pd.DataFrame(rows)
    with caplog.at_level("WARNING"):
        short = "\n".join(replicate_resolution(family, {"names": 20_000, "census": 12_000}, 0.05))
    assert "0.05 / 64 = 0.00078" in short and "0.00088 with 12000 census replicates" in short
    assert "`--census-boot 13562` or more" in short and "--n-boot" not in short
    assert "too few replicates" in caplog.text
    caplog.clear()
    enough = "\n".join(replicate_resolution(family, {"names": 20_000, "census": 16_000}, 0.05))
    assert "Too few" not in enough and "0.00066 with 16000 census replicates" in enough and not caplog.text
    exact_only = family[family["p_value_low"] == family["p_value_high"]]
    assert replicate_resolution(exact_only, {"names": 10, "census": 10}, 0.05) == []


def test_the_study_opens_with_the_group_effect_test_and_judges_halving_by_a_paired_bound(tmp_path):
    """Black Female is the baseline's worst group; `halves` lifts it to a deficit under half the baseline's in
    both seeds, `keeps` leaves it. study.md opens with the group-effect p; goal.csv carries the halving bound."""
    for seed, shift in ((1, 0), (2, 1)):
        write_run(tmp_path, "baseline", seed, {**BASE, "Aisha": 3 + shift, "Ebony": 4}, 0.90)
        write_run(tmp_path, "halves", seed, {**BASE, "Aisha": 7 + shift, "Ebony": 8}, 0.90)
        write_run(tmp_path, "keeps", seed, {**BASE, "Aisha": 3 + shift, "Ebony": 4 - shift}, 0.90)
    path = run_study(tmp_path, tmp_path / "out", n_boot=100)
    text = path.read_text()
    assert text.index("## Is there a group effect?") < text.index("## Winogender")
    goal = pd.read_csv(tmp_path / "out" / "goal.csv").set_index("condition")
    assert (goal["worst_group"] == "Black Female").all()
    base = np.array([(3 + 4 + s) / 20 - ((10 + 10) / 20 + (9 + 7) / 20) / 2 for s in (0, 1)])  # minus the others
    halves = np.array([(7 + 8 + s) / 20 - ((10 + 10) / 20 + (9 + 7) / 20) / 2 for s in (0, 1)])
    margin = halves - 0.5 * base
    lower = margin.mean() - stats.t.ppf(0.95, 1) * margin.std(ddof=1) / np.sqrt(2)
    assert goal.loc["halves", "halving_lower"] == pytest.approx(lower)
    assert goal.loc["halves", "gap_met"] and not goal.loc["keeps", "gap_met"]
    table = read(tmp_path / "out", "winogender")
    assert np.isnan(table.loc[("halves", "best_worst_gap"), "ratio_low"])  # the ratio has no interval


def test_a_job_copied_or_renamed_is_refused_naming_where_it_ran(tmp_path):
    import shutil
    for seed in (1, 2):
        write_run(tmp_path, "baseline", seed, BASE, 0.9)
    shutil.copytree(tmp_path / "baseline-seed1", tmp_path / "baseline-seed1-copy")
    with pytest.raises(NerbiasError, match=r"baseline-seed1-copy: its config says it ran in .*baseline-seed1 "
                                           r"\(condition baseline, seed 1\)"):
        find_study(tmp_path)
    (tmp_path / "baseline-seed1-copy").rename(tmp_path / "baseline-seed3")  # renamed as another seed
    with pytest.raises(NerbiasError, match="baseline-seed3: its config says it ran in"):
        run_study(tmp_path, tmp_path / "out", n_boot=50)
    assert not (tmp_path / "out").exists()


def test_two_jobs_of_one_condition_and_seed_are_refused(tmp_path):
    write_run(tmp_path, "baseline", 1, BASE, 0.9)
    other = write_run(tmp_path / "elsewhere", "baseline", 1, BASE, 0.9)
    config = yaml.safe_load((other / "config_resolved.yaml").read_text())
    del config["paths"]  # a run that does not say where it ran
    (other / "config_resolved.yaml").write_text(yaml.safe_dump(config))
    other.rename(tmp_path / "baseline-seed1b")
    with pytest.raises(NerbiasError, match=r"baseline-seed1 and .*baseline-seed1b: both are condition baseline, seed 1"):
        find_study(tmp_path)


def test_a_job_missing_an_evaluation_is_refused_and_a_condition_never_evaluated_is_said(tmp_path):
    for seed in (1, 2):
        write_run(tmp_path, "baseline", seed, BASE, 0.9)
        write_run(tmp_path, "mask", seed, BASE, 0.9)
    (tmp_path / "mask-seed2" / "bias" / "winogender" / "metrics.json").unlink()
    with pytest.raises(NerbiasError, match=r"mask-seed2/bias/winogender/metrics.json: missing, while other mask runs"):
        run_study(tmp_path, tmp_path / "out", n_boot=50)
    (tmp_path / "mask-seed1" / "bias" / "winogender" / "metrics.json").unlink()
    text = run_study(tmp_path, tmp_path / "out", n_boot=50).read_text()
    assert "Not evaluated (no run of the condition has the evaluation): winogender: mask" in text


def test_conll_location_recall_is_reported_per_condition_over_the_seeds(tmp_path):
    for seed, (base_f1, names_f1) in enumerate([(0.90, 0.88), (0.91, 0.90), (0.92, 0.89)], start=1):
        write_run(tmp_path, "baseline", seed, BASE, base_f1)
        write_run(tmp_path, "names", seed, BASE, names_f1)
    out = tmp_path / "out"
    run_study(tmp_path, out, n_boot=200, floor_permutations=10)
    table = read(out, "winogender")
    assert table.loc[("baseline", "test_recall_LOC"), "value"] == pytest.approx(0.9 + 0.091)
    assert table.loc[("names", "test_recall_LOC"), "diff"] == pytest.approx((0.89 - 0.91) / 10)
    assert "CoNLL LOC recall" in (out / "study.md").read_text()


def test_conditions_are_compared_only_on_names_no_run_can_have_substituted(tmp_path, monkeypatch):
    """A names list beside the training pool (the census-scale one): every condition is scored without the
    names some run's substitution could draw, so a condition never scores names it trained on; a group left with
    fewer than 2 names is refused, naming it."""
    monkeypatch.setitem(GROUPS, "White Female", ["Emily", "Anne", "Clara"])
    pool = tmp_path / "pool.txt"
    pool.write_text("Anne\nEbony\nZelda\n")  # Ebony is on Mishra et al.'s list, which the pool avoids
    substitutes = {"names": 0.5, "name_pool": {"source": str(pool), "exclude": [None]}}
    sweep = tmp_path / "sweep"
    for seed in (1, 2):
        write_run(sweep, "baseline", seed, {**BASE, "Clara": 8}, 0.9)
        write_run(sweep, "names", seed, {**BASE, "Clara": 8, "Anne": 10}, 0.9, augment=substitutes)
    path = run_study(sweep, tmp_path / "out", n_boot=100, floor_permutations=10)
    table = read(tmp_path / "out", "winogender")
    assert table.loc[("names", "White Female"), "value"] == table.loc[("baseline", "White Female"), "value"] == 0.85
    assert table.loc[("names", "White Female"), "diff"] == 0.0  # Anne, which it trained on, is not scored
    assert table.loc[("baseline", "Black Female"), "value"] == pytest.approx(0.7)  # Ebony stays
    assert "on the 6 names no run's name substitution could draw (the other 1 of the list's 7 are left out)" in \
        path.read_text()
    pool.write_text("Anne\nClara\n")  # White Female left with Emily alone
    with pytest.raises(NerbiasError, match=r"winogender: without the names a run's substitution could draw, "
                                           r"group\(s\) \['White Female'\] keep fewer than 2 names"):
        run_study(sweep, tmp_path / "out2", n_boot=100, floor_permutations=10)
    # a pool of the SSA names draws from their training hash half only, never an excluded or unknown name
    ssa = SHARED_DATA / "ssa_names"
    if ssa.is_dir():
        runs = find_study(sweep).runs
        for run in runs["names"]:
            run.pool, run.data_dir = ("ssa_train_half", [None]), str(SHARED_DATA)
        names = ["Mary", "Todd", "Aisha", "Anne", "Emily", "Syedtiastephen"]  # Mary, Todd: held-out half
        assert drawable_names(names, runs) == {"Aisha", "Anne"}  # Emily: Mishra et al.'s; the last: no SSA name
        for run in runs["names"]:
            run.pool = None  # a run that substitutes nothing leaves every name in
        assert drawable_names(names, runs) == set()


def test_study_py_is_aggregate_py_with_study(tmp_path, capsys):
    """``python study.py`` is the study's own entry point; ``aggregate.py --study`` stays as its alias."""
    from nerbias.study.aggregate import main, study_main

    assert study_main([str(tmp_path)]) == main(["--study", str(tmp_path)]) == 2  # an empty folder: no study
    first, second = capsys.readouterr().err.strip().split("\n")
    assert first == second and first.startswith("error: ")


def test_a_sweep_directory_that_does_not_exist_is_one_line_exit_2(tmp_path, capsys):
    from nerbias.study.aggregate import study_main

    assert study_main([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'nowhere'}: no such sweep directory"
