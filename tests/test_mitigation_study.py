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
from nerbias.training.finished import finished_evaluation

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
    "context": (None, 0.0, 0.5, 0.0, None, 0.25, "ambiguous"),
    "ghaddar_noise": (None, 0.0, 0.0, 0.0, None, 0.5, "ssa_train_half"),  # and the context counted on each side
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
           cfg.embeddings.normalize, cfg.augment.adversarial, cfg.augment.name_pool.source)
    assert got == CONDITIONS[condition]
    assert cfg.augment.adversarial_context_per_side is (condition == "ghaddar_noise")
    assert cfg.embeddings.kind == "glove" and cfg.trainer.max_epochs == 50 and cfg.trainer.patience == 8  # to convergence
    oov = cfg.bias_eval.corpora.winogender_oov
    assert oov.names == "oov_set" and oov.seed == 0 and cfg.bias_eval.corpora.insitu_oov.names == "oov_set"
    census = cfg.bias_eval.corpora.census
    assert census.names == "heldout" and list(census.pool_exclude) == list(cfg.augment.name_pool.exclude)
    assert cfg.bias_eval.corpora.winogender.seed == 0  # one sample for every condition and seed
    assert cfg.bias_eval.corpora.probes._target_.endswith("ProbesBenchmark")  # person vs place contexts


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
    assert finished_evaluation(tmp_path, "corpus: {sample: 10}\n") is None  # no results yet: redo
    (tmp_path / "metrics.json").write_text(json.dumps({"metrics": {"winogender/ALL/accuracy": 0.5}}))
    assert finished_evaluation(tmp_path, "corpus: {sample: 10}\n") == {"winogender/ALL/accuracy": 0.5}
    assert finished_evaluation(tmp_path, "corpus: {sample: 20}\n") is None  # other settings: redo


def test_a_census_name_subset_typo_stops_before_training():
    from nerbias.validation import ConfigError, validate
    cfg = compose_config("train", ["experiment=mitigation_study", "bias_eval.corpora.census.names=held"])
    with pytest.raises(ConfigError, match="bias_eval.corpora.census.names='held': must be all or heldout"):
        validate(cfg)
    with pytest.raises(ConfigError, match="corpus.names='half'"):
        validate(compose_config("evaluate", ["corpus=census", "corpus.names=half"]))
    validate(compose_config("evaluate", ["corpus=census", "corpus.names=heldout", "tagger=spacy"]))


def _finish_job_on_disk(cfg, run_dir) -> dict:
    """What a finished sweep job leaves, without its checkpoints (as a study archive restores it)."""
    import yaml
    from omegaconf import OmegaConf
    from nerbias.tasks.evaluations import bias_evaluation_configs
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config_resolved.yaml").write_text(yaml.safe_dump(OmegaConf.to_container(cfg, resolve=True),
                                                                 sort_keys=False))
    (run_dir / "metrics.json").write_text(json.dumps({"metrics": {"test_f1": 0.9}}))
    expected = {"test_f1": 0.9}
    for number, (label, eval_cfg) in enumerate(bias_evaluation_configs(cfg, run_dir / "checkpoints" / "best.pt")):
        folder = run_dir / "bias" / label
        folder.mkdir(parents=True)
        (folder / "config_resolved.yaml").write_text(yaml.safe_dump(OmegaConf.to_container(eval_cfg), sort_keys=False))
        (folder / "metrics.json").write_text(json.dumps({"metrics": {f"{label}/ALL": number}}))
        expected[f"{label}/ALL"] = number
    return expected


