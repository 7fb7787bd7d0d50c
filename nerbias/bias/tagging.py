"""What the ``tagger`` group builds, and what it can do: benchmarks ask a tagger, they never probe its type.

- ``Tagger``: every tagger names itself (``name``, shown in results), says what tells its shards from
  another tagger's (``identity()``) and which trained model it reads (``lineage()``, for the W&B model
  artifact), hands the CoNLL-03 benchmark a ``NerTagger`` when it has one (``ner_tagger``), and gives the
  census benchmark its census labeller (``census_labeller()``).
- ``SlotTagger``: a tagger of sentences (``tag``; ours also ``tag_indices``): every name corpus. Its
  census labeller tags each census name's sentence (``TaggedCensus``).
- ``CensusLabeller``: labels the census benchmark's names, and nothing else (published predictions are
  one, ``published.PublishedPredictions``).

Adding a tagger is one ``SlotTagger`` subclass (``tag``, ``name``) and a YAML file in ``configs/tagger/``.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from nerbias.bias import census
from nerbias.bias.types import BiasSentence, SlotOutcome
from nerbias.bias.ssa import SsaTable
from nerbias.errors import NerbiasError

log = logging.getLogger(__name__)


class Lineage(NamedTuple):
    """The trained model a tagger reads: the training run's name and the checkpoint file."""

    run_name: str | None
    path: str


@dataclass(frozen=True)
class CensusOptions:
    """How sentences of the census are written and read (the ``corpus=census`` settings a labeller needs)."""

    lowercase: bool = False
    batch_size: int = 1024
    partial_person_is_person: bool = True


class CensusLabeller(ABC):
    """Labels the names of the census benchmark."""

    name: str

    @abstractmethod
    def label(self, table: SsaTable, templates: Sequence[int]
              ) -> tuple[census.CensusOutcomes, pd.DataFrame, float]:
        """The census outcomes of ``table``'s rows in ``templates``, ``census_labels.csv`` and the seconds
        spent inside the tagger (or reading its predictions)."""


class Tagger(ABC):
    """Anything the ``tagger`` group builds (see the module docstring)."""

    name: str = "tagger"
    ner_tagger: Any = None  # a nerbias NerTagger inside (our checkpoints): what CoNLL-03 scoring runs

    def identity(self) -> dict[str, Any]:
        """What must agree between the shards of one evaluation besides ``name`` (a model file's
        content, options that change outcomes); JSON values."""
        return {}

    def lineage(self) -> Lineage | None:
        """The trained model of ours this tagger reads (None: not one of our checkpoints)."""
        return None

    @abstractmethod
    def census_labeller(self, options: CensusOptions) -> CensusLabeller:
        """What labels the census benchmark's names for this tagger."""

    def slot_tagger(self, corpus: str) -> SlotTagger:
        """This tagger as a tagger of ``corpus``'s sentences; a census labeller tags none."""
        raise NerbiasError(f"tagger {self.name} labels the census benchmark's names only, not {corpus} sentences "
                           "(use corpus=census)")


class SlotTagger(Tagger):
    """Labels the name slots of bias sentences (one subclass per tagger kind)."""

    can_tag_indices: bool = False  # tag_indices(corpus, indices): name-substitution sentences by index, as arrays

    @abstractmethod
    def tag(self, sentences: Sequence[BiasSentence]) -> list[list[SlotOutcome]]:
        """One list per sentence, one outcome per slot, in slot order."""

    def slot_tagger(self, corpus: str) -> SlotTagger:
        return self

    def census_labeller(self, options: CensusOptions) -> CensusLabeller:
        return TaggedCensus(self, options)


class TaggedCensus(CensusLabeller):
    """A sentence tagger's census labels: each distinct name tagged once per template, reused across years."""

    def __init__(self, tagger: SlotTagger, options: CensusOptions):
        self.tagger = tagger
        self.options = options
        self.name = tagger.name

    def tag_names(self, names: Sequence[str], templates: Sequence[int]) -> tuple[dict[int, np.ndarray], float]:
        """Each name's census label in each template, and the seconds spent inside the tagger."""
        labels, seconds = {}, 0.0
        partial_person_is_person = self.options.partial_person_is_person
        census_label: dict[str, str] = {}  # outcome label -> census label; a handful of distinct labels
        batch_size = int(self.options.batch_size)
        for template in templates:
            sentences = census.census_sentences(names, template, lowercase=self.options.lowercase)
            per_name = np.empty(len(names), dtype=object)
            for first in tqdm(range(0, len(sentences), batch_size), desc=f"census template {template}", unit="batch"):
                batch = sentences[first:first + batch_size]
                started = time.perf_counter()
                tagged = self.tagger.tag(batch)
                seconds += time.perf_counter() - started
                for outcomes in tagged:
                    label = outcomes[0].label
                    if label not in census_label:
                        census_label[label] = census.outcome_to_census_label(label, partial_person_is_person)
                per_name[first:first + len(batch)] = [census_label[outcomes[0].label] for outcomes in tagged]
            labels[template] = per_name
        return labels, seconds

    def label(self, table: SsaTable, templates: Sequence[int]
              ) -> tuple[census.CensusOutcomes, pd.DataFrame, float]:
        log.info("census: %d distinct names x %d templates, each tagged once and reused across years",
                 len(table.names), len(templates))
        labels, seconds = self.tag_names(table.names.tolist(), templates)
        label_table = pd.DataFrame({"name": np.tile(table.names, len(templates)),
                                    "template": np.repeat(np.asarray(templates, dtype=np.int64), len(table.names)),
                                    "label": np.concatenate([labels[template] for template in templates])})
        return census.CensusOutcomes.from_name_labels(table, labels), label_table, seconds
