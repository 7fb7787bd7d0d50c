"""Training-data augmentation that targets name bias (``augment`` config group; every option off by default).

Applied to the training sentences afresh each epoch, from a generator seeded by (run seed, epoch),
so a resumed run sees the same data as an uninterrupted one. In this order:

1. **Name substitution** (``names=P``): each single-token PERSON mention is replaced, with
   probability P, by a name drawn uniformly from ``name_pool`` (distinct SSA first names disjoint
   from every evaluation name list; see ``nerbias.bias.names.substitution_pool``; with
   ``name_pool=ambiguous`` only those that are also places or organisations,
   ``nerbias.data.ambiguity``). Multi-token mentions ("John Smith") are left as they are: a first
   name replaced inside a full name would need a surname model, and the bias corpora place one-token
   names only.
2. **Entity masking** (``entity_mask=P``): every token of a PERSON mention becomes the masked token
   (``nerbias.data.batching.MASKED``: word id ``<unk>`` and no characters, so the character features
   are zero; for an ELMo encoder the empty word) with probability P per mention, so the tagger must
   find persons from context (in the spirit of Ghaddar et al. 2021).
3. **Mixed case** (``lowercase=P``): each sentence is lower-cased with probability P; with P = 1 the
   epoch holds every sentence twice, cased and lower-cased (the concatenation of Mayhew et al. 2019).
4. **Context-aware adversarial noise** (``adversarial=λ``, after Ghaddar et al. 2021): each entity
   mention of any type with at least ``adversarial_context`` context words (tokens outside the
   mention holding a letter or digit) is chosen with probability λ; its tokens are masked as in 2 and
   marked with an entity type other than its own, drawn uniformly (``NoisySentence``). The tagger
   replaces their whole representation by that type's learnable noise vector (one per type, shared
   by every token of the mention; ``BiLSTMCRFTagger.mention_noise``) and keeps the gold label, so only
   the context can recover it. Applied last, so a lower-cased copy draws its own mentions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from nerbias.data.batching import MASKED, NoisySentence
from nerbias.data.conll import ENTITY_TYPES, Sentence, lowercased
from nerbias.errors import NerbiasError
from nerbias.validation import PROBABILITY, Rule, at_least, check_values

PERSON = "PER"
# The options; any > 0 switches augmentation on.
AUGMENT_PROBABILITIES = ("lowercase", "names", "entity_mask", "adversarial")
DEFAULT_ADVERSARIAL_CONTEXT = 3  # context words a mention needs for adversarial noise (Ghaddar et al. 2021)


def effective_augment_options(section: Mapping[str, Any]) -> dict[str, Any]:
    """An ``augment`` config section without the keys that do not act: ``adversarial`` and
    ``adversarial_context`` while adversarial training is off, ``ambiguity`` unless the pool is
    ``ambiguous``; so a run saved before those keys existed compares equal to the same run now."""
    values = dict(section)
    if not values.get("adversarial"):
        values.pop("adversarial", None)
        values.pop("adversarial_context", None)
    if values.get("name_pool") != "ambiguous":
        values.pop("ambiguity", None)
    return values


AUGMENT_RULES: dict[str, Rule] = {**{key: PROBABILITY for key in AUGMENT_PROBABILITIES},
                                  "adversarial_context": at_least(0)}


@dataclass(frozen=True)
class Augmentation:
    lowercase: float = 0.0
    names: float = 0.0
    entity_mask: float = 0.0
    name_pool: tuple[str, ...] = ()
    adversarial: float = 0.0
    adversarial_context: int = DEFAULT_ADVERSARIAL_CONTEXT
    entity_types: tuple[str, ...] = ENTITY_TYPES  # the types of the noise vectors

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "augment.") -> None:
        """What each ``augment`` option may be (validation.validate checks a config's before any work)."""
        check_values(values, AUGMENT_RULES, prefix)

    def __post_init__(self):
        self.check_values(vars(self))
        if self.names > 0 and not self.name_pool:
            raise NerbiasError("augment.names > 0 needs a non-empty augment.name_pool")
        if self.adversarial > 0 and len(self.entity_types) < 2:
            raise NerbiasError("augment.adversarial needs at least two entity types (a wrong one to draw)")

    @property
    def noise_types(self) -> tuple[str, ...]:
        """The entity types of the tagger's learnable noise vectors: ``entity_types`` with adversarial
        training, none without (``NerTagger.build``'s ``noise_types``)."""
        return tuple(self.entity_types) if self.adversarial > 0 else ()

    @property
    def active(self) -> bool:
        return bool(self.lowercase or self.names or self.entity_mask or self.adversarial)

    def epoch(self, sentences: Sequence[Sentence], seed: int, epoch: int) -> list[Sentence]:
        """This epoch's training sentences (the input itself when nothing is switched on)."""
        if not self.active:
            return list(sentences)
        rng = np.random.default_rng([int(seed), int(epoch)])
        out = [self._substitute_and_mask(s, rng) for s in sentences]
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
        words = [any(c.isalnum() for c in token) for token in sentence.tokens]
        total_words = sum(words)
        tokens, noise = list(sentence.tokens), [None] * len(sentence.tokens)
        for span in sentence.spans:
            if total_words - sum(words[span.start:span.end]) < self.adversarial_context:
                continue
            if rng.random() < self.adversarial:
                wrong = [kind for kind in self.entity_types if kind != span.label]
                kind = wrong[int(rng.integers(len(wrong)))]
                tokens[span.start:span.end] = [MASKED] * (span.end - span.start)
                noise[span.start:span.end] = [kind] * (span.end - span.start)
        if all(kind is None for kind in noise):
            return sentence
        return NoisySentence(tuple(tokens), sentence.spans, tuple(noise))

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

