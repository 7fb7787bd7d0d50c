"""The task layer: what the entry points run, and the only module that joins training and bias evaluation.

- ``run_training`` (``train.py``): train and score on CoNLL-03; with a ``bias_eval`` group
  (``experiment=paper``, the ``mishra2020_*`` experiments), then evaluate the best checkpoint on
  the bias corpora and, when ``bias_eval.report`` is set, write one ``report.md`` over all of it.
- ``run_evaluation`` (``evaluate.py``): score a tagger on CoNLL-03 or on a bias corpus.

Each task builds its objects from the composed config and calls them, as
lightning-hydra-template's ``train.py`` / ``eval.py`` do: an evaluation builds the tagger
(``tagger._target_``) and the benchmark its corpus names (``corpus.benchmark._target_``) and calls
``benchmark.evaluate(tagger, output_dir, logger)``, whatever the corpus or the tagger.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any, Iterable

import yaml
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, OmegaConf

from nerbias.bias import name_pools
from nerbias.bias.names import load_names
from nerbias.bias.name_profile import PROFILE_KEYS
from nerbias.bias.runner import METRICS_KEYS
from nerbias.bias.statistics import NameStatistics
from nerbias.bias.tagging import Tagger
from nerbias.bias.types import corpus_label
from nerbias.building import build
from nerbias.data.ambiguity import AmbiguityRule
from nerbias.fileio import (RESOLVED_CONFIG, atomic_write_text, check_writable, config_digest, record_hydra_run,
                            remove_orphans)
from nerbias.loggers import NullLogger, build_logger, model_artifact_name
from nerbias.models.bilstm_crf import MODEL_KEYS, TaggerConfig, WordCharEmbedder
from nerbias.reporting.options import ReportOptions
from nerbias.training.augment import DEFAULT_ADVERSARIAL_CONTEXT, DEFAULT_MENTION_MASK_FOLLOWING, Augmentation
from nerbias.training.build import build_tagger
from nerbias.training.trainer import (DATA_KEYS, TRAINER_KEYS, Trainer, TrainerSettings, load_data, release_memory,
                                      same_training)
from nerbias.validation import check_config_keys, validate

log = logging.getLogger(__name__)


def _command_line_overrides() -> list[str]:
    """The overrides of the running Hydra app (none when called from Python)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def _logger(cfg: DictConfig, output_dir: Path) -> NullLogger:
    """The run's logger; Hydra's record of the run and the fully resolved config beside it are saved
    first, so readers of the run (report.py, aggregate.py) never depend on this process's environment
    variables. Temporary files of a killed earlier attempt in the run directory are removed first."""
    for folder in (output_dir, output_dir / "checkpoints", output_dir / ".hydra"):
        for orphan in remove_orphans(folder):
            log.info("removed %s, left by a killed write", orphan)
    record_hydra_run(cfg, output_dir)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    atomic_write_text(output_dir / RESOLVED_CONFIG, yaml.safe_dump(resolved, sort_keys=False))
    return build_logger(resolved.get("logger"), resolved, save_dir=output_dir)


def coverage_names(embeddings: DictConfig) -> dict[str, str] | None:
    """name -> group of the evaluation names whose pretrained-vector coverage training reports
    (``embeddings.coverage_names``: a name list CSV, null for the packaged one); None when the
    embeddings config has no such setting (random, ELMo)."""
    if "coverage_names" not in embeddings:
        return None
    names = load_names(embeddings.coverage_names)
    return {name: names.group_of[name] for name in names.names if name != names.oov}


def name_labels(embeddings: DictConfig) -> dict[str, dict[str, str]] | None:
    """What the residual-bias classifier of de-biased or normalised runs predicts from the same names:
    target (gender, race; the group when the list has neither column) -> name -> label."""
    if "coverage_names" not in embeddings:
        return None
    names = load_names(embeddings.coverage_names)
    evaluated = [name for name in names.names if name != names.oov]
    targets = {"gender": names.gender_of, "race": names.race_of}
    labels = {target: {name: of[name] for name in evaluated} for target, of in targets.items() if of}
    return labels or {"group": {name: names.group_of[name] for name in evaluated}}


