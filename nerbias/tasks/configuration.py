"""What the tasks check in a composed config before any work (``validate_config``), and the name lists training
reports on.

Every node that code reads is a constructor's arguments (its ``_target_``): ``building.build`` and
``validation.check_config_keys`` accept no other key. The nodes no constructor receives are the task's own,
described here by their schemas: the top level (``TaskConfig``), ``paths`` and ``bias_eval``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable

from omegaconf import DictConfig

from nerbias.bias.names import load_names
from nerbias.validation import validate

log = logging.getLogger(__name__)


@dataclass
class TaskConfig:
    """The top level of train.py's and evaluate.py's configs (configs/train.yaml, configs/evaluate.yaml)."""

    task_name: str
    seed: int
    run_name: str | None = None    # W&B run name
    run_tags: list | None = None   # W&B tags
    sweep_id: str | None = None    # W&B group of a sweep
    condition: str | None = None   # the mitigation study's or the context selection's condition (configs/mitigation/)
    paths: Any = None
    # train.py
    data: Any = None
    embeddings: Any = None
    model: Any = None
    trainer: Any = None
    augment: Any = None
    bias_eval: Any = None
    # evaluate.py
    tagger: Any = None
    corpus: Any = None
    metrics: Any = None
    name_profile: Any = None
    shards_dir: str | None = None  # where a sharded evaluation's shards go
    merge_shards: bool = False     # score nothing, merge the finished shards
    logger: Any = None


@dataclass
class Paths:
    """The ``paths`` group (configs/paths/default.yaml)."""

    data_dir: str
    log_dir: str
    output_dir: str


@dataclass
class BiasEvaluation:
    """The ``bias_eval`` group (configs/bias_eval/): after training, the best checkpoint (``tagger``) on each
    corpus of ``corpora`` in each casing of ``lowercase``, with the shared ``metrics`` and ``name_profile``;
    then, when ``report`` is set, one report.md."""

    corpora: Any
    lowercase: list
    tagger: Any
    metrics: Any
    name_profile: Any = None
    report: Any = None


SCHEMAS = {"": TaskConfig, "paths": Paths, "bias_eval": BiasEvaluation}


def validate_config(cfg: DictConfig, overrides: Iterable[str] = ()) -> None:
    """Everything a task checks before any work: each key, and each value by its owner's rules."""
    validate(cfg, overrides, SCHEMAS)


def coverage_names(embeddings: Any) -> dict[str, str] | None:
    """name -> group of the evaluation names whose pretrained-vector coverage training reports
    (``embeddings.coverage_names``: a name list CSV, null for the packaged one); None without pretrained
    word vectors (random, ELMo)."""
    if not getattr(embeddings, "pretrained", False):
        return None
    names = load_names(embeddings.coverage_names)
    return {name: names.group_of[name] for name in names.names if name != names.oov}


def name_labels(embeddings: Any) -> dict[str, dict[str, str]] | None:
    """What the residual-bias classifier of de-biased or normalised runs predicts from the same names:
    target (gender, race; the group when the list has neither column) -> name -> label."""
    if not getattr(embeddings, "pretrained", False):
        return None
    names = load_names(embeddings.coverage_names)
    evaluated = [name for name in names.names if name != names.oov]
    targets = {"gender": names.gender_of, "race": names.race_of}
    labels = {target: {name: of[name] for name in evaluated} for target, of in targets.items() if of}
    return labels or {"group": {name: names.group_of[name] for name in evaluated}}
