"""The two synthetic bias corpora of Mishra et al. (2020), Section 2.1, as lazy indexable sequences.

* Winogender: every Winogender-schema template with its occupation, participant and pronoun slots
  filled by three distinct names, all ordered triples (hundreds of millions of sentences).
* In-Situ: CoNLL-03 test sentences whose one one-token PERSON entity is replaced by each name
  (``nerbias.bias.insitu``).

Neither corpus is ever materialised: ``sentence(index)`` builds one sentence in O(1) from its
index, so runs can be sharded (``shard_bounds``), streamed (``iter_range``) or sampled
(``sample_indices``) and every result traced back to its index.

Tokenisation of templates (``tokenize``): a deterministic regex in the style of CoNLL-03 / Penn
Treebank, so that template sentences look like the text the taggers were trained on:
punctuation marks are separate tokens; hyphenated words stay whole ("cross-examined", "x-ray");
numbers stay whole ("911", "10.5", "1,000"); negations and clitics are split as in CoNLL-03
("couldn't" -> "could" "n't", "John's" -> "John" "'s"); other apostrophes stay inside the word
("O'Brien"). A name is always exactly one token.
"""

from __future__ import annotations

import logging
import random
import re
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from math import perm
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from nerbias.bias.types import BiasSentence, NameSlot
from nerbias.errors import DataFormatError, NerbiasError
from nerbias.fileio import read_utf8_text
from nerbias.validation import POSITIVE_INTEGER, check_values, existing_file, optional

log = logging.getLogger(__name__)

_CLITICS = r"(?:s|re|ve|ll|d|m)\b"
_TOKEN = re.compile(
    rf"""
    \$[A-Za-z_]+                        # template placeholder, filled later
  | \w+(?=n't\b)                        # "could" of "couldn't"
  | n't\b
  | '{_CLITICS}                         # "'s", "'re", ...
  | \d+(?:[.,:]\d+)*(?![\w-])           # numbers: 911, 10.5, 1,000, 10:30
  | \w+(?:-\w+)*(?:'(?!{_CLITICS})\w+(?:-\w+)*)*   # words, hyphenated words, O'Brien
  | \S                                  # any other character: one punctuation token each
    """,
    re.VERBOSE | re.IGNORECASE,
)


def shard_bounds(total: int, num_shards: int, shard: int) -> tuple[int, int]:
    """``(start, stop)`` of shard ``shard`` when ``total`` items are cut into ``num_shards``
    contiguous, near-equal shards; together the shards cover every item exactly once."""
    if num_shards < 1 or not 0 <= shard < num_shards:
        raise NerbiasError(f"corpus.shard={shard} must be in [0, corpus.num_shards={num_shards}) "
                           "with num_shards >= 1")
    return total * shard // num_shards, total * (shard + 1) // num_shards


def tokenize(text: str) -> list[str]:
    """Split plain English text into CoNLL-03-style tokens (see the module docstring)."""
    return _TOKEN.findall(text)


class CorpusIndexError(NerbiasError, IndexError):
    """A sentence index outside the corpus (an IndexError, so corpora behave as sequences)."""


# --------------------------------------------------------------------------------------------
# Shared logic: names placed in numbered sources (templates or base sentences).


