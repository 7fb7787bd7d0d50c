"""Config values checked before any work: one sentence naming the key and what it may be (exit 2).

Each rule reads one key of the composed config; keys a group does not have are skipped, so one
``validate`` serves train.py, evaluate.py and pretrain_lm.py. Keys appended on the command line
(``+trainer.max_epoch=3``) must be keys some config of that group defines: nothing would read a
misspelt one, and the run would silently use the default.
"""

from __future__ import annotations

import importlib
import math
import re
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Mapping

from omegaconf import DictConfig, ListConfig, OmegaConf

from nerbias.errors import NerbiasError

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?|mps")
WANDB_MODES = ("auto", "online", "offline", "disabled")


class ConfigError(NerbiasError):
    """A config value outside what its key allows."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "seed": (lambda v: _integer(v) and v >= 0, "an integer >= 0"),
    "trainer.batch_size": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "trainer.eval_batch_size": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "trainer.max_epochs": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "trainer.patience": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "trainer.grad_clip": (lambda v: v is None or (_number(v) and v > 0), "a number > 0, or null (no clipping)"),
    "trainer.optimizer.lr": (lambda v: _number(v) and v > 0, "a number > 0"),
    "trainer.embedding_lr": (lambda v: v is None or (_number(v) and v > 0), "a number > 0, or null"),
    "trainer.lr_decay": (lambda v: v is None or (_number(v) and v >= 0), "a number >= 0, or null"),
    "trainer.device": (lambda v: isinstance(v, str) and bool(_DEVICE.fullmatch(v)), "auto, cpu, cuda or cuda:N"),
    "model.dropout": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "model.word_dropout": (lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)"),
    "model.lstm_hidden": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "model.lstm_layers": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "model.char_encoder": (lambda v: v in (None, "cnn", "lstm"), "cnn, lstm or null (no character features)"),
    "model.char_lstm_hidden": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "embeddings.dim": (lambda v: v is None or (_integer(v) and v >= 1), "an integer >= 1"),
    "data.max_train_sentences": (lambda v: v is None or (_integer(v) and v >= 1), "an integer >= 1, or null (all)"),
    "data.max_eval_sentences": (lambda v: v is None or (_integer(v) and v >= 1), "an integer >= 1, or null (all)"),
    "tagger.device": (lambda v: isinstance(v, str) and bool(_DEVICE.fullmatch(v)), "auto, cpu, cuda or cuda:N"),
    "tagger.batch_size": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "corpus.batch_size": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "corpus.sample": (lambda v: v is None or (_integer(v) and v >= 1), "an integer >= 1, or null (every sentence)"),
    "corpus.num_shards": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "corpus.template": (lambda v: v is None or (_integer(v) and 1 <= v <= 9), "1-9, or null (all nine)"),
    "metrics.confidence_bins": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "metrics.confidence_over": (lambda v: v in ("recognised", "all"), "recognised or all"),
    "metrics.exact_percentiles_max": (lambda v: _integer(v) and v >= 0, "an integer >= 0"),
    "metrics.std_ddof": (lambda v: v in (0, 1), "0 (population) or 1 (sample)"),
    "augment.lowercase": (lambda v: _number(v) and 0 <= v <= 1, "a probability in [0, 1]"),
    "augment.names": (lambda v: _number(v) and 0 <= v <= 1, "a probability in [0, 1]"),
    "augment.entity_mask": (lambda v: _number(v) and 0 <= v <= 1, "a probability in [0, 1]"),
    "augment.adversarial": (lambda v: _number(v) and 0 <= v <= 1, "a probability in [0, 1]"),
    "augment.adversarial_context": (lambda v: _integer(v) and v >= 0, "an integer >= 0"),
    "augment.ambiguity.types": (lambda v: isinstance(v, (list, ListConfig)) and len(v) > 0 and
                                all(t in ("PER", "LOC", "ORG", "MISC", "O") for t in v),
                                "a non-empty list of PER, LOC, ORG, MISC, O"),
    "augment.ambiguity.min_typed": (lambda v: _integer(v) and v >= 1, "an integer >= 1"),
    "augment.ambiguity.casing": (lambda v: v in ("exact", "lower"), "exact or lower"),
    "augment.ambiguity.gazetteer": (lambda v: isinstance(v, bool), "true or false"),
    "embeddings.debias": (lambda v: v in (None, "hard"), "null or hard"),
    "name_profile.enabled": (lambda v: isinstance(v, bool), "true or false"),
    "bias_eval.name_profile.enabled": (lambda v: isinstance(v, bool), "true or false"),
    "embeddings.debias_neutralize": (lambda v: v in ("all", "neutral_only"), "all or neutral_only"),
    "embeddings.normalize": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
    "logger.mode": (lambda v: v in WANDB_MODES, ", ".join(WANDB_MODES)),
    "logger.kind": (lambda v: v in ("wandb", "none"), "wandb or none (logger=wandb|none)"),
}


def _select(cfg: DictConfig, key: str) -> tuple[bool, Any]:
    """(present, value): a missing key or one whose interpolation fails counts as absent here."""
    missing = object()
    value = OmegaConf.select(cfg, key, default=missing, throw_on_missing=False, throw_on_resolution_failure=False)
    return value is not missing, value


def known_group_keys(group: str) -> set[str]:
    """Every dotted key any config file of ``configs/<group>/`` defines (for appended-key checks)."""
    keys: set[str] = set()
    for path in (CONFIGS / group).rglob("*.yaml"):
        def walk(node: Any, prefix: str) -> None:
            if isinstance(node, dict):
                for key, value in node.items():
                    keys.add(f"{prefix}{key}")
                    walk(value, f"{prefix}{key}.")
        walk(OmegaConf.to_container(OmegaConf.load(path), resolve=False), "")
    return keys


def check_appended_keys(overrides: Iterable[str]) -> None:
    """``+group.key=value`` overrides: the key must exist in some config of that group."""
    for override in overrides:
        if not override.startswith("+") or override.startswith("++") or "=" not in override:
            continue
        key = override[1:].split("=", 1)[0]
        group, _, rest = key.partition(".")
        if not rest or group in ("hydra",) or not (CONFIGS / group).is_dir():
            continue
        if rest not in known_group_keys(group):
            raise ConfigError(f"{key}: no {group} config has the key {rest!r}, so nothing would read it "
                              f"(a typo? without '+', Hydra checks the key exists)")


def _target_problem(target: Any) -> str | None:
    """Why a ``_target_`` cannot be found (a typo: no such module or attribute), or None. A module
    that exists but fails to import for another reason is left for the build to report."""
    if not isinstance(target, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", target):
        return "must be a dotted path to a class or function"
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
                continue  # this prefix is not a module: try a shorter one
            return None  # the module exists but lacks a dependency of its own
        except Exception:  # noqa: BLE001 - any other import failure is the build's to report
            return None
        for depth, attribute in enumerate(parts[cut:], start=cut):
            if not hasattr(found, attribute):
                return f"{'.'.join(parts[:depth])} has no {attribute!r} (a typo?)"
            found = getattr(found, attribute)
        return None
    return f"no module named {parts[0]!r} (a typo?)"


def check_targets(cfg: DictConfig) -> None:
    """Every ``_target_`` of the config names something importable, before any data is read
    (Hydra would find a misspelt optimizer only when it builds it, after data and embeddings)."""
    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "_target_":
                    problem = _target_problem(value)
                    if problem:
                        raise ConfigError(f"{prefix}_target_={value!r}: {problem}")
                elif key != "hydra":
                    walk(value, f"{prefix}{key}.")

    walk(OmegaConf.to_container(cfg, resolve=False), "")


def _target_parameters(target: Any) -> set[str] | None:
    """The parameters ``target`` takes by name; None when it takes ``**kwargs`` (anything goes) or
    cannot be imported here (``check_targets`` reports a misspelt one)."""
    import inspect

    from hydra.utils import get_object

    try:
        factory = get_object(target)
        parameters = inspect.signature(factory).parameters
    except Exception:  # noqa: BLE001 - an import failure is check_targets' or the build's to report
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return {name for name, p in parameters.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL}


def check_config_keys(cfg: DictConfig, reads: Mapping[str, Collection[str]]) -> None:
    """Stop at a key no code reads (a misspelt ``model.hiden_size`` in a YAML file would otherwise
    leave the default in force and say nothing).

    ``reads``: dotted path of a config node ("" for the top level) -> the keys the code that runs the
    node reads from it. A node with a ``_target_`` also takes its target's parameters (``build``
    passes them), wherever it sits; nodes neither named nor built (free-form values such as
    ``embeddings.lstm`` overrides) are not checked.
    """
    def check(node: Mapping[str, Any], path: str) -> None:
        accepted = set(reads.get(path, ()))
        target = node.get("_target_")
        if target is not None:
            parameters = _target_parameters(target)
            if parameters is None:
                return
            accepted |= parameters | {"_target_", "_partial_"}
        unknown = sorted(key for key in node if key not in accepted)
        if unknown:
            where = f"{path}." if path else ""
            group = f"the {path} group" if path else "the top level"
            raise ConfigError(f"{where}{unknown[0]}: no code reads this key ({group} takes: "
                              f"{', '.join(sorted(accepted))}); a typo, or a setting of another group?")

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, Mapping):
            return
        if path in reads or "_target_" in node:
            check(node, path)
        for key, value in node.items():
            if key != "hydra":
                walk(value, f"{path}.{key}" if path else str(key))

    walk(OmegaConf.to_container(cfg, resolve=False), "")


def validate(cfg: DictConfig, overrides: Iterable[str] = ()) -> None:
    """Raise ConfigError for the first value outside what its key allows."""
    check_appended_keys(overrides)
    check_targets(cfg)
    for key, (allowed, description) in RULES.items():
        present, value = _select(cfg, key)
        if present and not allowed(value):
            raise ConfigError(f"{key}={value!r}: must be {description}")
    present, shard = _select(cfg, "corpus.shard")
    _, num_shards = _select(cfg, "corpus.num_shards")
    if present and shard is not None and not (_integer(shard) and 0 <= shard < (num_shards or 1)):
        raise ConfigError(f"corpus.shard={shard!r}: must be null or an integer in [0, corpus.num_shards={num_shards})")
    census_nodes = [("corpus", OmegaConf.select(cfg, "corpus", default=None))]
    census_nodes += [(f"bias_eval.corpora.{name}", node) for name, node in
                     (OmegaConf.select(cfg, "bias_eval.corpora", default=None) or {}).items()]
    for where, node in census_nodes:  # the census's `names` chooses SSA names (name corpora: a CSV list)
        if isinstance(node, DictConfig) and node.get("name") == "census" and \
                node.get("names", "all") not in ("all", "heldout"):
            raise ConfigError(f"{where}.names={node.get('names')!r}: must be all or heldout (the census benchmark "
                              "scores every SSA name, or only those name substitution never trains on)")
    for key in ("trainer.device", "tagger.device"):
        present, device = _select(cfg, key)
        if present and isinstance(device, str) and device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(f"{key}={device}: this machine has no CUDA device (use auto or cpu)")
    if OmegaConf.select(cfg, "tagger.kind", default=None) == "checkpoint":
        if OmegaConf.is_missing(cfg.tagger, "path"):
            raise ConfigError("tagger.path: missing; give the checkpoint, e.g. "
                              "tagger.path=logs/train/runs/<run>/checkpoints/best.pt")
        if not Path(str(cfg.tagger.path)).is_file():
            raise ConfigError(f"tagger.path={cfg.tagger.path}: no such checkpoint file")
    embeddings = OmegaConf.select(cfg, "embeddings", default=None)
    if isinstance(embeddings, DictConfig) and embeddings.get("source") and "path" in embeddings.keys():
        if OmegaConf.is_missing(embeddings, "path"):
            raise ConfigError(f"embeddings.path: missing; embeddings.source={embeddings.source} needs its vectors "
                              "file, e.g. embeddings.path=/data/numberbatch-en-19.08.txt.gz")
        if embeddings.path is not None and not Path(str(embeddings.path)).is_file():
            raise ConfigError(f"embeddings.path={embeddings.path}: no such file")
    examples = {"transformers": "a saved model folder or a hub id, e.g. tagger.model=dslim/bert-base-NER",
                "flair": "the path of a trained SequenceTagger, e.g. tagger.model=/models/ner-english/final-model.pt"}
    kind = OmegaConf.select(cfg, "tagger.kind", default=None)
    if kind in examples and OmegaConf.is_missing(cfg.tagger, "model"):
        raise ConfigError(f"tagger.model: missing; give {examples[kind]}")
