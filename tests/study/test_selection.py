"""Issue 45's declared selection rule (nerbias/study/selection.py, scripts/context_selection.py) on sweeps written
here: eligibility by dev F1, one candidate a part, entry above every baseline seed, the combination last."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from helpers import run_script
from nerbias.errors import NerbiasError
from nerbias.study.selection import apply_rule, read_candidates, read_reference

REFERENCE = pd.DataFrame({"job": [f"baseline-seed{s}" for s in (1, 2, 3)], "seed": [1, 2, 3],
                          "dev_f1": [94.3, 94.7, 94.8], "person_recall": [0.56, 0.55, 0.53],
                          "place_recall": [0.62, 0.63, 0.64], "mean_recall": [0.595, 0.587, 0.613]})
# (dev F1, mean recall): eligible from 94.0, entering above 0.613
CANDIDATES = {"adversarial_025": (94.5, 0.650), "adversarial_050": (94.4, 0.700), "adversarial_080": (93.9, 0.800),
              "mention_mask_030": (94.6, 0.640), "both_roles": (94.2, 0.610), "freeze_words": (94.1, 0.600),
              "freeze_features": (94.0, 0.605)}


def write_sweep(root, candidates=CANDIDATES):
    for name, (dev_f1, recall) in candidates.items():
        job = root / f"{name}-seed1"
        (job / "bias" / "dev_probe").mkdir(parents=True)
        (job / "config_resolved.yaml").write_text(yaml.safe_dump({"condition": name, "seed": 1}))
        (job / "metrics.json").write_text(json.dumps({"metrics": {"dev_f1": dev_f1 / 100}, "history": [{}] * 20,
                                                      "code": {"commit": "abc"}}))
        (job / "bias" / "dev_probe" / "metrics.json").write_text(json.dumps({"metrics": {
            "dev_probe/person_recall": recall - 0.05, "dev_probe/place_recall": recall + 0.05,
            "dev_probe/mean_recall": recall}}))
    return root


def test_the_rule_picks_one_candidate_a_part_and_asks_for_the_combination(tmp_path):
    selection = apply_rule(read_candidates(write_sweep(tmp_path / "sweep")), REFERENCE)
    table = selection.table.set_index("candidate")
    assert not table.loc["adversarial_080", "eligible"]  # the highest recall, but dev F1 under 94.0
    assert table["stands_for_part"][table["stands_for_part"]].index.tolist() == [
        "adversarial_050", "both_roles", "freeze_features", "mention_mask_030"]
    assert selection.entering == ("adversarial_050", "mention_mask_030")  # both_roles, freezing: not above 0.613
    assert selection.best_single == "adversarial_050" and selection.needs_combined and selection.choice is None


@pytest.mark.parametrize("combined, choice", [((94.3, 0.75), "combined"), ((94.3, 0.69), "adversarial_050"),
                                              ((93.5, 0.90), "adversarial_050")])
def test_the_combination_is_chosen_only_when_eligible_and_above_the_best_single_part(tmp_path, combined, choice):
    sweep = write_sweep(tmp_path / "sweep", {**CANDIDATES, "combined": combined})
    selection = apply_rule(read_candidates(sweep), REFERENCE)
    assert selection.choice == choice and selection.best_single == "adversarial_050" and not selection.needs_combined


def test_one_part_entering_is_the_choice_and_ties_go_to_the_smaller_lambda(tmp_path):
    tied = {**CANDIDATES, "adversarial_025": (94.5, 0.70), "mention_mask_030": (94.6, 0.60)}
    selection = apply_rule(read_candidates(write_sweep(tmp_path / "sweep", tied)), REFERENCE)
    assert selection.entering == ("adversarial_025",) and selection.choice == "adversarial_025"


def test_the_script_prints_the_table_and_exits_by_what_is_left_to_do(tmp_path):
    sweep = write_sweep(tmp_path / "sweep")
    reference = tmp_path / "reference.csv"
    REFERENCE.to_csv(reference, index=False)
    first = run_script("scripts/context_selection.py", [str(sweep), "--reference", str(reference)])
    assert first.returncode == 3, first.stderr
    assert "| adversarial_050 |" in first.stdout and "selection=combined with the options of adversarial_050, " \
           "mention_mask_030" in first.stdout
    write_sweep(tmp_path / "extra", {"combined": (94.3, 0.75)})
    (tmp_path / "extra" / "combined-seed1").rename(sweep / "combined-seed1")
    decided = run_script("scripts/context_selection.py", [str(sweep), "--reference", str(reference)])
    assert decided.returncode == 0 and "the study's condition: combined" in decided.stdout
    (sweep / "both_roles-seed1" / "metrics.json").unlink()
    missing = run_script("scripts/context_selection.py", [str(sweep), "--reference", str(reference)])
    assert missing.returncode == 2 and "lacks 1 declared candidates (both_roles)" in missing.stderr


def test_the_committed_reference_is_the_five_baseline_seeds(tmp_path):
    reference = read_reference()
    assert reference["seed"].tolist() == [1, 2, 3, 4, 5]
    assert reference["dev_f1"].min() == pytest.approx(94.281, abs=1e-3)
    assert reference["mean_recall"].max() == pytest.approx(0.613, abs=1e-3)
    with pytest.raises(NerbiasError, match="no finished candidate"):
        read_candidates(tmp_path)
