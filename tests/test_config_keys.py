"""A config key no code reads stops the run before any work (validation.check_config_keys), naming the
key and what its group takes; every shipped config composes without one."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from helpers import CONFIGS, ROOT, SHIPPED, compose_config, run_script
from nerbias import scoring
from nerbias.bias import runner
from nerbias.tasks.configuration import config_reads
from nerbias.training import trainer
from nerbias.tasks import configuration
from nerbias.validation import ConfigError, check_config_keys


def test_pretrain_lm_config_has_only_keys_that_code_reads():
    from nerbias.training.lm_pretraining import PRETRAIN_READS

    check_config_keys(compose_config("pretrain_lm", []), PRETRAIN_READS)
    with pytest.raises(ConfigError, match=r"^epoch: no code reads this key \(the top level takes: .*\bepochs\b"):
        check_config_keys(compose_config("pretrain_lm", ["+epoch=3"]), PRETRAIN_READS)


@pytest.mark.parametrize("config_name,overrides", SHIPPED, ids=[" ".join(o) for _, o in SHIPPED])
def test_every_shipped_config_has_only_keys_that_code_reads(config_name, overrides):
    cfg = compose_config(config_name, overrides)
    check_config_keys(cfg, config_reads(cfg))


def checked(config_name: str, overrides: list[str]) -> str:
    cfg = compose_config(config_name, overrides)
    with pytest.raises(ConfigError) as caught:
        check_config_keys(cfg, config_reads(cfg))
    return str(caught.value)


@pytest.mark.parametrize("config_name,overrides,message", [
    ("train", ["+model.hiden_size=8"], r"^model\.hiden_size: no code reads this key \(the model group takes: "
                                       r"char_dim, char_encoder, .*lstm_hidden"),
    ("train", ["+trainer.patiense=3"], r"^trainer\.patiense: no code reads this key \(the trainer group takes: "
                                       r"batch_size, .*patience"),
    ("train", ["+trainer.optimizer.learning_rate=0.1"],  # a target's node takes its parameters
     r"^trainer\.optimizer\.learning_rate: no code reads this key \(.*\blr\b"),
    ("train", ["+embeddings.dimension=50"], r"^embeddings\.dimension: no code reads this key \(.*\bdim\b"),
    ("train", ["+augment.ambiguity.min_type=2"], r"^augment\.ambiguity\.min_type: .*min_typed"),
    ("train", ["experiment=paper", "+bias_eval.corpora.winogender.smaple=10"],
     r"^bias_eval\.corpora\.winogender\.smaple: no code reads this key \(.*\bsample\b"),
    ("train", ["experiment=paper", "+bias_eval.tagger.devise=cpu"], r"^bias_eval\.tagger\.devise: "),
    ("train", ["+sed=3"], r"^sed: no code reads this key \(the top level takes: .*\bseed\b"),
    ("evaluate", ["corpus=census", "tagger.path=x", "+corpus.first_yaer=1900"],
     r"^corpus\.first_yaer: no code reads this key \(the corpus group takes: .*first_year"),
    ("evaluate", ["corpus=winogender", "tagger.path=x", "+corpus.first_year=1900"],  # a census key elsewhere
     r"^corpus\.first_year: "),
    ("evaluate", ["corpus=conll2003", "tagger.path=x", "+corpus.sample=10"], r"^corpus\.sample: "),
    ("evaluate", ["tagger=spacy", "+tagger.person_lable=PER"], r"^tagger\.person_lable: .*person_label"),
    ("evaluate", ["tagger.path=x", "+metrics.std_dof=1"], r"^metrics\.std_dof: .*std_ddof"),
    ("evaluate", ["tagger.path=x", "+name_profile.conll_tran=x"], r"^name_profile\.conll_tran: .*conll_train"),
    ("train", ["experiment=paper", "+bias_eval.name_profile.conll_tran=x"], r"^bias_eval\.name_profile\.conll_tran: "),
    ("train", ["experiment=paper", "+bias_eval.report.checkpoint=x"], r"^bias_eval\.report\.checkpoint: "),
])
def test_a_key_no_code_reads_is_named_with_what_its_group_takes(config_name, overrides, message):
    assert re.search(message, checked(config_name, overrides))


def test_a_misspelt_key_in_a_yaml_file_stops_train_py_before_any_work(tmp_path):
    """The issue's example: a model config file with ``hiden_size`` exits 2 with one line naming it, before
    the data (a folder that does not exist) is read."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "typo.yaml").write_text(
        (CONFIGS / "model" / "bilstm_crf.yaml").read_text() + "hiden_size: 64\n", encoding="utf-8")
    result = run_script("train.py", [f"hydra.searchpath=[file://{tmp_path}]", "model=typo", "logger=none",
                                     f"paths.data_dir={tmp_path / 'no_data'}", f"hydra.run.dir={tmp_path / 'run'}"])
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: model.hiden_size: no code reads this key"), result.stderr
    assert "no_data" not in result.stderr  # stopped before reading data
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_keys_outside_a_target_s_parameters_are_taken_only_where_declared():
    """A node built from a ``_target_`` takes exactly its parameters plus what its readers declare."""
    cfg = OmegaConf.create({"trainer": {"optimizer": {"_target_": "torch.optim.Adam", "_partial_": True, "lr": 0.1}},
                            "thing": {"_target_": "fractions.Fraction", "numerator": 1}})
    check_config_keys(cfg, {"": ("trainer", "thing"), "trainer": ("optimizer",)})
    cfg.thing.extra = 1
    with pytest.raises(ConfigError, match=r"^thing\.extra: .*\(the thing group takes: _normalize, _partial_, _target_, denominator, numerator\)"):
        check_config_keys(cfg, {"": ("trainer", "thing"), "trainer": ("optimizer",)})
    check_config_keys(cfg, {"": ("trainer", "thing"), "trainer": ("optimizer",), "thing": ("extra",)})


SOURCES = "\n".join(path.read_text(encoding="utf-8") for path in
                    [*(ROOT / "nerbias").rglob("*.py"), *(ROOT / "configs").rglob("*.yaml")])


@pytest.mark.parametrize("declared", [
    "trainer.DATA_KEYS", "trainer.TRAINER_KEYS", "runner.CORPUS_LOOP_KEYS", "runner.CENSUS_KEYS",
    "runner.METRICS_KEYS", "configuration.AUGMENT_KEYS", "scoring.CONLL_KEYS", "configuration.BIAS_EVAL_KEYS",
    "configuration.PATHS_KEYS", "configuration.TOP_LEVEL_KEYS"])
def test_every_declared_key_is_read_somewhere(declared):
    """A declaration is no licence for a dead key: each declared key is read in the package (an attribute,
    a get, a subscript) or by an interpolation of a config file."""
    module, name = declared.split(".")
    keys = getattr({"trainer": trainer, "runner": runner, "configuration": configuration, "scoring": scoring}[module], name)
    read = r"(\.|\[\"|\.get\(\"|\$\{|oc\.select:)%s\b|\b%s="  # .key ["key .get("key ${key oc.select:key key=
    unread = [key for key in keys if not re.search(read % (re.escape(key), re.escape(key)), SOURCES)]
    assert not unread, f"{declared}: nothing reads {unread}"