# The keys the tasks read themselves: the top level, ``paths``, ``augment`` (build_augmentation),
# beside the ``_target_`` parameters of ``embeddings``, ``tagger`` and ``logger`` their ``kind`` (a
# label for runs and tables) and the embeddings' ``coverage_names``; a corpus's keys are its benchmark's.
TOP_LEVEL_KEYS = ("task_name", "seed", "run_name", "run_tags", "sweep_id", "condition", "shards_dir", "merge_shards",
                  "paths", "data", "embeddings", "model", "trainer", "augment", "logger", "bias_eval", "tagger",
                  "corpus", "metrics", "name_profile")
PATHS_KEYS = ("data_dir", "log_dir", "output_dir")
AUGMENT_KEYS = ("lowercase", "names", "place_names", "entity_mask", "mention_mask", "mention_mask_following", "adversarial",
                "adversarial_context", "adversarial_context_per_side", "name_pool", "ambiguity", "pool_exclude")
BIAS_EVAL_KEYS = ("corpora", "lowercase", "tagger", "metrics", "name_profile", "report")
# A paper run's report always reads the run's own best checkpoint (pipeline.render_run_report): a
# ``checkpoint`` set in the config would be read by nothing.
REPORT_KEYS = tuple(key for key in ReportOptions.__dataclass_fields__ if key != "checkpoint")


def config_reads(cfg: DictConfig) -> dict[str, tuple[str, ...]]:
    """Node by node, the keys the code that ``cfg`` runs reads besides the nodes' ``_target_``
    parameters (validation.check_config_keys): any other key is read by nothing."""
    def corpus(node: Any) -> tuple[str, ...]:
        """What the corpus's benchmark reads of its node (the benchmark class's CORPUS_KEYS)."""
        target = OmegaConf.select(node, "benchmark._target_", default=None) if isinstance(node, DictConfig) else None
        try:
            return tuple(get_object(target).CORPUS_KEYS) if target else ()
        except Exception:  # noqa: BLE001 - a misspelt target: check_targets names it first
            return ()

    model = MODEL_KEYS
    reads = {"": TOP_LEVEL_KEYS, "paths": PATHS_KEYS, "data": DATA_KEYS, "trainer": TRAINER_KEYS, "model": model,
             "augment": AUGMENT_KEYS, "augment.ambiguity": tuple(AmbiguityRule.__dataclass_fields__),
             "embeddings": ("kind", "coverage_names"), "tagger": ("kind",), "logger": ("kind",),
             "metrics": METRICS_KEYS, "name_profile": PROFILE_KEYS, "bias_eval": BIAS_EVAL_KEYS,
             "bias_eval.tagger": ("kind",), "bias_eval.metrics": METRICS_KEYS,
             "bias_eval.name_profile": PROFILE_KEYS, "bias_eval.report": REPORT_KEYS}
    if "corpus" in cfg:
        reads["corpus"] = corpus(cfg.corpus)
    for label, node in (OmegaConf.select(cfg, "bias_eval.corpora", default=None) or {}).items():
        reads[f"bias_eval.corpora.{label}"] = corpus(node)
    return reads


# The classes that receive the config nodes without a ``_target_`` state what their values may be
# (``check_values``); a node with a ``_target_`` is checked by the class it builds (validation.validate).
VALUE_OWNERS = (("trainer", TrainerSettings), ("model", TaggerConfig), ("model", WordCharEmbedder),
                ("augment", Augmentation), ("augment.ambiguity", AmbiguityRule), ("metrics", NameStatistics),
                ("bias_eval.metrics", NameStatistics), ("bias_eval.report", ReportOptions))


def validate_config(cfg: DictConfig, overrides: Iterable[str] = ()) -> None:
    """Everything a task checks before any work: each value, by its owner's rules, and each key."""
    validate(cfg, overrides, VALUE_OWNERS)
    check_config_keys(cfg, config_reads(cfg))


