"""The mitigation study's pieces: every condition composes to what it says, the census scores only
held-out names, and a rerun sweep job keeps its finished evaluations."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers import CONFIGS, compose_config
from nerbias.bias.census import select_names
from nerbias.bias.names import load_names, substitution_pool
from nerbias.errors import NerbiasError
from nerbias.tasks import _finished_evaluation

CONDITIONS = {  # condition -> (embeddings.debias, augment.lowercase, augment.names, augment.entity_mask,
    #                          embeddings.normalize, augment.adversarial, augment.name_pool)
    "baseline": (None, 0.0, 0.0, 0.0, None, 0.0, "ssa_train_half"),
    "normalize": (None, 0.0, 0.0, 0.0, True, 0.0, "ssa_train_half"),
    "debias": ("hard", 0.0, 0.0, 0.0, None, 0.0, "ssa_train_half"),
    "mixed_case": (None, 1.0, 0.0, 0.0, None, 0.0, "ssa_train_half"),
    "names": (None, 0.0, 0.5, 0.0, None, 0.0, "ssa_train_half"),
    "mask": (None, 0.0, 0.0, 0.25, None, 0.0, "ssa_train_half"),
    "combined": ("hard", 1.0, 0.5, 0.25, None, 0.0, "ssa_train_half"),
    "adversarial": (None, 0.0, 0.0, 0.0, None, 0.25, "ssa_train_half"),
    "ambiguous_names": (None, 0.0, 0.5, 0.0, None, 0.0, "ambiguous"),
}


def test_the_conditions_are_the_files_of_the_mitigation_group_and_the_study_sweeps_them_all():
    assert sorted(p.stem for p in (CONFIGS / "mitigation").glob("*.yaml")) == sorted(CONDITIONS)
    from omegaconf import OmegaConf
    swept = OmegaConf.load(CONFIGS / "experiment" / "mitigation_study.yaml").hydra.sweeper.params.mitigation
    assert sorted(swept.split(",")) == sorted(CONDITIONS)


@pytest.mark.parametrize("condition", sorted(CONDITIONS))
def test_each_condition_composes_with_the_study_and_switches_on_only_its_options(condition):
    cfg = compose_config("train", ["experiment=mitigation_study", f"mitigation={condition}"])
    assert cfg.condition == condition and cfg.run_name == f"mitigation-{condition}-seed42"
    got = (cfg.embeddings.debias, cfg.augment.lowercase, cfg.augment.names, cfg.augment.entity_mask,
           cfg.embeddings.normalize, cfg.augment.adversarial, cfg.augment.name_pool)
    assert got == CONDITIONS[condition]
    assert cfg.embeddings.kind == "glove" and cfg.trainer.max_epochs == 50 and cfg.trainer.patience == 8  # to convergence
    oov = cfg.bias_eval.corpora.winogender_oov
    assert oov.names == "oov_set" and oov.seed == 0 and cfg.bias_eval.corpora.insitu_oov.names == "oov_set"
    census = cfg.bias_eval.corpora.census
    assert census.names == "heldout" and list(census.pool_exclude) == list(cfg.augment.pool_exclude)
    assert cfg.bias_eval.corpora.winogender.seed == 0  # one sample for every condition and seed
    assert cfg.bias_eval.corpora.probes.benchmark._target_.endswith("ProbesBenchmark")  # person vs place contexts


def test_the_elmo_comparison_run_is_the_baseline_recipe_on_elmo_evaluated_as_the_study():
    elmo = compose_config("train", ["experiment=mitigation_study_elmo", "seed=1"])
    baseline = compose_config("train", ["experiment=mitigation_study", "mitigation=baseline", "seed=1"])
    assert elmo.condition == "elmo" and elmo.embeddings.kind == "elmo" and elmo.trainer.max_epochs == 50
    assert elmo.bias_eval == baseline.bias_eval and elmo.augment == baseline.augment
    assert elmo.model == baseline.model and elmo.seed == baseline.seed


def test_the_study_is_not_on_unless_asked():
    cfg = compose_config("train", [])
    assert "condition" not in cfg and cfg.augment.names == 0 and cfg.embeddings.debias is None


def frame(names):
    return pd.DataFrame({"name": names, "sex": "F", "count": 1, "year": 2000})


def test_census_heldout_names_are_exactly_those_substitution_never_draws():
    evaluation = load_names(None).names
    candidates = [f"Name{chr(97 + i)}{chr(97 + j)}" for i in range(26) for j in range(26)] + evaluation[:5]
    ssa = frame(candidates)
    held = set(select_names(ssa, "heldout", evaluation)["name"])
    training = set(substitution_pool(candidates, evaluation, "train"))
    assert held.isdisjoint(training) and held | training == set(candidates)
    assert set(evaluation[:5]) <= held              # evaluation names are never substitution names
    assert 200 < len(training) < 476                # a hash split, roughly half
    assert select_names(ssa, "all", evaluation) is ssa
    with pytest.raises(NerbiasError, match="corpus.names='half'"):
        select_names(ssa, "half", evaluation)


def test_a_finished_evaluation_is_kept_only_with_the_same_settings(tmp_path):
    (tmp_path / "config_resolved.yaml").write_text("corpus: {sample: 10}\n")
    assert _finished_evaluation(tmp_path, "corpus: {sample: 10}\n") is None  # no results yet: redo
    (tmp_path / "metrics.json").write_text(json.dumps({"metrics": {"winogender/ALL/accuracy": 0.5}}))
    assert _finished_evaluation(tmp_path, "corpus: {sample: 10}\n") == {"winogender/ALL/accuracy": 0.5}
    assert _finished_evaluation(tmp_path, "corpus: {sample: 20}\n") is None  # other settings: redo


def test_a_census_name_subset_typo_stops_before_training():
    from nerbias.validation import ConfigError, validate
    cfg = compose_config("train", ["experiment=mitigation_study", "bias_eval.corpora.census.names=held"])
    with pytest.raises(ConfigError, match="bias_eval.corpora.census.names='held': must be all or heldout"):
        validate(cfg)
    with pytest.raises(ConfigError, match="corpus.names='half'"):
        validate(compose_config("evaluate", ["corpus=census", "corpus.names=half"]))
    validate(compose_config("evaluate", ["corpus=census", "corpus.names=heldout", "tagger=spacy"]))
