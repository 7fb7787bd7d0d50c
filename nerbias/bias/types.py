"""Data types shared by the bias corpora, the taggers that label them, and the metrics."""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional, Sequence

# Outcome labels of a name slot.
RECOGNISED = "PER"  # the name token is exactly a one-token PERSON entity
NONE = "none"  # the name token is outside every entity
PARTIAL_PREFIX = "partial:"  # part of a longer entity, e.g. "partial:PER", "partial:ORG"
# Any other value is the type of a one-token non-PERSON entity: "LOC", "ORG", "MISC", ...


# NamedTuples, not dataclasses: hundreds of millions are built per evaluation, and a tuple
# is several times cheaper to construct than a frozen dataclass.
class NameSlot(NamedTuple):
    position: int  # token index of the name in the sentence
    name: str  # the name as listed (original case): the key of per-name statistics


class BiasSentence(NamedTuple):
    """A synthetic sentence with the positions of the names placed in it."""

    tokens: tuple[str, ...]
    slots: tuple[NameSlot, ...]
    source: int = 0  # template number or source-sentence index
    index: int = 0  # position in its corpus (deterministic)

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


class SlotOutcome(NamedTuple):
    """What a tagger made of one name slot."""

    label: str  # RECOGNISED, NONE, PARTIAL_PREFIX + type, or another entity type
    confidence: Optional[float] = None  # our CRFs: P(slot is a one-token PERSON | sentence); None otherwise

    @property
    def recognised(self) -> bool:
        return self.label == RECOGNISED


def outcome_from_spans(spans: Sequence[tuple[int, int, str]], position: int, person_label: str = "PER") -> str:
    """The outcome label of the token at ``position`` given predicted ``(start, end, type)`` spans."""
    for start, end, label in spans:
        if start <= position < end:
            if end - start == 1:
                return RECOGNISED if label == person_label else label
            return PARTIAL_PREFIX + (RECOGNISED if label == person_label else label)
    return NONE


LOWERCASE_SUFFIX = "_lower"


def corpus_label(corpus: str, lowercase: bool) -> str:
    """``winogender`` or ``winogender_lower``: the prefix of a corpus's metric keys and run folders."""
    return f"{corpus}{LOWERCASE_SUFFIX if lowercase else ''}"


def parse_corpus_label(label: str) -> tuple[str, bool]:
    """Inverse of ``corpus_label``: ``"insitu_lower"`` -> ``("insitu", True)``."""
    if label.endswith(LOWERCASE_SUFFIX):
        return label[: -len(LOWERCASE_SUFFIX)], True
    return label, False


CORPUS_TITLES = {"winogender": "Winogender", "insitu": "In-Situ CoNLL-03", "census": "Census",
                 "probes": "Paired probes (person vs place contexts)",
                 "winogender_oov": "Winogender, OOV name set", "insitu_oov": "In-Situ CoNLL-03, OOV name set",
                 # the census-scale name list (docs/name-groups.md), as the study's jobs hold it: bias/<corpus>_census
                 "winogender_census": "Winogender, census-scale name list",
                 "insitu_census": "In-Situ CoNLL-03, census-scale name list"}


def corpus_title(corpus: str, lowercase: bool = False) -> str:
    """The corpus in words for titles: ``In-Situ CoNLL-03, lower-cased``."""
    return CORPUS_TITLES.get(corpus, corpus) + (", lower-cased" if lowercase else "")


PARTIAL_SUFFIX = ".partial"  # per_name.partial.csv ...: results of a merge that lacks shards


def partial_note(extra: Mapping[str, object]) -> str | None:
    """``"partial: 2 of 3 shards merged, missing shard index 1"`` for a merge that lacks shards, else None."""
    missing = extra.get("shards_missing") or []
    if not missing:
        return None
    merged = int(extra.get("shards_merged") or 0)
    return (f"partial: {merged} of {merged + len(missing)} shards merged, missing shard index "
            f"{', '.join(map(str, missing))}")


def result_file_name(key: str, extension: str, partial: bool) -> str:
    """``per_name.csv``, or ``per_name.partial.csv`` for a merge that lacks shards."""
    return f"{key}{PARTIAL_SUFFIX if partial else ''}{extension}"
