"""Vocabularies: plain lists of strings, so checkpoints hold them without pickled objects."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

PAD = "<pad>"
UNK = "<unk>"


class Vocabulary:
    """String <-> index mapping with ``<pad>`` at 0 and ``<unk>`` at 1 (when ``with_unk``)."""

    def __init__(self, items: Sequence[str], with_specials: bool = True):
        items = list(items)
        if with_specials and items[:2] != [PAD, UNK]:
            items = [PAD, UNK] + [item for item in items if item not in (PAD, UNK)]
        self.items = items
        self.index = {item: i for i, item in enumerate(items)}
        if len(self.index) != len(items):
            raise ValueError("vocabulary items must be unique")
        self.unk_index = self.index.get(UNK)
        # from_counts: how many items after the specials come from the counted tokens (the rest are extra)
        self.counted: int | None = None

    @classmethod
    def from_counts(cls, tokens: Iterable[str], min_count: int = 1, extra: Iterable[str] = ()) -> "Vocabulary":
        counts = Counter(tokens)
        frequent = sorted((item for item, n in counts.items() if n >= min_count), key=lambda item: (-counts[item], item))
        seen = set(frequent)
        vocabulary = cls(frequent + [item for item in extra if item not in seen])
        vocabulary.counted = len(seen - {PAD, UNK})
        return vocabulary

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item: str) -> bool:
        return item in self.index

    def lookup(self, item: str) -> int:
        found = self.index.get(item, self.unk_index)
        if found is None:
            raise KeyError(f"{item!r} is not in the vocabulary")
        return found

    def lookup_all(self, items: Iterable[str]) -> list[int]:
        return [self.lookup(item) for item in items]
