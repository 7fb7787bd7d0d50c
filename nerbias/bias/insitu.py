"""In-Situ (Mishra et al. 2020, Section 2.1): CoNLL-03 test sentences whose one one-token PERSON entity is
replaced by each name, a lazy ``NameSubstitutionCorpus`` (``nerbias.bias.corpora``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from nerbias.bias.corpora import NameSubstitutionCorpus
from nerbias.data.conll import Sentence
from nerbias.data.conll2003 import load_conll2003
from nerbias.errors import NerbiasError
from nerbias.validation import BOOLEAN, check_values, one_of

log = logging.getLogger(__name__)


INSITU_RULES = ("single_token_unique", "no_other_person")
DEFAULT_INSITU_RULE = "single_token_unique"
MIN_INSITU_TOKENS = 6  # the paper: "more than 5 tokens"


@dataclass(frozen=True)
class InSituBase:
    """A source sentence and the position of the one-token PERSON entity that names replace."""

    tokens: tuple[str, ...]
    position: int
    source: int  # index of the sentence in the list given to ``from_conll``


class InSituCorpus(NameSubstitutionCorpus):
    """Real sentences whose one one-token PERSON entity is replaced by each name in turn.

    ``index = base_index * N + name_index``. Selection (``from_conll``): more than 5 tokens and
    exactly one one-token PERSON entity, under one of two readings of the paper:

    * ``single_token_unique`` (default): other PERSON entities are allowed if they are longer
      than one token. The paper says "exactly one unigram person entity" and then "as a result,
      the sentence can have other n-gram entities of all types", which reads as multi-token
      PERSON entities being allowed too; this reading gives 302 sentences on CoNLL-03 test
      (eng.testb), the closer of the two to the paper's 289. Only the replaced token is scored,
      so other, multi-token names in the sentence do not enter the metrics.
    * ``no_other_person``: no other PERSON entity at all (217 sentences): a stricter context in
      which the slot is the only person mentioned.
    """

    def __init__(self, bases: Sequence[InSituBase], names: Sequence[str], lowercase: bool = False,
                 rule: str | None = None):
        super().__init__(names, slots=1, num_sources=len(bases), lowercase=lowercase)
        self.base_sentences = tuple(bases)
        self.rule = rule  # how the bases were selected, for reports; None when given directly

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "corpus.source.") -> None:
        """The selection rule (validation.validate checks a config's before any work)."""
        check_values(values, {"rule": one_of(*INSITU_RULES), "verify_sizes": BOOLEAN}, prefix)

    @classmethod
    def from_conll(cls, sentences: Sequence[Sentence], names: Sequence[str], rule: str = DEFAULT_INSITU_RULE,
                   lowercase: bool = False) -> "InSituCorpus":
        """Select base sentences from CoNLL sentences (e.g. ``load_conll2003(dir, ("test",))["test"]``)."""
        if rule not in INSITU_RULES:
            raise NerbiasError(f"unknown In-Situ rule {rule!r}; choose one of {list(INSITU_RULES)}")
        bases = []
        for source, sentence in enumerate(sentences):
            if len(sentence.tokens) < MIN_INSITU_TOKENS:
                continue
            persons = [span for span in sentence.spans if span.label == "PER"]
            one_token = [span for span in persons if span.end - span.start == 1]
            if len(one_token) != 1 or (rule == "no_other_person" and len(persons) != 1):
                continue
            bases.append(InSituBase(tuple(sentence.tokens), one_token[0].start, source))
        if not bases:
            raise NerbiasError(f"no sentence has more than 5 tokens and exactly one one-token PERSON entity "
                               f"(rule {rule!r}, {len(sentences)} sentences given)")
        return cls(bases, names, lowercase=lowercase, rule=rule)

    @classmethod
    def from_conll2003(cls, data_dir: str | Path, names: Sequence[str], rule: str = DEFAULT_INSITU_RULE,
                       lowercase: bool = False, verify_sizes: bool = True) -> "InSituCorpus":
        """``corpus=insitu``: base sentences from the CoNLL-03 test split under ``data_dir``."""
        test = load_conll2003(data_dir, splits=("test",), verify_sizes=verify_sizes)["test"]
        corpus = cls.from_conll(test, names, rule=rule, lowercase=lowercase)
        log.info("In-Situ (rule %s): %d CoNLL-03 test sentences x %d names -> %d sentences",
                 rule, len(corpus.base_sentences), len(names), len(corpus))
        print(f"In-Situ rule {rule}: {len(corpus.base_sentences)} base sentences")
        return corpus

    def _layout(self, source: int) -> tuple[tuple[str, ...], tuple[int, ...], int]:
        base = self.base_sentences[source]
        return base.tokens, (base.position,), base.source  # position in the CoNLL input, to trace it back

    def index_of(self, base: int, name: int) -> int:
        """Index of base sentence ``base`` with name ``name`` in its slot."""
        return self.encode(base, (name,))
