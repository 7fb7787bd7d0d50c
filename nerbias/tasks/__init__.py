"""The task layer: what the entry points run, and the only package that joins training and bias evaluation.

- ``run_training`` (``train.py``): train and score on CoNLL-03; with a ``bias_eval`` group
  (``experiment=paper``, the ``mishra2020_*`` experiments), then evaluate the best checkpoint on
  the bias corpora and, when ``bias_eval.report`` is set, write one ``report.md`` over all of it.
- ``run_evaluation`` (``evaluate.py``): score a tagger on CoNLL-03 or on a bias corpus.

Beside them: ``configuration`` (what a config may hold, checked before any work; the schemas of the task's
own nodes) and ``evaluations`` (a benchmark called on a tagger; the bias evaluations after a training, and
whether a job already finished).

Each task builds its objects from the composed config and calls them, as
lightning-hydra-template's ``train.py`` / ``eval.py`` do: every node is its ``_target_``'s arguments
(``building.build``). A training builds the data, the embeddings, the model options, the augmentation and
the trainer settings and fits; an evaluation builds the benchmark (``corpus._target_``) and the tagger
(``tagger._target_``) and calls ``benchmark.evaluate(tagger, output_dir, logger)``, whatever the corpus or
the tagger.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from nerbias.bias.tagging import Tagger
from nerbias.building import build
from nerbias.fileio import RESOLVED_CONFIG, atomic_write_text, check_writable, exclusive_folder, record_hydra_run, remove_orphans
from nerbias.loggers import NullLogger, build_logger, model_artifact_name
from nerbias.tasks.configuration import coverage_names, name_labels, validate_config
from nerbias.tasks.evaluations import build_benchmark, check_bias_evaluation, evaluate_on_bias_corpora, finished_job
from nerbias.training.build import build_tagger
from nerbias.training.trainer import Trainer, release_memory

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


def run_training(cfg: DictConfig, output_dir: str | Path) -> dict[str, float]:
    """Train and score on CoNLL-03; then, when ``bias_eval`` is set, evaluate the best checkpoint
    on the bias corpora into ``<run dir>/bias/<corpus>[_lower]/``, logged to the same W&B run."""
    output_dir = Path(output_dir)
    validate_config(cfg, _command_line_overrides())
    if cfg.get("bias_eval"):  # the corpora's and the report's settings, before training
        check_bias_evaluation(cfg)
    with exclusive_folder(output_dir, "a training"):
        return _run_training(cfg, output_dir)


def _run_training(cfg: DictConfig, output_dir: Path) -> dict[str, float]:
    check_writable(output_dir / "checkpoints")  # before an epoch, not after it
    kept = finished_job(cfg, output_dir)
    if kept is not None:
        return kept
    if (output_dir / "metrics.json").is_file() and not (output_dir / "checkpoints" / "last.pt").is_file():
        log.warning("%s: results of a finished training but no checkpoint, and not all of this config's results "
                    "are there: training again from scratch (same seed: the same result but for float drift)", output_dir)
    run_config = OmegaConf.to_container(cfg, resolve=True)
    augmentation = build(cfg.augment, "augment.")
    embeddings = build(cfg.embeddings, "embeddings.")
    # new_tagger: the embeddings source and the model options; Trainer calls it once on the training
    # sentences (a resumed run rebuilds the checkpoint's tagger instead, by the same builder).
    trainer = Trainer(build(cfg.trainer, "trainer."),
                      new_tagger=functools.partial(build_tagger, embeddings=embeddings, seed=cfg.seed,
                                                   model=build(cfg.model, "model.").as_mapping(),
                                                   run_config=run_config, noise_types=augmentation.noise_types,
                                                   coverage_names=coverage_names(embeddings),
                                                   name_labels=name_labels(embeddings)),
                      output_dir=output_dir, seed=cfg.seed, run_config=run_config, augmentation=augmentation,
                      run_name=cfg.get("run_name"))
    trainer.check_start()  # a refused start writes nothing of ours into the run directory
    logger = _logger(cfg, output_dir)
    try:
        metrics = trainer.fit(build(cfg.data, "data.").load(), logger)
        if cfg.get("bias_eval"):
            release_memory()  # the training's tables and optimiser states are garbage now: give them back
            metrics.update(evaluate_on_bias_corpora(cfg, output_dir, logger))
        return metrics
    finally:
        logger.finish()


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
    benchmark = build_benchmark(cfg)  # settings checked, nothing read yet
    check_writable(output_dir)
    if int(cfg.corpus.get("num_shards", 1)) > 1 and cfg.get("shards_dir"):
        check_writable(cfg.shards_dir)
    logger = _logger(cfg, output_dir)
    try:
        tagger = build(cfg.tagger, "tagger.")
        _use_model_artifact(tagger, logger)
        return benchmark.evaluate(tagger, output_dir, logger)
    finally:
        logger.finish()


__all__ = ["run_training", "run_evaluation"]
