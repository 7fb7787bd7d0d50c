"""The task layer: what the entry points run, and the only module that joins training and bias evaluation.

- ``run_training`` (``train.py``): train and score on CoNLL-03; with a ``bias_eval`` group
  (the ``mishra2020_*`` experiments), then evaluate the best checkpoint on the bias corpora.
- ``run_evaluation`` (``evaluate.py``): score a tagger on CoNLL-03 or on a bias corpus.

Each task builds its objects from the composed config and calls them, as
lightning-hydra-template's ``train.py`` / ``eval.py`` do.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from nerbias.bias.names import load_names
from nerbias.bias.runner import run_bias_evaluation
from nerbias.bias.taggers import CheckpointSlotTagger
from nerbias.bias.types import corpus_label
from nerbias.building import build
from nerbias.data.conll2003 import load_conll2003
from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_write_json
from nerbias.loggers import NullLogger, build_logger
from nerbias.scoring import score_splits
from nerbias.training.trainer import Trainer

log = logging.getLogger(__name__)


def _logger(cfg: DictConfig, output_dir: Path) -> NullLogger:
    resolved = OmegaConf.to_container(cfg, resolve=True)
    return build_logger(resolved.get("logger"), resolved, save_dir=output_dir)


def coverage_names(embeddings: DictConfig) -> dict[str, str] | None:
    """name -> group of the evaluation names whose pretrained-vector coverage training reports
    (``embeddings.coverage_names``: a name list CSV, null for the packaged one); None when the
    embeddings config has no such setting (random, ELMo)."""
    if "coverage_names" not in embeddings:
        return None
    names = load_names(embeddings.coverage_names)
    return {name: names.group_of[name] for name in names.names if name != names.oov}


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
            runs.append((corpus_label(str(name), bool(lowercase)), eval_cfg))
    return runs


def run_training(cfg: DictConfig, output_dir: str | Path) -> dict[str, float]:
    """Train and score on CoNLL-03; then, when ``bias_eval`` is set, evaluate the best checkpoint
    on the bias corpora into ``<run dir>/bias/<corpus>[_lower]/``, logged to the same W&B run."""
    output_dir = Path(output_dir)
    logger = _logger(cfg, output_dir)
    try:
        metrics = Trainer(cfg, output_dir, coverage_names=coverage_names(cfg.embeddings)).fit(logger)
        if cfg.get("bias_eval"):
            checkpoint = output_dir / "checkpoints" / "best.pt"
            for label, eval_cfg in bias_evaluation_configs(cfg, checkpoint):
                log.info("bias evaluation: %s", label)
                run_dir = output_dir / "bias" / label
                run_dir.mkdir(parents=True, exist_ok=True)
                metrics.update(run_bias_evaluation(eval_cfg, run_dir, logger))
        return metrics
    finally:
        logger.finish()


def evaluate_conll(cfg: DictConfig, output_dir: Path) -> dict[str, float]:
    """Our checkpoint on CoNLL-03 dev / test: metrics.json plus prediction files per split."""
    slot_tagger = build(cfg.tagger)
    if not isinstance(slot_tagger, CheckpointSlotTagger):
        raise NerbiasError(f"tagger={cfg.tagger.get('kind')} cannot be scored on CoNLL-03 (needs a checkpoint)")
    splits = load_conll2003(cfg.corpus.data_dir, splits=list(cfg.corpus.splits),
                            verify_sizes=cfg.corpus.get("verify_sizes", True))
    metrics = score_splits(slot_tagger.tagger, splits, cfg.tagger.batch_size, output_dir)
    atomic_write_json(output_dir / "metrics.json", {"metrics": metrics, "checkpoint": str(cfg.tagger.path)})
    return metrics


def run_evaluation(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    output_dir = Path(output_dir)
    logger = _logger(cfg, output_dir)
    try:
        if cfg.corpus.name == "conll2003":
            metrics = evaluate_conll(cfg, output_dir)
            logger.summary(metrics)
            return metrics
        return run_bias_evaluation(cfg, output_dir, logger)
    finally:
        logger.finish()


__all__ = ["run_training", "run_evaluation", "bias_evaluation_configs", "coverage_names"]
