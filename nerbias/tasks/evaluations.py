"""The evaluations the tasks run: a benchmark built from an evaluation config and called on a tagger, and,
after a training with a ``bias_eval`` group, the best checkpoint on each of its corpora and casings."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from nerbias.bias.name_profile import NameProfileJoin
from nerbias.bias.runner import EvaluationRun
from nerbias.bias.statistics import StatisticsOptions
from nerbias.bias.types import corpus_label
from nerbias.building import build
from nerbias.fileio import RESOLVED_CONFIG, atomic_write_text
from nerbias.loggers import NullLogger
from nerbias.reporting.options import ReportOptions
from nerbias.training.finished import evaluation_config_text, finished_evaluation, finished_training_job
from nerbias.training.trainer import release_memory
from nerbias.validation import ConfigError

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

        options = report_options(cfg)
        report = render_run_report(output_dir, bias_dirs, options, checkpoint=checkpoint)
        logger.artifact("paper-report", "report", report)
        log.info("report: %s", report)
        print(f"report written to {report}")
    return metrics


def report_options(cfg: DictConfig) -> ReportOptions:
    """The options of the report a training's bias evaluation ends with (``bias_eval.report``)."""
    options = build(cfg.bias_eval.report, "bias_eval.report.")
    if options.checkpoint is not None:
        raise ConfigError("bias_eval.report.checkpoint: a run's report always reads the run's own best checkpoint; "
                          "remove the key")
    return options


def check_bias_evaluation(cfg: DictConfig) -> None:
    """Build every benchmark and the report options of ``cfg.bias_eval`` (their settings are checked on
    building; nothing is read), so that a bad one stops the run before training, not after it."""
    for _, eval_cfg in bias_evaluation_configs(cfg, Path("best.pt")):
        build_benchmark(eval_cfg)
    if cfg.bias_eval.get("report"):
        report_options(cfg)


def finished_job(cfg: DictConfig, output_dir: Path) -> dict[str, Any] | None:
    """The metrics of a training job already finished in ``output_dir`` with this config and its bias
    evaluations (``training.finished.finished_training_job``), else None."""
    evaluations = bias_evaluation_configs(cfg, output_dir / "checkpoints" / "best.pt") if cfg.get("bias_eval") else []
    return finished_training_job(cfg, output_dir, evaluations, report=bool(cfg.get("bias_eval")
                                                                             and cfg.bias_eval.get("report")))


def evaluation_run(cfg: DictConfig) -> EvaluationRun:
    """What the benchmarks of an evaluation config share: its ``metrics`` and ``name_profile`` nodes (built)
    and its shard settings."""
    sharded = int(cfg.corpus.get("num_shards", 1) or 1) > 1  # shards_dir reads the run directory: only then
    return EvaluationRun(
        metrics=build(cfg.metrics, "metrics.") if cfg.get("metrics") else StatisticsOptions(),
        name_profile=build(cfg.name_profile, "name_profile.") if cfg.get("name_profile") else NameProfileJoin(),
        shards_dir=cfg.get("shards_dir") if sharded else None, merge_shards=bool(cfg.get("merge_shards")))


def build_benchmark(cfg: DictConfig) -> Any:
    """The benchmark of ``cfg.corpus`` (its ``_target_``: a benchmark class, the node's keys its arguments)."""
    return build(cfg.corpus, "corpus.", run=evaluation_run(cfg))


def evaluate_corpus(cfg: DictConfig, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
    """Build ``cfg.tagger`` and the benchmark of ``cfg.corpus``, and score the one on the other."""
    benchmark = build_benchmark(cfg)  # its settings are checked before the tagger is loaded
    return benchmark.evaluate(build(cfg.tagger, "tagger."), Path(output_dir), logger)
