"""Objects from config nodes: a node's ``_target_`` names the class or function that builds it, and every
other key of the node is an argument of it.

``build`` refuses a key its target does not take, naming the key and listing what the target takes (as
AllenNLP's ``Params.assert_empty`` and thinc's signature check do), so a misspelt key can never be left
unread. One key is the config system's, not the target's: ``_partial_`` (build a ``functools.partial``,
for what is called later with run-time values, such as an optimizer with the parameters); a node's label
in run names and tables (``embeddings.kind=glove``) is an argument of the classes that have one. A
nested node with a ``_target_`` is built first and passed as the argument; run-time values (vocabularies,
a name list) come as keyword arguments of ``build`` and must be parameters too.
"""

from __future__ import annotations

import datetime
import functools
import os
from typing import Any, Mapping

from omegaconf import DictConfig, ListConfig, OmegaConf

from nerbias.validation import PARTIAL, BuildError, target_of, unexpected_keys

def plain(node: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    """A config node as plain, resolved data."""
    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=True)
    return dict(node)


def build(node: Mapping[str, Any] | DictConfig, where: str = "", **runtime: Any) -> Any:
    """``node["_target_"]`` called with the node's other keys (nested targets built first) and ``runtime``.

    ``where``: the node's dotted path, for messages (``"trainer."``). Raises BuildError for a key the
    target does not take, here or in a nested node, before anything is built."""
    values = plain(node)
    if "_target_" not in values:
        raise BuildError(f"{where or 'config'}: no _target_ to build from (keys: {sorted(values)})")
    problem = unexpected_keys({**values, **{key: None for key in runtime}}, where)
    if problem:
        raise BuildError(problem)
    return _construct(values, runtime)


def _construct(values: dict[str, Any], runtime: Mapping[str, Any]) -> Any:
    factory = target_of(values.pop("_target_"))
    partial = bool(values.pop(PARTIAL, False))
    arguments = {key: _construct(dict(value), {}) if isinstance(value, Mapping) and "_target_" in value else value
                 for key, value in values.items()}
    arguments.update(runtime)
    return functools.partial(factory, **arguments) if partial else factory(**arguments)


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
