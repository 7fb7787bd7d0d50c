"""What the ``embeddings`` config group builds (its ``_target_``): the source of a tagger's token embedder.

A source knows how tokens are looked up (``lowercase``), which words it brings into the word
vocabulary, and how to make the ``nn.Module`` that embeds tokens for ``BiLSTMCRFTagger``:

- ``WordVectors`` (``embeddings=glove|conceptnet|random``): word vectors, pretrained from a file
  through gensim (``source``) or trained from scratch (``source: null``), + the character CNN;
- ``ElmoEmbeddings`` (``embeddings=elmo``): the ELMo-style contextual encoder.

Whatever a source reads is recorded in ``TaggerConfig`` (word_dim, or the ELMo options), so a
checkpoint rebuilds its embedder without the source files (``build_token_embedder``).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from nerbias.data.debias import bias_projection, direction_names, direction_projections, hard_debias
from nerbias.data.embeddings import coverage, embedding_matrix, load_keyed_vectors
from nerbias.errors import NerbiasError
from nerbias.data.vocab import Vocabulary
from nerbias.models.bilstm_crf import TaggerConfig, WordCharEmbedder

log = logging.getLogger(__name__)


class WordVectors:
    """Word vectors (+ char CNN): pretrained from ``source``/``path``, or random when ``source`` is None."""

    def __init__(self, source: str | None = None, path: str | None = None, dim: int = 50, lowercase: bool = True,
                 freeze: bool = False, include_pretrained_vocab: bool = True, debias: str | None = None):
        if debias not in (None, "hard"):
            raise NerbiasError(f"embeddings.debias={debias}: must be null or hard")
        if debias and source is None:
            raise NerbiasError("embeddings.debias=hard needs pretrained vectors (embeddings.source)")
        self.source, self.path, self.dim = source, path, int(dim)
        self.lowercase, self.freeze = bool(lowercase), bool(freeze)
        self.include_pretrained_vocab = bool(include_pretrained_vocab)
        self.debias = debias
        self._keyed = None
        self._original = None  # the vectors before de-biasing, for the diagnostic
        self._subspace = None

    @property
    def pretrained(self) -> bool:
        return self.source is not None

    @property
    def keyed(self):
        """The gensim KeyedVectors, loaded once on first use."""
        if self._keyed is None and self.pretrained:
            self._keyed = load_keyed_vectors(self.source, self.path)
            log.info("%s: %d pretrained vectors of dimension %d", self.path or self.source,
                     len(self._keyed.index_to_key), self._keyed.vector_size)
            if self.debias == "hard":
                self._original = self._keyed
                self._keyed, self._subspace, definitional = hard_debias(self._original)
                log.info("hard de-biasing: %d bias directions, %d definitional words kept, every other word "
                         "neutralised", len(self._subspace), len(definitional))
        return self._keyed

    def debias_diagnostic(self, names: Sequence[str]) -> dict[str, Any] | None:
        """Mean absolute projection of ``names`` on the bias subspace before and after de-biasing."""
        if self.debias is None:
            return None
        self.keyed  # noqa: B018  (loads and de-biases on first use)
        keys = [n.lower() if self.lowercase else n for n in names]
        rows = [self._original.key_to_index[k] for k in keys if k in self._original.key_to_index]
        original, debiased = (vectors[rows].astype(np.float64) for vectors in (self._original.vectors,
                                                                                self._keyed.vectors))
        before = bias_projection(original, self._subspace)
        after = bias_projection(debiased, self._subspace)
        log.info("bias-subspace projection of %d evaluation names: %.4f before, %.2g after", len(rows), before, after)
        per_direction = {name: {"mean_abs_cosine_before": float(b), "mean_abs_cosine_after": float(a)}
                         for name, b, a in zip(direction_names(self._subspace),
                                               direction_projections(original, self._subspace),
                                               direction_projections(debiased, self._subspace))}
        return {"method": "hard", "directions": len(self._subspace), "names": len(rows),
                "mean_abs_projection_before": before, "mean_abs_projection_after": after,
                "per_direction": per_direction}

    def vocabulary_words(self) -> list[str]:
        """Words added to the training vocabulary (names unseen in training keep their vectors)."""
        if not self.pretrained or not self.include_pretrained_vocab:
            return []
        words = self.keyed.index_to_key
        return list(dict.fromkeys(w.lower() for w in words)) if self.lowercase else list(words)

    def name_coverage(self, group_of: Mapping[str, str]) -> dict[str, Any] | None:
        """Which of these evaluation names (name -> group) the pretrained vocabulary lacks; None if random."""
        if not self.pretrained:
            return None
        found, missing = coverage(self.keyed, list(group_of), self.lowercase)
        return {"names": len(group_of), "found": len(found), "missing": missing,
                "missing_by_group": {n: group_of[n] for n in missing}}

    def model_options(self) -> dict[str, Any]:
        return {"word_dim": self.dim, "freeze_words": self.freeze}

    def token_embedder(self, words: Vocabulary, chars: Vocabulary, config: TaggerConfig, seed: int = 0) -> nn.Module:
        pretrained = None
        if self.pretrained:
            values, hits = embedding_matrix(self.keyed, words.items, self.dim, self.lowercase, seed=seed,
                                            source=str(self.path or self.source), training_words=words.counted)
            log.info("word vocabulary %d, %d with pretrained vectors", len(words), hits)
            pretrained = torch.from_numpy(values)
        return WordCharEmbedder(len(words), len(chars), config, pretrained=pretrained, unk_index=words.unk_index)


class ElmoEmbeddings:
    """The ELMo-style encoder (``nerbias.models.elmo``): pretrained (``pretrained_lm``, or official
    ``options_file`` + ``weight_file``) or a preset ``size`` with ``char_cnn`` / ``lstm`` overrides."""

    def __init__(self, size: str = "small", options_file: str | None = None, weight_file: str | None = None,
                 pretrained_lm: str | None = None, char_cnn: Mapping | None = None, lstm: Mapping | None = None,
                 freeze_lm: bool = False, dropout: float = 0.0, lowercase: bool = False):
        self.spec = {"size": size, "options_file": options_file, "weight_file": weight_file,
                     "pretrained_lm": pretrained_lm, "char_cnn": char_cnn, "lstm": lstm, "freeze_lm": freeze_lm,
                     "dropout": dropout}
        self.lowercase = bool(lowercase)

    def vocabulary_words(self) -> list[str]:
        return []

    def name_coverage(self, group_of: Mapping[str, str]) -> None:
        return None  # every token is encoded from its characters: no vocabulary to miss a name

    def model_options(self) -> dict[str, Any]:
        return {}

    def encoder(self):
        from nerbias.models.elmo import build_elmo_encoder

        return build_elmo_encoder(self.spec)

    def token_embedder(self, words: Vocabulary, chars: Vocabulary, config: TaggerConfig, seed: int = 0) -> nn.Module:
        encoder = self.encoder()
        # The resolved options go into the checkpoint: it rebuilds the encoder without the pretrained files.
        config.elmo = {"options": json.loads(json.dumps(encoder.bilm.options)),
                       "freeze_lm": bool(encoder.freeze_lm), "dropout": float(encoder.dropout.p)}
        return encoder
