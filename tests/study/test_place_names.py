"""Names that are also places in the study: probes' LOCATION recall, the watched names, each names corpus
again without its ambiguous names, and the goal of issue 25, on a sweep written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from nerbias.data.ambiguity import TOKEN_TYPES, AmbiguityRule
from nerbias.errors import NerbiasError
from nerbias.study.place_names import GOAL, goal_frame
from nerbias.study.mitigation import run_study

GROUPS = {"Hispanic Female": ["Sofia", "Victoria", "Maria", "Lucia"], "White Female": ["Emily", "Anne", "Claire"],
          "White Male": ["Greg", "Todd", "Brad"]}
PLACES = {"Sofia", "Victoria"}  # the profile below marks them ambiguous: gazetteer places typed LOC


def _frame(rows: list[dict], folder: Path, corpus: str) -> None:
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "per_name.csv", index=False)
    (folder / "metrics.json").write_text(json.dumps({"metrics": {}}))
    (folder / "config_resolved.yaml").write_text(yaml.safe_dump({"corpus": {"name": corpus, "lowercase": False}}))


def write_run(root: Path, condition: str, seed: int, person: dict[str, int], place: dict[str, int], f1: float) -> None:
    run = root / f"{condition}-seed{seed}"
    run.mkdir(parents=True)
    (run / "config_resolved.yaml").write_text(yaml.safe_dump({"condition": condition, "seed": seed}))
    (run / "metrics.json").write_text(json.dumps({"metrics": {"test_f1": f1}}))
    rows = [{"name": n, "group": g, "sentences": 10, "recognised": person[n], "accuracy": person[n] / 10}
            for g, names in GROUPS.items() for n in names]
    _frame(rows, run / "bias" / "winogender", "winogender")
    probes = [{**row, "place_sentences": 20, "place_located": place[row["name"]],
               "place_recall": place[row["name"]] / 20} for row in rows]
    _frame(probes, run / "bias" / "probes", "probes")


def write_profile(path: Path) -> Path:
    rows = [{"name": n, "place": int(n in PLACES), "place_kinds": "city" if n in PLACES else "",
             **{f"conll_{t}": (4 if t == "LOC" and n in PLACES else 0) for t in TOKEN_TYPES},
             **{f"conll_lower_{t}": 0 for t in TOKEN_TYPES}} for names in GROUPS.values() for n in names]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


NAMES = [n for names in GROUPS.values() for n in names]
BASE = {**{n: 10 for n in NAMES}, "Sofia": 0, "Victoria": 1}
PLACE = {n: 18 for n in NAMES}


def test_place_recall_watched_names_and_the_gap_without_ambiguous_names_by_hand(tmp_path):
    for seed in (1, 2, 3):
        write_run(tmp_path, "baseline", seed, {**BASE, "Maria": 8 + seed % 2}, PLACE, 0.90)
        write_run(tmp_path, "context", seed, {**BASE, "Sofia": 9, "Victoria": 9}, {**PLACE, "Greg": 10}, 0.899)
    run_study(tmp_path, tmp_path / "out", n_boot=200, name_profile=write_profile(tmp_path / "name_profile.csv"))
    study = pd.read_csv(tmp_path / "out" / "study_winogender.csv").set_index(["condition", "metric"])
    assert study.loc[("baseline", "name: Sofia"), "value"] == 0.0
    assert study.loc[("context", "name: Victoria"), "value"] == pytest.approx(0.9)
    victoria = study.loc[("context", "name: Victoria")]  # one name's mean has no interval; its median seed a bound
    assert np.isnan(victoria["ci_low"]) and victoria["median_seed"] == pytest.approx(9.5 / 11)  # (9 + .5) / (1 + .5)
    assert victoria["median_seed_lower"] == pytest.approx(9.5 / 11)  # every seed the same: no spread
    probes = pd.read_csv(tmp_path / "out" / "study_probes.csv").set_index(["condition", "metric"])
    assert probes.loc[("baseline", "place_recall"), "value"] == pytest.approx(0.9)
    assert probes.loc[("context", "place_recall"), "value"] == pytest.approx((9 * 18 + 10) / (10 * 20))
    assert probes.loc[("context", "place_recall"), "diff"] == pytest.approx((10 - 18) / 200)
    # places that stay places (issue 45): Sofia's and the place-like names' share tagged LOCATION in place frames
    sofia = probes.loc[("context", "LOCATION in place frames: Sofia")]
    assert sofia["value"] == pytest.approx(18 / 20) and sofia["diff"] == pytest.approx(0.0)
    assert probes.loc[("context", "LOCATION in place frames: place-like names"), "value"] == pytest.approx(36 / 40)
    assert np.isnan(sofia["ci_low"]) and sofia["ci_covers"] == "none"  # 20 frames a seed: no t over the seeds
    clean = pd.read_csv(tmp_path / "out" / "study_winogender_unambiguous.csv").set_index(["condition", "metric"])
    maria = np.mean([(9 + 10) / 20, (8 + 10) / 20, (9 + 10) / 20])  # Maria and Lucia, seeds 1-3
    assert clean.loc[("baseline", "Hispanic Female"), "value"] == pytest.approx(maria)
    assert clean.loc[("context", "Hispanic Female"), "value"] == 1.0  # Sofia and Victoria left out
    text = (tmp_path / "out" / "study.md").read_text()
    assert "Winogender, without its 2 ambiguous names" in text and "Sofia, Victoria" in text
    goal = pd.read_csv(tmp_path / "out" / "goal.csv").set_index("condition")
    assert goal.loc["context", "f1_met"] and goal.loc["context", "watched_met"]
    assert not goal.loc["context", "place_met"] and not goal.loc["context", "met"]  # LOCATION recall -4 points
    assert "## Goal: a condition that reads context" in text
    assert "## Goal: Sofia in a person's slot (issue 45)" in text
    context_goal = pd.read_csv(tmp_path / "out" / "context_goal.csv").set_index("condition")
    assert not context_goal.loc["context", "met"] and not context_goal.loc["context", "watched_met"]  # no In-Situ
    claims = pd.read_csv(tmp_path / "out" / "claims.csv")
    assert set(claims["corpus"]) == {"winogender"}  # the probes and the extra section are not claims


def test_goal_needs_every_part_and_the_worst_deficit_halved():
    def frames(halving_lower: float, f1: float, place: float, sofia: float) -> dict[str, pd.DataFrame]:
        rows = [("best_worst_gap", {"ratio": 0.4, "halving_lower": halving_lower, "worst_group": "Hispanic Female",
                                    "worst_deficit": -0.1, "worst_deficit_condition": -0.03}),
                ("test_f1", {"diff": f1}), ("name: Sofia", {"value": sofia}), ("name: Victoria", {"value": 0.95})]
        winogender = pd.DataFrame([{"condition": c, "metric": m, **v} for c in ("baseline", "x") for m, v in rows])
        probes = pd.DataFrame([{"condition": "x", "metric": "place_recall", "diff": place}])
        return {"winogender": winogender, "probes": probes}
    assert goal_frame(frames(0.01, -0.004, -0.01, 0.92), "baseline", "best_worst_gap")["met"].tolist() == [True]
    for spoiled in (frames(-0.01, -0.004, -0.01, 0.92), frames(0.01, -0.006, -0.01, 0.92),
                    frames(0.01, -0.004, -0.03, 0.92), frames(0.01, -0.004, -0.01, 0.89),
                    frames(np.nan, -0.004, -0.01, 0.92)):   # no halving test (one seed): not met
        assert goal_frame(spoiled, "baseline", "best_worst_gap")["met"].tolist() == [False]
    no_probes = frames(0.01, -0.004, -0.01, 0.92)
    del no_probes["probes"]
    assert goal_frame(no_probes, "baseline", "best_worst_gap")["place_met"].tolist() == [False]  # unmeasured
    assert GOAL == {"deficit_share": 0.5, "f1_cost": 0.005, "place_recall_drop": 0.02, "watched_accuracy": 0.9}


def test_a_profile_without_the_evaluated_names_or_a_group_left_empty_is_an_error(tmp_path):
    write_run(tmp_path, "baseline", 1, BASE, PLACE, 0.9)
    profile = write_profile(tmp_path / "name_profile.csv")
    partial = pd.read_csv(profile)
    partial[partial["name"] != "Greg"].to_csv(tmp_path / "partial.csv", index=False)
    with pytest.raises(NerbiasError, match=r"the name profile lacks 1 evaluated names \(e.g. Greg\)"):
        run_study(tmp_path, tmp_path / "out", n_boot=50, name_profile=tmp_path / "partial.csv")
    strict = AmbiguityRule(min_typed=1, gazetteer=True)
    everything = pd.read_csv(profile).assign(place=1)
    everything.to_csv(tmp_path / "all_places.csv", index=False)
    with pytest.raises(NerbiasError, match=r"group\(s\) \['Hispanic Female', 'White Female', 'White Male'\] keep"):
        run_study(tmp_path, tmp_path / "out", n_boot=50, name_profile=tmp_path / "all_places.csv", ambiguity=strict)


def test_the_context_goal_reads_one_sided_bounds_over_the_paired_seeds():
    from scipy import stats
    from nerbias.reporting.intervals import Statistic
    from nerbias.study.place_names import CONTEXT_GOAL, context_goal_columns, context_goal_frame

    seeds = (1, 2, 3, 4, 5)
    sofia = Statistic(0.9, seeds, np.array([0.9, 0.85, 0.88, 0.92, 0.95]), bounds=(0.0, 1.0), slots=2459)
    columns = context_goal_columns("name: Sofia", sofia, None)
    assert set(columns) == {"median_seed", "median_seed_lower"} and columns["median_seed_lower"] < columns["median_seed"]
    ours, theirs = np.array([0.900, 0.903, 0.899, 0.905, 0.901]), np.array([0.902, 0.904, 0.900, 0.903, 0.904])
    f1 = context_goal_columns("test_f1", Statistic(ours.mean(), seeds, ours), Statistic(theirs.mean(), seeds, theirs))
    d = ours - theirs
    assert f1["diff_lower_one_sided"] == pytest.approx(d.mean() - stats.t.ppf(0.95, 4) * d.std(ddof=1) / np.sqrt(5))
    gap_c, gap_b = np.array([0.06, 0.05, 0.07, 0.05, 0.06]), np.array([0.16, 0.17, 0.15, 0.16, 0.17])
    halving = context_goal_columns("White - Hispanic", Statistic(0.058, seeds, gap_c, slots=40000),
                                   Statistic(0.162, seeds, gap_b, slots=40000))
    m = gap_c - 0.5 * gap_b
    assert halving["halving_upper"] == pytest.approx(m.mean() + stats.t.ppf(0.95, 4) * m.std(ddof=1) / np.sqrt(5))
    assert context_goal_columns("White - Hispanic", Statistic(0.058, seeds, gap_c, slots=400),
                                Statistic(0.162, seeds, gap_b, slots=400)) == {}  # too few slots for a t
    assert context_goal_columns("test_f1", Statistic(0.9, (1, 2, 3), ours[:3]), Statistic(0.9, (1, 2, 4), theirs[:3])) == {}

    def frames(sofia_point=0.9, sofia_lower=0.82, f1_lower=-0.002, loc_lower=-0.004, frames_share=0.96, upper=-0.01):
        name_rows = [{"metric": f"name: {n}", "median_seed": p, "median_seed_lower": low}
                     for n, p, low in (("Sofia", sofia_point, sofia_lower), ("Victoria", 0.9, 0.85))]
        winogender = pd.DataFrame(
            [{"condition": "x", **r} for r in name_rows]
            + [{"condition": "x", "metric": "test_f1", "diff": 0.0, "diff_lower_one_sided": f1_lower},
               {"condition": "x", "metric": "test_recall_LOC", "diff": 0.0, "diff_lower_one_sided": loc_lower},
               {"condition": "x", "metric": "White - Hispanic", "value": 0.05, "halving_upper": upper},
               {"condition": "baseline", "metric": "White - Hispanic", "value": 0.16}])
        insitu = pd.DataFrame([{"condition": "x", **r, "median_seed": 0.9, "median_seed_lower": 0.84} for r in name_rows])
        probes = pd.DataFrame([{"condition": "x", "metric": f"LOCATION in place frames: {n}", "value": frames_share}
                               for n in ("Sofia", "Victoria")])
        return {"winogender": winogender, "insitu": insitu, "probes": probes}

    assert context_goal_frame(frames(), "baseline")["met"].tolist() == [True]
    for spoiled in ({"sofia_point": 0.85}, {"sofia_lower": 0.79}, {"f1_lower": -0.0031}, {"loc_lower": -0.0051},
                    {"frames_share": 0.94}, {"upper": 0.001}, {"upper": np.nan}):
        assert context_goal_frame(frames(**spoiled), "baseline")["met"].tolist() == [False], spoiled
    no_insitu = frames()
    del no_insitu["insitu"]
    assert not context_goal_frame(no_insitu, "baseline")["watched_met"].iloc[0]  # unmeasured: not met
    assert CONTEXT_GOAL["watched_point"] == 0.86 and CONTEXT_GOAL["watched_lower"] == 0.80
