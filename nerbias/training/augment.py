"""Training-data augmentation that targets name bias (``augment`` config group; every option off by default).

Applied to the training sentences afresh each epoch, from a generator seeded by (run seed, epoch),
so a resumed run sees the same data as an uninterrupted one. In this order:

1. **Name substitution** (``names=P``): each single-token PERSON mention is replaced, with
   probability P, by a name drawn uniformly from ``name_pool`` (distinct SSA first names disjoint
   from every evaluation name list; see ``nerbias.bias.names.substitution_pool``). Multi-token
   mentions ("John Smith") are left as they are: a first name replaced inside a full name would need
   a surname model, and the bias corpora place one-token names only.
2. **Entity masking** (``entity_mask=P``): every token of a PERSON mention becomes the unknown word
   ``<unk>`` with probability P per mention, so the tagger must find persons from context
   (in the spirit of Ghaddar et al. 2021).
3. **Mixed case** (``lowercase=P``): each sentence is lower-cased with probability P; with P = 1 the
   epoch holds every sentence twice, cased and lower-cased (the concatenation of Mayhew et al. 2019).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from nerbias.data.conll import Sentence, lowercased
from nerbias.data.vocab import UNK
from nerbias.errors import NerbiasError

PERSON = "PER"
AUGMENT_PROBABILITIES = ("lowercase", "names", "entity_mask")  # the options; any > 0 switches augmentation on


@dataclass(frozen=True)
class Augmentation:
    lowercase: float = 0.0
    names: float = 0.0
    entity_mask: float = 0.0
    name_pool: tuple[str, ...] = ()

    def __post_init__(self):
        for key in ("lowercase", "names", "entity_mask"):
            value = getattr(self, key)
            if not 0.0 <= float(value) <= 1.0:
                raise NerbiasError(f"augment.{key}={value}: must be a probability in [0, 1]")
        if self.names > 0 and not self.name_pool:
            raise NerbiasError("augment.names > 0 needs a non-empty augment.name_pool")

    @property
    def active(self) -> bool:
        return bool(self.lowercase or self.names or self.entity_mask)

    def epoch(self, sentences: Sequence[Sentence], seed: int, epoch: int) -> list[Sentence]:
        """This epoch's training sentences (the input itself when nothing is switched on)."""
        if not self.active:
            return list(sentences)
        rng = np.random.default_rng([int(seed), int(epoch)])
        out = [self._substitute_and_mask(s, rng) for s in sentences]
        if self.lowercase >= 1.0:
            return out + lowercased(out)
        if self.lowercase > 0:
            flips = rng.random(len(out)) < self.lowercase
            out = [lower if flip else s for s, lower, flip in zip(out, lowercased(out), flips)]
        return out

    def _substitute_and_mask(self, sentence: Sentence, rng: np.random.Generator) -> Sentence:
        persons = [span for span in sentence.spans if span.label == PERSON]
        if not persons or not (self.names or self.entity_mask):
            return sentence
        tokens = list(sentence.tokens)
        for span in persons:
            if self.names and span.end - span.start == 1 and rng.random() < self.names:
                tokens[span.start] = self.name_pool[int(rng.integers(len(self.name_pool)))]
            if self.entity_mask and rng.random() < self.entity_mask:
                tokens[span.start:span.end] = [UNK] * (span.end - span.start)
        return Sentence(tuple(tokens), sentence.spans)

