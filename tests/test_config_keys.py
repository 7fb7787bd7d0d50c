"""Every config node is a constructor's arguments (or, for the task's own nodes, a schema's fields): a key no
constructor takes stops the run before any work, naming the key and what its node takes; ``build`` refuses
one too; every shipped config composes without one; and no hand-kept list of key names is left."""

from __future__ import annotations

import ast
import re

import pytest
from omegaconf import OmegaConf

from helpers import CONFIGS, ROOT, SHIPPED, compose_config, run_script
from nerbias.building import build
from nerbias.tasks.configuration import SCHEMAS
from nerbias.training.lm_pretraining import PretrainingConfig
from nerbias.errors import NerbiasError
from nerbias.validation import BuildError, ConfigError, check_config_keys


def test_pretrain_lm_config_has_only_keys_that_code_reads():
    check_config_keys(compose_config("pretrain_lm", []), {"": PretrainingConfig})
    with pytest.raises(ConfigError, match=r"^epoch: no code reads this key \(the top level takes: .*\bepochs\b"):
        check_config_keys(compose_config("pretrain_lm", ["+epoch=3"]), {"": PretrainingConfig})


@pytest.mark.parametrize("config_name,overrides", SHIPPED, ids=[" ".join(o) for _, o in SHIPPED])
def test_every_shipped_config_has_only_keys_that_code_reads(config_name, overrides):
    check_config_keys(compose_config(config_name, overrides), SCHEMAS)


def checked(config_name: str, overrides: list[str]) -> str:
    cfg = compose_config(config_name, overrides)
    with pytest.raises(ConfigError) as caught:
        check_config_keys(cfg, SCHEMAS)
    return str(caught.value)


@pytest.mark.parametrize("config_name,overrides,message", [
    ("train", ["+model.hiden_size=8"], r"^model\.hiden_size: nerbias\.models\.bilstm_crf\.ModelOptions takes no such "
                                       r"argument \(it takes: char_dim, char_encoder, .*lstm_hidden"),
    ("train", ["+trainer.patiense=3"], r"^trainer\.patiense: .*TrainerSettings takes no such argument \(it takes: "
                                       r"batch_size, .*patience"),
    ("train", ["+trainer.optimizer.learning_rate=0.1"], r"^trainer\.optimizer\.learning_rate: torch\.optim\.Adam .*\blr\b"),
    ("train", ["+embeddings.dimension=50"], r"^embeddings\.dimension: .*\bdim\b"),
    ("train", ["+augment.nmes=0.5"], r"^augment\.nmes: .*Augmentation\.configured .*\bnames\b"),
    ("train", ["+augment.name_pool.exlude=[x]"], r"^augment\.name_pool\.exlude: .*NamePool .*\bexclude\b"),
    ("train", ["+data.max_trian_sentences=5"], r"^data\.max_trian_sentences: .*Conll2003Data .*max_train_sentences"),
    ("train", ["experiment=paper", "+bias_eval.corpora.winogender.smaple=10"],
     r"^bias_eval\.corpora\.winogender\.smaple: .*NameSubstitutionBenchmark .*\bsample\b"),
    ("train", ["experiment=paper", "+bias_eval.corpora.winogender.source.templatez=x"],
     r"^bias_eval\.corpora\.winogender\.source\.templatez: .*WinogenderCorpus\.from_file .*\btemplates\b"),
    ("train", ["experiment=paper", "+bias_eval.tagger.devise=cpu"], r"^bias_eval\.tagger\.devise: "),
    ("train", ["experiment=paper", "+bias_eval.report.n_bot=3"], r"^bias_eval\.report\.n_bot: .*\bn_boot\b"),
    ("train", ["experiment=paper", "+bias_eval.lowercas=[true]"], r"^bias_eval\.lowercas: no code reads this key "
                                                                 r"\(the bias_eval group takes: .*\blowercase\b"),
    ("train", ["+sed=3"], r"^sed: no code reads this key \(the top level takes: .*\bseed\b"),
    ("train", ["+paths.dat_dir=x"], r"^paths\.dat_dir: no code reads this key \(the paths group takes: data_dir"),
    ("evaluate", ["corpus=census", "tagger.path=x", "+corpus.first_yaer=1900"], r"^corpus\.first_yaer: .*first_year"),
    ("evaluate", ["corpus=winogender", "tagger.path=x", "+corpus.first_year=1900"], r"^corpus\.first_year: "),
    ("evaluate", ["corpus=conll2003", "tagger.path=x", "+corpus.sample=10"], r"^corpus\.sample: "),
    ("evaluate", ["tagger=spacy", "+tagger.person_lable=PER"], r"^tagger\.person_lable: .*person_label"),
    ("evaluate", ["tagger.path=x", "+metrics.std_dof=1"], r"^metrics\.std_dof: .*std_ddof"),
    ("evaluate", ["tagger.path=x", "+name_profile.conll_tran=x"], r"^name_profile\.conll_tran: .*conll_train"),
])
def test_a_key_no_code_reads_is_named_with_what_its_node_takes(config_name, overrides, message):
    assert re.search(message, checked(config_name, overrides))


