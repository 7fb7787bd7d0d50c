"""Whether a job's results are already there: a rerun of a sweep skips what finished with the same config
and redoes only what is missing or was set differently (``tasks.run_training`` asks before training)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

import yaml
from omegaconf import DictConfig, OmegaConf

from nerbias.fileio import RESOLVED_CONFIG, config_digest
from nerbias.training.run_identity import same_training
from nerbias.validation import BuildError, parameters_of, target_of

log = logging.getLogger(__name__)


def evaluation_config_text(eval_cfg: DictConfig) -> str:
    """An evaluation's config as its run directory saves it (``config_resolved.yaml``)."""
    return yaml.safe_dump(OmegaConf.to_container(eval_cfg), sort_keys=False)


# Corpus evaluations as named before every corpus was a benchmark class (``corpus.evaluate``, a partial of a
# function): saved configs of bias evaluations finished then read as today's, so a resumed run keeps them.
LEGACY_EVALUATIONS = {"nerbias.bias.runner.evaluate_names": "nerbias.bias.benchmarks.NameSubstitutionBenchmark",
                      "nerbias.bias.runner.evaluate_census": "nerbias.bias.benchmarks.CensusBenchmark",
                      "nerbias.bias.runner.evaluate_probes": "nerbias.bias.benchmarks.ProbesBenchmark",
                      "nerbias.tasks.evaluate_conll": "nerbias.scoring.Conll2003Benchmark"}


# Sentence builders that moved since a saved config named them.
MOVED_TARGETS = {"nerbias.bias.corpora.InSituCorpus.from_conll2003": "nerbias.bias.insitu.InSituCorpus.from_conll2003"}
# The top-level nodes of an evaluation config that became constructors' arguments on 2026-12-06.
NODE_TARGETS = {"metrics": "nerbias.bias.statistics.StatisticsOptions",
                "name_profile": "nerbias.bias.name_profile.NameProfileJoin"}


def current_config(saved: Any) -> Any:
    """A saved evaluation config (parsed) as this code writes it.

    - A corpus's ``evaluate`` partial of a legacy evaluation function becomes its benchmark class.
    - A corpus node whose ``benchmark._target_`` named the benchmark and whose own ``_target_`` built the
      sentences (before 2026-12-06) becomes the benchmark's arguments: the benchmark is the node's
      ``_target_``, and the sentence builder, with the keys it took besides the names and the casing, its
      ``source`` (a partial).
    - ``metrics`` and ``name_profile`` get the ``_target_`` they have since.
    """
    if not isinstance(saved, dict):
        return saved
    config = dict(saved)
    corpus = config.get("corpus")
    if isinstance(corpus, dict):
        corpus = dict(corpus)
        old = corpus.get("evaluate")
        if isinstance(old, dict) and set(old) == {"_target_", "_partial_"} and old["_target_"] in LEGACY_EVALUATIONS:
            corpus = {("benchmark" if key == "evaluate" else key):
                      ({"_target_": LEGACY_EVALUATIONS[old["_target_"]]} if key == "evaluate" else value)
                      for key, value in corpus.items()}
        benchmark = corpus.get("benchmark")
        if isinstance(benchmark, dict) and set(benchmark) == {"_target_"}:
            corpus = _benchmark_arguments(corpus)
        config["corpus"] = corpus
    for key, target in NODE_TARGETS.items():
        node = config.get(key)
        if isinstance(node, dict) and "_target_" not in node:
            config[key] = {"_target_": target, **node}
    return config


def _benchmark_arguments(corpus: dict[str, Any]) -> dict[str, Any]:
    """A corpus node of the layout before 2026-12-06 as the benchmark's arguments (``current_config``)."""
    builder = corpus.get("_target_")
    builder = MOVED_TARGETS.get(builder, builder)
    rest = {key: value for key, value in corpus.items() if key not in ("_target_", "benchmark")}
    node: dict[str, Any] = {"_target_": corpus["benchmark"]["_target_"]}
    if builder is None:
        return {**node, **rest}
    try:
        taken = (parameters_of(target_of(builder)) or set()) - {"names", "lowercase"}
    except BuildError:
        return corpus  # a builder that is gone: the saved config stays as it was (and reads as different)
    node["source"] = {"_target_": builder, "_partial_": True, **{k: v for k, v in rest.items() if k in taken}}
    return {**node, **{k: v for k, v in rest.items() if k not in taken}}


def finished_training_job(cfg: DictConfig, output_dir: Path, evaluations: Sequence[tuple[str, DictConfig]] = (),
                          report: bool = False) -> dict[str, Any] | None:
    """The metrics of a job already finished in ``output_dir`` with exactly this config, its bias
    ``evaluations`` (label, evaluation config: ``tasks.evaluations.bias_evaluation_configs``) and, when
    ``report``, its ``report.md``; else None.

    Finished means: ``trainer.resume=true``, training wrote its ``metrics.json`` (last, after scoring
    the best checkpoint) for this very config (the config's sha256 it records; runs from before it did
    are judged by ``config_resolved.yaml``, which every accepted attempt rewrites; a config saved by
    older code, without the keys added since, counts when its training is the same), and every bias
    evaluation (and
    the report, when one is asked for) is there with the same settings. Such a job needs no checkpoint:
    a study restored from its archive (``scripts/study_archive.py``) skips its finished jobs instead of
    training them again. Anything missing or set differently: None, and the job runs, resuming from
    ``last.pt`` when there is one (a restored job has none: it trains again, to the same result but for float drift, docs/training.md).
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
    # one its results belong to and it trains the same run to the same end (run_identity.same_training).
    if recorded != config_digest(resolved) and (recorded != config_digest(saved_resolved)
                                                 or not same_training(saved_resolved, resolved)):
        return None
    metrics = dict(saved["metrics"])
    for label, eval_cfg in evaluations:
        finished = finished_evaluation(output_dir / "bias" / label, evaluation_config_text(eval_cfg))
        if finished is None:
            return None
        metrics.update(finished)
    if report and not (output_dir / "report.md").is_file():
        return None
    log.info("%s: this job already finished with the same config (metrics.json, %s and its bias evaluations), "
             "kept", output_dir, RESOLVED_CONFIG)
    return metrics


def finished_evaluation(run_dir: Path, resolved: str) -> dict[str, Any] | None:
    """The metrics of an evaluation already finished in ``run_dir`` with exactly these settings
    (its saved config is the same, read as this code writes it, and its metrics.json, written last
    with the results, exists), else None: a rerun of a sweep job redoes only what is missing or was set
    differently."""
    config, metrics = run_dir / RESOLVED_CONFIG, run_dir / "metrics.json"
    if not (config.is_file() and metrics.is_file()):
        return None
    saved = config.read_text()
    if saved != resolved and current_config(yaml.safe_load(saved)) != yaml.safe_load(resolved):
        return None
    return json.loads(metrics.read_text())["metrics"]
