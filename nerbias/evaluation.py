"""evaluate.py's work: score a tagger on a corpus and write the results into the run directory."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from nerbias.data import load_conll2003
from nerbias.errors import NerbiasError
from nerbias.io import atomic_write_json
from nerbias.loggers import build_logger
from nerbias.tagger import NerTagger
from nerbias.trainer import evaluate_split, write_predictions

log = logging.getLogger(__name__)


def load_tagger(cfg: Mapping[str, Any]) -> NerTagger:
    if cfg["kind"] != "checkpoint":
        raise NerbiasError(f"tagger.kind={cfg['kind']} cannot be scored on CoNLL-03 (needs a checkpoint)")
    return NerTagger.load(cfg["path"], device=cfg.get("device", "cpu"))


def evaluate_conll(cfg: DictConfig, output_dir: Path) -> dict[str, float]:
    tagger = load_tagger(cfg.tagger)
    splits = load_conll2003(cfg.corpus.data_dir, splits=list(cfg.corpus.splits),
                            verify_sizes=cfg.corpus.get("verify_sizes", True))
    metrics: dict[str, float] = {}
    for split, sentences in splits.items():
        scores, predictions = evaluate_split(tagger, sentences, cfg.tagger.batch_size, split, confidences=True)
        write_predictions(output_dir, f"{split}_predictions", sentences, predictions)
        metrics.update({f"{split}_{key}": value for key, value in scores.items()})
    atomic_write_json(output_dir / "metrics.json", {"metrics": metrics, "checkpoint": str(cfg.tagger.path)})
    return metrics


def run_evaluation(cfg: DictConfig, output_dir: str | Path) -> dict[str, float]:
    output_dir = Path(output_dir)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    logger = build_logger(resolved.get("logger"), resolved, save_dir=output_dir)
    try:
        if cfg.corpus.name == "conll2003":
            metrics = evaluate_conll(cfg, output_dir)
            logger.summary(metrics)
            return metrics
        from nerbias.bias_eval import run_bias_evaluation

        return run_bias_evaluation(cfg, output_dir, logger)
    finally:
        logger.finish()
