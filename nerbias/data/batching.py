"""From sentences to padded tensors: encoding and length-bucketed batching.

Two training-only inputs (``nerbias.training.augment``) are encoded here too:

- ``MASKED``, the empty token, is a hidden word: word id ``<unk>`` and no characters, so the
  character CNN and the character BiLSTM give it all-zero features (as they give padding) and an
  ELMo encoder reads only its word-start and word-end markers. No real token is empty (CoNLL files and
  templates are split on whitespace), so nothing but masking produces it.
- ``NoisySentence`` marks tokens whose whole representation the tagger replaces by the learnable
  noise vector of an entity type (``Batch.noise``, context-aware adversarial training).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch import Tensor

from nerbias.data.conll import Sentence
from nerbias.data.elmo_chars import batch_to_char_ids
from nerbias.data.tags import spans_to_bioes
from nerbias.data.vocab import Vocabulary

log = logging.getLogger(__name__)

MASKED = ""  # a masked token: <unk> word id, no characters (module docstring)


@dataclass(frozen=True)
class NoisySentence(Sentence):
    """A training sentence whose ``noise[i]`` names the entity type whose noise vector replaces token
    ``i``'s representation (``None``: the token's own)."""

    noise: tuple[str | None, ...] = ()


@dataclass
class Batch:
    """Padded tensors of a batch; ``index`` gives each row's position in the source list."""

    words: Tensor  # [batch, time] word ids
    chars: Tensor  # [batch, time, max_word_len] char ids; ELMo's [batch, time, 50] ids for an ELMo encoder
    mask: Tensor  # [batch, time] bool
    tags: Tensor | None  # [batch, time] tag ids (O at padding)
    index: list[int]
    noise: Tensor | None = None  # [batch, time]: 0, or 1 + the index of the noise type in Encoder.noise_types

    def to(self, device: torch.device | str) -> "Batch":
        move = lambda t: None if t is None else t.to(device, non_blocking=True)  # noqa: E731
        return Batch(move(self.words), move(self.chars), move(self.mask), move(self.tags), self.index,
                     move(self.noise))