def build_augmentation(cfg: DictConfig) -> Augmentation:
    """The ``augment`` group as an Augmentation; its name pool (``augment.name_pool``, read only when
    names or place names are substituted) is built by ``nerbias.bias.name_pools``."""
    spec = cfg.get("augment") or {}
    pool: tuple[str, ...] = ()
    org_pool: tuple[str, ...] = ()
    place_names = float(spec.get("place_names", 0) or 0)
    if float(spec.get("names", 0) or 0) > 0 or place_names > 0:
        ambiguity = OmegaConf.to_container(spec.get("ambiguity") or {}, resolve=True)
        pool = name_pools.substitution_names(cfg.paths.data_dir, str(spec.get("name_pool") or "ssa_train_half"),
                                             list(spec.get("pool_exclude") or [None]), ambiguity)
        if place_names > 0:
            org_pool = name_pools.organisation_names(cfg.paths.data_dir, pool)
    return Augmentation(lowercase=float(spec.get("lowercase", 0) or 0), names=float(spec.get("names", 0) or 0),
                        entity_mask=float(spec.get("entity_mask", 0) or 0), name_pool=pool,
                        place_names=place_names, org_pool=org_pool,
                        adversarial=float(spec.get("adversarial", 0) or 0),
                        adversarial_context=spec.get("adversarial_context", DEFAULT_ADVERSARIAL_CONTEXT),
                        adversarial_context_per_side=spec.get("adversarial_context_per_side", False),
                        mention_mask=float(spec.get("mention_mask", 0) or 0),
                        mention_mask_following=spec.get("mention_mask_following", DEFAULT_MENTION_MASK_FOLLOWING))


def bias_evaluation_configs(cfg: DictConfig, checkpoint: Path) -> list[tuple[str, DictConfig]]:
    """One evaluate-style config per (corpus, casing) of ``cfg.bias_eval``, for ``checkpoint``.

    The corpora are the ``corpus`` group's configs, composed into ``bias_eval.corpora`` by Hydra
    (``configs/bias_eval/*.yaml``), so the settings are those evaluate.py uses.
    """
    spec = cfg.bias_eval
    tagger = {**OmegaConf.to_container(spec.tagger, resolve=True), "path": str(checkpoint)}
    runs = []
    for name, corpus in spec.corpora.items():
        for lowercase in spec.lowercase:
            eval_cfg = OmegaConf.create({
                "paths": OmegaConf.to_container(cfg.paths, resolve=True), "seed": cfg.seed,
                "corpus": {**OmegaConf.to_container(corpus, resolve=True), "lowercase": bool(lowercase)},
                "tagger": tagger, "metrics": OmegaConf.to_container(spec.metrics, resolve=True),
                "shards_dir": None, "merge_shards": False})
            if OmegaConf.select(spec, "name_profile.enabled"):  # only when on: finished runs' configs stay equal
                eval_cfg.name_profile = OmegaConf.to_container(spec.name_profile, resolve=True)
            runs.append((corpus_label(str(name), bool(lowercase)), eval_cfg))
    return runs