@pytest.mark.parametrize("override,node_takes", [
    ("model.hiden_size=3", "ModelOptions takes no such argument (it takes: char_dim"),
    ("trainer.optimizer.lrr=0.1", "torch.optim.Adam takes no such argument (it takes: "),
    ("augment.nmes=0.5", "Augmentation.configured takes no such argument (it takes: adversarial"),
    ("corpus.smaple=10", "NameSubstitutionBenchmark takes no such argument (it takes: batch_size"),
    ("data.max_trian_sentences=5", "Conll2003Data takes no such argument (it takes: data_dir"),
])
def test_a_misspelt_key_exits_2_before_any_data_is_read(tmp_path, override, node_takes):
    """The issue's five: one line naming the key and what its node takes, exit 2, nothing read or written
    (the data folder does not exist; evaluate.py's checkpoint does not either)."""
    key = override.split("=")[0]
    common = ["logger=none", f"paths.data_dir={tmp_path / 'no_data'}", f"hydra.run.dir={tmp_path / 'run'}"]
    if key.startswith("corpus."):
        result = run_script("evaluate.py", ["corpus=winogender", f"tagger.path={tmp_path / 'none.pt'}", f"+{override}",
                                            *common])
    else:
        result = run_script("train.py", [f"+{override}", *common])
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {key}: ") and node_takes in errors[0], result.stderr
    assert "no_data" not in result.stderr  # stopped before reading data
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_misspelt_key_in_a_yaml_file_stops_train_py_before_any_work(tmp_path):
    """A model config file with ``hiden_size`` exits 2 with one line naming it, before the data (a folder
    that does not exist) is read."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "typo.yaml").write_text(
        (CONFIGS / "model" / "bilstm_crf.yaml").read_text() + "hiden_size: 64\n", encoding="utf-8")
    result = run_script("train.py", [f"hydra.searchpath=[file://{tmp_path}]", "model=typo", "logger=none",
                                     f"paths.data_dir={tmp_path / 'no_data'}", f"hydra.run.dir={tmp_path / 'run'}"])
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: model.hiden_size: "), result.stderr
    assert "no_data" not in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_build_refuses_a_key_its_target_does_not_take():
    node = {"_target_": "fractions.Fraction", "numerator": 3, "denominator": 4}
    assert build(node) == 3 / 4
    with pytest.raises(BuildError, match=r"^thing\.extra: fractions\.Fraction takes no such argument \(it takes: "
                                         r"_normalize, denominator, numerator\)"):
        build({**node, "extra": 1}, "thing.")
    with pytest.raises(BuildError, match=r"^thing\.numerator\.extra: fractions\.Fraction takes no such argument"):
        build({"_target_": "fractions.Fraction", "numerator": {**node, "extra": 1}}, "thing.")  # nested, before building
    with pytest.raises(BuildError, match=r"^thing\.shape: "):  # a run-time value must be a parameter too
        build(node, "thing.", shape=(1,))


def test_build_passes_nested_targets_built_and_a_partial():
    built = build({"_target_": "fractions.Fraction", "numerator": {"_target_": "fractions.Fraction", "numerator": 7}})
    assert built == 7
    partial = build({"_target_": "fractions.Fraction", "_partial_": True, "numerator": 1})
    assert partial(denominator=2) == 0.5


def _config_keys() -> set[str]:
    keys: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                keys.add(str(key))
                walk(value)
    for path in CONFIGS.rglob("*.yaml"):
        if path.parent.name != "study":  # the study's margins: a table the study reads, not a config node
            walk(OmegaConf.to_container(OmegaConf.load(path), resolve=False))
    return keys - {"_target_", "_partial_", "defaults", "hydra"}


# Literals that sort keys by what they do rather than list what a node may hold: the sections and trainer keys
# that define a run (a resumed run must agree on them), the augmentation options that are probabilities,
# the overrides the study does not group by.
CLASSIFICATIONS = {"RUN_DEFINING_KEYS", "NOT_RUN_DEFINING_TRAINER_KEYS", "AUGMENT_PROBABILITIES", "IGNORED_KEYS"}


def test_no_hand_kept_list_of_config_keys_is_left_in_the_package():
    """A node's keys are its constructor's parameters or its schema's fields, nowhere else: no tuple, list or
    set literal in nerbias/ whose strings (three or more) are all config keys, but the classifications."""
    keys, found = _config_keys(), []
    for path in sorted((ROOT / "nerbias").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        exempt = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id in CLASSIFICATIONS for t in node.targets)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in exempt:
                strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if len(strings) >= 3 and len(strings) == len(node.elts) and set(strings) <= keys:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {strings}")
    assert not found, "\n".join(found)


def test_the_name_pool_spelt_as_before_and_a_label_where_no_class_takes_one_are_refused(tmp_path):
    from nerbias.tasks.configuration import validate_config
    from nerbias.tasks.evaluations import build_benchmark

    with pytest.raises(ConfigError, match=r"^augment\.name_pool=ambiguous: the name pool is a config group: "
                                          r"augment/name_pool=ambiguous"):
        validate_config(compose_config("train", ["augment.name_pool=ambiguous"]))
    with pytest.raises(ConfigError, match=r"^augment\.kind: .*Augmentation\.configured takes no such argument"):
        validate_config(compose_config("train", ["+augment.kind=x"]))
    validate_config(compose_config("train", ["augment/name_pool=ambiguous", "+augment.name_pool.ambiguity.types=[LOC]"]),
                    ["+augment.name_pool.ambiguity.types=[LOC]"])  # a key of the nested group's files: accepted
    cfg = compose_config("evaluate", ["corpus=winogender", f"tagger.path={tmp_path}"])
    OmegaConf.set_struct(cfg, False)
    cfg.corpus.source.names = "x.csv"  # as a corpus YAML file of one's own might
    with pytest.raises(ConfigError, match=r"^corpus\.source\.names: set by the benchmark from corpus\.names"):
        build_benchmark(cfg)


def test_an_ambiguous_pool_needs_its_rule(tmp_path):
    from nerbias.bias.name_pools import NamePool

    with pytest.raises(NerbiasError, match=r"^augment\.name_pool\.ambiguity: needed with source=ambiguous"):
        NamePool(tmp_path, source="ambiguous")
    with pytest.raises(NerbiasError, match=r"^augment\.name_pool\.ambiguity: read only by the ambiguous pools"):
        NamePool(tmp_path, source="ssa_train_half", ambiguity={"min_typed": 1})


@pytest.mark.parametrize("overrides,message", [
    (["corpus=insitu", "corpus.source.rule=paper"], r"^corpus\.source\.rule='paper': must be single_token_unique or "
                                                   r"no_other_person$"),
    (["corpus=winogender", "corpus.source.templates=/no/such.tsv"], r"^corpus\.source\.templates='/no/such\.tsv': must "
                                                                    r"be an existing file$"),
    (["corpus=probes", "corpus.source.templates=/no/such.tsv"], r"^corpus\.source\.templates='/no/such\.tsv': must be "
                                                                r"an existing file, or null"),
])
def test_the_sentences_settings_are_checked_before_any_work(tmp_path, overrides, message):
    """A ``source`` partial's values, by the class it builds (before any work: after a training they would
    surface only once the training is done)."""
    from nerbias.tasks.configuration import validate_config

    (tmp_path / "best.pt").write_bytes(b"")
    with pytest.raises(ConfigError, match=message):
        validate_config(compose_config("evaluate", [*overrides, f"tagger.path={tmp_path / 'best.pt'}"]))