class Encoder:
    """Turns token lists into id tensors with the model's vocabularies.

    ``elmo_chars``: ``Batch.chars`` holds ELMo's character ids (UTF-8 bytes of the raw token,
    ``nerbias.data.elmo_chars.batch_to_char_ids``) instead of ids in the ``chars`` vocabulary.
    ``noise_types``: the entity types of the model's noise vectors, in order (empty: it has none).
    """

    def __init__(self, words: Vocabulary, chars: Vocabulary, tags: Vocabulary, lowercase_words: bool,
                 max_word_length: int = 30, elmo_chars: bool = False, noise_types: Sequence[str] = ()):
        self.words, self.chars, self.tags = words, chars, tags
        self.lowercase_words = lowercase_words
        self.max_word_length = max_word_length
        self.elmo_chars = elmo_chars
        self.noise_ids = {kind: i + 1 for i, kind in enumerate(noise_types)}
        self._masked_in_vocabulary = MASKED in words  # only a foreign vocabulary could hold the empty word
        self._char_cache: dict[str, list[int]] = {}

    def word_ids(self, tokens: Sequence[str]) -> list[int]:
        if self.lowercase_words:
            tokens = [token.lower() for token in tokens]
        ids = self.words.lookup_all(tokens)
        if self._masked_in_vocabulary:
            ids = [self.words.unk_index if token == MASKED else i for token, i in zip(tokens, ids)]
        return ids

    def char_ids(self, token: str) -> list[int]:
        return self.chars.lookup_all(token[: self.max_word_length])

    # Distinct tokens whose character ids are kept: a training epoch meets ~20k, and looking characters up
    # one by one was half of batching's time. Emptied when full (an endless stream of new tokens).
    CHAR_CACHE_SIZE = 500_000

    def _token_char_ids(self, clipped_token: str) -> list[int]:
        """The character ids of a token already cut to ``max_word_length`` (a shared list: never change it)."""
        cache = self._char_cache
        ids = cache.get(clipped_token)
        if ids is None:
            if len(cache) >= self.CHAR_CACHE_SIZE:
                cache.clear()
            ids = cache[clipped_token] = self.chars.lookup_all(clipped_token)
        return ids

    def batch(self, token_lists: Sequence[Sequence[str]], tag_lists: Sequence[Sequence[str]] | None = None,
              index: Sequence[int] | None = None, noise_lists: Sequence[Sequence[str | None]] | None = None
              ) -> Batch:
        # Ids are gathered in flat Python lists and turned into tensors once: per-token
        # tensor construction dominated inference time on short template sentences.
        size = len(token_lists)
        lengths = [len(tokens) for tokens in token_lists]
        length = max(lengths)
        clipped = [[token[: self.max_word_length] for token in tokens] for tokens in token_lists]
        word_len = max(1, max(len(token) for tokens in clipped for token in tokens))
        words = torch.zeros(size, length, dtype=torch.long)
        mask = torch.arange(length).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
        flat_words = [i for tokens in token_lists for i in self.word_ids(tokens)]
        words[mask] = torch.tensor(flat_words, dtype=torch.long)
        if self.elmo_chars:
            chars = batch_to_char_ids(token_lists)
        else:
            chars = torch.zeros(size, length, word_len, dtype=torch.long)
            token_chars = self._token_char_ids
            flat_chars = [token_chars(token) + [0] * (word_len - len(token)) for tokens in clipped for token in tokens]
            chars[mask] = torch.tensor(flat_chars, dtype=torch.long).view(-1, word_len)
        tags = None
        if tag_lists is not None:
            tags = torch.zeros(size, length, dtype=torch.long)
            tags[mask] = torch.tensor([i for t in tag_lists for i in self.tags.lookup_all(t)], dtype=torch.long)
        noise = None
        if noise_lists is not None:
            noise = torch.zeros(size, length, dtype=torch.long)
            noise[mask] = torch.tensor([self._noise_id(kind) for tokens, kinds in zip(token_lists, noise_lists)
                                        for kind in (kinds or [None] * len(tokens))], dtype=torch.long)
        return Batch(words, chars, mask, tags, list(index) if index is not None else list(range(size)), noise)

    def _noise_id(self, kind: str | None) -> int:
        if kind is None:
            return 0
        if kind not in self.noise_ids:
            raise ValueError(f"no noise vector for type {kind!r}: the model has {list(self.noise_ids) or 'none'} "
                             "(augment.adversarial needs a tagger built with noise vectors)")
        return self.noise_ids[kind]


def bioes_tags(sentence: Sentence) -> list[str]:
    return spans_to_bioes(sentence.spans, len(sentence))


def iterate_batches(
    sentences: Sequence[Sentence],
    encoder: Encoder,
    batch_size: int,
    shuffle: bool = False,
    generator: torch.Generator | None = None,
    with_tags: bool = True,
) -> Iterator[Batch]:
    """Batches of similar length (little padding); shuffled batch order when training.

    Shuffling draws only from ``generator``, so a saved generator state replays the order.
    """
    if shuffle:
        order = torch.randperm(len(sentences), generator=generator).tolist()
        # Sort within chunks of 50 batches: random content, little padding.
        chunk = batch_size * 50
        order = [i for start in range(0, len(order), chunk)
                 for i in sorted(order[start:start + chunk], key=lambda i: len(sentences[i]))]
        batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
        batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
    else:
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for rows in batches:
        tokens = [sentences[i].tokens for i in rows]
        tags = [bioes_tags(sentences[i]) for i in rows] if with_tags else None
        noisy = any(isinstance(sentences[i], NoisySentence) for i in rows)
        noise = [getattr(sentences[i], "noise", None) for i in rows] if noisy else None
        yield encoder.batch(tokens, tags, index=rows, noise_lists=noise)
