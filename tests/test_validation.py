"""Config value rules: each stated once, by the class that receives the value (nerbias/validation.py)."""

from __future__ import annotations

import sys
import types

import pytest
from omegaconf import OmegaConf

from helpers import SHIPPED, compose_config
from nerbias.bias.transformers_tagger import TransformersSlotTagger
from nerbias.data.ambiguity import AmbiguityRule
from nerbias.loggers import WandbLogger
from nerbias.bias.benchmarks import NameSubstitutionBenchmark
from nerbias.bias.statistics import NameStatistics, StatisticsOptions
from nerbias.data.conll2003 import Conll2003Data
from nerbias.models.bilstm_crf import ModelOptions, TaggerConfig, build_char_encoder
from nerbias.models.embedders import WordVectors
from nerbias.reporting.report import ReportOptions
from nerbias.tasks.configuration import validate_config
from nerbias.training.augment import Augmentation
from nerbias.training.trainer import TrainerSettings
from nerbias.validation import POSITIVE_INTEGER, RULES, ConfigError, check_config_values, check_values, validate

# The classes the config nodes' ``_target_``s build (validate finds them through it).
TARGET_OWNERS = {"embeddings": WordVectors, "logger": WandbLogger, "tagger": TransformersSlotTagger,
                 "trainer": TrainerSettings, "model": ModelOptions, "augment": Augmentation, "data": Conll2003Data,
                 "metrics": StatisticsOptions, "bias_eval.report": ReportOptions, "corpus": NameSubstitutionBenchmark}


@pytest.mark.parametrize("build, message", [
    (lambda: TrainerSettings(batch_size=0), "trainer.batch_size=0: must be an integer >= 1"),
    (lambda: TrainerSettings(grad_clip=-1.0), "trainer.grad_clip=-1.0: must be a number > 0, or null (no clipping)"),
    (lambda: TaggerConfig(dropout=1.0), "model.dropout=1.0: must be a number in [0, 1)"),
    (lambda: build_char_encoder(9, "rnn", 4, 4, (3,), 4), "model.char_encoder='rnn': must be cnn, lstm or null"),
    (lambda: Augmentation(entity_mask=1.5), "augment.entity_mask=1.5: must be a probability in [0, 1]"),
    (lambda: AmbiguityRule(casing="upper"), "ambiguity rule: casing='upper': must be exact or lower"),
    (lambda: WordVectors(debias="soft"), "embeddings.debias='soft': must be null or hard"),
    (lambda: NameStatistics(confidence_over="some"), "metrics.confidence_over='some': must be recognised or all"),
    (lambda: ReportOptions(confidence=95), "bias_eval.report.confidence=95: must be a level between 0 and 1"),
    (lambda: ReportOptions(ambiguity_boot=0), "bias_eval.report.ambiguity_boot=0: must be an integer >= 1"),
    (lambda: WandbLogger(project="p", mode="loud"), "logger.mode='loud': must be auto, online, offline, disabled"),
])
def test_a_class_refuses_on_construction_what_its_config_key_may_not_be(build, message):
    with pytest.raises(ConfigError) as caught:
        build()
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("path, owner", TARGET_OWNERS.items())
def test_no_rule_is_stated_both_in_rules_and_by_the_class_that_receives_the_value(path, owner):
    never_allowed = object()  # fails every rule
    own = [key for key in ("batch_size", "dropout", "names", "min_typed", "dim", "confidence_bins", "mode", "overflow",
                                 "n_boot", "word_dropout", "max_train_sentences", "sample")
           if _raises(owner, {key: never_allowed})]
    assert own, f"{owner.__name__} states no rule"  # the probe below would prove nothing
    for key in RULES:
        leaf = key.removeprefix(f"{path}.")
        if leaf != key and "." not in leaf:
            assert not _raises(owner, {leaf: never_allowed}), f"{key}: in RULES and in {owner.__name__}"


def _raises(owner, values) -> bool:
    try:
        owner.check_values(values, "x.")
    except ConfigError:
        return True
    return False


@pytest.mark.parametrize("config_name,overrides", SHIPPED, ids=[" ".join(o) for _, o in SHIPPED])
def test_every_shipped_config_has_only_values_their_owners_allow(config_name, overrides):
    check_config_values(compose_config(config_name, overrides))


def test_the_bias_evaluation_nodes_of_a_training_are_checked_before_any_work():
    cfg = compose_config("train", ["bias_eval=paper", "bias_eval.metrics.std_ddof=2"])
    with pytest.raises(ConfigError, match=r"^bias_eval\.metrics\.std_ddof=2: must be 0 \(population\) "
                                          r"or 1 \(sample\)$"):
        validate_config(cfg)
    with pytest.raises(ConfigError, match=r"^bias_eval\.report\.n_boot=0: must be an integer >= 1$"):
        validate_config(compose_config("train", ["experiment=paper", "bias_eval.report.n_boot=0"]))
    with pytest.raises(ConfigError, match=r"^metrics\.confidence_bins=0: must be an integer >= 1$"):
        validate_config(compose_config("evaluate", ["tagger=spacy", "metrics.confidence_bins=0"]))


@pytest.mark.parametrize("target", ["owners_fixture.Thing", "owners_fixture.Thing.build"])
def test_a_node_is_checked_by_the_class_its_target_builds(monkeypatch, target):
    class Thing:
        def __init__(self, size: int = 1):
            self.check_values({"size": size}, "thing.")

        @classmethod
        def check_values(cls, values, prefix):
            check_values(values, {"size": POSITIVE_INTEGER}, prefix)

        @classmethod
        def build(cls, size: int = 1) -> "Thing":
            return cls(size)

    module = types.ModuleType("owners_fixture")
    module.Thing = Thing
    monkeypatch.setitem(sys.modules, "owners_fixture", module)
    validate(OmegaConf.create({"thing": {"_target_": target, "size": 2}}))
    with pytest.raises(ConfigError, match=r"^thing\.size=0: must be an integer >= 1$"):
        validate(OmegaConf.create({"thing": {"_target_": target, "size": 0}}))


def test_the_null_logger_ignores_the_wandb_settings_but_a_bad_one_is_still_named():
    with pytest.raises(ConfigError, match=r"^logger\.mode='ofline'"):
        validate(compose_config("train", ["logger=none", "+logger.mode=ofline"]))
