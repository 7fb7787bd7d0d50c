"""The names that training substitutes, and the place-like names the dev probe keeps from it.

Every pool starts from the SSA first names (``<data_dir>/ssa_names``) minus every name of the
evaluation lists (``exclude``, compared case-insensitively), and keeps the hash-chosen training half
(``names.substitution_pool``; the other half is the census benchmark's unseen names):

- ``ssa_train_half``: all of it;
- ``ambiguous``: only the names the ambiguity rule marks as also places or organisations, judged on
  CoNLL-03 eng.train and the gazetteer (``nerbias.data.ambiguity``);
- ``ambiguous_train``: those, less one in four (``names.ambiguous_part``), which are kept for
  ``dev_probe_names``: place-like names neither training nor any evaluation list uses (issue 45; it also
  drops every Tzioumis 2018 name, the source of the census-scale lists);
- any other value: a text file of names, one a line, minus the same evaluation names.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any, Mapping, Sequence
from nerbias.bias.names import ambiguous_part, load_names, substitution_pool
from nerbias.bias.ssa import load_ssa
from nerbias.data.ambiguity import AMBIGUOUS_POOLS, AmbiguityRule, ambiguous_tokens, conll_type_counts
from nerbias.data.conll import read_conll
from nerbias.data.conll2003 import SPLIT_FILES
from nerbias.errors import NerbiasError

log = logging.getLogger(__name__)

SSA_POOLS = ("ssa_train_half", *AMBIGUOUS_POOLS)


class NamePool:
    """The ``augment.name_pool`` node (``configs/augment/name_pool/``): the names training substitutes, read
    when first asked for (a run that substitutes nothing reads no name file).

    ``source``: ``ssa_train_half``, ``ambiguous``, ``ambiguous_train`` or a text file of names, one a line
    (the module docstring); ``exclude``: the name lists (CSV; null: the packaged Mishra et al. list) the
    pool avoids; ``ambiguity``: the rule of the ambiguous pools (``nerbias.data.ambiguity.AmbiguityRule``),
    only read with them."""

    def __init__(self, data_dir: str | Path, source: str = "ssa_train_half", exclude: Sequence[str | None] = (None,),
                 ambiguity: Mapping[str, Any] | None = None):
        if ambiguity is None and source in AMBIGUOUS_POOLS:
            raise NerbiasError(f"augment.name_pool.ambiguity: needed with source={source} (augment/name_pool={source} "
                               "sets the rule)")
        if ambiguity is not None and source not in AMBIGUOUS_POOLS:
            raise NerbiasError(f"augment.name_pool.ambiguity: read only by the ambiguous pools "
                               f"({', '.join(AMBIGUOUS_POOLS)}), not by source={source}")
        if ambiguity is not None:  # checked now, before any data is read
            self.check_values({"ambiguity": ambiguity})
            try:
                AmbiguityRule.from_mapping(ambiguity)
            except NerbiasError as error:
                raise NerbiasError(f"augment.name_pool.ambiguity: {error}") from None
        self.data_dir, self.source = Path(data_dir), str(source)
        self.exclude, self.ambiguity = list(exclude or [None]), ambiguity

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "augment.name_pool.") -> None:
        """The ambiguity rule's values (validation.validate checks a config's before any work)."""
        if isinstance(values.get("ambiguity"), Mapping):
            AmbiguityRule.check_values(values["ambiguity"], f"{prefix}ambiguity.")

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return substitution_names(self.data_dir, self.source, self.exclude, self.ambiguity, node="augment.name_pool.")

    @functools.cached_property
    def organisation_names(self) -> tuple[str, ...]:
        """The pool's names that CoNLL-03 train types ORG (``organisation_names``)."""
        return organisation_names(self.data_dir, self.names)


def excluded_names(lists: Sequence[str | None]) -> list[str]:
    """Every name of the given name lists (CSV; ``None``: the packaged Mishra et al. list)."""
    return [name for path in (lists or [None]) for name in load_names(path).names]


