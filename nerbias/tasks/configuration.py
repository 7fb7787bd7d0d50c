"""What the tasks check and build from a composed config before any work: the keys each node may hold and
the values they may take (``validate_config``), the augmentation, and the name lists training reports on."""

from __future__ import annotations

import logging
from typing import Any, Iterable

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from nerbias.bias import name_pools
from nerbias.bias.name_profile import PROFILE_KEYS
from nerbias.bias.names import load_names
from nerbias.bias.runner import METRICS_KEYS
from nerbias.bias.statistics import NameStatistics
from nerbias.data.ambiguity import AmbiguityRule
from nerbias.models.bilstm_crf import MODEL_KEYS, TaggerConfig, WordCharEmbedder
from nerbias.reporting.options import ReportOptions
from nerbias.training.augment import DEFAULT_ADVERSARIAL_CONTEXT, DEFAULT_MENTION_MASK_FOLLOWING, Augmentation
from nerbias.training.trainer import DATA_KEYS, TRAINER_KEYS, TrainerSettings
from nerbias.validation import check_config_keys, validate

log = logging.getLogger(__name__)


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
