"""When two resolved configs train the same run: a resumed run must continue its own configuration's weights
(``check_same_run``), and a rerun of a finished job keeps its results only for the same training
(``same_training``, ``training.finished``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from nerbias.errors import NerbiasError
from nerbias.fileio import RUN_DEFINING_KEYS
from nerbias.models.bilstm_crf import effective_model_options
from nerbias.models.embedders import effective_embedding_options
from nerbias.training.augment import AUGMENT_PROBABILITIES, effective_augment_options

# trainer keys that do not shape the run: how to start, where to compute (its kind is recorded in
# metrics.json's platforms), the scoring batch (rounding only), and where it stops: a run continued with
# more epochs or more patience follows the same trajectory as one started with them.
NOT_RUN_DEFINING_TRAINER_KEYS = ("resume", "device", "eval_batch_size", "max_epochs", "patience")


def _without_targets(section: Any) -> Any:
    """A config section without ``_target_`` keys and null values (runs saved before configs had a key,
    such as ``_target_`` or ``embeddings.debias``, compare equal to the same run now)."""
    if isinstance(section, Mapping):
        return {key: _without_targets(value) for key, value in section.items()
                if key != "_target_" and value is not None}
    return section


def _run_defining(config: Mapping[str, Any], key: str) -> Any:
    section = config.get(key)
    if key == "model" and isinstance(section, Mapping):
        section = effective_model_options(section)
    if key == "embeddings" and isinstance(section, Mapping):
        section = effective_embedding_options(section)
    optimizer = None
    if key == "trainer" and isinstance(section, Mapping):
        section = {k: v for k, v in section.items() if k not in NOT_RUN_DEFINING_TRAINER_KEYS}
        optimizer = (section.get("optimizer") or {}).get("_target_")  # which optimizer: run-defining
    section = _without_targets(section)
    if optimizer is not None:
        section["optimizer"]["_target_"] = optimizer
    if key == "augment":
        if not any((section or {}).get(p) for p in AUGMENT_PROBABILITIES):
            return None  # switched off, or a run saved before augmentation existed: the same training
        section = effective_augment_options(section)
    return section


def _first_difference(saved: Any, current: Any, where: str) -> tuple[str, Any, Any]:
    """The first key (dotted) at which two config sections differ, and its two values (None: absent)."""
    if isinstance(saved, Mapping) and isinstance(current, Mapping):
        for key in sorted(set(saved) | set(current), key=str):
            if saved.get(key) != current.get(key):
                return _first_difference(saved.get(key), current.get(key), f"{where}.{key}")
    return where, saved, current


def check_same_run(saved: Mapping[str, Any], current: Mapping[str, Any], path: Path) -> None:
    """Refuse to continue another configuration's weights (a sweep rerun in another order, a changed
    learning rate): one line naming the first differing key and both values."""
    for key in RUN_DEFINING_KEYS:
        before, now = _run_defining(saved, key), _run_defining(current, key)
        if before != now:
            where, old, new = _first_difference(before, now, key)
            raise NerbiasError(f"{path}: was trained with {where}={old!r}, this run has {where}={new!r}; resume "
                               "only the same configuration (or start a new run directory)")


def same_training(saved: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether two resolved configs train the same run to the same end: every run-defining key equal as
    ``check_same_run`` compares them (keys added since, at their off values, are equal to their absence),
    and where training stops (``max_epochs``, ``patience``)."""
    try:
        check_same_run(saved, current, Path("<saved config>"))
    except NerbiasError:
        return False
    stops = ("max_epochs", "patience")
    return all((saved.get("trainer") or {}).get(key) == (current.get("trainer") or {}).get(key) for key in stops)
