"""Objects from config groups: each group's ``_target_`` names the class or function that builds it.

A group's config also holds settings that other code reads (``kind`` labels runs and tables;
a corpus's ``sample``, ``shard`` and ``batch_size`` steer the evaluation loop), so ``build``
passes the target only the keys that are its parameters, plus what the caller adds at run
time (a name list, the run's config). Those other keys are declared by the code that reads them
(``tasks.configuration.config_reads``), and ``validation.check_config_keys`` stops a run before any work at a
key that is neither a parameter nor declared, so nothing ``build`` leaves out goes unread.
"""

from __future__ import annotations

import datetime
import functools
import inspect
import os
from typing import Any, Mapping

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from nerbias.errors import NerbiasError


def build(node: Mapping[str, Any] | DictConfig, **runtime: Any) -> Any:
    """Call ``node["_target_"]`` with the node's keys that it accepts, then ``runtime`` (which wins)."""
    values = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    target = values.pop("_target_", None)
    if target is None:
        raise NerbiasError(f"config has no _target_ to build from (keys: {sorted(values)})")
    try:
        factory = get_object(target)
    except Exception as error:  # hydra raises ImportError or a wrapped error for a bad path
        raise NerbiasError(f"_target_ {target!r} cannot be imported ({error})") from None
    parameters = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    accepted = {key: value for key, value in values.items() if takes_any or key in parameters}
    return factory(**{**accepted, **runtime})


@functools.lru_cache(maxsize=None)
def run_id() -> str:
    """``2026-12-01_10-18-25_123456-p4242``: start time to the microsecond and process id, fixed for
    the process, so two runs started in the same second never share a default run directory."""
    now = datetime.datetime.now()
    return f"{now:%Y-%m-%d_%H-%M-%S}_{now:%f}-p{os.getpid()}"


def register_resolvers() -> None:
    """``${run_id:}`` for configs/hydra (entry points call this before Hydra composes)."""
    if not OmegaConf.has_resolver("run_id"):
        OmegaConf.register_new_resolver("run_id", run_id)
