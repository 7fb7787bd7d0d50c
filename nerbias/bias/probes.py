"""Paired probes (``corpus=probes``): every name in person contexts and in place contexts.

A tagger that reads context tags "{X} told the reporter she would stay." PERSON and "They moved to {X}
last year." LOCATION whatever {X} is; one that memorises a token's usual type gets one of the two. Per
name: PERSON recall in person contexts (the slot is exactly a one-token PERSON entity, as in the other
corpora) and LOCATION recall in place contexts (the slot is exactly a one-token place entity: ``LOC``,
or what other taggers call a place, ``labels.PLACE_TYPES``).

The templates are a data file (``resources/probes.tsv``, its header says who wrote it): a header line
``context<TAB>sentence``, then ``person`` or ``place`` and a sentence with one ``{X}``; ``#`` lines are
comments. Sentences are tokenised as the Winogender templates are (``corpora.tokenize``).

Outputs (``benchmarks.ProbesBenchmark``, all final together): ``per_name.csv`` (the person-context columns every
name corpus writes, so reports read it as any name corpus, plus ``place_sentences``, ``place_located``,
``place_recall``), ``per_group.csv`` (PERSON and LOCATION recall per group, slot-weighted),
``label_breakdown.csv`` (person contexts) and ``place_label_breakdown.csv``, ``probes_recall.png`` (the
two recalls, one point per name, group colours) and ``metrics.json``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from nerbias.bias.corpora import NameSubstitutionCorpus, tokenize
from nerbias.bias.labels import PLACE_TYPES
from nerbias.bias.names import NameList
from nerbias.bias.statistics import NameStatistics, per_group, summary_scalars
from nerbias.errors import DataFormatError, NerbiasError
from nerbias.fileio import read_utf8_text
from nerbias.validation import check_values, existing_file

log = logging.getLogger(__name__)

DEFAULT_PROBES_PATH = Path(__file__).resolve().parent / "resources" / "probes.tsv"
CONTEXTS = ("person", "place")
SLOT = "{X}"
_PLACEHOLDER = "$NAME"  # what the tokenizer keeps whole
HEADER = ("context", "sentence")


@dataclass(frozen=True)
class ProbeTemplate:
    context: str  # "person" or "place"
    tokens: tuple[str, ...]  # the slot token holds the placeholder
    position: int
    line: int  # 1-based line in the file

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


def load_probe_templates(path: str | Path | None = None) -> list[ProbeTemplate]:
    """The templates of ``path`` (None: the packaged file); a bad line is a DataFormatError naming it."""
    path = Path(path) if path is not None else DEFAULT_PROBES_PATH
    text = read_utf8_text(path, "probe templates file")
    templates: list[ProbeTemplate] = []
    header_seen = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [field.strip() for field in line.split("\t")]
        if not header_seen:
            if tuple(fields) != HEADER:
                raise DataFormatError(path, f"expected the header {'<TAB>'.join(HEADER)!r}, found {line!r}", number)
            header_seen = True
            continue
        if len(fields) != 2:
            raise DataFormatError(path, f"expected 2 tab-separated fields (context, sentence), found {len(fields)}",
                                  number)
        context, sentence = fields
        if context not in CONTEXTS:
            raise DataFormatError(path, f"context {context!r} must be one of {list(CONTEXTS)}", number)
        if sentence.count(SLOT) != 1:
            raise DataFormatError(path, f"the sentence must hold {SLOT} exactly once: {sentence!r}", number)
        if _PLACEHOLDER in sentence:  # the slot's internal marker: the name would be scored in the wrong place
            raise DataFormatError(path, f"{_PLACEHOLDER} in {sentence!r}: the name's slot is written {SLOT}", number)
        tokens = tuple(tokenize(sentence.replace(SLOT, f" {_PLACEHOLDER} ")))
        if any(token.startswith("$") and token != _PLACEHOLDER for token in tokens):
            raise DataFormatError(path, f"unexpected placeholder in {sentence!r} (only {SLOT})", number)
        templates.append(ProbeTemplate(context, tokens, tokens.index(_PLACEHOLDER), number))
    missing = [context for context in CONTEXTS if not any(t.context == context for t in templates)]
    if missing:
        raise DataFormatError(path, f"no {' or '.join(missing)} template")
    return templates


class ProbeCorpus(NameSubstitutionCorpus):
    """The templates of one context, each filled with every name (``index = template * N + name``)."""

    def __init__(self, templates: Sequence[ProbeTemplate], names: Sequence[str], lowercase: bool = False):
        contexts = {template.context for template in templates}
        if len(contexts) > 1:
            raise NerbiasError(f"a ProbeCorpus holds one context, got {sorted(contexts)}")
        super().__init__(names, slots=1, num_sources=len(templates), lowercase=lowercase)
        self.templates = tuple(templates)
        self.context = contexts.pop() if contexts else None

    def _layout(self, source: int) -> tuple[tuple[str, ...], tuple[int, ...], int]:
        template = self.templates[source]
        return template.tokens, (template.position,), template.line


@dataclass(frozen=True)
class PairedProbes:
    """``corpus=probes``: the person-context and place-context corpora of one templates file."""

    person: ProbeCorpus
    place: ProbeCorpus

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "corpus.source.") -> None:
        """The templates file is there, or null (validation.validate checks a config's before any work)."""
        check_values(values, {"templates": existing_file("the packaged resources/probes.tsv")}, prefix)

    @classmethod
    def from_file(cls, names: Sequence[str], templates: str | Path | None = None, lowercase: bool = False
                  ) -> "PairedProbes":
        loaded = load_probe_templates(templates)
        by_context = {context: [t for t in loaded if t.context == context] for context in CONTEXTS}
        log.info("probes: %d person and %d place templates x %d names", len(by_context["person"]),
                 len(by_context["place"]), len(names))
        return cls(ProbeCorpus(by_context["person"], names, lowercase), ProbeCorpus(by_context["place"], names, lowercase))

    def corpora(self) -> dict[str, ProbeCorpus]:
        return {"person": self.person, "place": self.place}


def place_located(stats: NameStatistics, name: str) -> int:
    """Slots of ``name`` tagged exactly as a one-token place entity."""
    entry = stats.names.get(name)
    return 0 if entry is None else int(sum(entry.labels.get(kind, 0) for kind in PLACE_TYPES))


def probe_tables(person: NameStatistics, place: NameStatistics, names: NameList, ddof: int = 0
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_name, per_group)``: the person-context columns of any name corpus plus the place recall."""
    table = person.per_name(names, ddof=ddof)
    table["place_sentences"] = [place.names[n].slots if n in place.names else 0 for n in table["name"]]
    table["place_located"] = [place_located(place, n) for n in table["name"]]
    table["place_recall"] = table["place_located"] / table["place_sentences"].where(table["place_sentences"] > 0)
    groups = per_group(table, names, ddof=ddof)
    place_recall = []
    for group in groups["group"]:
        members = table[table["name"] != names.oov] if group == "ALL" else table[table["group"] == group]
        place_recall.append(members["place_located"].sum() / max(members["place_sentences"].sum(), 1))
    groups.insert(4, "place_recall", place_recall)
    return table, groups


def probe_scalars(groups: pd.DataFrame, prefix: str) -> dict[str, Any]:
    """``<prefix>/<group>/accuracy`` (PERSON recall in person contexts) as other corpora, plus
    ``<prefix>/<group>/place_recall``."""
    scalars = summary_scalars(groups, prefix)
    scalars.update({f"{prefix}/{row.group}/place_recall": float(row.place_recall)
                    for row in groups.itertuples(index=False)})
    return scalars


__all__ = ["PairedProbes", "ProbeCorpus", "ProbeTemplate", "load_probe_templates", "probe_tables",
           "probe_scalars", "place_located", "DEFAULT_PROBES_PATH"]
