"""The dev probe (``corpus=dev_probe``, issue 45): CoNLL-03 dev with its one-token PERSON and LOCATION
mentions replaced by place-like first names, for choosing training options without looking at a bias
corpus.

Every sentence of CoNLL-03 dev (eng.testa) with a one-token ``PER`` or ``LOC`` mention is kept, and each
such mention is replaced by a name of ``name_pools.dev_probe_names``: the quarter of the ambiguous
training-half SSA names that ``augment/name_pool=ambiguous_train`` never substitutes, less the names of
``pool_exclude`` (Mishra et al.'s list) and of Tzioumis (2018) (every census-scale list), so neither
training with that pool nor any evaluation list has seen them. The names of a sentence are drawn,
distinct, from a generator seeded by (``seed``, sentence index): the probe is the same for every
tagger. A string such as "Sofia" then says nothing about the type; only the sentence does.

Per gold type, the recall of the replaced mentions: a ``PER`` slot counts when the tagger makes it
exactly a one-token PERSON entity, a ``LOC`` slot when exactly a one-token place entity (``LOC``, or
what other taggers call a place: ``labels.PLACE_TYPES``). ``per_type.csv`` also counts what the slots
became instead. Outputs, final together: ``per_type.csv`` and ``metrics.json``
(``dev_probe/person_recall``, ``dev_probe/place_recall`` and their mean, ``dev_probe/mean_recall``,
the selection's criterion beside dev F1: docs/context_training.md).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from nerbias.bias.labels import PLACE_TYPES
from nerbias.bias.name_pools import dev_probe_names
from nerbias.bias.names import load_names
from nerbias.bias.tagging import Tagger
from nerbias.bias.types import NONE, PARTIAL_PREFIX, RECOGNISED, BiasSentence, NameSlot, corpus_label
from nerbias.data.ambiguity import AmbiguityRule
from nerbias.data.conll import Sentence
from nerbias.data.conll2003 import load_conll2003
from nerbias.errors import NerbiasError
from nerbias.fileio import atomic_files, atomic_write_json, write_csv
from nerbias.loggers import NullLogger
from nerbias.validation import BOOLEAN, POSITIVE_INTEGER, at_least, check_values

log = logging.getLogger(__name__)

SWAPPED_TYPES = ("PER", "LOC")
OUTCOME_COLUMNS = ("PER", "LOC", "ORG", "MISC", "other", "none", "partial")


@dataclass(frozen=True)
class DevProbe:
    """The probe's sentences, and for each the gold type of each of its slots (slot order)."""

    sentences: tuple[BiasSentence, ...]
    types: tuple[tuple[str, ...], ...]

    @classmethod
    def from_conll(cls, sentences: Sequence[Sentence], names: Sequence[str], seed: int,
                   lowercase: bool = False) -> "DevProbe":
        if not names:
            raise NerbiasError("the dev probe needs at least one name")
        probe, types = [], []
        for index, sentence in enumerate(sentences):
            mentions = [span for span in sentence.spans if span.label in SWAPPED_TYPES and span.end - span.start == 1]
            if not mentions:
                continue
            rng = np.random.default_rng([seed, index])
            picks = rng.choice(len(names), size=len(mentions), replace=len(mentions) > len(names))
            tokens = list(sentence.tokens)
            for span, pick in zip(mentions, picks):
                tokens[span.start] = names[pick]
            if lowercase:
                tokens = [token.lower() for token in tokens]
            slots = tuple(NameSlot(span.start, names[pick]) for span, pick in zip(mentions, picks))
            probe.append(BiasSentence(tuple(tokens), slots, source=index, index=len(probe)))
            types.append(tuple(span.label for span in mentions))
        if not probe:
            raise NerbiasError(f"no sentence of the {len(sentences)} given has a one-token PER or LOC mention")
        return cls(tuple(probe), tuple(types))


def outcome_column(label: str) -> str:
    """Where a slot outcome counts in ``per_type.csv``."""
    if label == NONE:
        return "none"
    if label.startswith(PARTIAL_PREFIX):
        return "partial"
    if label in PLACE_TYPES:
        return "LOC"
    return label if label in OUTCOME_COLUMNS else "other"


def recalled(gold: str, label: str) -> bool:
    return label == RECOGNISED if gold == "PER" else label in PLACE_TYPES