def test_a_finished_job_is_kept_without_its_checkpoints_only_when_every_part_is_there(tmp_path):
    from nerbias.tasks.evaluations import finished_job
    run_dir = tmp_path / "baseline-seed1"
    overrides = ["experiment=mitigation_study", "logger=none", "seed=1", f"paths.output_dir={run_dir}",
                 "trainer.resume=true"]
    cfg = compose_config("train", overrides)
    expected = _finish_job_on_disk(cfg, run_dir)
    assert len(expected) == 1 + 12 and finished_job(cfg, run_dir) == expected
    assert finished_job(compose_config("train", overrides[:-1]), run_dir) is None  # not resuming: train
    assert finished_job(compose_config("train", overrides[:2] + ["seed=2"] + overrides[3:]), run_dir) is None
    from nerbias.fileio import config_digest
    from omegaconf import OmegaConf
    recorded = {"metrics": {"test_f1": 0.9}, "config_sha256": config_digest(OmegaConf.to_container(cfg, resolve=True))}
    (run_dir / "metrics.json").write_text(json.dumps(recorded))
    assert finished_job(cfg, run_dir) == expected  # the results say which config they belong to
    stale = compose_config("train", overrides + ["trainer.max_epochs=20"])
    (run_dir / "metrics.json").write_text(json.dumps({**recorded, "config_sha256": config_digest(
        OmegaConf.to_container(stale, resolve=True))}))
    assert finished_job(cfg, run_dir) is None  # finished under another config; this one was only started
    import copy
    import yaml
    older = OmegaConf.to_container(cfg, resolve=True)
    for key in ("place_names", "mention_mask", "mention_mask_following", "adversarial_context_per_side"):
        del older["augment"][key]  # as code before those keys wrote it
    for change, kept in ((None, True), (("augment", "names", 0.7), False), (("trainer", "max_epochs", 99), False)):
        saved = copy.deepcopy(older)
        if change:
            saved[change[0]][change[1]] = change[2]
        (run_dir / "config_resolved.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
        (run_dir / "metrics.json").write_text(json.dumps({**recorded, "config_sha256": config_digest(saved)}))
        assert (finished_job(cfg, run_dir) == expected) is kept, change
    (run_dir / "config_resolved.yaml").write_text(yaml.safe_dump(older, sort_keys=False))
    stale = {**recorded, "config_sha256": config_digest(OmegaConf.to_container(
        compose_config("train", overrides + ["augment.names=0.7"]), resolve=True))}
    (run_dir / "metrics.json").write_text(json.dumps(stale))  # the results belong to neither config
    assert finished_job(cfg, run_dir) is None
    (run_dir / "metrics.json").write_text(json.dumps({**recorded, "config_sha256": config_digest(older)}))
    (run_dir / "bias" / "probes_lower" / "metrics.json").unlink()  # one evaluation missing: run the job
    assert finished_job(cfg, run_dir) is None


def test_a_rerun_of_a_finished_job_whose_checkpoints_are_gone_trains_nothing(tmp_path):
    from helpers import make_tiny_conll, tiny_train_overrides
    from nerbias.tasks import run_training
    from nerbias.testing import one_thread
    data_dir = make_tiny_conll(tmp_path / "data")
    run_dir = tmp_path / "run"
    cfg = compose_config("train", tiny_train_overrides(data_dir, epochs=1) +
                         [f"paths.output_dir={run_dir}", "trainer.resume=true"])
    with one_thread():
        metrics = run_training(cfg, run_dir)
        for checkpoint in (run_dir / "checkpoints").iterdir():
            checkpoint.unlink()
        written = (run_dir / "metrics.json").stat().st_mtime_ns
        assert run_training(cfg, run_dir) == metrics
    assert not list((run_dir / "checkpoints").iterdir()) and (run_dir / "metrics.json").stat().st_mtime_ns == written


def test_a_sweep_packs_each_finished_job_and_a_restored_sweep_reruns_without_training(tmp_path):
    """The study's archive loop end to end: train.py -m with the pack callback, the sweep directory lost
    (checkpoints and all), the archive unpacked into its place, the same command rerun: nothing trained."""
    import shutil
    from helpers import make_tiny_conll, run_script, tiny_train_overrides
    data_dir = make_tiny_conll(tmp_path / "data")
    sweep, archive = tmp_path / "sweep", tmp_path / "archive"
    command = [*tiny_train_overrides(data_dir, epochs=1), f"hydra.sweep.dir={sweep}", "seed=1,2",
               "+hydra.callbacks.study_archive._target_=nerbias.study.archive.PackEachFinishedJob",
               f"+hydra.callbacks.study_archive.archive_dir={archive}"]
    first = run_script("train.py", ["-m", *command], env={"OMP_NUM_THREADS": "1"})
    assert first.returncode == 0, first.stderr
    jobs = sorted(p.name for p in archive.iterdir())
    assert jobs == ["0", "1"] and all((archive / job / "MANIFEST.sha256").is_file() for job in jobs)
    metrics = {job: json.loads((sweep / job / "metrics.json").read_text()) for job in jobs}
    again = run_script("scripts/study_archive.py", ["unpack", str(archive), str(sweep)])  # nothing lacking
    assert again.returncode == 0 and "restored 0 jobs" in again.stdout, again.stderr
    shutil.rmtree(sweep)
    assert run_script("scripts/study_archive.py", ["unpack", str(archive), str(sweep)]).returncode == 0
    check = run_script("scripts/study_archive.py", ["check", str(sweep)])
    assert check.returncode == 0 and check.stdout.splitlines() == ["0: kept", "1: kept"], check.stderr
    again = run_script("train.py", ["-m", *command], env={"OMP_NUM_THREADS": "1"})
    assert again.returncode == 0, again.stderr
    assert (again.stdout + again.stderr).count("already finished with the same config") == 2, again.stderr
    for job in jobs:
        assert json.loads((sweep / job / "metrics.json").read_text()) == metrics[job]
        assert not list((sweep / job / "checkpoints").glob("*.pt"))