class NameSubstitutionCorpus(ABC):
    """Sentences made by placing ``slots`` distinct names into each of ``num_sources`` sources.

    Index layout (mixed radix): ``index = source * P + rank``, where ``P = N!/(N-slots)!`` counts
    the ordered choices of distinct names and ``rank`` numbers them with the first slot most
    significant; slot ``m`` holds the ``d_m``-th name among those not yet used. Consecutive
    indices therefore share a source (similar lengths: good batches) and the last slot varies
    fastest. For one slot this is simply ``source * N + name``.
    """

    def __init__(self, names: Sequence[str], slots: int, num_sources: int, lowercase: bool):
        names = list(names)
        if len(names) < slots:
            raise NerbiasError(f"{type(self).__name__} needs at least {slots} distinct names, got {len(names)}")
        keys = [name.lower() if lowercase else name for name in names]
        key_counts = Counter(keys)
        duplicates = sorted({name for name, key in zip(names, keys) if key_counts[key] > 1})
        if duplicates:
            raise NerbiasError(f"duplicate names{' (ignoring case)' if lowercase else ''}: {duplicates}")
        for name in names:
            if tokenize(name) != [name]:
                raise NerbiasError(f"name {name!r} is not a single token")
        if num_sources < 1:
            raise NerbiasError(f"{type(self).__name__} has no sources (templates or sentences) to fill")
        self.names = tuple(names)
        self.lowercase = lowercase
        self.slots = slots
        self.num_sources = num_sources
        self.choices_per_source = perm(len(names), slots)

    @abstractmethod
    def _layout(self, source: int) -> tuple[tuple[str, ...], tuple[int, ...], int]:
        """The tokens of ``source``, the positions of its name slots in slot order, and the id
        reported as ``BiasSentence.source``."""

    def __len__(self) -> int:
        return self.num_sources * self.choices_per_source

    def decode(self, index: int) -> tuple[int, tuple[int, ...]]:
        """``(source, name indices in slot order)`` of a sentence index."""
        if not 0 <= index < len(self):
            raise CorpusIndexError(f"sentence index {index} outside [0, {len(self)})")
        source, rank = divmod(index, self.choices_per_source)
        digits = []
        for remaining in range(len(self.names) - self.slots + 1, len(self.names) + 1):
            rank, digit = divmod(rank, remaining)
            digits.append(digit)
        digits.reverse()  # collected least significant (last slot) first
        chosen: list[int] = []
        for digit in digits:
            name = digit
            for used in sorted(chosen):  # skip the names already placed
                if name >= used:
                    name += 1
            chosen.append(name)
        return source, tuple(chosen)

    def decode_many(self, indices: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``decode`` for many indices at once: ``(sources [n], name indices [n, slots])``."""
        indices = np.asarray(indices, dtype=np.int64)
        if len(indices) and (indices.min() < 0 or indices.max() >= len(self)):
            bad = indices[(indices < 0) | (indices >= len(self))][0]
            raise CorpusIndexError(f"sentence index {bad} outside [0, {len(self)})")
        sources, rank = np.divmod(indices, self.choices_per_source)
        digits = np.empty((len(indices), self.slots), dtype=np.int64)
        for slot in reversed(range(self.slots)):  # least significant (last slot) first
            rank, digits[:, slot] = np.divmod(rank, len(self.names) - slot)
        chosen = digits.copy()
        for slot in range(1, self.slots):  # skip the names already placed, smallest first
            for used in np.sort(chosen[:, :slot], axis=1).T:
                chosen[:, slot] += chosen[:, slot] >= used
        return sources, chosen

    def source_tokens(self, source: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """The tokens of ``source`` as ``sentence`` writes them (lower-cased if the corpus is),
        with its slot positions; the tokens at the slots are placeholders."""
        tokens, positions, _ = self._layout(source)
        return (tuple(token.lower() for token in tokens) if self.lowercase else tuple(tokens)), tuple(positions)

    def slot_tokens(self) -> tuple[str, ...]:
        """The token each name becomes in a sentence (lower-cased if the corpus is)."""
        return tuple(name.lower() for name in self.names) if self.lowercase else self.names

    def encode(self, source: int, name_indices: Sequence[int]) -> int:
        """The sentence index of ``source`` filled with ``name_indices`` (inverse of ``decode``)."""
        if not 0 <= source < self.num_sources:
            raise CorpusIndexError(f"source {source} outside [0, {self.num_sources})")
        if len(name_indices) != self.slots:
            raise NerbiasError(f"expected {self.slots} name indices, got {len(name_indices)}")
        if len(set(name_indices)) != self.slots or not all(0 <= i < len(self.names) for i in name_indices):
            raise CorpusIndexError(f"name indices {tuple(name_indices)} must be distinct and in [0, {len(self.names)})")
        rank = 0
        for slot, name in enumerate(name_indices):
            digit = name - sum(1 for used in name_indices[:slot] if used < name)
            rank = rank * (len(self.names) - slot) + digit
        return source * self.choices_per_source + rank

    def sentence(self, index: int) -> BiasSentence:
        source, name_indices = self.decode(index)
        tokens, positions, source_id = self._layout(source)
        filled = list(tokens)
        for position, name in zip(positions, name_indices):
            filled[position] = self.names[name]
        if self.lowercase:
            filled = [token.lower() for token in filled]
        slots = tuple(NameSlot(position, self.names[name]) for position, name in zip(positions, name_indices))
        return BiasSentence(tokens=tuple(filled), slots=slots, source=source_id, index=index)

    def __getitem__(self, index: int) -> BiasSentence:
        return self.sentence(index)

    def iter_range(self, start: int = 0, stop: int | None = None,
                   batch_size: int = 256) -> Iterator[list[BiasSentence]]:
        """Batches of consecutive sentences ``start <= index < stop`` (default: to the end), in order."""
        stop = len(self) if stop is None else stop
        if not 0 <= start <= stop <= len(self):
            raise CorpusIndexError(f"range [{start}, {stop}) is not inside [0, {len(self)})")
        if batch_size < 1:
            raise NerbiasError(f"batch_size must be positive, got {batch_size}")
        for first in range(start, stop, batch_size):
            yield [self.sentence(index) for index in range(first, min(first + batch_size, stop))]

    def iter_indices(self, indices: Sequence[int], batch_size: int = 256) -> Iterator[list[BiasSentence]]:
        """Batches of the sentences at ``indices`` (e.g. a sample), in the given order."""
        if batch_size < 1:
            raise NerbiasError(f"batch_size must be positive, got {batch_size}")
        for first in range(0, len(indices), batch_size):
            yield [self.sentence(index) for index in indices[first:first + batch_size]]

    def shard_bounds(self, num_shards: int, shard: int) -> tuple[int, int]:
        """``(start, stop)`` of shard ``shard`` of ``num_shards`` contiguous, near-equal shards."""
        return shard_bounds(len(self), num_shards, shard)

    def sample_indices(self, k: int, seed: int) -> list[int]:
        """``k`` seeded sentence indices in which every name fills the same number of slots (within 1).

        Names are dealt in groups of ``slots`` from consecutive seeded permutations of the names;
        each full permutation uses every name once, so counts differ by at most 1 overall (they
        are exactly equal when ``k * slots`` is a multiple of the number of names). When a group
        straddles two permutations, the new permutation's first names are swapped with later ones
        so the group stays distinct; it is still a permutation, so the balance holds. The source
        of each sentence is drawn uniformly. Indices may repeat (sampling with replacement: the
        chance is tiny on the full corpora and repeats would not unbalance names). The list is in
        generation order, and ``sample_indices(k, seed)`` is a prefix of ``sample_indices(k + m,
        seed)``; sort it to batch sentences of the same source together.
        """
        return list(self.iter_sample(k, seed))

    def iter_sample(self, k: int, seed: int) -> Iterator[int]:
        """``sample_indices`` as a stream: memory stays flat however large ``k`` is."""
        if k < 0:
            raise NerbiasError(f"sample size must be >= 0, got {k}")
        rng = random.Random(seed)
        deck: list[int] = []  # rest of the current permutation, next name last
        for _ in range(k):
            group: list[int] = []
            while len(group) < self.slots:
                if not deck:
                    deck = list(range(len(self.names)))
                    rng.shuffle(deck)  # dealt from the end by pop()
                    self._keep_distinct(deck, group)
                group.append(deck.pop())
            yield self.encode(rng.randrange(self.num_sources), group)

    def _keep_distinct(self, deck: list[int], group: list[int]) -> None:
        """Swap names already in ``group`` out of the next ``slots - len(group)`` cards of ``deck``."""
        needed = self.slots - len(group)
        for offset in range(needed):
            position = len(deck) - 1 - offset
            if deck[position] in group:
                # The first later card that is free; it exists because len(names) >= slots.
                for other in range(len(deck) - 1 - needed, -1, -1):
                    if deck[other] not in group:
                        deck[position], deck[other] = deck[other], deck[position]
                        break


# --------------------------------------------------------------------------------------------
# Winogender


PLACEHOLDER_OCCUPATION = "$OCCUPATION"
PLACEHOLDER_PARTICIPANT = "$PARTICIPANT"
PRONOUN_PLACEHOLDERS = ("$NOM_PRONOUN", "$POSS_PRONOUN", "$ACC_PRONOUN")
KNOWN_PLACEHOLDERS = (PLACEHOLDER_OCCUPATION, PLACEHOLDER_PARTICIPANT) + PRONOUN_PLACEHOLDERS
WINOGENDER_HEADER = ("occupation(0)", "other-participant(1)", "answer", "sentence")
POSSESSIVE = "'s"


@dataclass(frozen=True)
class WinogenderTemplate:
    """A cleaned template: ``tokens`` with the three slots at ``slot_positions``."""

    tokens: tuple[str, ...]  # slot tokens hold their placeholder, e.g. "$OCCUPATION"
    slot_positions: tuple[int, int, int]  # occupation, participant, pronoun
    pronoun: str  # which pronoun placeholder the template had, e.g. "$POSS_PRONOUN"
    occupation: str  # the schema's words, e.g. "technician", for reports
    participant: str
    answer: int  # 0: the pronoun refers to the occupation, 1: to the participant
    line: int  # 1-based line in the templates file

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


def load_winogender_templates(path: str | Path, dropped_words: Sequence[str] = ("the",)) -> list[WinogenderTemplate]:
    """Read and clean the Winogender templates TSV (Rudinger et al. 2018, ``data/templates.tsv``).

    As in the paper, the word "the" right before a placeholder is dropped ("The $OCCUPATION told
    the $PARTICIPANT" -> "$OCCUPATION told $PARTICIPANT"; a sentence that then starts with a name
    needs no re-capitalisation, since names are capitalised as listed). Every template must have
    $OCCUPATION, $PARTICIPANT and one pronoun placeholder, each once (else an error naming its
    line). The possessive $POSS_PRONOUN becomes the name followed by the token "'s". ``dropped_words`` (compared
    case-insensitively) can add e.g. "a": two templates say "meeting with a $PARTICIPANT".
    """
    path = Path(path)
    text = read_utf8_text(path, "Winogender templates file", byte_order_mark=False)
    if not text.strip():
        raise DataFormatError(path, "file is empty")
    lines = text.split("\n")
    header = tuple(field.strip() for field in lines[0].rstrip("\r").split("\t"))
    if header != WINOGENDER_HEADER:
        raise DataFormatError(path, f"expected header {'<TAB>'.join(WINOGENDER_HEADER)!r}, found {lines[0]!r}", 1)
    dropped = {word.lower() for word in dropped_words}

    templates: list[WinogenderTemplate] = []
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(WINOGENDER_HEADER):
            raise DataFormatError(path, f"expected {len(WINOGENDER_HEADER)} tab-separated fields, found {len(fields)}",
                                  number)
        occupation, participant, answer, sentence = (field.strip() for field in fields)
        if answer not in ("0", "1"):
            raise DataFormatError(path, f"answer must be 0 or 1, found {answer!r}", number)
        template = _clean_template(tokenize(sentence), dropped, path, number)
        if template is None:  # every row is a template: one without its slots would be lost silently
            raise DataFormatError(path, "template needs $OCCUPATION, $PARTICIPANT and one pronoun placeholder, "
                                        f"each once; found {sentence!r}", number)
        tokens, positions, pronoun = template
        templates.append(WinogenderTemplate(tokens, positions, pronoun, occupation, participant, int(answer), number))
    if not templates:
        raise DataFormatError(path, "no templates below the header")
    return templates


def _clean_template(tokens: list[str], dropped: set[str], path: Path, line: int):
    """``(tokens, slot positions, pronoun placeholder)``, or None for a template without the three slots."""
    for token in tokens:
        if token.startswith("$") and len(token) > 1 and token not in KNOWN_PLACEHOLDERS:
            raise DataFormatError(path, f"unknown placeholder {token!r} (known: {', '.join(KNOWN_PLACEHOLDERS)})",
                                  line)
    cleaned: list[str] = []
    for position, token in enumerate(tokens):
        next_token = tokens[position + 1] if position + 1 < len(tokens) else ""
        if token.lower() in dropped and next_token in KNOWN_PLACEHOLDERS:
            continue
        cleaned.append(token)
        if token == "$POSS_PRONOUN":
            cleaned.append(POSSESSIVE)
    placeholders = [token for token in cleaned if token in KNOWN_PLACEHOLDERS]
    pronouns = [token for token in placeholders if token in PRONOUN_PLACEHOLDERS]
    if (len(placeholders) != 3 or placeholders.count(PLACEHOLDER_OCCUPATION) != 1
            or placeholders.count(PLACEHOLDER_PARTICIPANT) != 1 or len(pronouns) != 1):
        return None
    positions = tuple(cleaned.index(slot) for slot in (PLACEHOLDER_OCCUPATION, PLACEHOLDER_PARTICIPANT, pronouns[0]))
    return tuple(cleaned), positions, pronouns[0]


class WinogenderCorpus(NameSubstitutionCorpus):
    """Every template with every ordered triple of distinct names (occupation, participant, pronoun).

    ``len = templates * N * (N-1) * (N-2)`` for N names. The paper's "3! * C(123, 3) = 217
    million" is 120 templates with N = 123 (217,887,120); the packaged Table 1 list has 121 names
    plus the OOV name, N = 122: 120 * 122 * 121 * 120 = 212,572,800 sentences.
    """

    def __init__(self, templates: Sequence[WinogenderTemplate], names: Sequence[str], lowercase: bool = False):
        super().__init__(names, slots=3, num_sources=len(templates), lowercase=lowercase)
        self.templates = tuple(templates)

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "corpus.source.") -> None:
        """The templates file is there (validation.validate checks a config's before any work)."""
        check_values(values, {"templates": existing_file(), "expected_templates": optional(POSITIVE_INTEGER, "any")},
                     prefix)

    @classmethod
    def from_file(cls, templates: str | Path, names: Sequence[str], lowercase: bool = False,
                  expected_templates: int | None = None) -> "WinogenderCorpus":
        """``corpus=winogender``: the templates file (``templates.tsv``) filled with ``names``;
        ``expected_templates`` (120 for the published file) catches a truncated or edited file."""
        loaded = load_winogender_templates(templates)
        if expected_templates is not None and len(loaded) != expected_templates:
            raise DataFormatError(templates, f"{len(loaded)} templates, expected {expected_templates} (truncated or "
                                             "edited? set corpus.source.expected_templates=null for your own templates)")
        corpus = cls(loaded, names, lowercase=lowercase)
        log.info("Winogender: %d templates x %d names -> %d sentences", len(loaded), len(names), len(corpus))
        return corpus

    def _layout(self, source: int) -> tuple[tuple[str, ...], tuple[int, ...], int]:
        template = self.templates[source]
        return template.tokens, template.slot_positions, source  # the template's number

    def index_of(self, template: int, i: int, j: int, k: int) -> int:
        """Index of ``template`` with names ``i`` (occupation), ``j`` (participant), ``k`` (pronoun)."""
        return self.encode(template, (i, j, k))