def score_probe(tagger: Any, probe: DevProbe, batch_size: int) -> pd.DataFrame:
    """One row per gold type: mentions, recalled, recall, and what the slots were tagged as."""
    outcomes = {gold: Counter() for gold in SWAPPED_TYPES}
    hits = Counter()
    for first in range(0, len(probe.sentences), batch_size):
        batch = probe.sentences[first:first + batch_size]
        for types, tagged in zip(probe.types[first:first + batch_size], tagger.tag(batch)):
            for gold, outcome in zip(types, tagged):
                outcomes[gold][outcome_column(outcome.label)] += 1
                hits[gold] += recalled(gold, outcome.label)
    rows = []
    for gold in SWAPPED_TYPES:
        mentions = sum(outcomes[gold].values())
        rows.append({"type": gold, "mentions": mentions, "recalled": hits[gold],
                     "recall": hits[gold] / mentions if mentions else float("nan"),
                     **{f"tagged_{column}": outcomes[gold][column] for column in OUTCOME_COLUMNS}})
    return pd.DataFrame(rows)


class DevProbeBenchmark:
    """``corpus=dev_probe``: build the probe from CoNLL-03 dev and the dev names, tag it, write the table."""

    RULES = {"seed": at_least(0), "batch_size": POSITIVE_INTEGER, "lowercase": BOOLEAN,
             "exclude_tzioumis": BOOLEAN, "verify_sizes": BOOLEAN}

    def __init__(self, name: str, paper: str, data_dir: str, seed: int = 0, lowercase: bool = False,
                 batch_size: int = 1024, verify_sizes: bool = True, pool_exclude: Sequence[str | None] = (None,),
                 exclude_tzioumis: bool = True, ambiguity: Mapping[str, Any] | None = None,
                 run: Any = None):
        """``run``: the evaluation's shared settings (``runner.EvaluationRun``), which the probe does not use
        (it keeps no name statistics)."""
        # Checked on building, before any data is read: after a training (experiment=context_selection) a bad
        # value would otherwise surface only once the training is done.
        self.check_values({"seed": seed, "batch_size": batch_size, "lowercase": lowercase,
                           "exclude_tzioumis": exclude_tzioumis, "verify_sizes": verify_sizes})
        if ambiguity is None:  # the rule of the pool the probe's names are the held-out quarter of
            raise NerbiasError("corpus.ambiguity: needed (configs/corpus/dev_probe.yaml gives the name pools' rule)")
        try:
            AmbiguityRule.from_mapping(ambiguity)
        except NerbiasError as error:
            raise NerbiasError(f"corpus.ambiguity: {error}") from None
        self.name, self.paper, self.data_dir, self.seed = str(name), paper, data_dir, int(seed)
        self.lowercase, self.batch_size, self.verify_sizes = bool(lowercase), int(batch_size), bool(verify_sizes)
        self.exclude_tzioumis, self.ambiguity = bool(exclude_tzioumis), ambiguity
        self.pool_exclude = list(pool_exclude or [None])
        for path in self.pool_exclude:
            load_names(path)  # a missing or malformed list: its own error, now

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "corpus.") -> None:
        check_values(values, cls.RULES, prefix)

    def evaluate(self, tagger: Tagger, output_dir: Path, logger: NullLogger) -> dict[str, Any]:
        names = dev_probe_names(self.data_dir, self.pool_exclude, self.ambiguity, exclude_tzioumis=self.exclude_tzioumis)
        dev = load_conll2003(self.data_dir, splits=("dev",), verify_sizes=self.verify_sizes)["dev"]
        lowercase = self.lowercase
        probe = DevProbe.from_conll(dev, names, self.seed, lowercase)
        slot_tagger = tagger.slot_tagger(self.name)
        log.info("dev probe: %d CoNLL-03 dev sentences, %d swapped mentions, %d names; tagging with %s",
                 len(probe.sentences), sum(map(len, probe.types)), len(names), slot_tagger.name)
        table = score_probe(slot_tagger, probe, self.batch_size)
        prefix = corpus_label(self.name, lowercase)
        recall = dict(zip(table["type"], table["recall"]))
        scalars = {f"{prefix}/person_recall": float(recall["PER"]), f"{prefix}/place_recall": float(recall["LOC"]),
                   f"{prefix}/mean_recall": float((recall["PER"] + recall["LOC"]) / 2),
                   **{f"{prefix}/mentions_{gold}": int(n) for gold, n in zip(table["type"], table["mentions"])}}
        with atomic_files([output_dir / "per_type.csv", output_dir / "metrics.json"]) as (table_path, metrics_path):
            write_csv(table_path, table)
            atomic_write_json(metrics_path, {"metrics": scalars, "tagger": slot_tagger.name, "names": len(names),
                                             "sentences": len(probe.sentences)})
        logger.summary(scalars)
        logger.table(f"{prefix}/per_type", table)
        print(table.to_string(index=False))
        return scalars
