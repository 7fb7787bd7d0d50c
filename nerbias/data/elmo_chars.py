"""ELMo's character ids (Peters et al. 2018): the input encoding of an ELMo token encoder.

Every token becomes 50 ids: a word-start marker, up to 48 UTF-8 bytes, a word-end marker and
padding, shifted by one so that id 0 means "no token here" (batch padding). A data concern,
like AllenNLP's ``ELMoTokenCharactersIndexer``: the model only sees the ids.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

MAX_CHARS_PER_TOKEN = 50
# Raw codes 0-255 are UTF-8 bytes; then ELMo's five markers. Every code is shifted by +1 in the ids so
# that id 0 means "no token here" (batch padding) and has an all-zero embedding.
_SENTENCE_START, _SENTENCE_END, _WORD_START, _WORD_END, _CHAR_PADDING = 256, 257, 258, 259, 260
NUM_CHAR_IDS = _CHAR_PADDING + 2  # ids 0..261
BOS_TOKEN, EOS_TOKEN = "<S>", "</S>"


def _marker_token_ids(marker: int) -> list[int]:
    codes = [_WORD_START, marker, _WORD_END] + [_CHAR_PADDING] * (MAX_CHARS_PER_TOKEN - 3)
    return [code + 1 for code in codes]


SENTENCE_START_IDS = _marker_token_ids(_SENTENCE_START)
SENTENCE_END_IDS = _marker_token_ids(_SENTENCE_END)


def word_to_char_ids(word: str) -> list[int]:
    """ELMo's 50 character ids of one token: word start, up to 48 UTF-8 bytes, word end, padding."""
    if word == BOS_TOKEN:  # the pretrained models saw these strings as sentence markers
        return list(SENTENCE_START_IDS)
    if word == EOS_TOKEN:
        return list(SENTENCE_END_IDS)
    encoded = word.encode("utf-8", "ignore")[: MAX_CHARS_PER_TOKEN - 2]
    codes = [_WORD_START, *encoded, _WORD_END]
    codes += [_CHAR_PADDING] * (MAX_CHARS_PER_TOKEN - len(codes))
    return [code + 1 for code in codes]


def batch_to_char_ids(token_lists: Sequence[Sequence[str]]) -> Tensor:
    """``LongTensor[batch, max_len, 50]``; positions past a sentence's end are all zeros."""
    longest = max((len(tokens) for tokens in token_lists), default=0)
    ids = torch.zeros(len(token_lists), longest, MAX_CHARS_PER_TOKEN, dtype=torch.long)
    for row, tokens in enumerate(token_lists):
        if tokens:
            ids[row, : len(tokens)] = torch.tensor([word_to_char_ids(t) for t in tokens], dtype=torch.long)
    return ids


def char_ids_mask(char_ids: Tensor) -> Tensor:
    """``[batch, time]`` bool: which positions hold a token."""
    return (char_ids > 0).any(dim=-1)