def run_training(cfg: DictConfig, output_dir: str | Path) -> dict[str, float]:
    """Train and score on CoNLL-03; then, when ``bias_eval`` is set, evaluate the best checkpoint
    on the bias corpora into ``<run dir>/bias/<corpus>[_lower]/``, logged to the same W&B run."""
    output_dir = Path(output_dir)
    validate_config(cfg, _command_line_overrides())
    if cfg.get("bias_eval") and cfg.bias_eval.get("report"):  # its options (the ambiguity rule) before training
        ReportOptions(**OmegaConf.to_container(cfg.bias_eval.report, resolve=True))
    check_writable(output_dir / "checkpoints")  # before an epoch, not after it
    kept = finished_job(cfg, output_dir)
    if kept is not None:
        return kept
    if (output_dir / "metrics.json").is_file() and not (output_dir / "checkpoints" / "last.pt").is_file():
        log.warning("%s: results of a finished training but no checkpoint, and not all of this config's results "
                    "are there: training again from scratch (same seed, same result)", output_dir)
    settings = {key: value for key, value in OmegaConf.to_container(cfg.trainer, resolve=True).items()
                if key != "optimizer"}
    run_config = OmegaConf.to_container(cfg, resolve=True)
    augmentation = build_augmentation(cfg)
    # new_tagger: the embeddings source (its _target_) and the model options; Trainer calls it once on the
    # training sentences (a resumed run rebuilds the checkpoint's tagger instead, by the same builder).
    trainer = Trainer(TrainerSettings(**settings), optimizer=instantiate(cfg.trainer.optimizer),
                      new_tagger=functools.partial(build_tagger, embeddings=build(cfg.embeddings), seed=cfg.seed,
                                                   model=OmegaConf.to_container(cfg.model, resolve=True),
                                                   run_config=run_config, noise_types=augmentation.noise_types,
                                                   coverage_names=coverage_names(cfg.embeddings),
                                                   name_labels=name_labels(cfg.embeddings)),
                      output_dir=output_dir, seed=cfg.seed, run_config=run_config, augmentation=augmentation,
                      run_name=cfg.get("run_name"))
    trainer.check_start()  # a refused start writes nothing of ours into the run directory
    logger = _logger(cfg, output_dir)
    try:
        metrics = trainer.fit(load_data(cfg.data), logger)
        if cfg.get("bias_eval"):
            release_memory()  # the training's tables and optimiser states are garbage now: give them back
            checkpoint = output_dir / "checkpoints" / "best.pt"
            bias_dirs = []
            for label, eval_cfg in bias_evaluation_configs(cfg, checkpoint):
                log.info("bias evaluation: %s", label)
                run_dir = output_dir / "bias" / label
                resolved = yaml.safe_dump(OmegaConf.to_container(eval_cfg), sort_keys=False)
                finished = _finished_evaluation(run_dir, resolved)
                if finished is not None:  # a resumed run: same settings, results final (written together)
                    log.info("bias evaluation %s: already finished in %s, kept", label, run_dir)
                    metrics.update(finished)
                else:
                    atomic_write_text(run_dir / RESOLVED_CONFIG, resolved)
                    metrics.update(evaluate_corpus(eval_cfg, run_dir, logger))
                    release_memory()
                bias_dirs.append(run_dir)
            if cfg.bias_eval.get("report"):
                from nerbias.reporting.pipeline import render_run_report  # scipy and matplotlib: only when used

                options = ReportOptions(**OmegaConf.to_container(cfg.bias_eval.report, resolve=True))
                report = render_run_report(output_dir, bias_dirs, options, checkpoint=checkpoint)
                logger.artifact("paper-report", "report", report)
                log.info("report: %s", report)
                print(f"report written to {report}")
        return metrics
    finally:
        logger.finish()


# Corpus evaluations as named before every corpus was a benchmark class (``corpus.evaluate``, a partial of a
# function): saved configs of bias evaluations finished then read as today's, so a resumed run keeps them.
LEGACY_EVALUATIONS = {"nerbias.bias.runner.evaluate_names": "nerbias.bias.benchmarks.NameSubstitutionBenchmark",
                      "nerbias.bias.runner.evaluate_census": "nerbias.bias.benchmarks.CensusBenchmark",
                      "nerbias.bias.runner.evaluate_probes": "nerbias.bias.benchmarks.ProbesBenchmark",
                      "nerbias.tasks.evaluate_conll": "nerbias.scoring.Conll2003Benchmark"}


def current_config_text(saved: str) -> str:
    """A saved evaluation config as this code writes it: a corpus's ``evaluate`` partial of a legacy
    evaluation function becomes the ``benchmark`` of its class, in the same place; other text is kept."""
    config = yaml.safe_load(saved)
    corpus = config.get("corpus") if isinstance(config, dict) else None
    old = corpus.get("evaluate") if isinstance(corpus, dict) else None
    if not isinstance(old, dict) or set(old) != {"_target_", "_partial_"} or \
            old["_target_"] not in LEGACY_EVALUATIONS:
        return saved
    config["corpus"] = {("benchmark" if key == "evaluate" else key):
                        ({"_target_": LEGACY_EVALUATIONS[old["_target_"]]} if key == "evaluate" else value)
                        for key, value in corpus.items()}
    return yaml.safe_dump(config, sort_keys=False)