def substitution_names(data_dir: str | Path, source: str, exclude: Sequence[str | None] = (None,),
                       ambiguity: Mapping[str, Any] | None = None, node: str = "augment.name_pool.") -> tuple[str, ...]:
    """The pool ``source`` names (see the module docstring), sorted; errors name the config keys under ``node``."""
    excluded = excluded_names(exclude)
    if source in SSA_POOLS:
        candidates = load_ssa(Path(data_dir) / "ssa_names", progress=False).names.tolist()
    else:
        path = Path(source)
        if not path.is_file():
            raise NerbiasError(f"{node}source={source}: not one of {', '.join(SSA_POOLS)} and no such file")
        candidates = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    pool = substitution_pool(candidates, excluded, "train" if source in SSA_POOLS else None)
    if source in AMBIGUOUS_POOLS:
        pool = ambiguous_names(data_dir, pool, ambiguity, node)
    if source == "ambiguous_train":
        pool = [name for name in pool if ambiguous_part(name) == "train"]
    log.info("name pool %s: %d names, none of the %d evaluation names", source, len(pool), len(excluded))
    return tuple(pool)


def dev_probe_names(data_dir: str | Path, exclude: Sequence[str | None] = (None,),
                    ambiguity: Mapping[str, Any] | None = None, exclude_tzioumis: bool = True) -> tuple[str, ...]:
    """The quarter of the ``ambiguous`` pool that ``ambiguous_train`` leaves out, less (``exclude_tzioumis``)
    every first name of Tzioumis (2018), which holds every census-scale list ``census_names`` can build
    (whatever its rule): place-like names for choosing training options on dev data, unseen by training
    with that pool and by every evaluation list."""
    pool = [name for name in substitution_names(data_dir, "ambiguous", exclude, ambiguity, node="corpus.")
            if ambiguous_part(name) == "dev"]
    if exclude_tzioumis:
        from nerbias.bias.census_names import read_tzioumis  # pyarrow: only when used

        listed = set(read_tzioumis()["firstname"].str.lower())
        pool = [name for name in pool if name.lower() not in listed]
    if not pool:
        raise NerbiasError("the dev probe has no names: no ambiguous training-half name is in the dev quarter"
                           + (" and outside Tzioumis (2018)" if exclude_tzioumis else ""))
    log.info("dev probe names: %d%s", len(pool), " (none in Tzioumis 2018)" if exclude_tzioumis else "")
    return tuple(pool)


def ambiguous_names(data_dir: str | Path, names: Sequence[str], ambiguity: Mapping[str, Any] | None,
                    node: str = "augment.name_pool.") -> list[str]:
    """The ``names`` that the rule ``ambiguity`` marks ambiguous, judged on all of CoNLL-03 eng.train of
    ``data_dir`` and the gazetteer."""
    try:
        rule = AmbiguityRule.from_mapping(ambiguity)
    except NerbiasError as error:
        raise NerbiasError(f"{node}ambiguity: {error}") from None
    train = Path(data_dir) / "conll2003" / SPLIT_FILES["train"]
    pool = ambiguous_tokens(names, read_conll(train), rule)
    if not pool:
        pool_key = "the dev probe's ambiguous pool" if node == "corpus." else f"{node}source=ambiguous"
        raise NerbiasError(f"{pool_key}: none of the {len(names)} training-half names is ambiguous "
                           f"under {node}ambiguity={dict(ambiguity or {})} ({train})")
    log.info("ambiguous names (%s): %d of %d, e.g. %s", rule.describe(), len(pool), len(names), ", ".join(pool[:8]))
    return pool


def organisation_names(data_dir: str | Path, pool: Sequence[str]) -> tuple[str, ...]:
    """The pool's names that CoNLL-03 eng.train types ORG at least once (exact case): those may stand in an
    organisation's slot (``augment.place_names``)."""
    counts = conll_type_counts(read_conll(Path(data_dir) / "conll2003" / SPLIT_FILES["train"]))
    names = tuple(name for name in pool if counts.get(name, {}).get("ORG", 0) > 0)
    log.info("pool names typed ORG in CoNLL-03 train: %d, e.g. %s", len(names), ", ".join(names[:8]))
    return names
