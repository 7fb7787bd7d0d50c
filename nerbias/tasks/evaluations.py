"""The evaluations the tasks run: a benchmark built from an evaluation config and called on a tagger, and,
after a training with a ``bias_eval`` group, the best checkpoint on each of its corpora and casings."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from nerbias.bias.types import corpus_label
from nerbias.building import build
from nerbias.fileio import RESOLVED_CONFIG, atomic_write_text
from nerbias.loggers import NullLogger
from nerbias.reporting.options import ReportOptions
from nerbias.training.finished import evaluation_config_text, finished_evaluation, finished_training_job
from nerbias.training.trainer import release_memory

log = logging.getLogger(__name__)


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


def evaluate_on_bias_corpora(cfg: DictConfig, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
    """The run's best checkpoint on each corpus and casing of ``cfg.bias_eval``, into
    ``<run dir>/bias/<corpus>[_lower]/`` (an evaluation finished with the same settings is kept), then the
    run's ``report.md`` when ``bias_eval.report`` asks for one; their metrics."""
    metrics: dict[str, Any] = {}
    checkpoint = output_dir / "checkpoints" / "best.pt"
    bias_dirs = []
    for label, eval_cfg in bias_evaluation_configs(cfg, checkpoint):
        log.info("bias evaluation: %s", label)
        run_dir = output_dir / "bias" / label
        resolved = evaluation_config_text(eval_cfg)
        finished = finished_evaluation(run_dir, resolved)
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


def finished_job(cfg: DictConfig, output_dir: Path) -> dict[str, Any] | None:
    """The metrics of a training job already finished in ``output_dir`` with this config and its bias
    evaluations (``training.finished.finished_training_job``), else None."""
    evaluations = bias_evaluation_configs(cfg, output_dir / "checkpoints" / "best.pt") if cfg.get("bias_eval") else []
    return finished_training_job(cfg, output_dir, evaluations, report=bool(cfg.get("bias_eval")
                                                                             and cfg.bias_eval.get("report")))


def build_benchmark(cfg: DictConfig) -> Any:
    """The benchmark ``cfg.corpus`` names (``corpus.benchmark._target_``), built with the evaluation's config."""
    return build(cfg.corpus.benchmark, config=cfg)


def evaluate_corpus(cfg: DictConfig, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
    """Build ``cfg.tagger`` and the benchmark of ``cfg.corpus``, and score the one on the other."""
    tagger, benchmark = build(cfg.tagger), build_benchmark(cfg)
    return benchmark.evaluate(tagger, Path(output_dir), logger)
