"""Training-data augmentation that targets name bias (``augment`` config group; every option off by default).

Applied to the training sentences afresh each epoch, from a generator seeded by (run seed, epoch),
so a resumed run sees the same data as an uninterrupted one. In this order:

1. **Name substitution** (``names=P``): each single-token PERSON mention is replaced, with
   probability P, by a name drawn uniformly from ``name_pool`` (distinct SSA first names disjoint
   from every evaluation name list; see ``nerbias.bias.names.substitution_pool``; with
   ``augment/name_pool=ambiguous`` only those that are also places or organisations,
   ``nerbias.data.ambiguity``). Multi-token mentions ("John Smith") are left as they are: a first
   name replaced inside a full name would need a surname model, and the bias corpora place one-token
   names only.
   **Pool names in places** (``place_names=P``): each single-token LOCATION mention is replaced, with
   probability P, by a name of the same pool, and each single-token ORGANIZATION mention by one of the
   pool's names that CoNLL-03 train types ORG (``org_pool``; none: ORG mentions are kept). With
   ``augment/name_pool=ambiguous`` a place-like first name is then seen in places' slots as in persons', so
   the string no longer tells the type: only the context does (issue 45; docs/context_training.md).
2. **Entity masking** (``entity_mask=P``): every token of a PERSON mention becomes the masked token
   (``nerbias.data.batching.MASKED``: word id ``<unk>`` and no characters, so the character features
   are zero; for an ELMo encoder the empty word) with probability P per mention, so the tagger must
   find persons from context (in the spirit of Ghaddar et al. 2021).
   **Mention masking** (``mention_mask=P``, Ghaddar et al.'s masking): a mention of any type whose next
   ``mention_mask_following`` tokens are words (a letter or digit) outside every mention is masked the
   same way with probability P, so context that follows a mention is what finds it.
3. **Mixed case** (``lowercase=P``): each sentence is lower-cased with probability P; with P = 1 the
   epoch holds every sentence twice, cased and lower-cased (the concatenation of Mayhew et al. 2019).
4. **Context-aware adversarial noise** (``adversarial=λ``, after Ghaddar et al. 2021): each entity
   mention of any type with at least ``adversarial_context`` context words (tokens outside the
   mention holding a letter or digit; with ``adversarial_context_per_side`` that many on each side, as
   Ghaddar et al. require) is chosen with probability λ; its tokens are masked as in 2 and
   marked with an entity type other than its own, drawn uniformly (``NoisySentence``). The tagger
   replaces their whole representation by that type's learnable noise vector (one per type, shared
   by every token of the mention; ``BiLSTMCRFTagger.mention_noise``) and keeps the gold label, so only
   the context can recover it. Applied last, so a lower-cased copy draws its own mentions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from nerbias.data.ambiguity import AMBIGUOUS_POOLS, saved_name_pool
from nerbias.data.batching import MASKED, NoisySentence
from nerbias.data.conll import ENTITY_TYPES, Sentence, lowercased
from nerbias.errors import NerbiasError
from nerbias.validation import BOOLEAN, PROBABILITY, ConfigError, Rule, at_least, check_values

PERSON = "PER"
# The options; any > 0 switches augmentation on.
AUGMENT_PROBABILITIES = ("lowercase", "names", "place_names", "entity_mask", "mention_mask", "adversarial")
DEFAULT_ADVERSARIAL_CONTEXT = 3  # context words a mention needs for adversarial noise (Ghaddar et al. 2021)
DEFAULT_MENTION_MASK_FOLLOWING = 3  # non-entity words that must follow a mention for it to be masked (ibid.)


def effective_augment_options(section: Mapping[str, Any]) -> dict[str, Any]:
    """An ``augment`` config section without the keys that do not act: ``adversarial`` and its context
    keys while adversarial training is off, ``mention_mask`` and ``mention_mask_following`` while mention
    masking is, ``adversarial_context_per_side`` while false, ``ambiguity`` unless the pool is
    ``ambiguous``, ``pool_exclude`` at its default; the name pool node read as the flat keys it replaced
    (``name_pool``: its source); so a run saved before those keys existed compares equal to the same run now."""
    values = dict(section)
    if isinstance(values.get("name_pool"), Mapping):  # the pool as a node (2026-12-06 on) compares as the flat keys
        values["name_pool"], values["pool_exclude"], ambiguity = saved_name_pool(values)
        if ambiguity is not None:
            values["ambiguity"] = ambiguity
    if values.get("pool_exclude") in ([None], None):  # the default list, spelt or not
        values.pop("pool_exclude", None)
    if not values.get("adversarial"):
        values.pop("adversarial", None)
        values.pop("adversarial_context", None)
        values.pop("adversarial_context_per_side", None)
    if not values.get("adversarial_context_per_side"):
        values.pop("adversarial_context_per_side", None)
    if not values.get("place_names"):
        values.pop("place_names", None)
    if not values.get("mention_mask"):
        values.pop("mention_mask", None)
        values.pop("mention_mask_following", None)
    if values.get("name_pool") not in AMBIGUOUS_POOLS:
        values.pop("ambiguity", None)
    return values


AUGMENT_RULES: dict[str, Rule] = {**{key: PROBABILITY for key in AUGMENT_PROBABILITIES},
                                  "adversarial_context": at_least(0), "mention_mask_following": at_least(1),
                                  "adversarial_context_per_side": BOOLEAN}


class NamePool(Protocol):
    """The names substitution draws (``nerbias.bias.name_pools.NamePool`` builds the configured one)."""

    names: Sequence[str]
    organisation_names: Sequence[str]  # those that may stand in an organisation's slot (place_names)


@dataclass(frozen=True)
class Augmentation:
    lowercase: float = 0.0
    names: float = 0.0
    entity_mask: float = 0.0
    name_pool: tuple[str, ...] = ()
    place_names: float = 0.0
    org_pool: tuple[str, ...] = ()  # the pool's names that CoNLL-03 train types ORG (place_names into ORG mentions)
    adversarial: float = 0.0
    adversarial_context: int = DEFAULT_ADVERSARIAL_CONTEXT
    adversarial_context_per_side: bool = False
    mention_mask: float = 0.0
    mention_mask_following: int = DEFAULT_MENTION_MASK_FOLLOWING
    entity_types: tuple[str, ...] = ENTITY_TYPES  # the types of the noise vectors

    @classmethod
    def configured(cls, lowercase: float = 0.0, names: float = 0.0, place_names: float = 0.0, entity_mask: float = 0.0,
                   mention_mask: float = 0.0, mention_mask_following: int = DEFAULT_MENTION_MASK_FOLLOWING,
                   adversarial: float = 0.0, adversarial_context: int = DEFAULT_ADVERSARIAL_CONTEXT,
                   adversarial_context_per_side: bool = False, name_pool: NamePool | None = None) -> "Augmentation":
        """The ``augment`` group (``configs/augment/``): the options and the name pool, whose names are read
        only when names or place names are substituted."""
        pool, org_pool = (), ()
        if (names > 0 or place_names > 0) and name_pool is not None:
            pool = tuple(name_pool.names)
            org_pool = tuple(name_pool.organisation_names) if place_names > 0 else ()
        return cls(lowercase=lowercase, names=names, place_names=place_names, entity_mask=entity_mask,
                   mention_mask=mention_mask, mention_mask_following=mention_mask_following, adversarial=adversarial,
                   adversarial_context=adversarial_context, adversarial_context_per_side=adversarial_context_per_side,
                   name_pool=pool, org_pool=org_pool)

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "augment.") -> None:
        """What each ``augment`` option may be (validation.validate checks a config's before any work)."""
        check_values(values, AUGMENT_RULES, prefix)
        pool = values.get("name_pool")
        if isinstance(pool, str):  # the spelling before the pool was a node (2026-12-06)
            raise ConfigError(f"{prefix}name_pool={pool}: the name pool is a config group: {prefix.rstrip('.')}/name_pool="
                              f"{pool} (or {prefix}name_pool.source=<names file>; docs/training.md)")

    def __post_init__(self):
        self.check_values(vars(self))
        if (self.names > 0 or self.place_names > 0) and not self.name_pool:
            raise NerbiasError("augment.names or augment.place_names > 0 needs a non-empty augment.name_pool")
        if not set(self.org_pool) <= set(self.name_pool):
            raise NerbiasError("augment: the ORG substitution names must come from the name pool")
        if self.adversarial > 0 and len(self.entity_types) < 2:
            raise NerbiasError("augment.adversarial needs at least two entity types (a wrong one to draw)")

    @property
    def noise_types(self) -> tuple[str, ...]:
        """The entity types of the tagger's learnable noise vectors: ``entity_types`` with adversarial
        training, none without (``NerTagger.build``'s ``noise_types``)."""
        return tuple(self.entity_types) if self.adversarial > 0 else ()

    @property
    def active(self) -> bool:
        return bool(self.lowercase or self.names or self.place_names or self.entity_mask or self.mention_mask
                    or self.adversarial)

    def epoch(self, sentences: Sequence[Sentence], seed: int, epoch: int) -> list[Sentence]:
        """This epoch's training sentences (the input itself when nothing is switched on)."""
        if not self.active:
            return list(sentences)
        rng = np.random.default_rng([int(seed), int(epoch)])
        out = [self._substitute_and_mask(s, rng) for s in sentences]
        # the newer options draw after the older ones: runs without them keep their data exactly
        if self.place_names:
            out = [self._substitute_places(s, rng) for s in out]
        if self.mention_mask:
            out = [self._mask_followed_mentions(s, rng) for s in out]
        if self.lowercase >= 1.0:
            out = out + lowercased(out)
        elif self.lowercase > 0:
            flips = rng.random(len(out)) < self.lowercase
            out = [lower if flip else s for s, lower, flip in zip(out, lowercased(out), flips)]
        if self.adversarial:
            out = [self._add_noise(s, rng) for s in out]
        return out

    def _add_noise(self, sentence: Sentence, rng: np.random.Generator) -> Sentence:
        """The sentence with each eligible mention chosen with probability ``adversarial``: its tokens
        masked and marked with a uniformly drawn type other than its own (a NoisySentence)."""
        words = [_is_word(token) for token in sentence.tokens]
        tokens, noise = list(sentence.tokens), [None] * len(sentence.tokens)
        for span in sentence.spans:
            left, right = sum(words[:span.start]), sum(words[span.end:])
            if (min(left, right) if self.adversarial_context_per_side else left + right) < self.adversarial_context:
                continue
            if rng.random() < self.adversarial:
                wrong = [kind for kind in self.entity_types if kind != span.label]
                kind = wrong[int(rng.integers(len(wrong)))]
                tokens[span.start:span.end] = [MASKED] * (span.end - span.start)
                noise[span.start:span.end] = [kind] * (span.end - span.start)
        if all(kind is None for kind in noise):
            return sentence
        return NoisySentence(tuple(tokens), sentence.spans, tuple(noise))

    def _substitute_places(self, sentence: Sentence, rng: np.random.Generator) -> Sentence:
        """Single-token LOC mentions (and ORG ones, from ``org_pool``) replaced by pool names with
        probability ``place_names`` (one draw for each such mention, in order)."""
        pools = {"LOC": self.name_pool, "ORG": self.org_pool}
        tokens = list(sentence.tokens)
        for span in sentence.spans:
            pool = pools.get(span.label)
            if pool and span.end - span.start == 1 and rng.random() < self.place_names:
                tokens[span.start] = pool[int(rng.integers(len(pool)))]
        return Sentence(tuple(tokens), sentence.spans) if tokens != list(sentence.tokens) else sentence

    def _mask_followed_mentions(self, sentence: Sentence, rng: np.random.Generator) -> Sentence:
        """Each mention whose next ``mention_mask_following`` tokens are words outside every mention,
        masked with probability ``mention_mask`` (one draw for each such mention, in order)."""
        inside = np.zeros(len(sentence.tokens), dtype=bool)
        for span in sentence.spans:
            inside[span.start:span.end] = True
        tokens, need = list(sentence.tokens), self.mention_mask_following
        for span in sentence.spans:
            following = range(span.end, span.end + need)
            if span.end + need > len(tokens) or any(inside[i] or not _is_word(sentence.tokens[i]) for i in following):
                continue
            if rng.random() < self.mention_mask:
                tokens[span.start:span.end] = [MASKED] * (span.end - span.start)
        return Sentence(tuple(tokens), sentence.spans)

    def _substitute_and_mask(self, sentence: Sentence, rng: np.random.Generator) -> Sentence:
        persons = [span for span in sentence.spans if span.label == PERSON]
        if not persons or not (self.names or self.entity_mask):
            return sentence
        tokens = list(sentence.tokens)
        for span in persons:
            if self.names and span.end - span.start == 1 and rng.random() < self.names:
                tokens[span.start] = self.name_pool[int(rng.integers(len(self.name_pool)))]
            if self.entity_mask and rng.random() < self.entity_mask:
                tokens[span.start:span.end] = [MASKED] * (span.end - span.start)
        return Sentence(tuple(tokens), sentence.spans)



def _is_word(token: str) -> bool:
    """A context word: a token with a letter or digit (punctuation is not context)."""
    return any(c.isalnum() for c in token)