def finished_job(cfg: DictConfig, output_dir: Path) -> dict[str, Any] | None:
    """The metrics of a job already finished in ``output_dir`` with exactly this config, else None.

    Finished means: ``trainer.resume=true``, training wrote its ``metrics.json`` (last, after scoring
    the best checkpoint) for this very config (the config's sha256 it records; runs from before it did
    are judged by ``config_resolved.yaml``, which every accepted attempt rewrites; a config saved by
    older code, without the keys added since, counts when its training is the same), and every bias
    evaluation (and
    the report, when one is asked for) is there with the same settings. Such a job needs no checkpoint:
    a study restored from its archive (``scripts/study_archive.py``) skips its finished jobs instead of
    training them again. Anything missing or set differently: None, and the job runs, resuming from
    ``last.pt`` when there is one (a restored job has none: it trains again, to the same result).
    """
    if OmegaConf.select(cfg, "trainer.resume") not in (True, "true"):  # a path resumes from that checkpoint
        return None
    saved_config, saved_metrics = output_dir / RESOLVED_CONFIG, output_dir / "metrics.json"
    if not (saved_config.is_file() and saved_metrics.is_file()):
        return None
    resolved = OmegaConf.to_container(cfg, resolve=True)
    saved = json.loads(saved_metrics.read_text(encoding="utf-8"))
    saved_resolved = yaml.safe_load(saved_config.read_text(encoding="utf-8")) or {}
    recorded = saved.get("config_sha256", config_digest(saved_resolved))
    # A config written by older code lacks the keys added since: the same job when the saved config is the
    # one its results belong to and it trains the same run to the same end (trainer.same_training).
    if recorded != config_digest(resolved) and (recorded != config_digest(saved_resolved)
                                                 or not same_training(saved_resolved, resolved)):
        return None
    metrics = dict(saved["metrics"])
    if cfg.get("bias_eval"):
        for label, eval_cfg in bias_evaluation_configs(cfg, output_dir / "checkpoints" / "best.pt"):
            resolved = yaml.safe_dump(OmegaConf.to_container(eval_cfg), sort_keys=False)
            finished = _finished_evaluation(output_dir / "bias" / label, resolved)
            if finished is None:
                return None
            metrics.update(finished)
        if cfg.bias_eval.get("report") and not (output_dir / "report.md").is_file():
            return None
    log.info("%s: this job already finished with the same config (metrics.json, %s and its bias evaluations), "
             "kept", output_dir, RESOLVED_CONFIG)
    return metrics


def _finished_evaluation(run_dir: Path, resolved: str) -> dict[str, Any] | None:
    """The metrics of an evaluation already finished in ``run_dir`` with exactly these settings
    (its saved config is the same text, read as this code writes it, and its metrics.json, written last
    with the results, exists), else None: a rerun of a sweep job redoes only what is missing or was set
    differently."""
    config, metrics = run_dir / RESOLVED_CONFIG, run_dir / "metrics.json"
    if not (config.is_file() and metrics.is_file()):
        return None
    saved = config.read_text()
    if saved != resolved and current_config_text(saved) != resolved:
        return None
    return json.loads(metrics.read_text())["metrics"]


def build_benchmark(cfg: DictConfig) -> Any:
    """The benchmark ``cfg.corpus`` names (``corpus.benchmark._target_``), built with the evaluation's config."""
    return build(cfg.corpus.benchmark, config=cfg)


def evaluate_corpus(cfg: DictConfig, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
    """Build ``cfg.tagger`` and the benchmark of ``cfg.corpus``, and score the one on the other."""
    tagger, benchmark = build(cfg.tagger), build_benchmark(cfg)
    return benchmark.evaluate(tagger, Path(output_dir), logger)


def _use_model_artifact(tagger: Tagger, logger: NullLogger) -> None:
    """Lineage: an evaluation whose tagger reads one of our checkpoints consumes the model artifact its
    training logged (``Tagger.lineage``)."""
    if logger.run is None:  # no W&B run records lineage
        return
    lineage = tagger.lineage()
    if lineage is not None:
        logger.use_artifact(model_artifact_name(lineage.run_name), "model", lineage.path)


def run_evaluation(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    output_dir = Path(output_dir)
    validate_config(cfg, _command_line_overrides())
    check_writable(output_dir)
    if int(cfg.corpus.get("num_shards", 1)) > 1 and cfg.get("shards_dir"):
        check_writable(cfg.shards_dir)
    logger = _logger(cfg, output_dir)
    try:
        tagger, benchmark = build(cfg.tagger), build_benchmark(cfg)
        _use_model_artifact(tagger, logger)
        return benchmark.evaluate(tagger, output_dir, logger)
    finally:
        logger.finish()


__all__ = ["run_training", "run_evaluation", "bias_evaluation_configs", "coverage_names"]
